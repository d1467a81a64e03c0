// peer_link's lag hints in a real actor system: sub-batches queued while the
// peer is down name their slots to on_lag (each slot once per down period),
// and on_caught_up runs once the peer acknowledged every sub-batch queued
// meanwhile -- not before, and not at all when queued ops were dropped.
// Links CAF (lmcc_actors).
#include "actors/peer_link.hpp"
#include "actors/type_ids.hpp"
#include "cluster/hash.hpp"

#include <caf/all.hpp>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <set>

namespace lmcc::actors {
namespace {

using namespace std::chrono_literals;

constexpr uint32_t slots = 64;

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
  std::mutex mutex;
  std::set<uint64_t> hinted; ///< every slot on_lag was told of
  size_t lag_calls = 0;
  std::atomic<int> caught_up{0};

  explicit link_fixture(uint64_t buffer_ops = 1 << 20) {
    register_message_types(cfg);
    sys = std::make_unique<caf::actor_system>(cfg);
    observer = std::make_unique<caf::scoped_actor>(*sys);
    peer = sys->spawn(fake_peer, caf::actor{*observer});
    peer_link_config lc;
    lc.peer_id = "n2";
    lc.buffer_ops = buffer_ops;
    lc.slot_count = slots;
    lc.on_lag = [this](std::vector<uint64_t> s) {
      std::lock_guard lock{mutex};
      hinted.insert(s.begin(), s.end());
      ++lag_calls;
    };
    lc.on_caught_up = [this] { ++caught_up; };
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
  std::set<uint64_t> slots_of(std::vector<uint64_t> keys) {
    std::set<uint64_t> out;
    for (uint64_t k : keys)
      out.insert(cluster::slot_of(k, slots));
    return out;
  }
};

TEST(peer_link, queued_slots_are_hinted_once_and_the_hints_end_when_the_peer_acked_them) {
  link_fixture f;
  caf::anon_send(f.link, peer_atom::value, caf::actor{}); // found down
  f.send(1, {11, 12, 13});
  f.expect_released(1);
  f.send(2, {11, 14});
  f.expect_released(2);
  f.sync();
  {
    std::lock_guard lock{f.mutex};
    EXPECT_EQ(f.hinted, f.slots_of({11, 12, 13, 14}));
    // Key 11's slot again is not news: the second sub-batch reports only
    // key 14's slot, if that is a new one.
    const bool fourteen_is_news = !f.slots_of({11, 12, 13}).contains(cluster::slot_of(14, slots));
    EXPECT_EQ(f.lag_calls, fourteen_is_news ? 2u : 1u);
  }
  // Back: both are re-sent; the hints end only when the last one is acked.
  caf::anon_send(f.link, peer_atom::value, f.peer);
  f.expect_resent(1);
  f.expect_resent(2);
  caf::anon_send(f.link, ack_atom::value, uint64_t{7}, uint64_t{1});
  f.sync();
  EXPECT_EQ(f.caught_up.load(), 0);
  caf::anon_send(f.link, ack_atom::value, uint64_t{7}, uint64_t{2});
  f.sync();
  EXPECT_EQ(f.caught_up.load(), 1);
}

TEST(peer_link, hints_stay_when_ops_queued_for_the_peer_were_dropped) {
  link_fixture f{/*buffer_ops=*/2};
  caf::anon_send(f.link, peer_atom::value, caf::actor{});
  f.send(1, {21, 22});
  f.expect_released(1);
  f.send(2, {23, 24}); // over the bound: sub-batch 1 is dropped
  f.expect_released(2);
  caf::anon_send(f.link, peer_atom::value, f.peer);
  f.expect_resent(2);
  caf::anon_send(f.link, ack_atom::value, uint64_t{7}, uint64_t{2});
  f.sync();
  EXPECT_EQ(f.caught_up.load(), 0); // sub-batch 1 never reached the peer
}

} // namespace
} // namespace lmcc::actors
