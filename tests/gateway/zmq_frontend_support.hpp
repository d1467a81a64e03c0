// Helpers for the zmq_frontend tests (zmq_frontend_test.cpp: S2/S3 and
// lifecycle; zmq_frontend_pull_test.cpp: S1 and its flow control): real ZMQ
// clients on loopback, PUSH (a worker's W1) and DEALER (W2/W3), a recording
// frontend_handler whose answers each test controls (answer at once, hold the
// reply_fns and answer later in any order, throw, or drop the reply_fn), a
// fake ingest_gate, a log capture and the fixture.
//
// Context: test code; the handler and the gate are thread-safe.
#pragma once

#include "gateway/zmq_frontend.hpp"
#include "messages/codec_json.hpp"
#include "messages/codec_msgpack.hpp"

#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>
#include <zmq.hpp>

#include <algorithm>
#include <arpa/inet.h>
#include <array>
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <netinet/in.h>
#include <optional>
#include <ostream>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>
#include <utility>
#include <vector>

namespace lmcc::msg {
// Failure messages show messages as msgspec JSON (gtest prints a variant's
// alternative with PrintTo, found here by ADL).
template <class T>
concept tagged_message = requires {
  T::type_tag;
};

template <tagged_message T>
void PrintTo(const T& m, std::ostream* os) {
  *os << encode_json(Msg{m});
}
} // namespace lmcc::msg

namespace lmcc::gateway::test {

using namespace std::chrono_literals;
using msg::ClearMsg;
using msg::DeRegisterMsg;
using msg::ErrorMsg;
using msg::HeartbeatMsg;
using msg::Msg;
using msg::RegisterMsg;
using msg::RegisterRetMsg;
using clock = std::chrono::steady_clock;

inline constexpr auto wait_limit = 10s;        // generous: the machine is shared
inline constexpr int client_timeout_ms = 5000; // a missing reply fails instead of hanging

/// Polls `pred` until it holds or `limit` passes; the result of the last call.
inline bool wait_until(const std::function<bool()>& pred,
                       std::chrono::milliseconds limit = wait_limit) {
  const auto until = clock::now() + limit;
  while (!pred()) {
    if (clock::now() > until)
      return pred();
    std::this_thread::sleep_for(2ms);
  }
  return true;
}

// -- messages ---------------------------------------------------------------------

inline Msg register_msg(std::string id) {
  return Msg{RegisterMsg{.instance_id = std::move(id),
                         .worker_id = 0,
                         .ip = "127.0.0.1",
                         .port = 8500,
                         .peer_init_url = std::nullopt}};
}

inline Msg heartbeat_msg(std::string id) {
  return Msg{HeartbeatMsg{.instance_id = std::move(id),
                          .worker_id = 0,
                          .ip = "127.0.0.1",
                          .port = 8500,
                          .peer_init_url = std::nullopt}};
}

inline Msg deregister_msg(std::string id) {
  return Msg{
      DeRegisterMsg{.instance_id = std::move(id), .worker_id = 1, .ip = "10.0.0.5", .port = 8500}};
}

inline Msg clear_msg(std::string event) {
  return Msg{ClearMsg{.event_id = std::move(event), .instance_id = "A", .location = "cpu"}};
}

inline std::string instance_of(const Msg& m) {
  return std::visit(
      [](const auto& x) -> std::string {
        if constexpr (requires { std::string{x.instance_id}; })
          return std::string(x.instance_id);
        else
          return "";
      },
      m);
}

/// What the recording handler answers by default: the request's instance id.
inline Msg echo_of(const Msg& request) {
  return Msg{RegisterRetMsg{.extra_config = {{"echo", instance_of(request)}}}};
}

inline Msg error_msg(std::string text) {
  return Msg{ErrorMsg{.error = std::move(text)}};
}

// -- the handler ------------------------------------------------------------------

/// An ingest_gate the test opens and closes: exhausted() and room() are what
/// the test sets; open() signals the eventfd the PULL thread waits on.
class fake_gate : public ingest_gate {
public:
  fake_gate() : fd_(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {}
  ~fake_gate() override { ::close(fd_); }
  fake_gate(const fake_gate&) = delete;
  fake_gate& operator=(const fake_gate&) = delete;

  bool exhausted() const override { return exhausted_.load(); }
  uint64_t room() const override { return exhausted_.load() ? 0 : room_.load(); }
  bool arm() override {
    arms.fetch_add(1);
    return true;
  }
  void disarm() override {
    uint64_t v = 0;
    if (::read(fd_, &v, sizeof v) < 0) {
    } // EAGAIN: not signalled
    disarms.fetch_add(1);
  }
  int wake_fd() const override { return fd_; }

  void close_gate() { exhausted_ = true; }
  /// Credit again, `room` of it: the PULL thread is woken through the eventfd.
  void open(uint64_t room) {
    room_ = room;
    exhausted_ = false;
    const uint64_t one = 1;
    if (::write(fd_, &one, sizeof one) < 0) {
    }
  }
  void set_room(uint64_t room) { room_ = room; }

  std::atomic<int> arms{0};
  std::atomic<int> disarms{0};

private:
  int fd_;
  std::atomic<bool> exhausted_{false};
  std::atomic<uint64_t> room_{UINT64_MAX};
};

class recording_handler : public frontend_handler {
public:
  enum class mode {
    echo,   ///< answer at once with echo_of(request)
    hold,   ///< keep the reply_fn; the test answers
    ignore, ///< drop the reply_fn without calling it
  };

