// zmq_frontend against real ZMQ clients on loopback: PUSH (a worker's W1) and
// DEALER (W2/W3), with a recording frontend_handler whose answers each test
// controls (answer at once, hold the reply_fns and answer later in any order,
// throw, or drop the reply_fn).
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

namespace lmcc::gateway {
namespace {

using namespace std::chrono_literals;
using msg::ClearMsg;
using msg::DeRegisterMsg;
using msg::ErrorMsg;
using msg::HeartbeatMsg;
using msg::Msg;
using msg::RegisterMsg;
using msg::RegisterRetMsg;
using clock = std::chrono::steady_clock;

constexpr auto wait_limit = 10s;        // generous: the machine is shared
constexpr int client_timeout_ms = 5000; // a missing reply fails instead of hanging

/// Polls `pred` until it holds or `limit` passes; the result of the last call.
bool wait_until(const std::function<bool()>& pred, std::chrono::milliseconds limit = wait_limit) {
  const auto until = clock::now() + limit;
  while (!pred()) {
    if (clock::now() > until)
      return pred();
    std::this_thread::sleep_for(2ms);
  }
  return true;
}

// -- messages ---------------------------------------------------------------------

Msg register_msg(std::string id) {
  return Msg{RegisterMsg{.instance_id = std::move(id),
                         .worker_id = 0,
                         .ip = "127.0.0.1",
                         .port = 8500,
                         .peer_init_url = std::nullopt}};
}

Msg heartbeat_msg(std::string id) {
  return Msg{HeartbeatMsg{.instance_id = std::move(id),
                          .worker_id = 0,
                          .ip = "127.0.0.1",
                          .port = 8500,
                          .peer_init_url = std::nullopt}};
}

Msg deregister_msg(std::string id) {
  return Msg{
      DeRegisterMsg{.instance_id = std::move(id), .worker_id = 1, .ip = "10.0.0.5", .port = 8500}};
}

Msg clear_msg(std::string event) {
  return Msg{ClearMsg{.event_id = std::move(event), .instance_id = "A", .location = "cpu"}};
}

std::string instance_of(const Msg& m) {
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
Msg echo_of(const Msg& request) {
  return Msg{RegisterRetMsg{.extra_config = {{"echo", instance_of(request)}}}};
}

Msg error_msg(std::string text) {
  return Msg{ErrorMsg{.error = std::move(text)}};
}

// -- the handler ------------------------------------------------------------------

class recording_handler : public frontend_handler {
public:
  enum class mode {
    echo,   ///< answer at once with echo_of(request)
    hold,   ///< keep the reply_fn; the test answers
    ignore, ///< drop the reply_fn without calling it
  };

  void on_push(Msg m) override {
    if (instance_of(m) == "boom")
      throw std::runtime_error("push handler failed");
    std::lock_guard lock(mutex_);
    pushes_.push_back(std::move(m));
  }

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
  std::vector<Msg> pushes_;
  std::vector<std::pair<request_socket, Msg>> requests_;
  std::vector<reply_fn> held_;
};

// -- clients ----------------------------------------------------------------------

/// Ports free right now, distinct from each other (all held until all are chosen).
std::array<uint16_t, 3> free_ports() {
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

zmq::socket_t client(zmq::context_t& ctx, zmq::socket_type type, uint16_t port) {
  zmq::socket_t s(ctx, type);
  s.set(zmq::sockopt::linger, 0);
  s.set(zmq::sockopt::rcvtimeo, client_timeout_ms);
  s.set(zmq::sockopt::sndtimeo, client_timeout_ms);
  s.connect("tcp://127.0.0.1:" + std::to_string(port));
  return s;
}

void send_frames(zmq::socket_t& s, const std::vector<std::string>& frames) {
  for (size_t i = 0; i < frames.size(); ++i) {
    const auto flags = i + 1 < frames.size() ? zmq::send_flags::sndmore : zmq::send_flags::none;
    ASSERT_TRUE(s.send(zmq::buffer(frames[i]), flags)) << "send timed out";
  }
}

/// A DEALER request the way LMCache workers send it: ["", payload].
void send_request(zmq::socket_t& dealer, const Msg& m) {
  send_frames(dealer, {"", msg::encode_msgpack(m)});
}

/// All frames of the next multipart; empty on timeout.
std::vector<std::string> recv_frames(zmq::socket_t& s) {
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
std::optional<Msg> recv_reply(zmq::socket_t& dealer) {
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
bool has_message_within(zmq::socket_t& s, std::chrono::milliseconds limit) {
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
  zmq_options options;
  std::unique_ptr<zmq_frontend> frontend; // destroyed first: stops before the rest go
};

// -- S1 PULL ----------------------------------------------------------------------

TEST_F(zmq_frontend_test, pull_hands_over_every_good_frame_in_order_and_counts_the_bad_ones) {
  start();
  auto push = pusher();
  send_frames(push, {
                        msg::encode_msgpack(deregister_msg("a")),
                        "GET / HTTP/1.1",
                        "{not json",
                        "\xff\xfe\xfd",
                        msg::encode_json(deregister_msg("b")),
                        msg::encode_msgpack(clear_msg("c")),
                        msg::encode_msgpack(heartbeat_msg("wrong-family")),
                        msg::encode_msgpack(deregister_msg("d")),
                    });
  ASSERT_TRUE(wait_until([&] { return handler.pushes().size() == 4; }));
  EXPECT_EQ(handler.pushes(), (std::vector<Msg>{deregister_msg("a"), deregister_msg("b"),
                                                clear_msg("c"), deregister_msg("d")}));
  EXPECT_EQ(counters().pull_frames.load(), 8u);
  EXPECT_EQ(counters().bad_frames.load(), 4u);

  // The loop is still there for the next multipart.
  send_frames(push, {msg::encode_msgpack(deregister_msg("e"))});
  ASSERT_TRUE(wait_until([&] { return handler.pushes().size() == 5; }));
  EXPECT_EQ(handler.pushes().back(), deregister_msg("e"));
  EXPECT_TRUE(wait_until([&] { return counters().pull_active.load() == 0; }));
}

TEST_F(zmq_frontend_test, pull_logs_bad_frames_at_most_about_once_a_second) {
  log_capture logs;
  start();
  auto push = pusher();
  send_frames(push, std::vector<std::string>(100, "\xff"));
  ASSERT_TRUE(wait_until([&] { return counters().bad_frames.load() == 100; }));
  frontend->stop();
  const auto lines = logs.lines_starting_with("pull-bad-frame ");
  ASSERT_FALSE(lines.empty());
  // 100 bad frames take far less than a second; allow a few lines on a slow machine.
  EXPECT_LE(lines.size(), 5u);
  EXPECT_TRUE(lines[0].starts_with("pull-bad-frame socket=pull bytes=1 head=ff error="))
      << lines[0];
}

TEST_F(zmq_frontend_test, pull_drops_the_frames_beyond_the_multipart_limit) {
  options.max_frames_per_multipart = 2;
  start();
  auto push = pusher();
  send_frames(push,
              {msg::encode_msgpack(deregister_msg("a")), msg::encode_msgpack(deregister_msg("b")),
               msg::encode_msgpack(deregister_msg("c")), msg::encode_msgpack(deregister_msg("d"))});
  send_frames(push, {msg::encode_msgpack(deregister_msg("e"))});
  ASSERT_TRUE(wait_until([&] { return handler.pushes().size() == 3; }));
  EXPECT_EQ(handler.pushes(),
            (std::vector<Msg>{deregister_msg("a"), deregister_msg("b"), deregister_msg("e")}));
  EXPECT_EQ(counters().pull_frames.load(), 5u);
  EXPECT_EQ(counters().bad_frames.load(), 2u);
}

TEST_F(zmq_frontend_test, pull_survives_a_handler_that_throws) {
  start();
  auto push = pusher();
  send_frames(push, {msg::encode_msgpack(deregister_msg("boom")),
                     msg::encode_msgpack(deregister_msg("after"))});
  send_frames(push, {msg::encode_msgpack(deregister_msg("next"))});
  ASSERT_TRUE(wait_until([&] { return handler.pushes().size() == 2; }));
  EXPECT_EQ(handler.pushes(), (std::vector<Msg>{deregister_msg("after"), deregister_msg("next")}));
  EXPECT_EQ(counters().handler_errors.load(), 1u);
}

// -- S2/S3 ROUTER framing -------------------------------------------------------------

TEST_F(zmq_frontend_test, dealer_with_delimiter_gets_delimiter_and_reply) {
  start();
  auto dealer = reply_dealer();
  send_request(dealer, register_msg("w1"));
  EXPECT_EQ(recv_reply(dealer), echo_of(register_msg("w1")));
  ASSERT_EQ(handler.requests().size(), 1u);
  EXPECT_EQ(handler.requests()[0].first, request_socket::reply);
  EXPECT_EQ(handler.requests()[0].second, register_msg("w1"));
  EXPECT_EQ(counters().reply_requests.load(), 1u);
  EXPECT_TRUE(wait_until([&] { return counters().reply_active.load() == 0; }));
}

TEST_F(zmq_frontend_test, dealer_without_delimiter_is_answered_too) {
  start();
  auto dealer = reply_dealer();
  // Arrives as [identity, payload]: the payload is the last frame.
  send_frames(dealer, {msg::encode_msgpack(register_msg("w1"))});
  EXPECT_EQ(recv_reply(dealer), echo_of(register_msg("w1")));
}

TEST_F(zmq_frontend_test, json_request_is_accepted) {
  start();
  auto dealer = reply_dealer();
  send_frames(dealer, {"", msg::encode_json(register_msg("w1"))});
  EXPECT_EQ(recv_reply(dealer), echo_of(register_msg("w1")));
}

TEST_F(zmq_frontend_test, wrong_family_on_the_reply_socket_gets_unknown_message_type) {
  start();
  auto dealer = reply_dealer();
  send_request(dealer, clear_msg("e1"));
  EXPECT_EQ(recv_reply(dealer), error_msg("Unknown message type: ClearMsg"));
  EXPECT_TRUE(handler.requests().empty());
  EXPECT_EQ(counters().bad_frames.load(), 1u);
  EXPECT_TRUE(wait_until([&] { return counters().error_replies.load() == 1; }));
}

TEST_F(zmq_frontend_test, heartbeat_socket_accepts_heartbeats_only) {
  start();
  auto dealer = heartbeat_dealer();
  send_request(dealer, register_msg("w1"));
  EXPECT_EQ(recv_reply(dealer), error_msg("Expected HeartbeatMsg, got RegisterMsg"));
  send_request(dealer, heartbeat_msg("w1"));
  EXPECT_EQ(recv_reply(dealer), echo_of(heartbeat_msg("w1")));
  ASSERT_EQ(handler.requests().size(), 1u);
  EXPECT_EQ(handler.requests()[0].first, request_socket::heartbeat);
  EXPECT_EQ(handler.requests()[0].second, heartbeat_msg("w1"));
}

TEST_F(zmq_frontend_test, undecodable_requests_get_the_codec_error_and_the_loop_goes_on) {
  options.limits.max_frame_bytes = 128; // a RegisterMsg with a short id fits
  start();
  auto dealer = reply_dealer();
  const std::string oversized = msg::encode_msgpack(register_msg(std::string(200, 'x')));
  const auto expected_error = msg::decode_frame(oversized, options.limits);
  ASSERT_FALSE(expected_error);
  for (const std::string& bad :
       {oversized, std::string("GET / HTTP/1.1"), std::string("{not json"), std::string()}) {
    send_frames(dealer, {"", bad});
    auto reply = recv_reply(dealer);
    ASSERT_TRUE(reply && std::holds_alternative<ErrorMsg>(*reply)) << bad;
    EXPECT_EQ(*reply, error_msg(msg::decode_frame(bad, options.limits).error().message));
  }
  send_request(dealer, register_msg("w1"));
  EXPECT_EQ(recv_reply(dealer), echo_of(register_msg("w1")));
  EXPECT_EQ(counters().bad_frames.load(), 4u);
  EXPECT_EQ(handler.requests().size(), 1u);
}

TEST_F(zmq_frontend_test, handler_that_throws_gets_an_error_reply_and_the_loop_survives) {
  start();
  auto dealer = reply_dealer();
  send_request(dealer, register_msg("boom"));
  EXPECT_EQ(recv_reply(dealer), error_msg("internal error: request handler failed"));
  send_request(dealer, register_msg("w1"));
  EXPECT_EQ(recv_reply(dealer), echo_of(register_msg("w1")));
  EXPECT_EQ(counters().handler_errors.load(), 1u);
}

TEST_F(zmq_frontend_test, handler_that_drops_its_reply_fn_still_yields_one_reply) {
  start();
  handler.set_mode(recording_handler::mode::ignore);
  auto dealer = reply_dealer();
  send_request(dealer, register_msg("w1"));
  EXPECT_EQ(recv_reply(dealer), error_msg("internal error: request dropped without reply"));
  handler.set_mode(recording_handler::mode::echo);
  send_request(dealer, register_msg("w2"));
  EXPECT_EQ(recv_reply(dealer), echo_of(register_msg("w2")));
}

// -- reply order ----------------------------------------------------------------------

TEST_F(zmq_frontend_test, replies_leave_in_request_order_when_answered_in_reverse) {
  start();
  handler.set_mode(recording_handler::mode::hold);
  auto dealer = reply_dealer();
  send_request(dealer, register_msg("first"));
  send_request(dealer, register_msg("second"));
  ASSERT_TRUE(wait_until([&] { return handler.held_count() == 2; }));

  // The second answer, from another thread, must wait for the first.
  std::thread([&] {
    auto [reply, request] = handler.held(1);
    reply(echo_of(request));
  }).join();
  EXPECT_FALSE(has_message_within(dealer, 200ms));
  std::thread([&] {
    auto [reply, request] = handler.held(0);
    reply(echo_of(request));
  }).join();

  EXPECT_EQ(recv_reply(dealer), echo_of(register_msg("first")));
  EXPECT_EQ(recv_reply(dealer), echo_of(register_msg("second")));
  EXPECT_TRUE(wait_until([&] { return counters().reply_active.load() == 0; }));
}

TEST_F(zmq_frontend_test, bad_request_between_two_good_ones_is_answered_in_its_place) {
  start();
  handler.set_mode(recording_handler::mode::hold);
  auto dealer = reply_dealer();
  send_request(dealer, register_msg("first"));
  send_frames(dealer, {"", "{not json"});
  send_request(dealer, register_msg("third"));
  ASSERT_TRUE(wait_until([&] { return handler.held_count() == 2; }));
  // The ErrorMsg is ready at once, but must not overtake "first".
  EXPECT_FALSE(has_message_within(dealer, 200ms));
  for (size_t i : {1, 0}) {
    auto [reply, request] = handler.held(i);
    reply(echo_of(request));
  }
  EXPECT_EQ(recv_reply(dealer), echo_of(register_msg("first")));
  auto error = recv_reply(dealer);
  ASSERT_TRUE(error && std::holds_alternative<ErrorMsg>(*error));
  EXPECT_EQ(recv_reply(dealer), echo_of(register_msg("third")));
}

TEST_F(zmq_frontend_test, a_slow_request_of_one_peer_does_not_hold_back_another_peer) {
  start();
  handler.set_mode(recording_handler::mode::hold);
  auto slow = reply_dealer();
  auto fast = reply_dealer();
  send_request(slow, register_msg("slow"));
  ASSERT_TRUE(wait_until([&] { return handler.held_count() == 1; }));
  send_request(fast, register_msg("fast"));
  ASSERT_TRUE(wait_until([&] { return handler.held_count() == 2; }));
  auto [reply_fast, request_fast] = handler.held(1);
  reply_fast(echo_of(request_fast));
  EXPECT_EQ(recv_reply(fast), echo_of(register_msg("fast")));
  auto [reply_slow, request_slow] = handler.held(0);
  reply_slow(echo_of(request_slow));
  EXPECT_EQ(recv_reply(slow), echo_of(register_msg("slow")));
}

TEST_F(zmq_frontend_test, too_many_pending_requests_get_an_ordered_error) {
  options.max_pending_per_peer = 2;
  start();
  handler.set_mode(recording_handler::mode::hold);
  auto dealer = reply_dealer();
  for (const char* id : {"a", "b", "c"})
    send_request(dealer, register_msg(id));
  ASSERT_TRUE(wait_until([&] { return counters().reply_requests.load() == 3; }));
  ASSERT_EQ(handler.held_count(), 2u);
  EXPECT_FALSE(has_message_within(dealer, 200ms));
  for (size_t i : {0, 1}) {
    auto [reply, request] = handler.held(i);
    reply(echo_of(request));
  }
  EXPECT_EQ(recv_reply(dealer), echo_of(register_msg("a")));
  EXPECT_EQ(recv_reply(dealer), echo_of(register_msg("b")));
  EXPECT_EQ(recv_reply(dealer), error_msg("too many pending requests"));
}

TEST_F(zmq_frontend_test, many_peers_answered_in_shuffled_order_from_many_threads_keep_order) {
  constexpr int peers = 3;
  constexpr int per_peer = 100;
  start();
  handler.set_mode(recording_handler::mode::hold);
  std::vector<zmq::socket_t> dealers;
  for (int p = 0; p < peers; ++p)
    dealers.push_back(reply_dealer());
  for (int i = 0; i < per_peer; ++i)
    for (int p = 0; p < peers; ++p)
      send_request(dealers[p], register_msg(std::to_string(p) + "-" + std::to_string(i)));
  ASSERT_TRUE(wait_until([&] { return handler.held_count() == peers * per_peer; }));

  std::vector<size_t> order(peers * per_peer);
  for (size_t i = 0; i < order.size(); ++i)
    order[i] = i;
  std::shuffle(order.begin(), order.end(), std::mt19937(20240601));
  std::vector<std::thread> answerers;
  constexpr size_t threads = 4;
  for (size_t t = 0; t < threads; ++t)
    answerers.emplace_back([&, t] {
      for (size_t k = t; k < order.size(); k += threads) {
        auto [reply, request] = handler.held(order[k]);
        reply(echo_of(request));
      }
    });
  for (auto& t : answerers)
    t.join();

  for (int p = 0; p < peers; ++p)
    for (int i = 0; i < per_peer; ++i)
      ASSERT_EQ(recv_reply(dealers[p]),
                echo_of(register_msg(std::to_string(p) + "-" + std::to_string(i))))
          << "peer " << p << " reply " << i;
  EXPECT_TRUE(wait_until([&] { return counters().reply_active.load() == 0; }));
}

// -- lifecycle ------------------------------------------------------------------------

TEST_F(zmq_frontend_test, reply_after_stop_or_destruction_is_dropped_quietly) {
  start();
  handler.set_mode(recording_handler::mode::hold);
  auto dealer = reply_dealer();
  send_request(dealer, register_msg("a"));
  send_request(dealer, register_msg("b"));
  ASSERT_TRUE(wait_until([&] { return handler.held_count() == 2; }));
  frontend->stop();
  auto [reply_a, request_a] = handler.held(0);
  reply_a(echo_of(request_a));
  frontend.reset();
  auto [reply_b, request_b] = handler.held(1);
  reply_b(echo_of(request_b));
  EXPECT_FALSE(has_message_within(dealer, 100ms));
}

TEST_F(zmq_frontend_test, stop_returns_promptly_joins_and_releases_the_ports) {
  start();
  auto dealer = reply_dealer();
  send_request(dealer, register_msg("w1"));
  ASSERT_TRUE(recv_reply(dealer));

  const auto before = clock::now();
  frontend->stop();
  const auto took = clock::now() - before;
  EXPECT_LT(took, 5s) << "stop() should take about one poll interval at most";
  frontend->stop(); // idempotent

  // The ports are free again: another front end binds them (libzmq closes
  // sockets in its I/O thread, so allow it a moment).
  zmq_frontend again(ctx, options, handler);
  EXPECT_TRUE(wait_until([&] {
    try {
      again.start();
      return true;
    } catch (const std::runtime_error&) {
      return false;
    }
  }));
  auto dealer2 = reply_dealer();
  send_request(dealer2, register_msg("w2"));
  EXPECT_EQ(recv_reply(dealer2), echo_of(register_msg("w2")));
}

TEST_F(zmq_frontend_test, start_names_the_address_it_cannot_bind) {
  const auto ports = free_ports();
  zmq::socket_t squatter(ctx, zmq::socket_type::pull);
  squatter.set(zmq::sockopt::linger, 0);
  squatter.bind("tcp://127.0.0.1:" + std::to_string(ports[1]));
  options.pull_port = ports[0];
  options.reply_port = ports[1];
  options.heartbeat_port = ports[2];
  zmq_frontend fe(ctx, options, handler);
  try {
    fe.start();
    FAIL() << "start() should have thrown";
  } catch (const std::runtime_error& e) {
    const std::string expected = "cannot bind tcp://127.0.0.1:" + std::to_string(ports[1]) + ": ";
    EXPECT_EQ(std::string(e.what()).substr(0, expected.size()), expected) << e.what();
  }
}

TEST_F(zmq_frontend_test, sockets_that_are_off_are_not_bound) {
  options.reply_port = std::nullopt;
  options.heartbeat_port = std::nullopt;
  options.pull_port = free_ports()[0];
  zmq_frontend fe(ctx, options, handler);
  fe.start();
  EXPECT_EQ(fe.heartbeat_url_for("10.1.2.3"), std::nullopt);
  auto push = pusher();
  send_frames(push, {msg::encode_msgpack(deregister_msg("a"))});
  EXPECT_TRUE(wait_until([&] { return handler.pushes().size() == 1; }));
}

// -- heartbeat URL ----------------------------------------------------------------------

TEST(heartbeat_connect_url, follows_spec_2_3_with_advertise_host) {
  const std::string me = "10.0.0.7";
  for (const char* bind_all : {"0.0.0.0", "*", ""}) {
    SCOPED_TRACE(bind_all);
    EXPECT_EQ(heartbeat_connect_url(bind_all, 8082, "10.0.0.9", "", me), "10.0.0.7:8082");
    EXPECT_EQ(heartbeat_connect_url(bind_all, 8082, me, "", me), "127.0.0.1:8082");
    EXPECT_EQ(heartbeat_connect_url(bind_all, 8082, "10.0.0.9", "ctl.example", me),
              "ctl.example:8082");
    EXPECT_EQ(heartbeat_connect_url(bind_all, 8082, me, "ctl.example", me), "ctl.example:8082");
  }
  EXPECT_EQ(heartbeat_connect_url("10.0.0.3", 8082, "10.0.0.9", "", me), "10.0.0.3:8082");
  EXPECT_EQ(heartbeat_connect_url("10.0.0.3", 8082, "10.0.0.9", "ctl.example", me),
            "10.0.0.3:8082");
  EXPECT_EQ(heartbeat_connect_url("localhost", 9, "10.0.0.9", "", me), "localhost:9");
}

TEST(heartbeat_connect_url, local_ip_is_an_ipv4_address) {
  const std::string ip = local_ip();
  in_addr parsed{};
  EXPECT_EQ(::inet_pton(AF_INET, ip.c_str(), &parsed), 1) << ip;
}

TEST_F(zmq_frontend_test, heartbeat_url_for_uses_the_bound_port_and_hosts) {
  start(); // host 127.0.0.1: handed out as is
  const std::string port = std::to_string(*options.heartbeat_port);
  EXPECT_EQ(frontend->heartbeat_url_for("10.1.2.3"), "127.0.0.1:" + port);

  zmq_options all = options;
  all.host = "0.0.0.0";
  all.advertise_host = "ctl.example";
  zmq_frontend advertised(ctx, all, handler); // not started: the URL needs no socket
  EXPECT_EQ(advertised.heartbeat_url_for("10.1.2.3"), "ctl.example:" + port);

  all.advertise_host.clear();
  zmq_frontend plain(ctx, all, handler);
  EXPECT_EQ(plain.heartbeat_url_for(local_ip()), "127.0.0.1:" + port);
  if (local_ip() != "127.0.0.1") {
    EXPECT_EQ(plain.heartbeat_url_for("203.0.113.1"), local_ip() + ":" + port);
  }
}

} // namespace
} // namespace lmcc::gateway
