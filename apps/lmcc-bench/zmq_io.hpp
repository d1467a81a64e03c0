// zmq_io: the socket plumbing a simulated LMCache worker needs (spec section 2).
//
// Every socket made here has a receive and a send timeout, so no call can hang;
// a DEALER used request/reply matches replies by order (the protocol has no
// correlation id) and is recreated after a timeout, as LMCache's worker does,
// so that a late reply is never taken for the answer to the next request.
//
//   dealer_channel reply{ctx, "tcp://127.0.0.1:8400", 5000};
//   request_result r = reply.request(msg::Msg{msg::RegisterMsg{...}});
//
// Context: a socket belongs to one thread at a time (hand over only across a
// thread start or join).
#pragma once

#include "messages/lmcache_msgs.hpp"

#include <zmq.hpp>

#include <chrono>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace lmcc::bench {

using steady = std::chrono::steady_clock;

/// The target does not answer at all: lmcc-bench exits with status 2.
struct unreachable_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// Seconds elapsed since `t0`.
inline double seconds_since(steady::time_point t0) {
  return std::chrono::duration<double>(steady::now() - t0).count();
}

/// A socket with RCVTIMEO/SNDTIMEO = `timeout_ms` and the given LINGER.
zmq::socket_t make_socket(zmq::context_t& ctx, zmq::socket_type type, uint32_t timeout_ms,
                          int linger_ms = 0);

/// The TCP port a socket bound to `tcp://host:*` got.
uint16_t bound_port(zmq::socket_t& socket);

/// Sends `frames` as one multipart. False when the first frame could not be
/// queued before SNDTIMEO (backpressure); nothing was sent then.
bool send_frames(zmq::socket_t& socket, const std::vector<std::string>& frames);

enum class request_status { ok, timeout, send_failed, bad_reply };

struct request_result {
  request_status status = request_status::timeout;
  std::optional<msg::Msg> reply;
  std::string error; ///< decode error text for bad_reply
};

/// A worker's DEALER towards a controller ROUTER (W2/W3): sends [b"", payload],
/// takes the last frame of the reply as the payload.
class dealer_channel {
public:
  dealer_channel(zmq::context_t& ctx, std::string url, uint32_t timeout_ms);

  /// One request, one reply (at most timeout_ms for each direction).
  request_result request(const msg::Msg& m);

  /// The asynchronous halves, for callers that poll several sockets.
  bool send(const msg::Msg& m);
  request_result receive_now(); ///< non-blocking; timeout = nothing there yet

  /// Drops the socket and connects a fresh one (after a lost reply).
  void reset();

  zmq::socket_t& socket() { return socket_; }
  const std::string& url() const { return url_; }

private:
  request_result decode_reply(std::vector<zmq::message_t>& frames) const;

  zmq::context_t* ctx_;
  std::string url_;
  uint32_t timeout_ms_;
  zmq::socket_t socket_;
};

} // namespace lmcc::bench