  /// A round with a frame of instance "boom" throws before anything is kept.
  void on_push_round(std::vector<Msg>& frames) override {
    for (const auto& m : frames)
      if (instance_of(m) == "boom")
        throw std::runtime_error("push handler failed");
    std::lock_guard lock(mutex_);
    rounds_.push_back(frames.size());
    for (auto& m : frames)
      pushes_.push_back(std::move(m));
  }

  ingest_gate* gate() override { return gate_; }
  void use_gate(ingest_gate* g) { gate_ = g; }

  void on_request(request_socket socket, Msg m, reply_fn reply) override {
    if (instance_of(m) == "boom")
      throw std::runtime_error("request handler failed");
    std::lock_guard lock(mutex_);
    requests_.emplace_back(socket, m);
    if (mode_ == mode::echo)
      reply(echo_of(m));
    else if (mode_ == mode::hold)
      held_.push_back(std::move(reply));
  }

  void set_mode(mode m) {
    std::lock_guard lock(mutex_);
    mode_ = m;
  }

  std::vector<Msg> pushes() {
    std::lock_guard lock(mutex_);
    return pushes_;
  }

  /// The number of frames of each round handed over.
  std::vector<size_t> rounds() {
    std::lock_guard lock(mutex_);
    return rounds_;
  }

  std::vector<std::pair<request_socket, Msg>> requests() {
    std::lock_guard lock(mutex_);
    return requests_;
  }

  size_t held_count() {
    std::lock_guard lock(mutex_);
    return held_.size();
  }

