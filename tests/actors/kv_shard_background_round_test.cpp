// kv_shard's background snapshot round, in a real actor system over a real
// store: (snapshot_atom, true) is answered once a round that began after the
// request is durable -- the entries are then in slot snapshots, and the log
// records before the round are gone -- while the round itself runs in the
// shard's bounded background steps (a refill's copies, slot_refill.hpp).
// Links CAF (lmcc_actors).
#include "actors/kv_shard.hpp"
#include "actors/type_ids.hpp"
#include "clock/clock.hpp"
#include "index/shard_restore.hpp"
#include "tests/persistence/test_util.hpp"

#include <caf/all.hpp>
#include <gtest/gtest.h>

#include <chrono>

namespace lmcc::actors {
namespace {

using namespace std::chrono_literals;

constexpr uint32_t round_slots = 64;
constexpr uint64_t keys = 400;

struct shard_system {
  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> sys;
  std::unique_ptr<caf::scoped_actor> self;
  persistence::test::temp_dir tmp;
  std::shared_ptr<persistence::store> store;
  kv_shard_actor shard;

  explicit shard_system(bool durable) {
    register_message_types(cfg);
    sys = std::make_unique<caf::actor_system>(cfg);
    self = std::make_unique<caf::scoped_actor>(*sys);
    auto init = std::make_shared<shard_init>();
    init->options.slot_count = round_slots;
    // Several steps per round; no round of its own accord during the test.
    init->options.snapshot_step_entries = 100;
    init->options.snapshot_interval = 1h;
    init->options.snapshot_min_interval = 1h;
    init->start.started_ms = monotonic_ms(); // the interval counts from now
    init->index = std::make_shared<kv_index>(round_slots);
    if (durable) {
      auto s = persistence::store::open(persistence::test::options_at(tmp.sub("db")), "n1");
      EXPECT_TRUE(s) << (s ? "" : s.error().message);
      if (s)
        store = std::shared_ptr<persistence::store>(std::move(*s));
      init->store = store;
    }
    shard = sys->spawn(kv_shard, std::move(init));
  }

  /// Applies `keys` admits as one sub-batch and waits for its ack (committed).
  void ingest() {
    kv_sub_batch sb;
    sb.stream = 1;
    sb.number = 1;
    sb.holder = 7;
    sb.incarnation = 1;
    sb.prev = stream_pos{1, 0, 0, 0}; // the registration's first batch
    sb.end = stream_pos{1, 0, keys, 0};
    for (uint64_t k = 1; k <= keys; ++k)
      sb.ops.push_back(persistence::kv_op{k * 0x9E3779B97F4A7C15ull, true});
    (*self)->send(shard, apply_atom::value, std::move(sb));
    bool acked = false;
    (*self)->receive([&](ack_atom, uint64_t, uint64_t) { acked = true; }, caf::after(10s) >> [] {});
    ASSERT_TRUE(acked);
  }

  /// Asks for a background round; the answer, or nullopt after 10 s.
  std::optional<bool> background_round() {
    std::optional<bool> out;
    (*self)
        ->request(shard, 10s, snapshot_atom::value, true)
        .receive([&](bool ok) { out = ok; }, [](caf::error&) {});
    return out;
  }

  /// Kills the shard (no clean stop, whose own snapshot would hide the
  /// round's) and restores a fresh index from the store.
  shard_restore_report killed_and_restored() {
    (*self)->send_exit(shard, caf::exit_reason::kill);
    (*self)->wait_for(shard);
    shard = nullptr;
    shard_restore_report report;
    kv_index index{round_slots};
    auto dir = store->load_directory();
    EXPECT_TRUE(dir);
    if (dir) {
      auto start = restore_shard(*store, index, *dir, 1, report);
      EXPECT_TRUE(start) << (start ? "" : start.error().message);
    }
    return report;
  }

  ~shard_system() {
    if (shard)
      caf::anon_send_exit(shard, caf::exit_reason::user_shutdown);
    self.reset();
  }
};

TEST(kv_shard_background_round, is_answered_once_a_round_begun_after_the_request_is_durable) {
  shard_system s{/*durable=*/true};
  ASSERT_TRUE(s.store);
  s.ingest();
  EXPECT_EQ(s.background_round(), std::optional<bool>{true});
  const auto report = s.killed_and_restored();
  EXPECT_EQ(report.entries, keys);
  EXPECT_GT(report.slots, 1u);   // the round wrote the dirty slots
  EXPECT_EQ(report.records, 0u); // and dropped the log before it
}

TEST(kv_shard_background_round, without_a_round_the_entries_are_only_in_the_log) {
  // The control: the same ingest, killed without asking.
  shard_system s{/*durable=*/true};
  ASSERT_TRUE(s.store);
  s.ingest();
  const auto report = s.killed_and_restored();
  EXPECT_EQ(report.entries, keys);
  EXPECT_EQ(report.slots, 0u);
  EXPECT_GT(report.records, 0u);
}

TEST(kv_shard_background_round, a_shard_without_a_store_answers_at_once) {
  shard_system s{/*durable=*/false};
  s.ingest();
  EXPECT_EQ(s.background_round(), std::optional<bool>{true});
}

} // namespace
} // namespace lmcc::actors
