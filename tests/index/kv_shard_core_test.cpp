// kv_shard_core with a real store: apply, op-log records, group commit and
// acks, fencing of older incarnations, marks (gap included), snapshot rounds
// and their cadence, injected commit failures and giving up after the grace,
// background drop cleaning. No actor system: linked with lmcc_index only.
#include "index/kv_shard_core.hpp"
#include "tests/index/shard_test_util.hpp"

#if defined(CAF_VERSION)
#error "kv_shard_core pulls in CAF"
#endif

#include <gtest/gtest.h>

namespace lmcc::actors {
namespace {

using namespace test;
using persistence::log_record;

std::map<uint64_t, log_record> log_of(const persistence::store& s) {
  std::map<uint64_t, log_record> out;
  for (const auto& [p, v] : persistence::test::read_all(s).log) {
    log_record rec;
    auto r = persistence::decode_log_record(v, rec);
    EXPECT_TRUE(r) << p;
    out[p] = rec;
  }
  return out;
}

/// Every (key, holders) of the slot snapshot stored for `slot`, or nullopt.
std::optional<std::map<uint64_t, std::vector<holder_id>>>
stored_slot(const persistence::store& s, uint32_t slot, uint64_t* stamp = nullptr) {
  auto all = persistence::test::read_all(s).slots;
  auto it = all.find(slot);
  if (it == all.end())
    return std::nullopt;
  std::map<uint64_t, std::vector<holder_id>> out;
  auto r =
      persistence::read_slot_snapshot(it->second, [&](uint64_t k, std::span<const uint64_t> hs) {
        out[k] = std::vector<holder_id>(hs.begin(), hs.end());
        std::sort(out[k].begin(), out[k].end());
      });
  EXPECT_EQ(r.damage, persistence::slot_damage::none);
  if (stamp)
    *stamp = r.header.position;
  return out;
}

TEST(kv_shard_core, apply_then_commit_acks_the_highest_number_per_stream_in_one_write) {
  shard_fixture f;
  const auto k = keys_in(3, 4, 64);
  f.core->apply(sb(7, 1, h1, {{k[0], true}}).intro(uid_of(1), "LocalCPUBackend"));
  f.core->apply(sb(7, 3, h1, {{k[1], true}}));
  f.core->apply(sb(7, 2, h1, {{k[2], true}})); // a lower number never lowers the ack
  f.core->apply(sb(9, 1, h2, {{k[3], true}, {k[0], true}}));
  EXPECT_TRUE(f.core->work_pending());
  EXPECT_TRUE(log_of(*f.store).empty()); // nothing durable before the commit
  const uint64_t writes = f.store->write_count();
  auto acks = f.commit();
  EXPECT_EQ(acks, (absl::flat_hash_map<uint64_t, uint64_t>{{7, 3}, {9, 1}}));
  EXPECT_EQ(f.store->write_count(), writes + 1); // group commit: one RocksDB write
  EXPECT_FALSE(f.core->work_pending());
  EXPECT_TRUE(f.commit().empty()); // acks are handed out once
  const auto log = log_of(*f.store);
  ASSERT_EQ(log.size(), 4u);
  EXPECT_EQ(log.begin()->first, 1u);
  EXPECT_EQ(log.at(1).ops, (std::vector<kv_op>{{k[0], true}}));
  EXPECT_EQ(log.at(4).holder, h2);
  EXPECT_EQ(log.at(4).ops.size(), 2u);
  EXPECT_EQ(f.core->next_position(), 5u);
  EXPECT_EQ(f.core->counters().sub_batches, 4u);
  EXPECT_EQ(f.core->counters().ops, 5u);
  EXPECT_EQ(f.core->counters().log_records, 4u);
  EXPECT_EQ(f.core->counters().commits, 1u);
  EXPECT_EQ(f.index->read().entries(), 5u);
  EXPECT_EQ(f.core->slot_position(3), 4u);
}

TEST(kv_shard_core, records_carry_the_intro_once_and_the_mark_when_it_moves) {
  shard_fixture f;
  const auto k = keys_in(1, 3, 64);
  f.core->apply(sb(1, 1, h1, {{k[0], true}})
                    .intro(uid_of(1), "LocalCPUBackend")
                    .mark(seq_state::tracking, 10));
  f.core->apply(sb(1, 2, h1, {{k[1], true}}).intro(uid_of(1), "LocalCPUBackend"));
  f.core->apply(sb(1, 3, h1, {{k[1], false}}).mark(seq_state::tracking, 12));
  f.core->apply(sb(1, 4, h1).drop());
  f.commit();
  const auto log = log_of(*f.store);
  ASSERT_EQ(log.size(), 4u);
  ASSERT_TRUE(log.at(1).intro);
  EXPECT_EQ(*log.at(1).intro, (persistence::holder_intro{uid_of(1), "LocalCPUBackend"}));
  EXPECT_EQ(log.at(1).mark, (seq_mark{seq_state::tracking, 10}));
  EXPECT_FALSE(log.at(2).intro); // already durable
  EXPECT_FALSE(log.at(2).mark);  // no mark: the watermark did not move
  EXPECT_EQ(log.at(3).mark, (seq_mark{seq_state::tracking, 12}));
  EXPECT_TRUE(log.at(4).drop);
  EXPECT_TRUE(log.at(4).ops.empty());
  EXPECT_EQ(log.at(4).mark, seq_mark{}); // a drop without a mark resets it
  const auto& meta = f.core->holders().at(h1);
  EXPECT_EQ(meta.mark, seq_mark{});
  EXPECT_EQ(meta.worker_uid, uid_of(1));
  EXPECT_EQ(meta.location, "LocalCPUBackend");
  EXPECT_TRUE(meta.changed);
}

TEST(kv_shard_core, without_a_store_it_applies_and_only_hands_out_the_acks) {
  shard_options opts;
  opts.slot_count = 64;
  auto index = std::make_shared<kv_index>(64);
  kv_shard_core core{opts, index, nullptr};
  EXPECT_FALSE(core.durable());
  core.apply(sb(5, 1, h1, {{1, true}, {2, true}}).mark(seq_state::tracking, 1));
  core.apply(sb(5, 2, h1, {{2, false}}));
  EXPECT_TRUE(core.work_pending());
  auto r = core.commit(0);
  EXPECT_TRUE(r.ok);
  EXPECT_EQ(r.acks, (absl::flat_hash_map<uint64_t, uint64_t>{{5, 2}}));
  EXPECT_EQ(index->read().entries(), 1u);
  EXPECT_EQ(core.next_position(), 1u); // nothing logged
  core.request_snapshot();
  EXPECT_FALSE(core.background_due(1'000'000'000));
  EXPECT_EQ(core.holders().at(h1).mark, (seq_mark{seq_state::tracking, 1}));
}

TEST(kv_shard_core, a_sub_batch_of_an_older_incarnation_is_ignored_but_still_acked) {
  shard_fixture f;
  const auto k = keys_in(2, 3, 64);
  f.core->apply(sb(1, 1, h1, {{k[0], true}}).incarnation(5).mark(seq_state::tracking, 3));
  f.core->apply(sb(2, 1, h1, {{k[1], true}}).incarnation(4).mark(seq_state::tracking, 99));
  f.core->apply(sb(2, 2, h1).incarnation(3).drop());
  auto acks = f.commit();
  EXPECT_EQ(acks, (absl::flat_hash_map<uint64_t, uint64_t>{{1, 1}, {2, 2}}));
  EXPECT_EQ(f.core->counters().fenced, 2u);
  EXPECT_TRUE(f.index->read().holds(k[0], h1));
  EXPECT_FALSE(f.index->read().holds(k[1], h1));
  EXPECT_EQ(f.core->holders().at(h1).mark, (seq_mark{seq_state::tracking, 3}));
  EXPECT_EQ(log_of(*f.store).size(), 1u); // fenced sub-batches are not logged
  // A newer incarnation is taken, and fences the one before.
  f.core->apply(sb(3, 1, h1).incarnation(6).drop());
  f.core->apply(sb(1, 2, h1, {{k[2], true}}).incarnation(5));
  f.commit();
  EXPECT_EQ(f.core->holders().at(h1).incarnation, 6u);
  EXPECT_EQ(f.index->read().entries(), 0u);
  EXPECT_EQ(log_of(*f.store).rbegin()->second.incarnation, 6u);
}

TEST(kv_shard_core, ops_past_the_newer_era_from_a_sender_in_an_older_one_ask_for_a_full_sync) {
  // A home that took the worker over from marks older than the era a later
  // home started sends the worker's new ops under the old era: every copy
  // that knows the new era drops them, so each names the worker once.
  shard_fixture f;
  const auto k = keys_in(2, 3, 64);
  const stream_pos e1{5, 1, 0, 0};
  const stream_pos e2{5, 2, 0, 0};
  f.core->apply(sb(1, 1, h1, {{k[0], true}})
                    .incarnation(5)
                    .intro(uid_of(1), "cpu")
                    .pos(e1, stream_pos{5, 1, 40, 0}));
  f.core->apply(sb(2, 1, h1).incarnation(5).drop().pos(e2, e2)); // a full sync's drop
  f.core->apply(sb(2, 2, h1, {{k[1], true}}).incarnation(5).pos(e2, stream_pos{5, 2, 50, 0}));
  f.commit();
  EXPECT_TRUE(f.core->take_era_behind().empty());
  // A frame the old home read before the sync: stale, and nothing lost.
  f.core->apply(sb(1, 2, h1, {{k[2], true}})
                    .incarnation(5)
                    .pos(stream_pos{5, 1, 40, 0}, stream_pos{5, 1, 45, 0}));
  EXPECT_TRUE(f.core->take_era_behind().empty());
  // Past the newer era's ops: the sender is behind the era.
  f.core->apply(sb(3, 1, h1, {{k[2], true}})
                    .incarnation(5)
                    .pos(stream_pos{5, 1, 45, 0}, stream_pos{5, 1, 60, 0}));
  f.core->apply(sb(3, 2, h1, {{k[2], false}})
                    .incarnation(5)
                    .pos(stream_pos{5, 1, 60, 0}, stream_pos{5, 1, 61, 0}));
  f.commit();
  EXPECT_FALSE(f.index->read().holds(k[2], h1)); // not applied: the copies agree
  EXPECT_EQ(f.core->take_era_behind(), (std::vector<uint64_t>{uid_of(1)})); // once per era
  EXPECT_EQ(f.core->counters().era_behind, 2u);
  EXPECT_TRUE(f.core->take_era_behind().empty());
}

TEST(kv_shard_core, ops_of_a_newer_registration_drop_the_older_ones_entries_first) {
  // This copy missed worker 1's re-registration drop; the new registration's
  // first ops arrive.
  shard_fixture f;
  const auto k = keys_in(2, 3, 64);
  f.core->apply(
      sb(1, 1, h1, {{k[0], true}, {k[1], true}}).incarnation(5).mark(seq_state::tracking, 9));
  f.core->apply(sb(2, 1, h2, {{k[0], true}}).incarnation(5));
  f.commit();
  f.core->apply(sb(1, 2, h1, {{k[2], true}}).incarnation(6).mark(seq_state::tracking, 0));
  f.commit();
  EXPECT_FALSE(f.index->read().holds(k[0], h1)); // the old registration's
  EXPECT_FALSE(f.index->read().holds(k[1], h1));
  EXPECT_TRUE(f.index->read().holds(k[2], h1)); // the new one's
  EXPECT_TRUE(f.index->read().holds(k[0], h2)); // another worker's stay
  EXPECT_EQ(f.core->holders().at(h1).incarnation, 6u);
  EXPECT_EQ(f.core->holders().at(h1).mark, (seq_mark{seq_state::tracking, 0}));
  EXPECT_EQ(f.core->counters().implied_drops, 1u);
  // The record names its newer era, so a restart replays the same drop.
  auto r = f.restore();
  EXPECT_EQ(visible(*r.index), visible(*f.index));
}

TEST(kv_shard_core, a_registration_learned_later_drops_older_holders_of_that_worker_only) {
  // This copy missed worker 1's re-registration drop (it was down); its
  // directory now learns incarnation 7 of worker 1 and 3 of worker 2.
  shard_fixture f;
  const auto k = keys_in(2, 4, 64);
  const holder_id h1b = holder_of(1, "LocalDiskBackend"); // a second location of worker 1
  f.core->apply(sb(1, 1, h1, {{k[0], true}, {k[1], true}})
                    .incarnation(5)
                    .intro(uid_of(1), "LocalCPUBackend")
                    .mark(seq_state::tracking, 9));
  f.core->apply(sb(1, 2, h1b, {{k[2], true}}).incarnation(7).intro(uid_of(1), "LocalDiskBackend"));
  f.core->apply(sb(2, 1, h2, {{k[3], true}}).incarnation(3).intro(uid_of(2), "LocalCPUBackend"));
  f.commit();
  const std::vector<cluster::registration_ref> known{
      {uid_of(1), 7}, {uid_of(2), 3}, {uid_of(9), 100}};
  EXPECT_EQ(f.core->retire_older(known), 1u);
  f.commit();
  EXPECT_FALSE(f.index->read().holds(k[0], h1)); // incarnation 5 < 7: stale
  EXPECT_FALSE(f.index->read().holds(k[1], h1));
  EXPECT_TRUE(f.index->read().holds(k[2], h1b)); // already at 7
  EXPECT_TRUE(f.index->read().holds(k[3], h2));  // worker 2 is at 3
  EXPECT_EQ(f.core->holders().at(h1).incarnation, 7u);
  EXPECT_EQ(f.core->holders().at(h1).mark, seq_mark{}); // its watermark went with it
  // Durable as a drop record, and it fences the old incarnation's stragglers.
  EXPECT_TRUE(log_of(*f.store).rbegin()->second.drop);
  f.core->apply(sb(1, 3, h1, {{k[0], true}}).incarnation(5));
  f.commit();
  EXPECT_FALSE(f.index->read().holds(k[0], h1));
  // Told again, nothing more goes.
  EXPECT_EQ(f.core->retire_older(known), 0u);
}

TEST(kv_shard_core, a_takeover_is_handed_the_durable_seq_when_the_mark_outran_it) {
  shard_fixture f;
  const auto k = keys_in(2, 2, 64);
  const uint64_t uid = uid_of(1);
  // Batch 5's mark reached this owner; the sender had every owner's ack only
  // up to batch 3 (batch 4 and 5's ops may have died with another node).
  f.core->apply(sb(1, 1, h1, {{k[0], true}})
                    .incarnation(5)
                    .intro(uid, "LocalCPUBackend")
                    .mark(seq_state::tracking, 5)
                    .durable(3));
  f.commit();
  auto marks = f.core->marks_of(uid);
  ASSERT_EQ(marks.size(), 1u);
  EXPECT_EQ(marks[0].mark, (seq_mark{seq_state::tracking, 3}));
  // The holder's own mark (its log, the fence) keeps the batch's seq.
  EXPECT_EQ(f.core->holders().at(h1).mark, (seq_mark{seq_state::tracking, 5}));
  // Once the sender says 5 is everywhere, 5 is handed out.
  f.core->apply(sb(1, 2, h1).incarnation(5).mark(seq_state::tracking, 5).durable(5));
  f.commit();
  EXPECT_EQ(f.core->marks_of(uid)[0].mark, (seq_mark{seq_state::tracking, 5}));
  // A sender that says nothing of durability (one node, or before any ack):
  // the mark as it is.
  const holder_id h2 = holder_of(2);
  f.core->apply(sb(2, 1, h2, {{k[1], true}})
                    .incarnation(1)
                    .intro(uid_of(2), "LocalCPUBackend")
                    .mark(seq_state::tracking, 9));
  f.commit();
  EXPECT_EQ(f.core->marks_of(uid_of(2))[0].mark, (seq_mark{seq_state::tracking, 9}));
  // A drop forgets the durable seq with the entries.
  f.core->apply(sb(1, 3, h1).incarnation(5).drop());
  f.core->apply(sb(1, 4, h1, {{k[0], true}}).incarnation(5).mark(seq_state::tracking, 2));
  f.commit();
  EXPECT_EQ(f.core->marks_of(uid)[0].mark, (seq_mark{seq_state::tracking, 2}));
}

TEST(kv_shard_core, a_full_sync_drops_marks_syncing_and_ends_resynced) {
  shard_fixture f;
  const auto k = keys_in(9, 3, 64);
  f.core->apply(sb(1, 1, h1, {{k[0], true}, {k[1], true}}).mark(seq_state::tracking, 7));
  f.core->apply(sb(2, 1, h1).drop().mark(seq_state::syncing));
  EXPECT_EQ(f.core->holders().at(h1).mark, (seq_mark{seq_state::syncing, 0}));
  EXPECT_FALSE(f.index->read().holds(k[0], h1));
  f.core->apply(sb(2, 2, h1, {{k[1], true}, {k[2], true}}));
  f.core->apply(sb(2, 3, h1).mark(seq_state::resynced));
  f.commit();
  EXPECT_EQ(f.core->holders().at(h1).mark, (seq_mark{seq_state::resynced, 0}));
  f.settle();
  const auto v = visible(*f.index);
  EXPECT_EQ(v.keys, (std::map<uint64_t, std::vector<holder_id>>{{k[1], {h1}}, {k[2], {h1}}}));
  EXPECT_EQ(v.entries, 2u);
  const auto log = log_of(*f.store);
  EXPECT_EQ(log.at(2).mark, (seq_mark{seq_state::syncing, 0}));
  EXPECT_EQ(log.at(4).mark, (seq_mark{seq_state::resynced, 0}));
}

#if LMCC_FAULT_INJECTION // injected commit failures: a test build only
TEST(kv_shard_core, failing_commits_keep_the_acks_back_until_a_retry_succeeds) {
  shard_fixture f;
  f.core->apply(sb(1, 1, h1, {{1, true}}));
  f.store->faults().fail_commits = 2;
  for (uint64_t now : {100, 200}) {
    auto r = f.core->commit(now);
    EXPECT_FALSE(r.ok);
    EXPECT_NE(r.error.find("injected failure"), std::string::npos) << r.error;
    EXPECT_TRUE(r.acks.empty());
    f.core->apply(sb(1, now / 100 + 1, h1, {{now, true}})); // more queues meanwhile
  }
  EXPECT_EQ(f.core->counters().commit_failures, 2u);
  EXPECT_TRUE(log_of(*f.store).empty());
  auto acks = f.commit(300);
  EXPECT_EQ(acks, (absl::flat_hash_map<uint64_t, uint64_t>{{1, 3}}));
  EXPECT_EQ(log_of(*f.store).size(), 3u);
  EXPECT_EQ(f.core->counters().records_given_up, 0u);
}

TEST(kv_shard_core, after_the_grace_the_records_are_given_up_and_their_holders_marked_gap) {
  shard_fixture f;
  f.opts.commit_failure_grace = std::chrono::milliseconds{5'000};
  f.core = std::make_unique<kv_shard_core>(f.opts, f.index, f.store);
  const auto k = keys_in(4, 3, 64);
  f.core->apply(sb(1, 1, h2, {{k[2], true}}).mark(seq_state::tracking, 1));
  f.commit(0); // h2 is durable and stays out of it
  f.store->faults().fail_all_commits = true;
  f.core->apply(sb(1, 2, h1, {{k[0], true}})
                    .intro(uid_of(1), "LocalCPUBackend")
                    .mark(seq_state::tracking, 1));
  EXPECT_TRUE(f.core->commit(1'000).acks.empty());
  f.core->apply(sb(1, 3, h1, {{k[1], true}}).mark(seq_state::tracking, 2));
  EXPECT_TRUE(f.core->commit(5'999).acks.empty()); // 4.999 s of failures: still waiting
  auto r = f.core->commit(6'000);
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.acks, (absl::flat_hash_map<uint64_t, uint64_t>{{1, 3}})); // released anyway
  EXPECT_EQ(f.core->counters().records_given_up, 2u);
  EXPECT_TRUE(f.index->read().holds(k[0], h1)); // the index keeps the ops
  EXPECT_EQ(f.core->holders().at(h1).mark, (seq_mark{seq_state::gap, 0}));
  EXPECT_EQ(f.core->holders().at(h2).mark, (seq_mark{seq_state::tracking, 1}));
  // The gap itself is logged, with the next commit that works.
  f.store->faults().fail_all_commits = false;
  EXPECT_TRUE(f.core->work_pending());
  f.commit(7'000);
  auto log = log_of(*f.store);
  ASSERT_EQ(log.size(), 2u); // h2's record and h1's gap: the given-up records are gone
  const auto& gap = log.rbegin()->second;
  EXPECT_EQ(gap.holder, h1);
  EXPECT_TRUE(gap.ops.empty());
  EXPECT_EQ(gap.mark, (seq_mark{seq_state::gap, 0}));
  ASSERT_TRUE(gap.intro); // the intro went down with the lost records: logged again
  // The gap stays on later records until a full sync or a drop replaces it.
  f.core->apply(sb(1, 4, h1, {{k[1], false}}).mark(seq_state::tracking, 3));
  EXPECT_EQ(f.core->holders().at(h1).mark, (seq_mark{seq_state::gap, 0}));
  f.core->apply(sb(2, 1, h1).drop().mark(seq_state::syncing));
  EXPECT_EQ(f.core->holders().at(h1).mark, (seq_mark{seq_state::syncing, 0}));
  f.commit(8'000);
  log = log_of(*f.store);
  EXPECT_EQ(std::prev(log.end(), 2)->second.mark, (seq_mark{seq_state::gap, 0}));
  EXPECT_EQ(log.rbegin()->second.mark, (seq_mark{seq_state::syncing, 0}));
}
#endif

TEST(kv_shard_core, a_snapshot_round_writes_dirty_slots_and_holder_states_and_truncates_the_log) {
  shard_fixture f;
  std::map<uint32_t, std::map<uint64_t, std::vector<holder_id>>> want;
  uint64_t n = 1;
  for (uint32_t slot : {0U, 5U, 63U})
    for (uint64_t key : keys_in(slot, 20, 64)) {
      const uint64_t number = n++;
      f.core->apply(sb(1, number, h1, {{key, true}})
                        .intro(uid_of(1), "LocalCPUBackend")
                        .mark(seq_state::tracking, number));
      want[slot][key] = {h1};
      if (key % 3 == 0) {
        f.core->apply(sb(2, number, h2, {{key, true}}).intro(uid_of(2), "LocalCPUBackend"));
        want[slot][key] = {std::min(h1, h2), std::max(h1, h2)};
      }
    }
  f.commit();
  const uint64_t p0 = f.core->next_position() - 1;
  EXPECT_FALSE(f.core->snapshot_running());
  f.core->request_snapshot();
  EXPECT_TRUE(f.core->background_due(0));
  int steps = 0;
  while (f.core->background_due(0)) {
    ASSERT_TRUE(f.core->background_step(0).ok);
    ++steps;
  }
  EXPECT_EQ(steps, 2); // a slot costs at least 64 of the 100 a step: 2 slots, then 1
  for (uint32_t slot = 0; slot < 64; ++slot) {
    uint64_t stamp = 0;
    auto got = stored_slot(*f.store, slot, &stamp);
    if (!want.contains(slot)) {
      EXPECT_FALSE(got) << "clean slot " << slot << " written";
      continue;
    }
    ASSERT_TRUE(got) << slot;
    EXPECT_EQ(*got, want[slot]) << slot;
    EXPECT_EQ(stamp, p0);
    EXPECT_EQ(f.core->slot_stamp(slot), p0);
  }
  auto disk = persistence::test::read_all(*f.store);
  EXPECT_EQ(disk.log_floor, p0 + 1);
  EXPECT_TRUE(disk.log.empty());
  ASSERT_EQ(disk.holders.size(), 2u);
  for (const auto& h : disk.holders) {
    const auto& meta = f.core->holders().at(h.holder);
    EXPECT_EQ(h.worker_uid, meta.worker_uid);
    EXPECT_EQ(h.location, meta.location);
    EXPECT_EQ(h.incarnation, meta.incarnation);
    EXPECT_EQ(h.mark, meta.mark);
    EXPECT_FALSE(meta.changed);
  }
  EXPECT_EQ(f.core->counters().snapshot_rounds, 1u);
  EXPECT_EQ(f.core->counters().snapshot_slots, 3u);
  EXPECT_EQ(f.core->log_bytes_since_round(), 0u);
}

TEST(kv_shard_core, a_later_round_rewrites_only_changed_slots_and_deletes_emptied_ones) {
  shard_fixture f;
  const auto a = keys_in(10, 2, 64);
  const auto b = keys_in(20, 2, 64);
  const auto c = keys_in(30, 2, 64);
  f.core->apply(sb(1, 1, h1, {{a[0], true}, {b[0], true}, {c[0], true}}));
  f.commit();
  f.snapshot();
  EXPECT_EQ(f.core->counters().snapshot_slots, 3u);
  f.core->apply(sb(1, 2, h1, {{a[1], true}, {b[0], false}}));
  f.commit();
  const uint64_t p0 = f.core->next_position() - 1;
  f.snapshot();
  EXPECT_EQ(f.core->counters().snapshot_slots, 5u); // slots 10 and 20 only
  EXPECT_EQ(stored_slot(*f.store, 10)->size(), 2u);
  EXPECT_FALSE(stored_slot(*f.store, 20)); // emptied: deleted, not an empty value
  uint64_t stamp = 0;
  EXPECT_TRUE(stored_slot(*f.store, 30, &stamp));
  EXPECT_LT(stamp, p0); // untouched since the first round
  EXPECT_EQ(persistence::test::read_all(*f.store).log_floor, p0 + 1);
  // Nothing dirty: a requested round writes no slot.
  f.snapshot();
  EXPECT_EQ(f.core->counters().snapshot_slots, 5u);
}

TEST(kv_shard_core, records_applied_during_a_round_stay_in_the_log_above_the_new_floor) {
  shard_fixture f;
  f.opts.snapshot_step_entries = 1; // one slot a step
  f.core = std::make_unique<kv_shard_core>(f.opts, f.index, f.store);
  uint64_t n = 1;
  for (uint32_t slot = 0; slot < 8; ++slot)
    f.core->apply(sb(1, n++, h1, {{keys_in(slot, 1, 64)[0], true}}));
  f.commit();
  const uint64_t p0 = f.core->next_position() - 1;
  f.core->request_snapshot();
  ASSERT_TRUE(f.core->background_step(0).ok); // slot 0
  EXPECT_TRUE(f.core->snapshot_running());
  const uint64_t during = keys_in(40, 1, 64)[0];
  f.core->apply(sb(1, n++, h1, {{during, true}}));
  while (f.core->background_due(0))
    ASSERT_TRUE(f.core->background_step(0).ok);
  f.commit();
  auto disk = persistence::test::read_all(*f.store);
  EXPECT_EQ(disk.log_floor, p0 + 1);
  ASSERT_EQ(disk.log.size(), 1u);
  EXPECT_EQ(disk.log.begin()->first, p0 + 1);
  uint64_t stamp0 = 0, stamp7 = 0;
  ASSERT_TRUE(stored_slot(*f.store, 0, &stamp0));
  ASSERT_TRUE(stored_slot(*f.store, 7, &stamp7));
  EXPECT_EQ(stamp0, p0);
  EXPECT_EQ(stamp7, p0 + 1);                      // written after the record: covers it
  EXPECT_GT(f.core->log_bytes_since_round(), 0u); // that record counts for the next round
}

TEST(kv_shard_core, rounds_start_on_log_growth_or_on_the_interval_never_too_close) {
  shard_fixture f;
  f.opts.snapshot_log_bytes = 2'000;
  f.opts.snapshot_interval = std::chrono::milliseconds{60'000};
  f.opts.snapshot_min_interval = std::chrono::milliseconds{2'000};
  shard_start_state start;
  start.started_ms = 10'000;
  f.core = std::make_unique<kv_shard_core>(f.opts, f.index, f.store, start);
  EXPECT_FALSE(f.core->background_due(10'000));
  EXPECT_FALSE(f.core->background_due(100'000)); // nothing dirty: no round on the interval
  f.core->apply(sb(1, 1, h1, {{1, true}}));
  f.commit();
  EXPECT_FALSE(f.core->background_due(11'000));
  EXPECT_TRUE(f.core->background_due(70'000)); // the interval passed with a dirty slot
  uint64_t n = 2;
  while (f.core->log_bytes_since_round() < 2'000) {
    const uint64_t number = n++;
    f.core->apply(sb(1, number, h1, {{number * 7919, true}, {number * 104729, true}}));
  }
  f.commit();
  EXPECT_FALSE(f.core->background_due(11'999)); // min interval since the start
  EXPECT_TRUE(f.core->background_due(12'000));
  f.settle(12'000);
  EXPECT_EQ(f.core->counters().snapshot_rounds, 1u);
  while (f.core->log_bytes_since_round() < 2'000) {
    const uint64_t number = n++;
    f.core->apply(sb(1, number, h1, {{number * 7919, true}}));
  }
  f.commit();
  EXPECT_FALSE(f.core->background_due(13'000)); // too soon after the last round
  EXPECT_TRUE(f.core->background_due(14'000));
}

TEST(kv_shard_core, an_idle_shard_flushes_the_stores_memtables_once_per_idle_spell) {
  shard_fixture f;
  f.opts.idle_flush = std::chrono::milliseconds{5'000};
  f.opts.idle_flush_min_bytes = 1'000;
  f.core = std::make_unique<kv_shard_core>(f.opts, f.index, f.store);
  uint64_t number = 1;
  const auto log_some = [&] {
    for (int i = 0; i < 50; ++i, ++number)
      f.core->apply(sb(1, number, h1, {{number * 7919, true}, {number * 104729, true}}));
  };
  log_some();
  EXPECT_FALSE(f.core->flush_if_idle(1'000)) << "records wait for a commit: not idle";
  f.commit();
  EXPECT_FALSE(f.core->flush_if_idle(1'000)) << "a commit just now";
  EXPECT_FALSE(f.core->flush_if_idle(5'999));
  const auto before = f.store->memory_usage().memtable_bytes;
  ASSERT_GE(before, f.opts.idle_flush_min_bytes);
  EXPECT_TRUE(f.core->flush_if_idle(6'000)) << "5 s with nothing logged";
  EXPECT_FALSE(f.core->flush_if_idle(20'000)) << "once per idle spell";
  ASSERT_TRUE(f.store->flush()); // waits for the background flush asked for above
  EXPECT_LT(f.store->memory_usage().memtable_bytes, before);

  // Memtables too small to be worth an SST are left alone.
  f.opts.idle_flush_min_bytes = uint64_t{1} << 30;
  f.core = std::make_unique<kv_shard_core>(f.opts, f.index, f.store);
  f.core->flush_if_idle(40'000);
  EXPECT_FALSE(f.core->flush_if_idle(50'000)) << "below idle_flush_min_bytes";

  f.opts.idle_flush = std::chrono::milliseconds{0};
  f.core = std::make_unique<kv_shard_core>(f.opts, f.index, f.store);
  f.core->flush_if_idle(60'000);
  EXPECT_FALSE(f.core->flush_if_idle(1'000'000)) << "0: never";
}

TEST(kv_shard_core, an_idle_shard_has_work_of_its_own_only_until_its_flush_and_snapshot) {
  shard_fixture f;
  f.opts.idle_flush = std::chrono::milliseconds{5'000};
  f.opts.idle_flush_min_bytes = 1'000;
  f.opts.snapshot_interval = std::chrono::milliseconds{60'000};
  f.opts.snapshot_log_bytes = uint64_t{1} << 30; // only the interval starts a round here
  f.core = std::make_unique<kv_shard_core>(f.opts, f.index, f.store);
  f.core->flush_if_idle(0);
  EXPECT_EQ(f.core->next_idle_work_ms(0), 5'000u) << "a fresh shard: one idle flush due";
  f.core->flush_if_idle(5'000); // the spell's one flush, worth an SST or not
  EXPECT_EQ(f.core->next_idle_work_ms(5'000), std::nullopt) << "nothing left: it may sleep";

  for (uint64_t number = 1; number <= 50; ++number)
    f.core->apply(sb(1, number, h1, {{number * 7919, true}}));
  EXPECT_EQ(f.core->next_idle_work_ms(6'000), 6'000u) << "records wait for a commit";
  f.commit();
  f.core->flush_if_idle(6'000); // sees the activity: the idle spell starts now
  EXPECT_EQ(f.core->next_idle_work_ms(6'000), 11'000u) << "the idle flush comes first";
  EXPECT_TRUE(f.core->flush_if_idle(11'000));
  ASSERT_TRUE(f.store->flush());
  EXPECT_EQ(f.core->next_idle_work_ms(11'000), 60'000u)
      << "then the snapshot the interval owes the logged records";
  ASSERT_TRUE(f.core->background_due(60'000));
  while (f.core->background_due(60'000))
    ASSERT_TRUE(f.core->background_step(60'000).ok);
  f.core->flush_if_idle(61'000); // the round's commits were activity: a new idle spell
  EXPECT_EQ(f.core->next_idle_work_ms(61'000), 66'000u);
  f.core->flush_if_idle(66'000);
  EXPECT_EQ(f.core->next_idle_work_ms(66'000), std::nullopt) << "snapshotted: nothing owed";
}

TEST(kv_shard_core, after_a_large_round_the_log_must_grow_by_its_share_of_it) {
  shard_fixture f;
  f.opts.snapshot_log_bytes = 1'000;
  f.opts.snapshot_log_percent = 200;
  f.opts.snapshot_interval = std::chrono::milliseconds{600'000};
  f.opts.snapshot_min_interval = std::chrono::milliseconds{0};
  f.core = std::make_unique<kv_shard_core>(f.opts, f.index, f.store);
  EXPECT_EQ(f.core->snapshot_log_threshold(), 1'000u); // no round yet: the floor
  uint64_t n = 1;
  auto grow_log_to = [&](uint64_t bytes) {
    while (f.core->log_bytes_since_round() < bytes) {
      const uint64_t number = n++;
      f.core->apply(sb(1, number, h1, {{number * 7919, true}, {number * 104729, true}}));
    }
    f.commit();
  };
  grow_log_to(1'000);
  EXPECT_TRUE(f.core->background_due(1'000));
  f.settle(1'000);
  ASSERT_EQ(f.core->counters().snapshot_rounds, 1u);
  // The round wrote every key once; the next one waits for twice those bytes.
  const uint64_t written = f.core->counters().snapshot_bytes;
  ASSERT_GT(written, 1'000u);
  EXPECT_EQ(f.core->snapshot_log_threshold(), written / 100 * 200);
  grow_log_to(1'000);
  EXPECT_FALSE(f.core->background_due(2'000)); // past the floor, short of the share
  grow_log_to(f.core->snapshot_log_threshold());
  EXPECT_TRUE(f.core->background_due(2'000));
}

TEST(kv_shard_core, drops_are_cleaned_in_background_steps_before_a_round_starts) {
  shard_fixture f; // 8 slots a drop step
  uint64_t n = 1;
  for (uint32_t slot = 0; slot < 64; ++slot)
    f.core->apply(sb(1, n++, h1, {{keys_in(slot, 1, 64)[0], true}}));
  f.commit();
  EXPECT_FALSE(f.core->background_due(0));
  f.core->apply(sb(1, n++, h1).drop());
  f.commit();
  EXPECT_EQ(f.index->read().entries(), 0u);
  EXPECT_TRUE(f.index->read().drops_pending());
  f.core->request_snapshot();
  int steps = 0;
  while (f.index->read().drops_pending()) {
    ASSERT_TRUE(f.core->background_due(0));
    f.core->background_step(0);
    EXPECT_FALSE(f.core->snapshot_running()) << "a round started before the drop was cleaned";
    ++steps;
  }
  EXPECT_EQ(steps, 8); // 64 slots, 8 a step
  f.settle();
  EXPECT_FALSE(f.core->background_due(0));
  // The round saw the cleaned slots: all 64 emptied, none stored.
  EXPECT_TRUE(persistence::test::read_all(*f.store).slots.empty());
  EXPECT_EQ(visible(*f.index).keys.size(), 0u);
  EXPECT_EQ(f.index->read().keys(), 0u);
}

#if LMCC_FAULT_INJECTION // injected commit failures: a test build only
TEST(kv_shard_core, a_given_up_round_still_gets_every_holder_state_written_later) {
  shard_fixture f;
  f.opts.commit_failure_grace = std::chrono::milliseconds{1'000};
  f.core = std::make_unique<kv_shard_core>(f.opts, f.index, f.store);
  const uint64_t key = keys_in(6, 1, 64)[0];
  f.core->apply(sb(1, 1, h1, {{key, true}})
                    .intro(uid_of(1), "LocalCPUBackend")
                    .mark(seq_state::tracking, 41));
  f.commit(0); // h1's record (intro and mark) is durable
  f.store->faults().fail_all_commits = true;
  f.core->request_snapshot();
  while (f.core->background_due(0))
    f.core->background_step(0);           // the whole round lands in one failing batch
  EXPECT_FALSE(f.core->commit(2'000).ok); // given up: acks out, round lost
  f.store->faults().fail_all_commits = false;
  f.commit(3'000);
  f.snapshot(10'000); // the lost slot is dirty again: a second round truncates the log
  auto r = f.restore();
  ASSERT_TRUE(r.start.holders.contains(h1)) << "h1's state and intro are gone from the disk";
  EXPECT_EQ(r.start.holders.at(h1).mark, (seq_mark{seq_state::tracking, 41}));
  EXPECT_EQ(r.start.holders.at(h1).worker_uid, uid_of(1));
}
#endif

} // namespace
} // namespace lmcc::actors