  /// The i-th held reply_fn and its request.
  std::pair<reply_fn, Msg> held(size_t i) {
    std::lock_guard lock(mutex_);
    return {held_.at(i), requests_.at(i).second};
  }

private:
  std::mutex mutex_;
  mode mode_ = mode::echo;
  ingest_gate* gate_ = nullptr;
  std::vector<Msg> pushes_;
  std::vector<size_t> rounds_;
  std::vector<std::pair<request_socket, Msg>> requests_;
  std::vector<reply_fn> held_;
};

// -- clients ----------------------------------------------------------------------

/// Ports free right now, distinct from each other (all held until all are chosen).
inline std::array<uint16_t, 3> free_ports() {
  std::array<int, 3> fds{};
  std::array<uint16_t, 3> ports{};
  for (size_t i = 0; i < fds.size(); ++i) {
    fds[i] = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    if (fds[i] < 0 || ::bind(fds[i], reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
        ::getsockname(fds[i], reinterpret_cast<sockaddr*>(&addr), &len) != 0)
      throw std::runtime_error("cannot pick a free port");
    ports[i] = ntohs(addr.sin_port);
  }
  for (int fd : fds)
    ::close(fd);
  return ports;
}

inline zmq::socket_t client(zmq::context_t& ctx, zmq::socket_type type, uint16_t port) {
  zmq::socket_t s(ctx, type);
  s.set(zmq::sockopt::linger, 0);
  s.set(zmq::sockopt::rcvtimeo, client_timeout_ms);
  s.set(zmq::sockopt::sndtimeo, client_timeout_ms);
  s.connect("tcp://127.0.0.1:" + std::to_string(port));
  return s;
}

inline void send_frames(zmq::socket_t& s, const std::vector<std::string>& frames) {
  for (size_t i = 0; i < frames.size(); ++i) {
    const auto flags = i + 1 < frames.size() ? zmq::send_flags::sndmore : zmq::send_flags::none;
    ASSERT_TRUE(s.send(zmq::buffer(frames[i]), flags)) << "send timed out";
  }
}

/// A DEALER request the way LMCache workers send it: ["", payload].
inline void send_request(zmq::socket_t& dealer, const Msg& m) {
  send_frames(dealer, {"", msg::encode_msgpack(m)});
}

/// All frames of the next multipart; empty on timeout.
inline std::vector<std::string> recv_frames(zmq::socket_t& s) {
  std::vector<std::string> frames;
  for (;;) {
    zmq::message_t part;
    if (!s.recv(part, zmq::recv_flags::none))
      return {};
    frames.push_back(part.to_string());
    if (!part.more())
      return frames;
  }
}

/// The next reply on a DEALER: exactly ["", msgpack], decoded.
inline std::optional<Msg> recv_reply(zmq::socket_t& dealer) {
  auto frames = recv_frames(dealer);
  if (frames.size() != 2 || !frames[0].empty()) {
    ADD_FAILURE() << "expected [\"\", reply], got " << frames.size() << " frames";
    return std::nullopt;
  }
  auto decoded = msg::decode_msgpack(frames[1]);
  if (!decoded) {
    ADD_FAILURE() << "undecodable reply: " << decoded.error().message;
    return std::nullopt;
  }
  return *decoded;
}

/// True if a message arrives within `limit` (used only to assert absence).
inline bool has_message_within(zmq::socket_t& s, std::chrono::milliseconds limit) {
  zmq::pollitem_t items[] = {{s.handle(), 0, ZMQ_POLLIN, 0}};
  return zmq::poll(items, 1, limit) > 0;
}

/// Sends every spdlog line (message only) to a string while alive. Create it
/// before the front end starts and stop the front end before it goes, so no
/// socket thread logs while the default logger is swapped.
class log_capture {
public:
  log_capture() : previous_(spdlog::default_logger()) {
    auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(stream_);
    sink->set_pattern("%v");
    spdlog::set_default_logger(std::make_shared<spdlog::logger>("capture", std::move(sink)));
  }
  ~log_capture() { spdlog::set_default_logger(previous_); }
  log_capture(const log_capture&) = delete;
  log_capture& operator=(const log_capture&) = delete;

  /// The captured lines that start with `event`.
  std::vector<std::string> lines_starting_with(std::string_view event) {
    spdlog::default_logger()->flush();
    std::vector<std::string> out;
    std::istringstream in(stream_.str());
    for (std::string line; std::getline(in, line);)
      if (line.starts_with(event))
        out.push_back(line);
    return out;
  }

private:
  std::shared_ptr<spdlog::logger> previous_;
  std::ostringstream stream_;
};

// -- fixture ----------------------------------------------------------------------

class zmq_frontend_test : public ::testing::Test {
protected:
  void SetUp() override { options.host = "127.0.0.1"; }

  /// Starts the front end on free ports (retrying if another process takes
  /// one between the pick and the bind).
  void start() {
    for (int attempt = 0;; ++attempt) {
      const auto ports = free_ports();
      options.pull_port = ports[0];
      options.reply_port = ports[1];
      options.heartbeat_port = ports[2];
      frontend = std::make_unique<zmq_frontend>(ctx, options, handler);
      try {
        frontend->start();
        return;
      } catch (const std::runtime_error&) {
        if (attempt == 5)
          throw;
      }
    }
  }

  zmq::socket_t pusher() { return client(ctx, zmq::socket_type::push, options.pull_port); }
  zmq::socket_t reply_dealer() {
    return client(ctx, zmq::socket_type::dealer, *options.reply_port);
  }
  zmq::socket_t heartbeat_dealer() {
    return client(ctx, zmq::socket_type::dealer, *options.heartbeat_port);
  }

  const frontend_counters& counters() { return frontend->counters(); }

  zmq::context_t ctx;
  recording_handler handler;
  fake_gate gate; // handed to the front end only by handler.use_gate(&gate)
  zmq_options options;
  std::unique_ptr<zmq_frontend> frontend; // destroyed first: stops before the rest go
};

} // namespace lmcc::gateway::test
