// peer_link in a real actor system: sub-batches queued while the peer is down
// are acknowledged to their sender at once and re-sent, in order, when the
// peer is back; beyond the bound the oldest go, and the peer learns of the
// gap from the next sub-batch's `prev` (coverage.hpp). Links CAF (lmcc_actors).
#include "actors/cluster/peer_link.hpp"
#include "actors/type_ids.hpp"

#include <caf/all.hpp>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>

namespace lmcc::actors {
namespace {

using namespace std::chrono_literals;

/// A peer's shard as the link sees it: tells `observer` the number of each
/// sub-batch it receives (acks come from the test).
caf::behavior fake_peer(caf::event_based_actor*, caf::actor observer) {
  return {
      [observer](apply_atom, const kv_sub_batch& sb) {
        caf::anon_send(observer, sb.stream, sb.number);
      },
      [observer](apply_atom, const std::vector<kv_sub_batch>& sbs) {
        for (const auto& sb : sbs)
          caf::anon_send(observer, sb.stream, sb.number);
      },
  };
}

struct link_fixture {
  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> sys;
  std::unique_ptr<caf::scoped_actor> observer;
  caf::actor peer;
  peer_link_actor link;
  std::shared_ptr<peer_link_counters> counters = std::make_shared<peer_link_counters>();

  explicit link_fixture(uint64_t buffer_ops = 1 << 20) {
    register_message_types(cfg);
    sys = std::make_unique<caf::actor_system>(cfg);
    observer = std::make_unique<caf::scoped_actor>(*sys);
    peer = sys->spawn(fake_peer, caf::actor{*observer});
    peer_link_config lc;
    lc.peer_id = "n2";
    lc.buffer_ops = buffer_ops;
    lc.counters = counters;
    link = sys->spawn(peer_link_main, std::move(lc));
  }
  ~link_fixture() {
    caf::anon_send_exit(link, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(peer, caf::exit_reason::user_shutdown);
    observer.reset();
  }

  /// A sub-batch of `keys` from the observer (the link acks it there).
  void send(uint64_t number, std::vector<uint64_t> keys) {
    kv_sub_batch sb;
    sb.stream = 7;
    sb.number = number;
    sb.holder = 1;
    for (uint64_t k : keys)
      sb.ops.push_back(kv_op{k, true});
    (*observer)->send(link, apply_atom::value, std::move(sb));
  }
  /// The link's ack of `number` to the sender (sent at once: the peer is down).
  void expect_released(uint64_t number) {
    (*observer)->receive([&](ack_atom, uint64_t, uint64_t n) { EXPECT_EQ(n, number); },
                         caf::after(10s) >> [] { ADD_FAILURE() << "no ack"; });
  }
  void expect_resent(uint64_t number) {
    (*observer)->receive([&](uint64_t, uint64_t n) { EXPECT_EQ(n, number); },
                         caf::after(10s) >> [] { ADD_FAILURE() << "nothing re-sent"; });
  }
  /// Waits until the link handled everything sent to it so far.
  void sync() {
    (*observer)
        ->request(link, 10s, drain_atom::value)
        .receive([](bool) {}, [](caf::error& e) { ADD_FAILURE() << caf::to_string(e); });
  }
};

TEST(peer_link, what_queued_while_the_peer_was_down_is_resent_in_order_when_it_is_back) {
  link_fixture f;
  caf::anon_send(f.link, peer_atom::value, caf::actor{}); // found down
  f.send(1, {11, 12, 13});
  f.expect_released(1); // the sender need not wait for a peer found down
  f.send(2, {11, 14});
  f.expect_released(2);
  f.sync();
  EXPECT_EQ(f.counters->queued_sub_batches.load(), 2u);
  caf::anon_send(f.link, peer_atom::value, f.peer);
  f.expect_resent(1);
  f.expect_resent(2);
  caf::anon_send(f.link, ack_atom::value, uint64_t{7}, uint64_t{2}); // cumulative
  f.sync();
  EXPECT_EQ(f.counters->queued_sub_batches.load(), 0u);
  EXPECT_EQ(f.counters->resent_sub_batches.load(), 2u);
}

TEST(peer_link, beyond_the_bound_the_oldest_queued_sub_batches_go_and_are_counted) {
  link_fixture f{/*buffer_ops=*/2};
  caf::anon_send(f.link, peer_atom::value, caf::actor{});
  f.send(1, {21, 22});
  f.expect_released(1);
  f.send(2, {23, 24}); // over the bound: sub-batch 1 is dropped
  f.expect_released(2);
  f.sync();
  EXPECT_EQ(f.counters->dropped_ops.load(), 2u);
  caf::anon_send(f.link, peer_atom::value, f.peer);
  f.expect_resent(2); // 1 is gone: the peer sees 2's prev past what it holds
}

TEST(peer_link, while_a_message_is_unacknowledged_what_comes_waits_and_goes_with_its_ack) {
  link_fixture f;
  caf::anon_send(f.link, peer_atom::value, f.peer);
  f.send(1, {31});
  f.expect_resent(1); // an idle link sends at once
  f.send(2, {32});
  f.send(3, {33});
  f.sync();
  EXPECT_EQ(f.counters->sent_messages.load(), 1u) << "2 and 3 wait for 1's ack";
  caf::anon_send(f.link, ack_atom::value, uint64_t{7}, uint64_t{1});
  f.expect_resent(2);
  f.expect_resent(3);
  f.sync();
  EXPECT_EQ(f.counters->sent_messages.load(), 2u) << "2 and 3 went as one message";
  EXPECT_EQ(f.counters->sent_sub_batches.load(), 3u);
}

TEST(peer_link, an_ack_that_does_not_come_holds_the_next_message_back_only_briefly) {
  link_fixture f;
  caf::anon_send(f.link, peer_atom::value, f.peer);
  f.send(1, {41});
  f.expect_resent(1);
  const auto held_from = std::chrono::steady_clock::now();
  f.send(2, {42}); // 1 is never acked: 2 goes on the timeout check past the patience
  f.expect_resent(2);
  EXPECT_GE(std::chrono::steady_clock::now() - held_from, 100ms);
  EXPECT_EQ(f.counters->sent_messages.load(), 2u);
}

} // namespace
} // namespace lmcc::actors
