// node_runtime: one lmcc controller node, put together.
//
// Start-up: HTTP binds first (/readyz 503), then the store is opened (or
// restored from a snapshot) and loaded (node_restore.hpp), then the actors are
// spawned with what was loaded, then the ZMQ front end binds and /readyz turns 200.
//
// It owns, in construction order: the ZMQ context, the CAF actor system with
// the node's actors (directory, KV shards, lookup actors, control fan-out,
// request bridge), the control channel to the workers, the ZMQ front end and
// the HTTP API; and it is the glue between them: the front end's
// frontend_handler and the HTTP API's controller_api are implemented here by
// messages to the actors. Shutdown runs in the reverse order, inbound first,
// so that nothing is accepted that could not be answered.
//
//   node_runtime node{options};
//   node.start();                 // binds everything; throws with the address on failure
//   wait_for_signal();
//   node.stop();                  // prompt and clean
//
// Thread-safety: start/stop from one thread; the handler and API methods are
// called from socket and HTTP threads.
#pragma once

#include "apps/lmcc/node_options.hpp"
#include "faults/fault_injection.hpp"
#include "gateway/controller_api.hpp"
#include "gateway/frontend_handler.hpp"

#include <memory>

namespace lmcc::apps {

class node_runtime : public gateway::frontend_handler, public gateway::controller_api {
public:
  explicit node_runtime(node_options options);
  ~node_runtime() override;
  node_runtime(const node_runtime&) = delete;
  node_runtime& operator=(const node_runtime&) = delete;

  void start();
  void stop();

  /// The HTTP port actually bound (useful with port 0).
  uint16_t http_port() const;

  // -- frontend_handler ------------------------------------------------------
  void on_push_round(std::vector<msg::Msg>& frames) override;
  gateway::ingest_gate* gate() override;
  void on_pull_thread_start() override;
  void on_request(gateway::request_socket socket, msg::Msg m, gateway::reply_fn reply) override;

  // -- controller_api --------------------------------------------------------
  std::future<msg::Msg> orchestrate(msg::Msg request) override;
  std::future<std::vector<gateway::worker_view>> workers() override;
  std::future<gateway::key_stats> stats() override;
  std::future<gateway::workers_detail> worker_details() override;
  std::future<gateway::controller_gauges> gauges() override;
  bool ready() const override;
  std::future<gateway::snapshot_outcome> snapshot(const std::string& dir) override;
#if LMCC_FAULT_INJECTION
  gateway::fault_outcome set_store_faults(const gateway::store_fault_settings& s) override;
#endif
  std::optional<std::string> cluster_status_json() const override;
  gateway::members_outcome change_members(const std::vector<std::string>& ids) override;

private:
  class impl;
  std::unique_ptr<impl> impl_;
};

} // namespace lmcc::apps
