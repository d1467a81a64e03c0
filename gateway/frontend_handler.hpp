// frontend_handler: what the ZMQ front end hands decoded traffic to.
//
// The front end (zmq_frontend.hpp) owns the worker-facing sockets S1-S3 and
// decodes every frame in isolation. The PULL thread hands over every good
// frame of one drain round at once, in arrival order (on_push_round), so the
// handler can route a worker's frames of that round to its actor in one
// message; the ROUTER threads call on_request once per request. Neither ever
// blocks on the index: implementations forward to actors and return at once.
// For requests, `reply` must be called exactly once, from any thread, with the
// reply message; the front end sends replies to each peer in the order its
// requests arrived, whatever order the replies are produced in.
//
// Flow control: when ingest_gate() returns a gate, the PULL thread checks it
// before every multipart and stops reading S1 while it is exhausted, so ZMQ
// and TCP push back on the workers' PUSH sockets.
//
//   struct my_handler : frontend_handler {
//     void on_push_round(std::vector<msg::Msg>& frames) override { ... }
//     void on_request(request_socket s, msg::Msg m, reply_fn reply) override { ... }
//   };
//
// Thread-safety: called from the front end's socket threads (one per socket);
// implementations must be thread-safe.
#pragma once

#include "messages/lmcache_msgs.hpp"

#include <functional>
#include <vector>

namespace lmcc::gateway {

/// Which ROUTER socket a request came in on.
enum class request_socket {
  reply,     ///< S2: RegisterMsg, HeartbeatMsg, BatchedP2PLookupMsg, FullSync{Start,Status}Msg
  heartbeat, ///< S3: HeartbeatMsg only
};

/// Called exactly once with the reply to one request; callable from any thread.
using reply_fn = std::function<void(msg::Msg reply)>;

/// Ingest credits a frame holds: one per op of a KV batch or key of a
/// full-sync batch, one for anything else.
inline uint64_t ingest_credits(const msg::Msg& m) {
  if (const auto* b = std::get_if<msg::BatchedKVOperationMsg>(&m))
    return b->operations.empty() ? 1 : b->operations.size();
  if (const auto* s = std::get_if<msg::FullSyncBatchMsg>(&m))
    return s->keys.empty() ? 1 : s->keys.size();
  return 1;
}

/// The bound on ingest in flight, as the PULL thread sees it.
class ingest_gate {
public:
  virtual ~ingest_gate() = default;
  /// True while the PULL thread must not read more.
  virtual bool exhausted() const = 0;
  /// Credits left before the bound (0 when exhausted): a drain round stops
  /// once its frames hold this many, so the bound is overshot by at most one
  /// multipart.
  virtual uint64_t room() const = 0;
  /// The thread is about to wait on wake_fd(); false when it need not (credits
  /// came back meanwhile).
  virtual bool arm() = 0;
  /// After wake_fd() became readable.
  virtual void disarm() = 0;
  virtual int wake_fd() const = 0;
};

class frontend_handler {
public:
  virtual ~frontend_handler() = default;

  /// The WorkerMsgs and OrchMsgs of one drain round of the PULL socket (S1),
  /// in arrival order; the handler may move them out. No reply is possible.
  /// Other families never reach here (the front end counts and logs them).
  virtual void on_push_round(std::vector<msg::Msg>& frames) = 0;

  /// Called first on the PULL thread itself (the handler may set its
  /// scheduling).
  virtual void on_pull_thread_start() {}

  /// The PULL thread's flow control, or nullptr for none.
  virtual ingest_gate* gate() { return nullptr; }

  /// A decoded request from a ROUTER socket. The front end has already checked
  /// the family: on `reply` a WorkerReqMsg, on `heartbeat` a HeartbeatMsg.
  virtual void on_request(request_socket socket, msg::Msg m, reply_fn reply) = 0;
};

} // namespace lmcc::gateway
