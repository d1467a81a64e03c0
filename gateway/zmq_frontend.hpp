// zmq_frontend: the worker-facing sockets S1 (PULL), S2 (ROUTER reply) and S3
// (ROUTER heartbeat) of spec section 2.
//
// Each socket has its own thread. Every frame is decoded in isolation (JSON if
// it starts with `{`, else msgpack, under zmq_options::limits); a bad frame is
// counted and logged (rate-limited) and never stops a loop. On ROUTER sockets the
// payload is the last frame and the identity the first (at least 2 frames); a
// bad request is answered with an ErrorMsg; every accepted request gets exactly
// one reply `[identity, "", payload]`, and replies to one peer leave in the order
// its requests arrived even though handlers answer concurrently.
//
//   zmq_frontend fe{ctx, options, handler};
//   fe.start();          // binds; throws std::runtime_error naming the address
//   ...
//   fe.stop();           // joins the threads (also done by the destructor)
//
// Thread-safety: start/stop from one thread; counters() from any thread.
#pragma once

#include "gateway/frontend_handler.hpp"
#include "gateway/gateway_options.hpp"

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

namespace zmq {
class context_t;
}

namespace lmcc::gateway {

/// Live counters behind the lmcache:cache_controller_*_socket_* gauges and
/// lmcc's own frame counters. All monotonic except the *_active and *_pending.
struct frontend_counters {
  std::atomic<uint64_t> pull_frames{0};      ///< frames received on S1
  std::atomic<uint64_t> reply_requests{0};   ///< requests received on S2 + S3
  std::atomic<uint64_t> bad_frames{0};       ///< undecodable, wrong-family or excess frames
  std::atomic<uint64_t> error_replies{0};    ///< ErrorMsg replies sent
  std::atomic<uint64_t> handler_errors{0};   ///< exceptions thrown by frontend_handler calls
  std::atomic<int64_t> pull_active{0};       ///< frames being decoded/handed over now
  std::atomic<int64_t> reply_active{0};      ///< S2 + S3 requests whose reply has not left
  std::atomic<int64_t> pull_has_pending{0};  ///< 1 if S1 had more input after the last drain
  std::atomic<int64_t> reply_has_pending{0}; ///< 1 if S2 had more input after the last drain
  std::atomic<int64_t> pull_paused{0};       ///< 1 while S1 is not read (no ingest credit)
  std::atomic<int64_t> pull_holding{0}; ///< 1 while busy S1 connections are held (pull_loop.hpp)
  std::atomic<uint64_t> pull_hold_starts{0}; ///< times holding began
};

class zmq_frontend {
public:
  zmq_frontend(zmq::context_t& context, zmq_options options, frontend_handler& handler);
  ~zmq_frontend();
  zmq_frontend(const zmq_frontend&) = delete;
  zmq_frontend& operator=(const zmq_frontend&) = delete;

  /// Binds S1..S3 and starts their threads. Throws std::runtime_error with the
  /// address when a bind fails.
  void start();

  /// Stops the threads promptly (they are woken at once), joins them and closes
  /// the sockets without linger. Replies produced afterwards are dropped.
  void stop();

  const frontend_counters& counters() const noexcept;

  /// The "host:port" handed to a worker registering from `worker_ip` as its
  /// heartbeat URL (spec 2.3 + advertise_host), or nullopt when S3 is off.
  std::optional<std::string> heartbeat_url_for(const std::string& worker_ip) const;

private:
  class impl;
  std::unique_ptr<impl> impl_;
};

/// The local address of a UDP socket "connected" to 8.8.8.8:80 (no packet is
/// sent), else "127.0.0.1" -- LMCache's rpc_utils.get_ip().
std::string local_ip();

/// spec 2.3 `_convert_bind_to_connect_url` with advertise_host (section 10).
std::string heartbeat_connect_url(const std::string& bind_host, uint16_t port,
                                  const std::string& worker_ip, const std::string& advertise_host,
                                  const std::string& this_host_ip);

} // namespace lmcc::gateway
