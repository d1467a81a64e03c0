// worker_logic with a recording worker_outbox, what it keeps per destination
// and what a cluster adds: watermark marks for every destination, the durable
// seq and its flushes, placements swapped by a membership change, gaps after a
// re-registration or a peer loss (and the fault window), marks for a handoff,
// and where a stream stands when another entity takes it over. Seq tracking,
// sub-batches, the full-sync gate, reset and retire: worker_logic_test.cpp.
// CAF-free: linked with lmcc_registry.
#include "registry/worker_logic.hpp"
#include "tests/registry/worker_test_util.hpp"

#include <gtest/gtest.h>

#include <map>
#include <set>

namespace lmcc::actors {
namespace {

using msg::wire_int;
using namespace worker_test;

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
