// http_api: LMCache's controller HTTP API (spec 5.1) on cpp-httplib.
//
// Every orchestration endpoint (/lookup, /query_instance, /clear, /pin, /compress,
// /decompress, /move, /health, /check_finish, /query_worker_info) parses its JSON
// body, builds the OrchMsg with an event_id "<Prefix><uuid4>" as LMCache does,
// asks controller_api::orchestrate() and answers with LMCache's JSON shape.
// Around them: GET /controller/workers, /controller/key-stats, /metrics,
// /threads, /env (LMCACHE_* and LMCC_* only), /healthz, /readyz and the 404 page
// at /. /run_script is deliberately absent (remote code execution in LMCache).
//
// Status codes follow FastAPI: 422 {"detail": "..."} for a missing or mistyped
// field, 500 {"detail": error} when the controller answers with an ErrorMsg;
// lmcc adds 400 for a body that is not JSON, 413 for a body over max_body_bytes
// or a token list over max_tokens, 404 for /query_instance of an unknown ip,
// 504 when the controller does not answer within handler_timeout and 503 while
// stopping. Every request is timed into node_metrics as "http <route>".
//
//   http_api api{options, controller, metrics, frontend.counters()};
//   api.start();           // binds; throws std::runtime_error("cannot bind http h:p")
//   uint16_t p = api.port();   // the bound port (useful with options.port == 0)
//   api.stop();            // also done by the destructor
//
// Thread-safety: start/stop/port from one owning thread. Handlers run on the
// server's own threads (http_options::threads) and call controller_api,
// node_metrics and frontend_counters concurrently; all three must outlive this.
#pragma once

#include "gateway/controller_api.hpp"
#include "gateway/gateway_options.hpp"
#include "gateway/metrics.hpp"

#include <cstdint>
#include <memory>
#include <string>

namespace lmcc::gateway {

/// A /lookup reply header of lmcc's own (LMCache's routers ignore it): present
/// when some chunk was read only from copies their owners were uncertain of
/// (mid-fault: a node back empty, a slot still being copied) or from no owner;
/// its value is the token count from which an instance's prefix may be short.
/// Absent: every chunk was read from a whole copy.
inline constexpr const char* lookup_unsure_header = "Lmcc-Unsure-From-Tokens";

class http_api {
public:
  // -- construction ------------------------------------------------------------

  http_api(http_options options, controller_api& controller, node_metrics& metrics,
           const frontend_counters& frontend);
  ~http_api();
  http_api(const http_api&) = delete;
  http_api& operator=(const http_api&) = delete;

  // -- lifecycle ---------------------------------------------------------------

  /// Binds http_options::host:port (port 0 picks a free port) and starts serving
  /// on a thread of its own. Throws std::runtime_error("cannot bind http host:port")
  /// when the bind fails, std::logic_error when called twice.
  void start();

  /// Stops accepting, fails waiting handlers with 503 and joins the server threads.
  /// Idempotent.
  void stop();

  // -- properties --------------------------------------------------------------

  /// The bound port; 0 before start().
  uint16_t port() const;

private:
  class impl;
  std::unique_ptr<impl> impl_;
};

/// A random (version 4) UUID in its 36-character text form, as Python's str(uuid4()).
std::string make_uuid4();

} // namespace lmcc::gateway
