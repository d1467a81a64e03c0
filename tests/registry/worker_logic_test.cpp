// worker_logic with a recording worker_outbox: seq tracking (and the first op
// after a restore), sub-batches per destination with their credits, the
// full-sync gate, reset and retire. A PULL round's batches:
// worker_logic_rounds_test.cpp. CAF-free: linked with lmcc_registry.
#include "registry/worker_logic.hpp"
#include "tests/registry/worker_test_util.hpp"

#include <gtest/gtest.h>

#include <set>

namespace lmcc::actors {
namespace {

using msg::wire_int;
using namespace worker_test;

/// An entity that took the worker over (or restored it) with a tracking mark:
/// `location` saw every op up to `last_seq`.
worker_config taken_over_config(const std::string& location, uint64_t last_seq) {
  auto c = config();
  c.restored = true;
  c.locations = {location};
  c.last_seq = {{location, last_seq}};
  c.expected_next = {{location, last_seq + 1}};
  return c;
}

pushed_msg sync_batch(std::string sync_id, uint64_t id, std::vector<wire_int> keys) {
  const uint64_t n = keys.size();
  return pushed_msg{msg::Msg{msg::FullSyncBatchMsg{"A", 0, "cpu", std::move(sync_id),
                                                   wire_int::from_unsigned(id), std::move(keys)}},
                    n};
}

TEST(worker_logic, a_batch_becomes_one_sub_batch_with_intro_mark_and_its_credits) {
  recording_outbox out;
  worker_logic w{config(), out};
  w.on_push(batch("cpu", 0, 3));
  ASSERT_EQ(out.sent.size(), 1u);
  const auto& [d, sb] = out.sent[0];
  EXPECT_EQ(d, 0u);
  EXPECT_EQ(sb.stream, base);
  EXPECT_EQ(sb.number, 1u);
  EXPECT_EQ(sb.holder, make_holder_id("A", wire_int{0}, "cpu"));
  EXPECT_EQ(sb.incarnation, 77u);
  EXPECT_TRUE(sb.has_intro);
  EXPECT_EQ(sb.intro_worker_uid, worker_uid("A", wire_int{0}));
  EXPECT_EQ(sb.intro_location, "cpu");
  EXPECT_TRUE(sb.has_mark);
  EXPECT_EQ(sb.mark, (seq_mark{seq_state::tracking, 2}));
  EXPECT_EQ(sb.ops, (std::vector<kv_op>{{0, true}, {1, false}, {2, true}}));
  EXPECT_EQ(out.locations, (std::vector<std::string>{"cpu"}));
  EXPECT_EQ(out.credits, 0u); // held until acknowledged
  w.on_push(batch("cpu", 3, 1));
  EXPECT_FALSE(out.sent[1].second.has_intro); // once per destination
  EXPECT_EQ(out.sent[1].second.number, 2u);
  EXPECT_EQ(out.locations.size(), 1u);
  EXPECT_TRUE(out.gaps.empty());
}

TEST(worker_logic, credits_come_back_with_cumulative_acks) {
  recording_outbox out;
  worker_logic w{config(), out};
  w.on_push(batch("cpu", 0, 5));
  w.on_push(batch("cpu", 5, 3));
  w.on_push(batch("cpu", 8, 2));
  EXPECT_EQ(w.stream().unacked(), 3u);
  w.on_ack(base, 2);
  EXPECT_EQ(out.credits, 8u);
  w.on_ack(base, 2);     // a repeated ack releases nothing
  w.on_ack(base + 5, 3); // another stream: not ours
  EXPECT_EQ(out.credits, 8u);
  w.on_ack(base, 3);
  EXPECT_EQ(out.credits, 10u);
  EXPECT_TRUE(w.stream().idle());
}

TEST(worker_logic, a_seq_gap_is_reported_once_per_batch) {
  recording_outbox out;
  worker_logic w{config(), out};
  w.on_push(batch("cpu", 10, 2)); // the first batch sets the tracker
  EXPECT_TRUE(out.gaps.empty());
  msg::BatchedKVOperationMsg b{"A", 0, "cpu", {}};
  for (uint64_t seq : {12, 14, 15, 20, 21}) // two holes in one batch
    b.operations.push_back(
        {msg::OpType::admit, wire_int::from_unsigned(seq), wire_int::from_unsigned(seq)});
  w.on_push(pushed_msg{msg::Msg{b}, 5});
  EXPECT_EQ(out.gaps, (std::vector<recording_outbox::gap>{{"cpu", 13, 14}}));
  EXPECT_EQ(out.sent.back().second.mark, (seq_mark{seq_state::tracking, 21}));
  w.on_push(batch("cpu", 22, 1));   // continues: no gap
  w.on_push(batch("disk", 500, 1)); // another location has its own tracker
  EXPECT_EQ(out.gaps.size(), 1u);
  w.on_push(batch("cpu", 30, 1));
  EXPECT_EQ(out.gaps.back(), (recording_outbox::gap{"cpu", 23, 30}));
  EXPECT_TRUE(out.resyncs.empty()); // a gap alone asks for nothing (LMCache counts it)
}

TEST(worker_logic, a_seq_that_goes_back_to_zero_is_reported_with_the_incarnation) {
  // The directory matches these against renewals (restart_race.hpp).
  recording_outbox out;
  worker_logic w{config(), out};
  w.on_push(batch("cpu", 0, 3));  // this process's own start: nothing to report
  w.on_push(batch("cpu", 3, 2));  // continues the run
  w.on_push(batch("disk", 7, 1)); // another location
  EXPECT_TRUE(out.seq_starts.empty());
  w.on_push(batch("cpu", 0, 1)); // back to 0: a new process this entity was not told of
  EXPECT_EQ(out.seq_starts, (std::vector<uint64_t>{77}));
  w.on_push(batch("disk", 0, 1)); // (a location's first seq 0 after others counts too)
  EXPECT_EQ(out.seq_starts, (std::vector<uint64_t>{77, 77}));
  EXPECT_TRUE(out.resyncs.empty()); // the entity itself asks for nothing
}

TEST(worker_logic, a_seq_that_goes_back_without_reaching_zero_is_reported_too) {
  // The new process's first frames went to another node; this entity sees
  // its later ones (chaos seed 1464).
  recording_outbox out;
  worker_logic w{config(), out};
  w.on_push(batch("cpu", 0, 50));
  w.on_push(batch("cpu", 60, 5)); // forward: a gap, not a start
  EXPECT_TRUE(out.seq_starts.empty());
  w.on_push(batch("cpu", 45, 3)); // back from 65 to 45
  EXPECT_EQ(out.seq_starts, (std::vector<uint64_t>{77}));
  // A taken-over entity compares with the mark it was handed.
  recording_outbox taken_out;
  worker_logic taken{taken_over_config("cpu", 313), taken_out};
  taken.on_push(batch("cpu", 45, 2));
  EXPECT_EQ(taken_out.seq_starts, (std::vector<uint64_t>{77}));
}

TEST(worker_logic, a_taken_over_entity_reports_a_locations_first_seq_0_even_without_a_mark) {
  // Its marks knew nothing of "cpu" (the old process had sent nothing there,
  // or this node never got it): a seq 0 there may be a newer process's first
  // frame all the same (chaos: kill -9 and worker restarts lost a process's
  // every key that way).
  recording_outbox out;
  worker_logic w{taken_over_config("disk", 9), out};
  w.on_push(batch("disk", 10, 2)); // the old run goes on
  EXPECT_TRUE(out.seq_starts.empty());
  w.on_push(batch("cpu", 0, 2));
  EXPECT_EQ(out.seq_starts, (std::vector<uint64_t>{77}));
  w.on_push(batch("cpu", 2, 1)); // its continuation is not a start
  EXPECT_EQ(out.seq_starts.size(), 1u);
  EXPECT_TRUE(out.resyncs.empty()); // the directory decides, against renewals
  // Each location is told to the directory once, the one from the marks too.
  EXPECT_EQ(out.locations, (std::vector<std::string>{"disk", "cpu"}));
  // An entity made by a registration knows its process: nothing to report.
  recording_outbox fresh_out;
  worker_logic fresh{config(), fresh_out};
  fresh.on_push(batch("cpu", 0, 2));
  EXPECT_TRUE(fresh_out.seq_starts.empty());
}

TEST(worker_logic, after_a_restore_the_first_op_is_checked_against_the_durable_watermark) {
  auto c = config();
  c.restored = true;
  c.locations = {"cpu", "disk", "nvme"};
  c.last_seq = {{"cpu", 49}};
  c.expected_next = {{"cpu", 50}, {"disk", std::nullopt}};
  {
    recording_outbox out;
    worker_logic w{c, out};
    w.on_push(batch("cpu", 50, 2)); // follows the watermark
    w.on_push(batch("disk", 7, 1)); // resynced: no check
    EXPECT_TRUE(out.resyncs.empty());
    EXPECT_TRUE(out.gaps.empty());
    // Known from the restore, and still told once each on their first batch
    // (the directory's add is idempotent; a peer may have lost them).
    EXPECT_EQ(out.locations, (std::vector<std::string>{"cpu", "disk"}));
    w.on_push(batch("cpu", 52, 1));
    EXPECT_EQ(out.locations.size(), 2u);
  }
  {
    recording_outbox out;
    worker_logic w{c, out};
    w.on_push(batch("cpu", 60, 1));
    EXPECT_EQ(out.resyncs, (std::vector<std::string>{"seq_gap_after_restart"}));
    EXPECT_EQ(out.gaps, (std::vector<recording_outbox::gap>{{"cpu", 50, 60}}));
    w.on_push(batch("cpu", 70, 1)); // checked once: later gaps are plain gaps
    EXPECT_EQ(out.resyncs.size(), 1u);
  }
  {
    recording_outbox out;
    worker_logic w{c, out};
    w.on_push(batch("nvme", 3, 1));    // restored without a watermark: must start at 0
    w.on_push(batch("new-loc", 0, 1)); // first seen after the restore: starts at 0, fine
    EXPECT_EQ(out.resyncs, (std::vector<std::string>{"seq_gap_after_restart"}));
    w.on_push(batch("other-loc", 5, 1)); // first seen after the restore, not at 0
    EXPECT_EQ(out.resyncs.size(), 2u);
    EXPECT_EQ(out.locations, (std::vector<std::string>{"nvme", "new-loc", "other-loc"}));
  }
}

TEST(worker_logic, discarded_frames_give_their_credits_back_at_once) {
  recording_outbox out;
  worker_logic w{config(), out};
  w.on_push(pushed_msg{msg::Msg{msg::BatchedKVOperationMsg{"A", 0, "cpu", {}}}, 1}); // empty
  EXPECT_EQ(out.credits, 1u);
  w.on_push(sync_batch("nobody", 0, {1, 2, 3})); // no session: dropped
  EXPECT_EQ(out.credits, 4u);
  w.on_push(pushed_msg{msg::Msg{msg::FullSyncEndMsg{"A", 0, "cpu", "nobody", 3}}, 1});
  EXPECT_EQ(out.credits, 5u);
  w.on_push(pushed_msg{msg::Msg{msg::DeRegisterMsg{"A", 0, "h", 1}}, 1}); // not ingest
  EXPECT_EQ(out.credits, 6u);
  EXPECT_TRUE(out.sent.empty());
  EXPECT_TRUE(out.inputs.empty());
}

TEST(worker_logic, legacy_single_op_messages_are_one_op_batches) {
  recording_outbox out;
  worker_logic w{config(), out};
  w.on_push(pushed_msg{msg::Msg{msg::KVAdmitMsg{"A", 0, wire_int{-1}, "cpu", 4}}, 1});
  w.on_push(pushed_msg{msg::Msg{msg::KVEvictMsg{"A", 0, wire_int{-1}, "cpu", 6}}, 1});
  ASSERT_EQ(out.sent.size(), 2u);
  EXPECT_EQ(out.sent[0].second.ops, (std::vector<kv_op>{{UINT64_MAX, true}}));
  EXPECT_EQ(out.sent[1].second.ops, (std::vector<kv_op>{{UINT64_MAX, false}}));
  EXPECT_EQ(out.sent[1].second.mark, (seq_mark{seq_state::tracking, 6}));
  EXPECT_EQ(out.gaps, (std::vector<recording_outbox::gap>{{"cpu", 5, 6}}));
  w.on_ack(base, 2);
  EXPECT_EQ(out.credits, 2u);
}

TEST(worker_logic, ops_split_by_slot_owner_and_credits_split_without_loss) {
  recording_outbox out;
  worker_logic w{config(3), out};
  w.on_push(batch("cpu", 0, 40, 97));
  ASSERT_GE(out.sent.size(), 2u);
  uint64_t ops = 0;
  for (const auto& [d, sb] : out.sent) {
    EXPECT_EQ(sb.stream, base + d);
    EXPECT_EQ(sb.number, 1u);
    EXPECT_TRUE(sb.has_intro);
    EXPECT_EQ(sb.mark, (seq_mark{seq_state::tracking, 39}));
    for (const auto& op : sb.ops)
      EXPECT_EQ(slot_of(op.key, 64) % 3, d);
    ops += sb.ops.size();
  }
  EXPECT_EQ(ops, 40u);
  EXPECT_EQ(w.stream().outstanding_credits(), 97u);
  for (uint32_t d = 0; d < 3; ++d)
    w.on_ack(base + d, 1);
  EXPECT_EQ(out.credits, 97u);
}

TEST(worker_logic, a_full_sync_closes_the_gate_and_goes_only_after_earlier_acks) {
  recording_outbox out;
  worker_logic w{config(), out};
  w.on_push(batch("cpu", 0, 4));
  auto ret = w.on_sync_start(sync_start("s1"));
  EXPECT_TRUE(ret.accepted);
  EXPECT_EQ(ret.sync_id, "s1");
  ASSERT_EQ(out.starts.size(), 1u);
  EXPECT_EQ(out.starts[0].holder, make_holder_id("A", wire_int{0}, "cpu"));
  EXPECT_EQ(out.starts[0].incarnation, 77u);
  EXPECT_EQ(out.starts[0].total_keys, 4000u);
  EXPECT_EQ(out.starts[0].batch_count, 2u);
  EXPECT_EQ(out.go, 0); // the increment before it is not acknowledged yet
  EXPECT_FALSE(w.gate_open());
  w.on_push(batch("cpu", 4, 3)); // an increment during the sync: discarded
  EXPECT_EQ(w.discarded_batches(), 1u);
  EXPECT_EQ(out.credits, 3u);
  w.on_push(sync_batch("s1", 0, {1, 2})); // the session's input, with its credits
  ASSERT_EQ(out.inputs.size(), 1u);
  EXPECT_EQ(out.inputs[0].credits, 2u);
  EXPECT_EQ(out.credits, 3u);
  w.on_ack(base, 1);
  EXPECT_EQ(out.go, 1);
  w.on_ack(base, 1);
  EXPECT_EQ(out.go, 1); // once
  // Another sync id while one runs is refused; the same id is accepted again.
  EXPECT_FALSE(w.on_sync_start(sync_start("s2")).accepted);
  w.on_session_ended("old", true); // not ours: the gate stays closed
  EXPECT_FALSE(w.gate_open());
  w.on_session_ended("s1", true);
  EXPECT_TRUE(w.gate_open());
  // The next increment re-initialises the tracker: no gap after the sync.
  w.on_push(batch("cpu", 900, 1));
  EXPECT_TRUE(out.gaps.empty());
  EXPECT_EQ(out.sent.back().second.mark, (seq_mark{seq_state::tracking, 900}));
}

TEST(worker_logic, a_sync_with_nothing_in_flight_goes_at_once_and_refuses_absurd_batch_counts) {
  recording_outbox out;
  worker_logic w{config(), out};
  auto big = sync_start("s1");
  big.batch_count = wire_int::from_unsigned(worker_logic::max_batch_count + 1);
  auto refused = w.on_sync_start(big);
  EXPECT_FALSE(refused.accepted);
  ASSERT_TRUE(refused.error_msg);
  EXPECT_NE(refused.error_msg->find("exceeds the limit"), std::string::npos);
  EXPECT_TRUE(w.gate_open());
  EXPECT_TRUE(w.on_sync_start(sync_start("s1")).accepted);
  EXPECT_EQ(out.go, 1);
  EXPECT_EQ(out.locations, (std::vector<std::string>{"cpu"}));
}

TEST(worker_logic, reset_drops_every_holder_with_the_new_incarnation) {
  recording_outbox out;
  worker_logic w{config(2), out};
  w.on_push(batch("cpu", 0, 6));
  w.on_push(batch("disk", 0, 6));
  w.on_sync_start(sync_start("s1", "cpu"));
  const size_t before = out.sent.size();
  w.on_reset(90);
  EXPECT_EQ(w.incarnation(), 90u);
  EXPECT_TRUE(w.gate_open());
  std::set<std::pair<uint32_t, holder_id>> drops;
  for (size_t i = before; i < out.sent.size(); ++i) {
    const auto& [d, sb] = out.sent[i];
    EXPECT_TRUE(sb.drop);
    EXPECT_TRUE(sb.ops.empty());
    EXPECT_EQ(sb.incarnation, 90u);
    EXPECT_EQ(sb.mark, seq_mark{});
    drops.emplace(d, sb.holder);
  }
  const holder_id cpu = make_holder_id("A", wire_int{0}, "cpu");
  const holder_id disk = make_holder_id("A", wire_int{0}, "disk");
  EXPECT_EQ(drops,
            (std::set<std::pair<uint32_t, holder_id>>{{0, cpu}, {1, cpu}, {0, disk}, {1, disk}}));
  // The new registration starts afresh: intro again, new incarnation, no tracker.
  w.on_push(batch("cpu", 500, 1));
  EXPECT_TRUE(out.sent.back().second.has_intro);
  EXPECT_EQ(out.sent.back().second.incarnation, 90u);
  EXPECT_TRUE(out.gaps.empty());
  EXPECT_EQ(out.locations, (std::vector<std::string>{"cpu", "disk", "cpu"}));
}

TEST(worker_logic, retire_drops_above_the_incarnation_and_finishes_once_acknowledged) {
  recording_outbox out;
  worker_logic w{config(), out};
  w.on_push(batch("cpu", 0, 5));
  w.on_retire();
  EXPECT_FALSE(w.finished());
  ASSERT_EQ(out.sent.size(), 2u);
  EXPECT_TRUE(out.sent[1].second.drop);
  EXPECT_EQ(out.sent[1].second.incarnation, 78u);
  w.on_push(batch("cpu", 5, 2)); // after retiring: given back, never sent
  EXPECT_EQ(out.credits, 2u);
  EXPECT_EQ(out.sent.size(), 2u);
  EXPECT_FALSE(w.on_sync_start(sync_start("s1")).accepted);
  w.on_ack(base, 1);
  EXPECT_FALSE(w.finished());
  w.on_ack(base, 2);
  EXPECT_TRUE(w.finished());
  EXPECT_EQ(out.credits, 7u);
}

} // namespace
} // namespace lmcc::actors
