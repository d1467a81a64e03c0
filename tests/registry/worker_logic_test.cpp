// worker_logic with a recording worker_outbox: seq tracking (and the first op
// after a restore), sub-batches per destination with their credits, the
// full-sync gate, reset and retire. A PULL round's batches:
// worker_logic_rounds_test.cpp. CAF-free: linked with lmcc_registry.
#include "registry/worker_logic.hpp"
#include "tests/registry/worker_test_util.hpp"

#include <gtest/gtest.h>

#include <map>
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

msg::FullSyncStartMsg sync_start(std::string sync_id, std::string location = "cpu") {
  return msg::FullSyncStartMsg{"A", 0, std::move(location), std::move(sync_id), 4000, 2};
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

namespace lmcc::actors {
namespace {

/// A batch of one op whose key lands in `slot` of 64 (keys probed from 1).
pushed_msg batch_in_slot(uint32_t slot, uint64_t seq) {
  uint64_t key = 1;
  while (slot_of(key, 64) != slot)
    ++key;
  msg::BatchedKVOperationMsg b{"A", 0, "cpu", {}};
  b.operations.push_back(msg::KVOpEvent{msg::OpType::admit, wire_int::from_unsigned(key),
                                        wire_int::from_unsigned(seq)});
  return pushed_msg{msg::Msg{std::move(b)}, 1};
}

TEST(worker_logic, every_mark_destination_gets_the_watermark_even_without_ops) {
  recording_outbox out;
  auto cfg = config(3);
  cfg.mark_mask = 0b101; // destinations 0 and 2 keep this worker's marks
  worker_logic w{cfg, out};
  w.on_push(batch_in_slot(1, 0)); // slot 1 belongs to destination 1 only
  std::set<uint32_t> to;
  for (const auto& [d, sb] : out.sent) {
    to.insert(d);
    EXPECT_EQ(sb.mark, (seq_mark{seq_state::tracking, 0})) << d;
    EXPECT_EQ(sb.ops.size(), d == 1 ? 1u : 0u) << d;
  }
  EXPECT_EQ(to, (std::set<uint32_t>{0, 1, 2}));
  for (uint32_t d = 0; d < 3; ++d)
    w.on_ack(base + d, 1);
  EXPECT_EQ(out.credits, 1u); // the credit came back once, whole
}

TEST(worker_logic, the_durable_seq_moves_only_once_every_destination_acked_the_batch) {
  recording_outbox out;
  auto cfg = config(3);
  cfg.mark_mask = 0b101; // destinations 0 and 2 keep the marks; slot 1 is destination 1's
  worker_logic w{cfg, out};
  w.on_push(batch_in_slot(1, 0));
  ASSERT_EQ(out.sent.size(), 3u);
  for (const auto& [d, sb] : out.sent)
    EXPECT_FALSE(sb.has_durable) << d; // nothing acknowledged yet
  // The mark owners acked, the op's owner not yet: nothing is durable.
  w.on_ack(base + 0, 1);
  w.on_ack(base + 2, 1);
  EXPECT_EQ(out.sent.size(), 3u);
  w.on_push(batch_in_slot(1, 1));
  ASSERT_EQ(out.sent.size(), 6u);
  for (size_t i = 3; i < 6; ++i)
    EXPECT_FALSE(out.sent[i].second.has_durable) << i;
  // Batch 0 everywhere: batch 1's acks are still out, so no flush yet.
  w.on_ack(base + 1, 1);
  EXPECT_EQ(out.sent.size(), 6u);
  EXPECT_EQ(out.flushes_wanted, 0);
  // Batch 1 everywhere, the worker quiet: a flush is wanted, not sent at once
  // (a worker that keeps sending tells the owners in its next batch).
  w.on_ack(base + 0, 2);
  w.on_ack(base + 2, 2);
  w.on_ack(base + 1, 2);
  EXPECT_EQ(out.flushes_wanted, 1);
  EXPECT_EQ(out.sent.size(), 6u);
  // When it runs, the mark owners, and the op's owner (a takeover may ask any
  // shard), hear that 1 is durable.
  w.flush_durable();
  ASSERT_EQ(out.sent.size(), 9u);
  std::set<uint32_t> flushed;
  for (size_t i = 6; i < 9; ++i) {
    const auto& [d, sb] = out.sent[i];
    flushed.insert(d);
    EXPECT_TRUE(sb.ops.empty());
    EXPECT_TRUE(sb.has_durable);
    EXPECT_EQ(sb.durable_seq, 1u);
    EXPECT_EQ(sb.mark, (seq_mark{seq_state::tracking, 1}));
  }
  EXPECT_EQ(flushed, (std::set<uint32_t>{0, 1, 2}));
  // Acks of the flush itself send nothing more, and neither does a second
  // flush with nothing new to tell.
  w.on_ack(base + 0, 3);
  w.on_ack(base + 1, 3);
  w.on_ack(base + 2, 3);
  w.flush_durable();
  EXPECT_EQ(out.sent.size(), 9u);
  EXPECT_EQ(out.flushes_wanted, 1);
  // The next batch carries it.
  w.on_push(batch_in_slot(1, 2));
  for (size_t i = 9; i < out.sent.size(); ++i) {
    EXPECT_TRUE(out.sent[i].second.has_durable);
    EXPECT_EQ(out.sent[i].second.durable_seq, 1u);
  }
}

/// Destination 0 keeps the marks, slot 1's ops go to destination 1.
worker_config durable_config() {
  auto cfg = config(3);
  cfg.mark_mask = 0b001;
  return cfg;
}

/// Batch `seq` (slot 1) sent and acknowledged by both its destinations.
void send_and_ack(worker_logic& w, uint64_t seq) {
  w.on_push(batch_in_slot(1, seq));
  w.on_ack(base + 0, seq + 1);
  w.on_ack(base + 1, seq + 1);
}

/// Every sub-batch sent from `from` on is a mark-only flush of `durable`.
void expect_flush(const recording_outbox& out, size_t from, uint64_t durable) {
  ASSERT_GT(out.sent.size(), from);
  for (size_t i = from; i < out.sent.size(); ++i) {
    EXPECT_TRUE(out.sent[i].second.ops.empty()) << i;
    EXPECT_EQ(out.sent[i].second.durable_seq, durable) << i;
  }
}

TEST(worker_logic, a_flush_waits_while_a_newer_batch_is_in_flight) {
  recording_outbox out;
  worker_logic w{durable_config(), out};
  send_and_ack(w, 0); // to destination 1 (ops) and 0 (mark)
  ASSERT_EQ(out.flushes_wanted, 1);
  w.on_push(batch_in_slot(1, 1)); // the worker kept sending
  const size_t sent = out.sent.size();
  for (size_t i = 2; i < sent; ++i) { // the new batch carries what the flush would
    EXPECT_TRUE(out.sent[i].second.has_durable) << i;
    EXPECT_EQ(out.sent[i].second.durable_seq, 0u) << i;
  }
  w.flush_durable(); // batch 1 unacknowledged: nothing to tell yet
  EXPECT_EQ(out.sent.size(), sent);
  w.on_ack(base + 0, 2);
  w.on_ack(base + 1, 2);
  EXPECT_EQ(out.flushes_wanted, 2); // batch 1 durable: asked again
  w.flush_durable();                // batch 1 went since the first wish: not quiet yet
  EXPECT_EQ(out.sent.size(), sent);
  w.flush_durable();
  expect_flush(out, sent, 1);
}

TEST(worker_logic, a_worker_that_keeps_sending_is_not_flushed_until_it_goes_quiet) {
  recording_outbox out;
  worker_logic w{durable_config(), out};
  send_and_ack(w, 0);
  ASSERT_EQ(out.flushes_wanted, 1);
  send_and_ack(w, 1); // batch 1 goes and is acknowledged before the wished flush runs
  const size_t sent = out.sent.size();
  const int wanted = out.flushes_wanted;
  w.flush_durable(); // not quiet since the wish: nothing sent, asked again
  EXPECT_EQ(out.sent.size(), sent);
  EXPECT_EQ(out.flushes_wanted, wanted + 1);
  w.flush_durable(); // quiet for a whole wait now
  expect_flush(out, sent, 1);
}

TEST(worker_logic, a_drain_flushes_without_waiting_for_quiet) {
  recording_outbox out;
  worker_logic w{durable_config(), out};
  send_and_ack(w, 0);
  send_and_ack(w, 1);
  const size_t sent = out.sent.size();
  w.flush_durable(/*only_if_quiet=*/false);
  ASSERT_GT(out.sent.size(), sent);
  EXPECT_EQ(out.sent.back().second.durable_seq, 1u);
}

TEST(worker_logic, ops_and_marks_follow_a_placement_swapped_by_a_membership_change) {
  recording_outbox out;
  auto cfg = config(3);
  cfg.mark_slot = 2; // the uid's slot: destination 2 keeps the marks at first
  auto cell = cfg.placement;
  worker_logic w{cfg, out};
  w.on_push(batch_in_slot(1, 0));
  std::map<uint32_t, size_t> ops_to;
  for (const auto& [d, sb] : out.sent)
    ops_to[d] += sb.ops.size();
  EXPECT_EQ(ops_to, (std::map<uint32_t, size_t>{{1, 1}, {2, 0}}));
  // A joint placement: slot 1 goes to destinations 0 and 1, the marks' slot to 0 and 2.
  std::vector<uint64_t> joint(64);
  for (uint32_t s = 0; s < 64; ++s)
    joint[s] = uint64_t{1} << (s % 3);
  joint[1] = 0b011;
  joint[2] = 0b101;
  cell->store(joint, 1);
  out.sent.clear();
  w.on_push(batch_in_slot(1, 1));
  ops_to.clear();
  for (const auto& [d, sb] : out.sent) {
    ops_to[d] += sb.ops.size();
    EXPECT_EQ(sb.mark, (seq_mark{seq_state::tracking, 1})) << d;
  }
  EXPECT_EQ(ops_to, (std::map<uint32_t, size_t>{{0, 1}, {1, 1}, {2, 0}}));
}

TEST(worker_logic, in_a_cluster_a_gap_after_a_reregistration_proves_old_frames_or_a_loss) {
  // The new process's first frames, then an older process's frame that came
  // the long way (chaos seeds 1224, 1239 kept such entries).
  for (const bool cluster : {false, true}) {
    recording_outbox out;
    auto cfg = config();
    cfg.strict_after_reregistration = cluster;
    worker_logic w{cfg, out};
    w.on_push(batch("cpu", 0, 4)); // the old process
    w.on_reset(90);
    w.on_push(batch("cpu", 0, 3)); // the new one starts at 0: no proof needed
    w.on_push(batch("cpu", 3, 2)); // and goes on in order
    EXPECT_TRUE(out.resyncs.empty()) << cluster;
    w.on_push(batch("cpu", 240, 1)); // an old frame, late
    if (cluster)
      EXPECT_EQ(out.resyncs,
                (std::vector<std::string>{"frames_out_of_sequence_after_reregistration"}));
    else
      EXPECT_TRUE(out.resyncs.empty()); // one node reads one queue: counted only
    w.on_push(batch("cpu", 300, 1));    // one full sync covers what follows
    EXPECT_EQ(out.resyncs.size(), cluster ? 1u : 0u);
  }
}

TEST(worker_logic, in_a_cluster_a_long_run_after_a_reregistration_is_counted_as_lmcache_does) {
  recording_outbox out;
  auto cfg = config();
  cfg.strict_after_reregistration = true;
  worker_logic w{cfg, out};
  w.on_reset(90);
  for (uint64_t seq = 0; seq < worker_logic::fault_window_batches; ++seq)
    w.on_push(batch("cpu", seq, 1));
  w.on_push(batch("cpu", 1000, 1)); // past the window: a gap is only counted
  EXPECT_TRUE(out.resyncs.empty());
  EXPECT_EQ(out.gaps.size(), 1u);
}

TEST(worker_logic, after_a_peer_is_lost_a_gap_in_the_next_batch_asks_for_a_full_sync) {
  recording_outbox out;
  worker_logic w{config(), out};
  w.on_push(batch("cpu", 0, 5));
  w.check_next_batches();
  w.on_push(batch("cpu", 5, 2)); // continues: frames were not lost
  EXPECT_TRUE(out.resyncs.empty());
  w.check_next_batches();
  w.on_push(batch("cpu", 9, 2)); // 7 and 8 died with the node
  EXPECT_EQ(out.resyncs, (std::vector<std::string>{"frames_lost_with_node"}));
  w.on_push(batch("cpu", 20, 1)); // later gaps are LMCache's: counted, no resync
  EXPECT_EQ(out.resyncs.size(), 1u);
}

TEST(worker_logic, a_gap_just_before_a_peer_loss_is_noticed_counts_as_proof) {
  recording_outbox out;
  worker_logic w{config(), out};
  w.on_push(batch("cpu", 0, 5));
  w.on_push(batch("cpu", 8, 1)); // the gap arrives before the loss is noticed
  w.on_push(batch("cpu", 9, 1));
  EXPECT_TRUE(out.resyncs.empty());
  w.check_next_batches();
  EXPECT_EQ(out.resyncs, (std::vector<std::string>{"frames_lost_with_node"}));
  // An old gap does not: 64 clean batches later a loss proves nothing.
  recording_outbox out2;
  worker_logic w2{config(), out2};
  w2.on_push(batch("cpu", 0, 1));
  w2.on_push(batch("cpu", 5, 1));
  for (uint64_t s = 6; s < 6 + worker_logic::recent_gap_batches + 1; ++s)
    w2.on_push(batch("cpu", s, 1));
  w2.check_next_batches();
  EXPECT_TRUE(out2.resyncs.empty());
}

TEST(worker_logic, marks_describe_each_location_for_a_handoff) {
  recording_outbox out;
  worker_logic w{config(), out};
  w.on_push(batch("cpu", 0, 4));
  w.on_push(batch("disk", 10, 1));
  auto start = sync_start("s1", "disk");
  ASSERT_TRUE(w.on_sync_start(start).accepted);
  auto marks = w.marks();
  std::sort(marks.begin(), marks.end(),
            [](const auto& a, const auto& b) { return a.location < b.location; });
  ASSERT_EQ(marks.size(), 2u);
  EXPECT_EQ(marks[0],
            (location_mark{"cpu", 77, seq_mark{seq_state::tracking, 3}, stream_pos{77, 0, 3, 0}}));
  // The sync started an era of its own: its drop is the location's last event.
  EXPECT_EQ(marks[1],
            (location_mark{"disk", 77, seq_mark{seq_state::syncing, 0}, stream_pos{77, 1, 0, 0}}));
}

TEST(worker_logic, sub_batches_carry_where_the_stream_stands_and_what_each_owner_got_before) {
  recording_outbox out;
  worker_logic w{config(2), out};
  // Keys 100 + i of the batch at seq 1 (first * 100 + i): round-robin over
  // 64 slots, so each destination gets ops of most batches.
  w.on_push(batch("cpu", 1, 4));
  std::map<uint32_t, kv_sub_batch> last;
  for (auto& [d, sb] : out.sent) {
    EXPECT_EQ(sb.prev, (stream_pos{77, 0, 0, 0})) << d; // the registration's start
    EXPECT_EQ(sb.end, (stream_pos{77, 0, 4, 0})) << d;  // the batch's highest seq
    last[d] = sb;
  }
  ASSERT_FALSE(last.empty());
  out.sent.clear();
  // Frames out of order: a smaller seq after a larger one is the next event
  // all the same, numbered after it.
  // (The seq going back is told to every owner first, as a mark at the
  // stream's position: no event.)
  w.on_push(batch("cpu", 0, 1));
  size_t with_ops = 0;
  for (auto& [d, sb] : out.sent) {
    EXPECT_EQ(sb.prev, last[d].end) << d; // continues what this destination got
    if (sb.ops.empty()) {
      EXPECT_EQ(sb.end, last[d].end) << d;
      continue;
    }
    ++with_ops;
    EXPECT_EQ(sb.end, (stream_pos{77, 0, 4, 1})) << d;
  }
  EXPECT_EQ(with_ops, 1u);
  out.sent.clear();
  // A re-registration: every destination gets the new incarnation's drop,
  // and the stream starts over from it.
  w.on_reset(78);
  ASSERT_EQ(out.sent.size(), 2u);
  for (auto& [d, sb] : out.sent) {
    EXPECT_TRUE(sb.drop);
    EXPECT_EQ(sb.end, (stream_pos{78, 0, 0, 0})) << d;
  }
  out.sent.clear();
  w.on_push(batch("cpu", 0, 2));
  for (auto& [d, sb] : out.sent)
    EXPECT_EQ(sb.prev, (stream_pos{78, 0, 0, 0})) << d;
}

TEST(worker_logic, an_entity_that_takes_a_stream_over_goes_on_from_where_it_stood) {
  recording_outbox out;
  auto cfg = config();
  cfg.locations = {"cpu"};
  cfg.restored = true;
  cfg.last_seq["cpu"] = 20;
  cfg.expected_next["cpu"] = 21;
  cfg.start_pos["cpu"] = stream_pos{77, 0, 20, 2};
  worker_logic w{cfg, out};
  w.on_push(batch("cpu", 21, 1));
  ASSERT_EQ(out.sent.size(), 1u);
  // Its first sub-batch names where it took over: an owner that is not there
  // missed something and copies it from another.
  EXPECT_EQ(out.sent[0].second.prev, (stream_pos{77, 0, 20, 2}));
  EXPECT_EQ(out.sent[0].second.end, (stream_pos{77, 0, 21, 0}));
}

} // namespace
} // namespace lmcc::actors

namespace lmcc::actors {
namespace {

TEST(worker_logic, a_gap_within_the_fault_window_after_a_peer_loss_asks_once) {
  recording_outbox out;
  worker_logic w{config(), out};
  w.on_push(batch("cpu", 0, 5));
  w.check_next_batches();
  w.on_push(batch("cpu", 5, 1)); // continues
  for (uint64_t s = 6; s < 16; ++s)
    w.on_push(batch("cpu", s, 1));
  EXPECT_TRUE(out.resyncs.empty());
  w.on_push(batch("cpu", 20, 1)); // frames held by a frozen node never came
  EXPECT_EQ(out.resyncs, (std::vector<std::string>{"frames_lost_with_node"}));
  w.on_push(batch("cpu", 30, 1));
  EXPECT_EQ(out.resyncs.size(), 1u);
}

TEST(worker_logic, past_the_fault_window_a_gap_is_only_counted_as_lmcache_does) {
  recording_outbox out;
  worker_logic w{config(), out};
  w.on_push(batch("cpu", 0, 1));
  w.check_next_batches();
  uint64_t seq = 1;
  for (uint32_t i = 0; i < worker_logic::fault_window_batches; ++i)
    w.on_push(batch("cpu", seq++, 1));
  w.on_push(batch("cpu", seq + 5, 1));
  EXPECT_TRUE(out.resyncs.empty());
  EXPECT_EQ(out.gaps.size(), 1u);
}

} // namespace
} // namespace lmcc::actors
