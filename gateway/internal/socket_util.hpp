// socket_util: what the ZMQ front end's socket threads share: tuning
// constants, an owned fd, an eventfd used as a wake-up flag, rate-limited
// logging of bad input, and binding a socket with lmcc's options.
//
// Private to gateway/: included by zmq_frontend.cpp and its loops only.
#pragma once

#include "clock/clock.hpp"
#include "gateway/frontend_handler.hpp"
#include "gateway/io_lanes.hpp"
#include "gateway/unique_fd.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <zmq.hpp>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <sys/eventfd.h>
#include <system_error>
#include <unistd.h>
#include <utility>

namespace lmcc::gateway::internal {

using namespace std::chrono_literals;

// -- tuning constants ----------------------------------------------------------

/// A socket thread with nothing to do sleeps in zmq::poll until a socket, or
/// an eventfd (stop(), finished replies, credit), wakes it: an idle node's
/// socket threads never wake on their own.
constexpr auto poll_forever = -1ms;

/// Longest a paused PULL thread sleeps between looks at its credit: a
/// safety net against a wake-up lost to a race, and only while paused.
constexpr auto poll_interval = 200ms;

/// Messages taken from one socket per wake-up before the thread looks at its
/// eventfd again, so a flood of requests cannot hold back the replies.
constexpr int max_messages_per_drain = 256;

/// At most one bad-input line per socket per interval; the rest are counted.
constexpr auto log_interval = 1s;

/// Bytes of a bad frame shown (hex) in its log line.
constexpr size_t log_head_bytes = 16;

/// Characters of untrusted text (error messages quoting peer input) in a log line.
constexpr size_t log_text_chars = 200;

constexpr std::string_view too_many_pending_text = "too many pending requests";

// -- small helpers -------------------------------------------------------------

using gateway::unique_fd;

/// An eventfd used as a level-triggered "look at your mailbox" flag that
/// zmq::poll can wait on next to a ZMQ socket.
class event_fd {
public:
  event_fd() : fd_(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {
    if (fd_.get() < 0)
      throw std::system_error(errno, std::generic_category(), "eventfd");
  }

  int fd() const noexcept { return fd_.get(); }

  void notify() noexcept {
    uint64_t one = 1;
    // Fails only when the counter is saturated, i.e. already signalled.
    if (::write(fd_.get(), &one, sizeof one) < 0) {
    }
  }

  void clear() noexcept {
    uint64_t value = 0;
    // EAGAIN just means it was not signalled.
    if (::read(fd_.get(), &value, sizeof value) < 0) {
    }
  }

private:
  unique_fd fd_;
};

/// Lets one log line through per log_interval and counts the ones it swallows.
class log_throttle {
public:
  /// True when a line may be written now; `suppressed` is then the number of
  /// lines swallowed since the previous one.
  bool allow(uint64_t& suppressed) {
    const auto now = steady_now();
    if (logged_ && now - last_ < log_interval) {
      ++suppressed_;
      return false;
    }
    logged_ = true;
    last_ = now;
    suppressed = std::exchange(suppressed_, 0);
    return true;
  }

private:
  bool logged_ = false;
  std::chrono::steady_clock::time_point last_;
  uint64_t suppressed_ = 0;
};

inline std::string hex(std::string_view bytes, size_t max_bytes) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < bytes.size() && i < max_bytes; ++i) {
    const auto b = static_cast<uint8_t>(bytes[i]);
    out += digits[b >> 4];
    out += digits[b & 15];
  }
  if (bytes.size() > max_bytes)
    out += "..";
  return out;
}

/// Peer-controlled text made safe for one log line: no control characters
/// (a newline could forge log lines), bounded length.
inline std::string printable(std::string_view text) {
  std::string out;
  for (size_t i = 0; i < text.size() && i < log_text_chars; ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    out += (c < 0x20 || c == 0x7f) ? '?' : static_cast<char>(c);
  }
  if (text.size() > log_text_chars)
    out += "...";
  return out;
}

inline bool is_bind_all(std::string_view host) {
  return host.empty() || host == "*" || host == "0.0.0.0";
}

/// The largest frame libzmq itself accepts (ZMQ_MAXMSGSIZE): twice the
/// decoder's limit, capped at what the option holds.
inline int64_t transport_frame_limit(size_t max_frame_bytes) {
  constexpr uint64_t cap = uint64_t{1} << 62;
  return static_cast<int64_t>(std::min<uint64_t>(cap, uint64_t{max_frame_bytes} * 2));
}

/// A socket of `type` bound to tcp://host:port on its I/O lane (io_lanes.hpp),
/// closing without linger; with
/// `receive_queue_messages`, ZMQ_RCVHWM (per connection) is set before the bind,
/// which is when libzmq copies it for the connections the socket accepts.
/// `before_bind` runs on the socket just before the bind (a monitor must be
/// in place before the first connection is accepted).
inline zmq::socket_t bind_socket(zmq::context_t& ctx, zmq::socket_type type,
                                 const std::string& host, uint16_t port, size_t max_frame_bytes,
                                 std::optional<int> receive_queue_messages = std::nullopt,
                                 const std::function<void(zmq::socket_t&)>& before_bind = {}) {
  zmq::socket_t socket(ctx, type);
  put_on_lane(ctx, socket, type == zmq::socket_type::pull ? io_lane::ingest : io_lane::requests);
  // A controller that stops must not wait for unread replies to drain.
  socket.set(zmq::sockopt::linger, 0);
  if (receive_queue_messages)
    socket.set(zmq::sockopt::rcvhwm, *receive_queue_messages);
  // libzmq refuses (and disconnects the peer of) a frame over twice the
  // decoder's limit before buffering it, instead of handing lmcc a 2 GiB frame
  // to refuse. Frames between the two limits are still read, and refused by
  // the decoder with an ErrorMsg that names the limit (a worker learns why).
  socket.set(zmq::sockopt::maxmsgsize,
             static_cast<int64_t>(transport_frame_limit(max_frame_bytes)));
  std::string bind_host = host.empty() ? "*" : host;
  if (bind_host.find(':') != std::string::npos) {
    socket.set(zmq::sockopt::ipv6, true);
    if (bind_host.front() != '[')
      bind_host = "[" + bind_host + "]";
  }
  const std::string url = fmt::format("tcp://{}:{}", bind_host, port);
  if (before_bind)
    before_bind(socket);
  try {
    socket.bind(url);
  } catch (const zmq::error_t& e) {
    throw std::runtime_error(fmt::format("cannot bind {}: {}", url, e.what()));
  }
  spdlog::info("zmq-frontend-bound url={}", url);
  return socket;
}

/// The port of a bound socket's last endpoint ("tcp://0.0.0.0:8300" -> 8300).
inline uint16_t bound_port(zmq::socket_t& socket) {
  const std::string endpoint = socket.get(zmq::sockopt::last_endpoint);
  const auto colon = endpoint.rfind(':');
  return colon == std::string::npos ? 0
                                    : static_cast<uint16_t>(std::stoul(endpoint.substr(colon + 1)));
}

inline bool has_input(zmq::socket_t& socket) {
  return (socket.get(zmq::sockopt::events) & ZMQ_POLLIN) != 0;
}

inline std::string_view socket_name(request_socket s) {
  return s == request_socket::reply ? "reply" : "heartbeat";
}

} // namespace lmcc::gateway::internal
