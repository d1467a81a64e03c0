// shard_restore: a restarted node rebuilds exactly the committed state of its
// shard from the slot snapshots and the op log, whatever point a snapshot
// round had reached; damage is reported per slot, holder or record; a data
// dir of another --slots is refused. Real RocksDB, no actor system.
#include "index/shard_restore.hpp"
#include "tests/index/shard_test_util.hpp"

#if defined(CAF_VERSION)
#error "shard_restore pulls in CAF"
#endif

#include <gtest/gtest.h>

#include <random>
#include <set>

namespace lmcc::actors {
namespace {

using namespace test;

/// The durable part of a holder's meta, as a restart must see it.
struct meta_view {
  uint64_t worker_uid = 0;
  std::string location;
  uint64_t incarnation = 0;
  seq_mark mark;
  friend bool operator==(const meta_view&, const meta_view&) = default;
};

std::map<holder_id, meta_view> metas_of(const holder_metas& m) {
  std::map<holder_id, meta_view> out;
  for (const auto& [h, meta] : m)
    out[h] = meta_view{meta.worker_uid, meta.location, meta.incarnation, meta.mark};
  return out;
}

/// Random traffic of four holders: admit/evict batches with moving marks,
/// drops (re-registrations with a new incarnation, full-sync starts),
/// resynced marks and fenced sub-batches of an old incarnation.
class traffic {
public:
  explicit traffic(uint64_t seed) : rng_(seed) {
    for (int w = 0; w < 4; ++w)
      holders_.push_back({holder_of(w, w % 2 ? "LocalDiskBackend" : "LocalCPUBackend"), uid_of(w),
                          w % 2 ? "LocalDiskBackend" : "LocalCPUBackend"});
    for (int i = 0; i < 400; ++i)
      pool_.push_back(rng_());
  }

  void run(kv_shard_core& core, int sub_batches) {
    for (int i = 0; i < sub_batches; ++i)
      core.apply(next());
  }

private:
  struct holder_state {
    holder_id id;
    uint64_t uid;
    std::string location;
    uint64_t incarnation = 100;
    uint64_t seq = 0;
    bool introduced = false;
    stream_pos pos{100, 0, 0, 0}; ///< its stream, as its worker's home numbers it
  };

  kv_sub_batch next() {
    auto& h = holders_[rng_() % holders_.size()];
    auto b = sb(1 + (&h - holders_.data()), ++number_, h.id);
    b.incarnation(h.incarnation);
    if (!h.introduced) {
      h.introduced = true;
      b.intro(h.uid, h.location);
    }
    const auto dice = rng_() % 100;
    if (h.introduced && dice < 4) {
      h.incarnation += 1; // a re-registration drops under the new incarnation
      h.seq = 0;
      h.pos = stream_pos{h.incarnation, 0, 0, 0};
      return b.incarnation(h.incarnation).drop().mark(seq_state::none).pos(h.pos, h.pos).sb;
    }
    if (dice < 7) { // a full sync starts: an era of its own
      h.pos = stream_pos{h.incarnation, h.pos.era + 1, 0, 0};
      return b.drop().mark(seq_state::syncing).pos(h.pos, h.pos).sb;
    }
    const stream_pos prev = h.pos;
    ++h.pos.sub;
    if (dice < 9)
      return b.mark(seq_state::resynced).pos(prev, h.pos).sb;
    if (dice < 12) {
      // A straggler of the old registration: fenced.
      b.incarnation(h.incarnation - 1)
          .pos({h.incarnation - 1, 0, 0, 0}, {h.incarnation - 1, 0, 5, 0});
      --h.pos.sub;
    } else {
      b.pos(prev, h.pos);
    }
    std::vector<kv_op> ops;
    const size_t n = 1 + rng_() % 12;
    for (size_t i = 0; i < n; ++i)
      ops.push_back({pool_[rng_() % pool_.size()], rng_() % 3 != 0});
    b.sb.ops = std::move(ops);
    h.seq += n;
    if (rng_() % 2 == 0)
      b.mark(seq_state::tracking, h.seq);
    return b.sb;
  }

