// frontend_handler: what the ZMQ front end hands decoded traffic to.
//
// The front end (zmq_frontend.hpp) owns the worker-facing sockets S1-S3, decodes
// every frame in isolation and calls exactly one of these per good frame. It
// never blocks on the index: implementations forward to actors and return at
// once. For requests, `reply` must be called exactly once, from any thread, with
// the reply message; the front end sends replies to each peer in the order its
// requests arrived, whatever order the replies are produced in.
//
//   struct my_handler : frontend_handler {
//     void on_push(msg::Msg m) override { anon_send(directory, std::move(m)); }
//     void on_request(request_socket s, msg::Msg m, reply_fn reply) override { ... }
//   };
//
// Thread-safety: called from the front end's socket threads (one per socket);
// implementations must be thread-safe.
#pragma once

#include "messages/lmcache_msgs.hpp"

#include <functional>

namespace lmcc::gateway {

/// Which ROUTER socket a request came in on.
enum class request_socket {
  reply,     ///< S2: RegisterMsg, HeartbeatMsg, BatchedP2PLookupMsg, FullSync{Start,Status}Msg
  heartbeat, ///< S3: HeartbeatMsg only
};

/// Called exactly once with the reply to one request; callable from any thread.
using reply_fn = std::function<void(msg::Msg reply)>;

class frontend_handler {
public:
  virtual ~frontend_handler() = default;

  /// A WorkerMsg or OrchMsg from the PULL socket (S1); no reply is possible.
  /// Other families never reach here (the front end counts and logs them).
  virtual void on_push(msg::Msg m) = 0;

  /// A decoded request from a ROUTER socket. The front end has already checked
  /// the family: on `reply` a WorkerReqMsg, on `heartbeat` a HeartbeatMsg.
  virtual void on_request(request_socket socket, msg::Msg m, reply_fn reply) = 0;
};

} // namespace lmcc::gateway
