// control_channel: controller -> worker commands over ZMQ (socket S4).
//
// LMCache workers serve ControlMsgs on a REP socket. The Python controller uses
// a REQ socket per worker with no timeout, so a worker that never answers
// wedges every later command to it (EFSM). lmcc instead keeps one DEALER per
// worker endpoint on a single thread that owns all of them: commands to one
// worker are queued and sent one at a time (REP answers strictly in turn); a
// command that sees no reply within control_options::request_timeout fails with
// an ErrorMsg and the socket is closed and re-created, so a late reply can never
// be mistaken for the answer to the next command. Commands to different
// workers run concurrently.
//
//   control_channel ch{zmq_ctx, control_options{}};
//   ch.send("10.0.0.5:8500", Msg{HealthWorkerMsg{"e1"}},
//           [](expected<Msg> r) { ... });   // exactly once, from ch's thread
//
// Errors reach the callback as codec_error texts naming the worker:
//   "worker H:P did not answer within Nms"        (request_timeout passed)
//   "undecodable reply from worker H:P: ..."       (bad msgpack or frame layout)
//   "too many queued commands for worker H:P"      (max_queued_per_worker)
//   "worker H:P deregistered"                      (forget())
//   "cannot send to worker H:P: ..."               (bad address, broken socket)
//   "controller shutting down"                     (destructor)
// Any decoded reply is passed on as is, ErrorMsg included; judging its type is
// the caller's business (spec 4.10).
//
// Thread-safety: send() and forget() may be called from any thread, also from
// inside a callback; callbacks run on the channel's own thread and must not
// block (they hold up every worker). Should the channel thread have stopped
// (the ZMQ context was terminated), send() runs the callback with the shutdown
// error on the caller's thread instead.
#pragma once

#include "gateway/gateway_options.hpp"
#include "messages/expected.hpp"
#include "messages/lmcache_msgs.hpp"

#include <functional>
#include <memory>
#include <string>

namespace zmq {
class context_t;
}

namespace lmcc::gateway {

/// The decoded reply, or why there is none (timeout, undecodable reply, queue full).
using control_reply_fn = std::function<void(msg::expected<msg::Msg> reply)>;

class control_channel {
public:
  control_channel(zmq::context_t& context, control_options options);
  ~control_channel(); // stops the thread; pending callbacks get an error
  control_channel(const control_channel&) = delete;
  control_channel& operator=(const control_channel&) = delete;

  /// Queues `command` for the worker REP socket at `endpoint` ("host:port",
  /// no scheme). `done` is called exactly once.
  void send(std::string endpoint, msg::Msg command, control_reply_fn done);

  /// Closes the socket to `endpoint` (worker deregistered); queued commands fail.
  void forget(std::string endpoint);

private:
  class impl;
  std::unique_ptr<impl> impl_;
};

} // namespace lmcc::gateway