  std::mt19937_64 rng_;
  std::vector<holder_state> holders_;
  std::vector<uint64_t> pool_;
  uint64_t number_ = 0;
};

enum class round_mode { none, full, partial_1, partial_3, full_with_traffic_between_steps };

const char* name_of(round_mode m) {
  switch (m) {
  case round_mode::none:
    return "no_round";
  case round_mode::full:
    return "full_round";
  case round_mode::partial_1:
    return "crash_after_1_round_step";
  case round_mode::partial_3:
    return "crash_after_3_round_steps";
  case round_mode::full_with_traffic_between_steps:
    return "round_crossed_by_traffic";
  }
  return "?";
}

struct restart_case {
  uint64_t seed;
  round_mode mode;
  friend void PrintTo(const restart_case& c, std::ostream* os) {
    *os << "seed " << c.seed << ", " << name_of(c.mode);
  }
};

class restart_equivalence : public ::testing::TestWithParam<restart_case> {};

TEST_P(restart_equivalence, restoring_gives_the_committed_state_and_nothing_pending) {
  const auto [seed, mode] = GetParam();
  shard_fixture f;
  traffic t{seed};
  t.run(*f.core, 300);
  f.commit();
  f.snapshot(); // an earlier round: some state comes from snapshots, some from the log
  t.run(*f.core, 300);
  f.commit();
  f.settle(); // cleaning drops changes no visible state
  if (mode == round_mode::full_with_traffic_between_steps) {
    f.core->request_snapshot();
    while (f.core->background_due(0)) {
      ASSERT_TRUE(f.core->background_step(0).ok);
      t.run(*f.core, 3); // committed by the next step
    }
    f.commit();
  }
  const auto committed = visible(*f.index);
  const auto committed_metas = metas_of(f.core->holders());
  if (mode == round_mode::full) {
    f.snapshot();
  } else if (mode == round_mode::partial_1 || mode == round_mode::partial_3) {
    // A crash mid-round: some slots are written, the log is not truncated.
    f.core->request_snapshot();
    for (int i = 0; i < (mode == round_mode::partial_1 ? 1 : 3); ++i)
      ASSERT_TRUE(f.core->background_step(0).ok);
    ASSERT_TRUE(f.core->snapshot_running());
  }
  const uint64_t committed_next = f.core->next_position();
  t.run(*f.core, 50); // applied, never committed: lost with the crash
  ASSERT_TRUE(f.core->work_pending());

  for (uint32_t threads : {1U, 4U}) {
    SCOPED_TRACE(threads);
    auto r = f.restore(threads);
    const auto got = visible(*r.index);
    EXPECT_TRUE(r.report.damaged_holders.empty());
    EXPECT_FALSE(r.report.damaged_unknown);
    EXPECT_EQ(got.keys, committed.keys);
    for (uint32_t s = 0; s < got.slots.size(); ++s) {
      ASSERT_EQ(got.slots[s].digest, committed.slots[s].digest) << "slot " << s;
      ASSERT_EQ(got.slots[s].entries, committed.slots[s].entries) << "slot " << s;
    }
    EXPECT_EQ(metas_of(r.start.holders), committed_metas);
    // Positions continue where the durable log ended.
    EXPECT_EQ(r.start.next_position, committed_next);
    // Once its replayed drops are cleaned, the index's own slot summaries agree.
    {
      auto w = r.index->write();
      while (w.drop_step(64)) {
      }
    }
    for (uint32_t s = 0; s < got.slots.size(); ++s) {
      const auto summary = r.index->read().slot(s);
      ASSERT_EQ(summary.digest, committed.slots[s].digest) << "slot " << s;
      ASSERT_EQ(summary.entries, committed.slots[s].entries) << "slot " << s;
      ASSERT_EQ(summary.keys, committed.slots[s].keys) << "slot " << s;
    }
    EXPECT_EQ(got.entries, committed.entries);
    EXPECT_EQ(got.counts, committed.counts);
  }
}

INSTANTIATE_TEST_SUITE_P(
    modes, restart_equivalence,
    ::testing::Values(restart_case{1, round_mode::none}, restart_case{2, round_mode::none},
                      restart_case{3, round_mode::full}, restart_case{4, round_mode::full},
                      restart_case{5, round_mode::partial_1},
                      restart_case{6, round_mode::partial_3},
                      restart_case{7, round_mode::full_with_traffic_between_steps}),
    [](const ::testing::TestParamInfo<restart_case>& i) {
      return std::string{name_of(i.param.mode)} + "_seed_" + std::to_string(i.param.seed);
    });

TEST(shard_restore, replayed_drops_keep_the_counts_of_newer_snapshots) {
  shard_fixture f;
  f.opts.snapshot_step_entries = 1; // one slot a round step
  f.core = std::make_unique<kv_shard_core>(f.opts, f.index, f.store);
  const holder_id h = holder_of(1);
  const uint64_t a0 = keys_in(3, 1, 64)[0], a1 = keys_in(3, 2, 64)[1];
  const uint64_t b0 = keys_in(40, 1, 64)[0];
  f.core->apply(sb(1, 1, h, {{a0, true}, {b0, true}}).intro(uid_of(1), "LocalCPUBackend"));
  f.core->apply(sb(1, 2, h).drop());
  f.core->apply(sb(1, 3, h, {{a1, true}})); // after the drop, in slot 3
  f.commit();
  f.settle(); // the drop is cleaned everywhere
  f.core->request_snapshot();
  ASSERT_TRUE(f.core->background_step(0).ok); // slot 3 written (stamp 3), then a crash
  ASSERT_TRUE(f.core->snapshot_running());
  auto r = f.restore();
  const auto got = visible(*r.index);
  EXPECT_EQ(got.keys, (std::map<uint64_t, std::vector<holder_id>>{{a1, {h}}}));
  EXPECT_EQ(r.index->read().entries(), 1u);
  EXPECT_EQ(r.index->read().entries_by_holder(), (holder_counts{{h, 1}}));
}

TEST(shard_restore, a_shard_started_after_a_replayed_drop_never_brings_the_entries_back) {
  shard_fixture f;
  const holder_id h = holder_of(1), other = holder_of(2);
  const uint64_t k = keys_in(5, 1, 64)[0], kept = keys_in(6, 1, 64)[0];
  f.core->apply(sb(1, 1, h, {{k, true}}).intro(uid_of(1), "LocalCPUBackend"));
  f.core->apply(sb(2, 1, other, {{kept, true}}).intro(uid_of(2), "LocalCPUBackend"));
  f.commit();
  f.snapshot();                      // slot 5 holds h's entry on disk
  f.core->apply(sb(1, 2, h).drop()); // a deregistration
  f.commit();
  f.core.reset();
  // Restart 1: the drop is replayed (slot 5 changed: dirty for the next round).
  auto r1 = f.restore();
  EXPECT_FALSE(r1.index->read().holds(k, h));
  kv_shard_core second{f.opts, r1.index, f.store, r1.start};
  second.request_snapshot();
  for (int i = 0; i < 10'000 && second.background_due(100'000); ++i)
    ASSERT_TRUE(second.background_step(100'000).ok);
  // Restart 2: h's entry must still be gone.
  auto r2 = f.restore();
  EXPECT_FALSE(r2.index->read().holds(k, h));
  EXPECT_EQ(visible(*r2.index).keys, (std::map<uint64_t, std::vector<holder_id>>{{kept, {other}}}));
}

TEST(shard_restore, an_incarnation_raised_without_an_explicit_drop_restores_as_applied) {
  shard_fixture f;
  f.opts.snapshot_step_entries = 1; // one slot a round step
  f.core = std::make_unique<kv_shard_core>(f.opts, f.index, f.store);
  const holder_id h = holder_of(1);
  const uint64_t a = keys_in(3, 1, 64)[0], b = keys_in(40, 1, 64)[0];
  const uint64_t c = keys_in(3, 2, 64)[1], d = keys_in(5, 1, 64)[0];
  f.core->apply(
      sb(1, 1, h, {{a, true}, {b, true}}).intro(uid_of(1), "LocalCPUBackend").incarnation(50));
  f.commit();
  f.core->request_snapshot();
  ASSERT_TRUE(f.core->background_step(0).ok);              // slot 3 written at position 1
  f.core->apply(sb(1, 2, h, {{c, true}}).incarnation(50)); // position 2, slot 3
  // A newer incarnation without its drop: the shard logs the implied drop of
  // a, b and c before d (kv_shard_core::apply).
  f.core->apply(sb(1, 3, h, {{d, true}}).incarnation(90));
  while (f.core->background_due(0))
    ASSERT_TRUE(f.core->background_step(0).ok); // slot 40, then the holder state (90)
  f.commit();
  const auto live = visible(*f.index);
  ASSERT_EQ(live.keys, (std::map<uint64_t, std::vector<holder_id>>{{d, {h}}}));
  auto r = f.restore();
  EXPECT_EQ(visible(*r.index).keys, live.keys);
}

TEST(shard_restore, the_report_counts_what_was_loaded_and_replayed) {
  shard_fixture f;
  const holder_id h = holder_of(1);
  f.core->apply(sb(1, 1, h, {{1, true}, {2, true}, {3, true}}).intro(uid_of(1), "LocalCPUBackend"));
  f.commit();
  f.snapshot();
  f.core->apply(sb(1, 2, h, {{4, true}, {1, false}}).mark(seq_state::tracking, 9));
  f.core->apply(sb(1, 3, h, {{5, true}}));
  f.commit();
  auto r = f.restore(3);
  const std::set<uint32_t> written{slot_of(1, 64), slot_of(2, 64), slot_of(3, 64)};
  EXPECT_EQ(r.report.slots, written.size());
  EXPECT_EQ(r.report.records, 2u);
  EXPECT_EQ(r.report.replayed_ops, 3u);
  EXPECT_EQ(r.report.entries, 4u);
  EXPECT_TRUE(r.report.problems.empty());
  EXPECT_EQ(r.start.next_position, 4u);
  EXPECT_EQ(r.start.holders.at(h).mark, (seq_mark{seq_state::tracking, 9}));
  EXPECT_EQ(r.start.holders.at(h).worker_uid, uid_of(1)); // from the holder state
  for (uint64_t key : {uint64_t{1}, uint64_t{2}, uint64_t{3}})
    EXPECT_EQ(r.start.slot_stamps[slot_of(key, 64)], 1u);
  // Every log record went: positions still continue past the floor.
  f.snapshot();
  auto after = f.restore();
  EXPECT_EQ(after.report.records, 0u);
  EXPECT_EQ(after.start.next_position, 4u);
}

TEST(shard_restore, a_holder_named_only_by_the_log_gets_its_intro_from_the_record) {
  shard_fixture f;
  const holder_id h = holder_of(7, "disk");
  f.core->apply(sb(1, 1, h, {{42, true}}).intro(uid_of(7), "disk").incarnation(3));
  f.commit();
  auto r = f.restore();
  const auto& meta = r.start.holders.at(h);
  EXPECT_EQ(meta.worker_uid, uid_of(7));
  EXPECT_EQ(meta.location, "disk");
  EXPECT_EQ(meta.incarnation, 3u);
  EXPECT_TRUE(meta.intro_durable);
  EXPECT_TRUE(meta.changed); // its log will be truncated: the next round writes its state
}

// -- damage -------------------------------------------------------------------------

struct damaged_fixture : shard_fixture {
  damaged_fixture() {
    f_keys = keys_in(12, 4, 64);
    core->apply(
        sb(1, 1, h1, {{f_keys[0], true}, {f_keys[1], true}}).intro(uid_of(1), "LocalCPUBackend"));
    core->apply(sb(2, 1, h2, {{f_keys[1], true}}).intro(uid_of(2), "LocalCPUBackend"));
    core->apply(sb(3, 1, h3, {{keys_in(13, 1, 64)[0], true}}).intro(uid_of(3), "LocalCPUBackend"));
    commit();
    snapshot();
  }
  /// Rewrites the stored snapshot of `slot` through `damage`.
  void damage_slot(uint32_t slot, const std::function<void(std::string&)>& damage) {
    auto value = persistence::test::read_all(*store).slots.at(slot);
    damage(value);
    auto b = store->new_batch();
    b.put_slot(slot, value);
    ASSERT_TRUE(store->commit(b));
  }
  const holder_id h1 = holder_of(1), h2 = holder_of(2), h3 = holder_of(3);
  std::vector<uint64_t> f_keys;
};

TEST(shard_restore, a_damaged_slot_body_names_that_slots_holders) {
  damaged_fixture f;
  f.damage_slot(12, [](std::string& v) { v[v.size() - 6] ^= 0x20; });
  auto r = f.restore();
  EXPECT_EQ(r.report.damaged_holders, (holder_set{f.h1, f.h2}));
  EXPECT_FALSE(r.report.damaged_unknown);
  ASSERT_EQ(r.report.problems.size(), 1u);
  EXPECT_NE(r.report.problems[0].find("slot 12"), std::string::npos) << r.report.problems[0];
  EXPECT_EQ(visible(*r.index).slots[12].entries, 0u); // lost: those workers resync
  EXPECT_EQ(visible(*r.index).slots[13].entries, 1u);
}

TEST(shard_restore, a_damaged_slot_header_names_no_one_and_asks_everyone) {
  damaged_fixture f;
  f.damage_slot(12, [](std::string& v) { v[3] ^= 0x01; }); // inside the position
  auto r = f.restore();
  EXPECT_TRUE(r.report.damaged_unknown);
  EXPECT_TRUE(r.report.damaged_holders.empty());
  ASSERT_EQ(r.report.problems.size(), 1u);
  EXPECT_NE(r.report.problems[0].find("slot 12"), std::string::npos);
}

TEST(shard_restore, a_damaged_log_record_stops_the_replay_there) {
  shard_fixture f;
  const holder_id h = holder_of(1);
  for (uint64_t i = 1; i <= 5; ++i)
    f.core->apply(sb(1, i, h, {{i * 1000003, true}}).mark(seq_state::tracking, i));
  f.commit();
  auto log = persistence::test::read_all(*f.store).log;
  std::string bad = log.at(3);
  bad[bad.size() / 2] ^= 0x04;
  auto b = f.store->new_batch();
  b.append_log(3, bad);
  ASSERT_TRUE(f.store->commit(b));
  auto r = f.restore();
  EXPECT_TRUE(r.report.damaged_unknown);
  EXPECT_EQ(r.report.records, 2u);
  ASSERT_EQ(r.report.problems.size(), 1u);
  EXPECT_NE(r.report.problems[0].find("op-log record 3"), std::string::npos);
  EXPECT_TRUE(r.index->read().holds(2 * 1000003, h));
  EXPECT_FALSE(r.index->read().holds(4 * 1000003, h)); // after the damage: not replayed
  EXPECT_EQ(r.start.holders.at(h).mark, (seq_mark{seq_state::tracking, 2}));
  EXPECT_EQ(r.start.next_position, 6u); // positions of the unread records are not reused
}

TEST(shard_restore, a_holder_state_with_a_bad_checksum_names_its_holder) {
  damaged_fixture f;
  auto state = persistence::encode_holder_state(
      persistence::holder_state{f.h2, uid_of(2), "LocalCPUBackend", 0, {}});
  state[2] ^= 0x08;
  f.core.reset();
  f.store.reset();
  persistence::test::raw_put(f.tmp.sub("db"), "default", persistence::holder_key(f.h2), state);
  f.open_store();
  auto r = f.restore();
  EXPECT_EQ(r.report.damaged_holders, (holder_set{f.h2}));
  EXPECT_FALSE(r.report.damaged_unknown);
  ASSERT_EQ(r.report.problems.size(), 1u);
  EXPECT_NE(r.report.problems[0].find("holder state"), std::string::npos);
  EXPECT_FALSE(r.start.holders.contains(f.h2));
  EXPECT_TRUE(r.start.holders.contains(f.h1));
}

TEST(shard_restore, a_data_dir_written_with_another_slot_count_is_refused) {
  damaged_fixture f;
  for (uint64_t k = 1; k < 200; ++k) // keys all over the 64 slots
    f.core->apply(sb(9, k, f.h1, {{k * 0x9e3779b97f4a7c15ULL, true}}));
  f.commit();
  f.snapshot();
  auto dir = f.store->load_directory();
  ASSERT_TRUE(dir);
  for (uint32_t other : {32U, 128U}) {
    SCOPED_TRACE(other);
    kv_index idx{other};
    shard_restore_report report;
    auto r = restore_shard(*f.store, idx, *dir, 2, report);
    ASSERT_FALSE(r);
    EXPECT_NE(r.error().message.find("another --slots"), std::string::npos) << r.error().message;
  }
}

} // namespace
} // namespace lmcc::actors
