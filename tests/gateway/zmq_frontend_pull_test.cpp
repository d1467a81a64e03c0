// zmq_frontend's PULL socket S1 against real PUSH clients on loopback: frames
// handed over per drain round in order, bad frames counted, the ingest gate
// stopping and resuming the reads, and libzmq's frame limit. Helpers in
// zmq_frontend_support.hpp.
#include "zmq_frontend_support.hpp"

#include <zmq.h>

#include <cstring>
#include <set>
#include <stop_token>
#include <thread>

namespace lmcc::gateway {
namespace {

using namespace test;

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
  // The round holding "boom" is lost with its handler call, not the loop.
  send_frames(push, {msg::encode_msgpack(deregister_msg("boom")),
                     msg::encode_msgpack(deregister_msg("after"))});
  ASSERT_TRUE(wait_until([&] { return counters().handler_errors.load() == 1; }));
  send_frames(push, {msg::encode_msgpack(deregister_msg("next"))});
  ASSERT_TRUE(wait_until([&] { return handler.pushes().size() == 1; }));
  EXPECT_EQ(handler.pushes(), (std::vector<Msg>{deregister_msg("next")}));
  EXPECT_TRUE(wait_until([&] { return counters().pull_active.load() == 0; }));
}

TEST_F(zmq_frontend_test, a_round_hands_over_every_frame_of_a_multipart_together) {
  start();
  auto push = pusher();
  std::vector<std::string> frames;
  std::vector<Msg> want;
  for (int i = 0; i < 20; ++i) {
    frames.push_back(msg::encode_msgpack(deregister_msg(std::to_string(i))));
    want.push_back(deregister_msg(std::to_string(i)));
  }
  send_frames(push, frames);
  ASSERT_TRUE(wait_until([&] { return handler.pushes().size() == 20; }));
  EXPECT_EQ(handler.pushes(), want);
  EXPECT_EQ(handler.rounds(), (std::vector<size_t>{20})); // one multipart, one round
}

// -- S1 flow control ---------------------------------------------------------------

TEST_F(zmq_frontend_test, an_exhausted_gate_stops_the_reads_until_its_eventfd_fires) {
  gate.close_gate();
  handler.use_gate(&gate);
  start();
  ASSERT_TRUE(wait_until([&] { return counters().pull_paused.load() == 1; }));
  EXPECT_GE(gate.arms.load(), 1);
  auto push = pusher();
  for (const char* id : {"a", "b", "c"})
    send_frames(push, {msg::encode_msgpack(deregister_msg(id))});
  // Paused: the frames stay queued in ZMQ (and push back on the worker).
  EXPECT_FALSE(wait_until([&] { return counters().pull_frames.load() > 0; }, 300ms));
  EXPECT_TRUE(handler.pushes().empty());
  EXPECT_EQ(counters().pull_paused.load(), 1);

  gate.open(UINT64_MAX);
  ASSERT_TRUE(wait_until([&] { return handler.pushes().size() == 3; }));
  EXPECT_EQ(handler.pushes(),
            (std::vector<Msg>{deregister_msg("a"), deregister_msg("b"), deregister_msg("c")}));
  EXPECT_EQ(counters().pull_paused.load(), 0);
  EXPECT_GE(gate.disarms.load(), 1);

  // Exhausted again: the next frames wait for the next wake-up.
  gate.close_gate();
  send_frames(push, {msg::encode_msgpack(deregister_msg("d"))});
  ASSERT_TRUE(wait_until(
      [&] { return counters().pull_paused.load() == 1 || handler.pushes().size() == 4; }));
  // "d" may have been read before the loop saw the gate closed; if not, it waits.
  if (handler.pushes().size() == 3) {
    EXPECT_FALSE(wait_until([&] { return handler.pushes().size() == 4; }, 200ms));
    gate.open(UINT64_MAX);
  }
  ASSERT_TRUE(wait_until([&] { return handler.pushes().size() == 4; }));
}

// What a paused node holds for one worker is bounded by pull_queue_messages
// (libzmq's per-connection queue, which counts a multipart as one message) plus
// the kernel's socket buffers: the worker's PUSH then blocks. At libzmq's
// default (1000 multiparts) every multipart below would have been taken in.
TEST_F(zmq_frontend_test, a_paused_pull_socket_queues_few_multiparts_then_the_pusher_blocks) {
  options.pull_queue_messages = 4;
  gate.close_gate();
  handler.use_gate(&gate);
  start();
  ASSERT_TRUE(wait_until([&] { return counters().pull_paused.load() == 1; }));
  auto push = pusher();
  push.set(zmq::sockopt::sndhwm, 1);
  // A send that cannot go within 1 s means the queues are full: libzmq waits
  // for room itself, so no retry loop is needed.
  push.set(zmq::sockopt::sndtimeo, 1000);
  const std::string frame(64 * 1024, 'x'); // four frames: a 256 KiB multipart
  constexpr int offered = 400;             // 100 MiB, far beyond the kernel's buffers
  int accepted = 0;
  while (accepted < offered) {
    // Only the first part can wait: libzmq takes a started multipart whole.
    if (!push.send(zmq::buffer(frame), zmq::send_flags::sndmore))
      break;
    for (int part = 1; part < 4; ++part)
      ASSERT_TRUE(push.send(zmq::buffer(frame),
                            part < 3 ? zmq::send_flags::sndmore : zmq::send_flags::none));
    ++accepted;
  }
  // 4 queued in the node + one in each socket's I/O thread + the pusher's one +
  // what loopback TCP buffers hold (a few MiB: some dozens of multiparts).
  EXPECT_LT(accepted, 120) << "the node kept taking multiparts while paused";
  EXPECT_GT(accepted, 4);
  EXPECT_EQ(counters().pull_frames.load(), 0U);
  // Stopped while the pusher is open and blocked mid-stream: the stop must
  // end (it half-closes the connection). Closing the pusher first, with
  // linger 0, races libzmq 4.3.4's own teardown of that socket against the
  // connection's end, and libzmq aborts in the pusher (session_base.cpp:260,
  // a multipart half read from a pipe being terminated): 4 of 30 runs.
  frontend->stop();
}

TEST_F(zmq_frontend_test, a_drain_round_stops_once_its_frames_hold_the_room) {
  gate.close_gate(); // closed while the frames queue up, so one round sees them all
  handler.use_gate(&gate);
  start();
  ASSERT_TRUE(wait_until([&] { return counters().pull_paused.load() == 1; }));
  auto push = pusher();
  for (int i = 0; i < 6; ++i)
    send_frames(push, {msg::encode_msgpack(deregister_msg(std::to_string(i)))}); // 1 credit each
  msg::BatchedKVOperationMsg batch{"w", 0, "cpu", {}};
  for (int i = 0; i < 5; ++i)
    batch.operations.push_back({msg::OpType::admit, i, i}); // 5 credits
  send_frames(push, {msg::encode_msgpack(Msg{batch})});
  send_frames(push, {msg::encode_msgpack(deregister_msg("last"))});
  gate.open(2);
  ASSERT_TRUE(wait_until([&] { return handler.pushes().size() == 8; }));
  // A round stops once it holds `room` credits: at most two of the single
  // frames, and the batch overshoots by its own multipart only.
  const auto rounds = handler.rounds();
  size_t total = 0;
  for (size_t n : rounds) {
    EXPECT_LE(n, 2u);
    total += n;
  }
  EXPECT_EQ(total, 8u);
  EXPECT_GE(rounds.size(), 4u);
  EXPECT_EQ(handler.pushes().back(), deregister_msg("last")); // order kept across rounds
}

TEST_F(zmq_frontend_test, a_frame_over_twice_the_limit_drops_its_connection_and_others_go_on) {
  options.limits.max_frame_bytes = 1024; // libzmq refuses frames over 2048
  start();
  zmq::socket_t big(ctx, zmq::socket_type::push);
  big.set(zmq::sockopt::linger, 0);
  big.set(zmq::sockopt::sndtimeo, client_timeout_ms);
  big.set(zmq::sockopt::reconnect_ivl, -1); // the dropped connection stays dropped
  // Watch the client's connection from its own side.
  ASSERT_EQ(zmq_socket_monitor(big.handle(), "inproc://big-monitor", ZMQ_EVENT_DISCONNECTED), 0);
  zmq::socket_t monitor(ctx, zmq::socket_type::pair);
  monitor.set(zmq::sockopt::linger, 0);
  monitor.set(zmq::sockopt::rcvtimeo, client_timeout_ms * 2);
  monitor.connect("inproc://big-monitor");
  big.connect("tcp://127.0.0.1:" + std::to_string(options.pull_port));
  auto good = pusher();

  send_frames(big, {msg::encode_msgpack(deregister_msg("before"))});
  ASSERT_TRUE(wait_until([&] { return handler.pushes().size() == 1; }));
  // Between the limits: read, and refused by the decoder (counted as bad).
  const std::string middle = msg::encode_msgpack(deregister_msg(std::string(1500, 'm')));
  send_frames(big, {middle});
  ASSERT_TRUE(wait_until([&] { return counters().bad_frames.load() == 1; }));
  send_frames(big, {std::string(4096, 'x')}); // over twice the limit
  zmq::message_t event;
  ASSERT_TRUE(monitor.recv(event, zmq::recv_flags::none)) << "the connection was not dropped";
  uint16_t id = 0;
  std::memcpy(&id, event.data(), sizeof id);
  EXPECT_EQ(id, ZMQ_EVENT_DISCONNECTED);
  zmq::message_t endpoint;
  (void)monitor.recv(endpoint, zmq::recv_flags::none);

  send_frames(good, {msg::encode_msgpack(deregister_msg("other-peer"))});
  ASSERT_TRUE(wait_until([&] { return handler.pushes().size() == 2; }));
  EXPECT_EQ(handler.pushes(),
            (std::vector<Msg>{deregister_msg("before"), deregister_msg("other-peer")}));
  EXPECT_EQ(counters().pull_frames.load(), 3u); // the oversized frame never reached lmcc
  EXPECT_EQ(counters().bad_frames.load(), 1u);
  zmq_socket_monitor(big.handle(), nullptr, 0);
}

/// A worker's batch of `ops` admits, as LMCache sends them (~15 bytes an op).
Msg batch_msg(std::string instance, int ops) {
  msg::BatchedKVOperationMsg batch{.instance_id = std::move(instance),
                                   .worker_id = 0,
                                   .location = "LocalCPUBackend",
                                   .operations = {}};
  for (int i = 0; i < ops; ++i)
    batch.operations.push_back(msg::KVOpEvent{
        .op_type = msg::OpType::admit, .key = 1'000'000'007LL * (i + 1), .seq_num = i});
  return batch;
}

// Busy connections are held in the kernel between releases (pull_loop.hpp):
// frames still arrive complete and in order while held; a lone frame on a
// quiet connection, beside a busy one that keeps holding on, arrives at the
// next release (with releases broken it waits until holding ends, which the
// busy connection never lets happen here); holding ends once every
// connection is quiet, and then a frame is read as it arrives.
TEST_F(zmq_frontend_test, busy_connections_are_held_between_releases_and_nothing_waits_for_good) {
  // A period long enough that the 1 ms sender never leaves one empty (an
  // empty period ends holding) even on a loaded machine.
  options.pull_coalesce = 50ms;
  start();
  std::vector<zmq::socket_t> pushes;
  for (int i = 0; i < 2; ++i)
    pushes.push_back(pusher());
  std::atomic<size_t> sent{0};
  std::atomic<bool> both{true};
  // Frame i goes to connection i % 2; while `both` is false only odd ones are sent.
  std::jthread sender([&](std::stop_token stop) {
    for (size_t i = 0; !stop.stop_requested(); ++i) {
      if (i % 2 == 0 && !both.load())
        continue;
      const std::string frame = msg::encode_msgpack(batch_msg(std::to_string(i), 40));
      if (!pushes[i % 2].send(zmq::buffer(frame), zmq::send_flags::none))
        return;
      sent.fetch_add(1);
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  });
  ASSERT_TRUE(wait_until([&] { return counters().pull_holding.load() == 1; }));
  const uint64_t starts = counters().pull_hold_starts.load();
  const size_t read = handler.pushes().size();
  ASSERT_TRUE(wait_until([&] { return handler.pushes().size() > read + 200; }));

  both.store(false); // connection 0 goes quiet; connection 1 stays busy
  const size_t before_lone = handler.pushes().size();
  ASSERT_TRUE(wait_until([&] { return handler.pushes().size() > before_lone + 50; }));
  send_frames(pushes[0], {msg::encode_msgpack(deregister_msg("lone-while-held"))});
  auto arrived = [&](std::string_view id) {
    const auto got = handler.pushes();
    return std::any_of(got.begin(), got.end(), [&](const Msg& m) { return instance_of(m) == id; });
  };
  ASSERT_TRUE(wait_until([&] { return arrived("lone-while-held"); }));
  EXPECT_EQ(counters().pull_holding.load(), 1) << "the busy connection kept holding on";
  EXPECT_EQ(counters().pull_hold_starts.load(), starts) << "holding never lapsed while busy";

  sender.request_stop();
  sender.join();
  ASSERT_TRUE(wait_until([&] { return handler.pushes().size() == sent.load() + 1; }))
      << handler.pushes().size() << " of " << sent.load() + 1;
  ASSERT_TRUE(wait_until([&] { return counters().pull_holding.load() == 0; }))
      << "quiet connections are not held";
  send_frames(pushes[1], {msg::encode_msgpack(deregister_msg("lone-after"))});
  ASSERT_TRUE(wait_until([&] { return handler.pushes().size() == sent.load() + 2; }));

  // Every frame once; each connection's frames in the order sent.
  const auto got = handler.pushes();
  std::vector<long> last_of(2, -1);
  size_t stream_frames = 0;
  std::set<size_t> seen;
  for (const auto& m : got) {
    const std::string id = instance_of(m);
    if (id.starts_with("lone"))
      continue;
    const size_t i = std::stoul(id);
    EXPECT_TRUE(seen.insert(i).second) << "frame " << i << " twice";
    EXPECT_GT(static_cast<long>(i), last_of[i % 2]) << "frame " << i << " out of order";
    last_of[i % 2] = static_cast<long>(i);
    ++stream_frames;
  }
  EXPECT_EQ(stream_frames, sent.load());
  EXPECT_EQ(instance_of(got.back()), "lone-after");
}

// With holding off (pull_hold_bytes 0) the stream arrives the same way.
TEST_F(zmq_frontend_test, with_holding_off_busy_connections_are_never_held) {
  options.pull_hold_bytes = 0;
  options.pull_coalesce = 20ms;
  start();
  auto push = pusher();
  for (size_t i = 0; i < 300; ++i) {
    send_frames(push, {msg::encode_msgpack(batch_msg(std::to_string(i), 40))});
    if (i % 50 == 0) {
      EXPECT_EQ(counters().pull_holding.load(), 0);
    }
  }
  ASSERT_TRUE(wait_until([&] { return handler.pushes().size() == 300; }));
  EXPECT_EQ(counters().pull_holding.load(), 0);
}

// A busy worker always has frames on the wire when the node stops. The stop
// catches up with them, half-closes the connection and reads until the
// worker's libzmq closes its side (pull_connections.hpp); the worker keeps
// what it had not written for its reconnect. Frames are numbered: the old and
// the restarted front end together must get each number once, in order (a
// loss here is a seq gap, and a full sync, for an LMCache worker).
TEST_F(zmq_frontend_test, a_stop_reads_what_a_busy_pusher_wrote_and_the_rest_reaches_the_restart) {
  start();
  zmq::context_t worker_context; // the worker's own libzmq, as in another process
  zmq::socket_t push(worker_context, zmq::socket_type::push);
  push.set(zmq::sockopt::linger, 0);
  push.set(zmq::sockopt::sndhwm, 0); // queues while the node is down, never blocks
  push.connect("tcp://127.0.0.1:" + std::to_string(options.pull_port));
  std::atomic<size_t> sent{0};
  std::jthread sender([&](std::stop_token stop) {
    for (size_t i = 0; !stop.stop_requested(); ++i) {
      const std::string frame = msg::encode_msgpack(batch_msg(std::to_string(i), 40));
      if (!push.send(zmq::buffer(frame), zmq::send_flags::none))
        return;
      sent.store(i + 1);
      // Busy, not a flood: a batch of 40 ops every millisecond, 10 times what an
      // LMCache worker sends. Four stops: before the half-close, 10 of 10 runs
      // lost frames; after, 0 of 40 (and 0 of 20 with two CPU hogs beside).
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  });
  // Four stops, each while frames are on the wire.
  std::vector<size_t> read_before_stop;
  for (int stop = 0; stop < 4; ++stop) {
    const size_t read = handler.pushes().size();
    ASSERT_TRUE(wait_until([&] { return handler.pushes().size() > read + 300; }));
    frontend->stop();
    read_before_stop.push_back(handler.pushes().size());
    // Same ports. libzmq closes a listener in its I/O thread after the socket
    // is gone, so the ports may stay taken a moment longer.
    ASSERT_TRUE(wait_until([&] {
      frontend = std::make_unique<zmq_frontend>(ctx, options, handler);
      try {
        frontend->start();
        return true;
      } catch (const std::runtime_error&) {
        return false;
      }
    }));
  }
  const size_t read = handler.pushes().size();
  ASSERT_TRUE(wait_until([&] { return handler.pushes().size() > read + 300; }));
  sender.request_stop();
  sender.join();
  EXPECT_TRUE(wait_until([&] { return handler.pushes().size() >= sent.load(); }));
  const auto pushes = handler.pushes();
  EXPECT_EQ(pushes.size(), sent.load());
  for (size_t i = 0; i < pushes.size(); ++i)
    ASSERT_EQ(instance_of(pushes[i]), std::to_string(i))
        << "frame " << i << " of " << pushes.size()
        << "; read before each stop: " << ::testing::PrintToString(read_before_stop);
}

} // namespace
} // namespace lmcc::gateway
