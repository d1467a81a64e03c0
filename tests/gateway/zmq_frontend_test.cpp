// zmq_frontend's ROUTER sockets S2/S3 (framing, errors, reply order), its
// lifecycle and the heartbeat URL, against real ZMQ clients on loopback. The
// PULL socket S1 is in zmq_frontend_pull_test.cpp; the helpers are in
// zmq_frontend_support.hpp.
#include "zmq_frontend_support.hpp"

namespace lmcc::gateway {
namespace {

using namespace test;

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
  // Over the decoder's limit but under libzmq's (twice it): read, and answered
  // with the decoder's error (a larger one would cost the peer its connection).
  const std::string oversized = msg::encode_msgpack(register_msg(std::string(100, 'x')));
  ASSERT_GT(oversized.size(), 128u);
  ASSERT_LE(oversized.size(), 256u);
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
