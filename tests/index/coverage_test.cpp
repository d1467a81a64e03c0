// coverage_book: how a node accounts, per holder and slot, for what its copy
// holds of the holder's stream (index/coverage.hpp), and how it judges
// another owner's copy.
#include "index/coverage.hpp"

#include <gtest/gtest.h>

#include <algorithm>

namespace lmcc::actors {
namespace {

constexpr uint32_t slots = 64;
constexpr holder_id h = 7;

stream_pos at(uint64_t n, uint64_t sub = 0, uint64_t era = 0, uint64_t inc = 1) {
  return stream_pos{inc, era, n, sub};
}

/// A key of `slot` (found by search: slot_of is a hash).
uint64_t key_in(uint32_t slot, uint64_t nth = 0) {
  for (uint64_t k = 1;; ++k)
    if (slot_of(k, slots) == slot && nth-- == 0)
      return k;
}

kv_sub_batch ops(stream_pos prev, stream_pos end, std::vector<uint32_t> touched,
                 uint64_t epoch = 0) {
  kv_sub_batch sb;
  sb.holder = h;
  sb.prev = prev;
  sb.end = end;
  sb.placement_epoch = epoch;
  for (uint32_t s : touched)
    sb.ops.push_back(kv_op{key_in(s), true});
  return sb;
}

kv_sub_batch drop(stream_pos at_) {
  kv_sub_batch sb;
  sb.holder = h;
  sb.drop = true;
  sb.end = at_;
  return sb;
}

/// Runs one sub-batch through the book the way the shard does; returns the
/// slots whose ops were applied.
std::vector<uint32_t> run(coverage_book& book, const kv_sub_batch& sb, cover_step* out = nullptr) {
  auto step = book.begin(sb);
  std::vector<uint32_t> applied;
  for (const auto& op : sb.ops) {
    const uint32_t s = slot_of(op.key, slots);
    const bool yes = step.ops == cover_step::ops_mode::all ||
                     (step.ops == cover_step::ops_mode::some && book.wants(s));
    if (yes)
      applied.push_back(s);
  }
  book.finish(sb);
  if (out)
    *out = step;
  return applied;
}

TEST(Coverage, ContiguousSubBatchesFollowTheStream) {
  coverage_book book{slots};
  EXPECT_EQ(run(book, drop(at(0))).size(), 0u);
  EXPECT_EQ(run(book, ops(at(0), at(5), {1, 2})), (std::vector<uint32_t>{1, 2}));
  EXPECT_EQ(run(book, ops(at(5), at(9), {3})), (std::vector<uint32_t>{3}));
  EXPECT_EQ(book.label(h, 1), at(9));
  EXPECT_EQ(book.label(h, 40), at(9)); // untouched slots follow too
  EXPECT_EQ(book.find(h)->exceptions, 0u);
}

TEST(Coverage, AResendOrAStaleSenderIsNotApplied) {
  coverage_book book{slots};
  run(book, drop(at(0)));
  run(book, ops(at(0), at(5), {1}));
  cover_step step;
  EXPECT_TRUE(run(book, ops(at(0), at(5), {1}), &step).empty());
  EXPECT_TRUE(step.stale);
  EXPECT_TRUE(run(book, ops(at(2), at(4), {1}), &step).empty());
  EXPECT_TRUE(step.stale);
}

TEST(Coverage, AHoleMakesEveryOwnedSlotPendingUntilACopyCoversIt) {
  coverage_book book{slots};
  run(book, drop(at(0)));
  run(book, ops(at(0), at(5), {1}));
  cover_step step;
  // The sender had sent this node up to 8; it holds 5: 6..8 never came.
  EXPECT_EQ(run(book, ops(at(8), at(10), {2}), &step), (std::vector<uint32_t>{2}));
  EXPECT_TRUE(step.hole);
  EXPECT_FALSE(book.label(h, 2).has_value());
  EXPECT_FALSE(book.label(h, 30).has_value());
  EXPECT_TRUE(book.slot_pending(30));
  EXPECT_EQ(book.find(h)->hole, at(8));
  // Slot 2 took ops at 10: a copy must cover them too.
  EXPECT_EQ(book.judge(h, 2, at(9), true, false), install_verdict::wait);
  EXPECT_EQ(book.judge(h, 30, at(7), true, false), install_verdict::wait);
  EXPECT_EQ(book.judge(h, 30, at(8), false, false), install_verdict::keep); // uncertain copy
  EXPECT_EQ(book.judge(h, 30, at(8), true, false), install_verdict::install);
  EXPECT_EQ(book.judge(h, 2, at(10), true, false), install_verdict::install);
  book.installed(h, 30, at(8));
  EXPECT_EQ(book.label(h, 30), at(10)); // resolved: the stream continued from the hole
  for (uint32_t s = 0; s < slots; ++s)
    if (book.judge(h, s, at(10), true, true) == install_verdict::install)
      book.installed(h, s, at(10));
  EXPECT_EQ(book.find(h)->exceptions, 0u);
  EXPECT_EQ(book.pending_count(), 0u);
  EXPECT_EQ(book.find(h)->hole, stream_pos{});
}

TEST(Coverage, ACopyNewerThanTheStreamIsLabeledUntilTheStreamCatchesUp) {
  coverage_book book{slots};
  run(book, drop(at(0)));
  run(book, ops(at(0), at(5), {1}));
  ASSERT_EQ(book.judge(h, 1, at(9), true, false), install_verdict::install);
  book.installed(h, 1, at(9));
  EXPECT_EQ(book.label(h, 1), at(9));
  // The sub-batch up to 7 is in the copy already; the one to 9 as well.
  EXPECT_TRUE(run(book, ops(at(5), at(7), {1})).empty());
  EXPECT_EQ(book.label(h, 1), at(9));
  EXPECT_TRUE(run(book, ops(at(7), at(9), {1})).empty());
  EXPECT_EQ(book.find(h)->exceptions, 0u); // caught up: follows again
  EXPECT_EQ(run(book, ops(at(9), at(12), {1})), (std::vector<uint32_t>{1}));
}

TEST(Coverage, EqualLabelsWithOtherEntriesAreAConflict) {
  coverage_book book{slots};
  run(book, drop(at(0)));
  run(book, ops(at(0), at(5), {1}));
  EXPECT_EQ(book.judge(h, 1, at(5), true, true), install_verdict::keep);
  EXPECT_EQ(book.judge(h, 1, at(5), true, false), install_verdict::conflict);
  EXPECT_EQ(book.judge(h, 1, at(4), true, false), install_verdict::keep);
}

TEST(Coverage, ADropClearsEverySlotButCopiesNewerThanIt) {
  coverage_book book{slots};
  run(book, drop(at(0)));
  run(book, ops(at(0), at(5), {1}));
  book.installed(h, 3, at(0, 2, 7)); // a copy of era 7, newer than the drop below
  cover_step step;
  run(book, drop(at(0, 0, 7)), &step);
  EXPECT_TRUE(step.reset);
  EXPECT_EQ(step.keep, (std::vector<uint32_t>{3}));
  EXPECT_EQ(book.label(h, 1), at(0, 0, 7));
  EXPECT_EQ(book.label(h, 3), at(0, 2, 7));
  // An older drop changes nothing.
  run(book, drop(at(0)), &step);
  EXPECT_TRUE(step.stale);
}

TEST(Coverage, ASubBatchOfANewerEraImpliesItsDrop) {
  coverage_book book{slots};
  run(book, drop(at(0)));
  run(book, ops(at(0), at(5), {1}));
  cover_step step;
  // Era 3's drop went missing; its first ops continue from the drop.
  EXPECT_EQ(run(book, ops(at(0, 0, 3), at(2, 0, 3), {4}), &step), (std::vector<uint32_t>{4}));
  EXPECT_TRUE(step.reset);
  EXPECT_FALSE(step.hole);
  EXPECT_EQ(book.label(h, 1), at(2, 0, 3));
  // And a registration's (a newer incarnation).
  run(book, ops(at(0, 0, 0, 2), at(1, 0, 0, 2), {4}), &step);
  EXPECT_TRUE(step.reset);
  EXPECT_EQ(book.label(h, 9), at(1, 0, 0, 2));
}

TEST(Coverage, AnEmptyNodeWaitsForCopiesOfWhatCameBeforeItsFirstSubBatch) {
  coverage_book book{slots};
  cover_step step;
  // This node knows nothing of the holder (it lost its disk); the sender is at 40.
  EXPECT_EQ(run(book, ops(at(40), at(41), {5}), &step), (std::vector<uint32_t>{5}));
  EXPECT_TRUE(step.reset); // implied: era (1, 0) is newer than nothing
  EXPECT_TRUE(step.hole);
  EXPECT_FALSE(book.label(h, 5).has_value());
  EXPECT_EQ(book.judge(h, 5, at(40), true, false), install_verdict::wait); // its op at 41
  EXPECT_EQ(book.judge(h, 6, at(40), true, false), install_verdict::install);
}

TEST(Coverage, AGainedSlotWaitsForACoveringSubBatchAndACopy) {
  coverage_book book{slots};
  std::vector<uint8_t> owned(slots, 1);
  owned[9] = 0;
  book.set_ownership(owned, std::vector<uint64_t>(slots, 0));
  run(book, drop(at(0)));
  run(book, ops(at(0), at(5), {1}));
  // Epoch 2 gives this node slot 9.
  owned[9] = 1;
  std::vector<uint64_t> since(slots, 0);
  since[9] = 2;
  book.set_ownership(owned, since);
  EXPECT_FALSE(book.label(h, 9).has_value());
  EXPECT_TRUE(book.cover(h, 9).uncovered);
  // A sub-batch still split under epoch 1 carries none of slot 9's ops.
  EXPECT_EQ(run(book, ops(at(5), at(7), {1, 9}, 1)), (std::vector<uint32_t>{1}));
  EXPECT_TRUE(book.cover(h, 9).uncovered);
  // A copy before any covering sub-batch: the slot holds it, frozen there.
  ASSERT_EQ(book.judge(h, 9, at(6), true, false), install_verdict::install);
  book.installed(h, 9, at(6));
  EXPECT_EQ(book.label(h, 9), at(6));
  // Epoch 2's first sub-batch continues from 7: the copy (6) stops short.
  EXPECT_EQ(run(book, ops(at(7), at(8), {9}, 2)), (std::vector<uint32_t>{9}));
  EXPECT_FALSE(book.label(h, 9).has_value());
  EXPECT_EQ(book.judge(h, 9, at(7), true, false), install_verdict::wait); // its op at 8
  ASSERT_EQ(book.judge(h, 9, at(8), true, false), install_verdict::install);
  book.installed(h, 9, at(8));
  EXPECT_EQ(book.label(h, 9), at(8));
  EXPECT_EQ(book.find(h)->exceptions, 0u);
}

TEST(Coverage, AGainedSlotIsBlankForHoldersThisNodeNeverHeardOf) {
  coverage_book book{slots};
  std::vector<uint8_t> owned(slots, 1);
  owned[9] = 0;
  book.set_ownership(owned, std::vector<uint64_t>(slots, 0));
  EXPECT_FALSE(book.slot_pending(9));
  owned[9] = 1;
  std::vector<uint64_t> since(slots, 0);
  since[9] = 2;
  book.set_ownership(owned, since); // no holder known here at all
  EXPECT_TRUE(book.blank(9));
  EXPECT_TRUE(book.slot_pending(9));
  EXPECT_FALSE(book.slot_pending(8));
  book.settle(9); // a whole previous owner's copy came
  EXPECT_FALSE(book.slot_pending(9));
  // A node back empty: every slot, until copies or the refill settle them.
  book.blank_all();
  EXPECT_TRUE(book.slot_pending(3));
  book.settle_all();
  EXPECT_FALSE(book.slot_pending(3));
  // A slot given away while blank is nothing this node waits for, but its
  // copy is still nobody's to take whole.
  book.blank_all();
  owned[3] = 0;
  since[3] = 0;
  book.set_ownership(owned, since);
  EXPECT_TRUE(book.blank(3));
  EXPECT_FALSE(book.slot_pending(3));
  EXPECT_TRUE(book.slot_pending(4));
}

/// A standby that owned nothing until epoch 1 gave it slot 9.
void gain_slot_9_as_a_standby(coverage_book& book) {
  std::vector<uint8_t> owned(slots, 0);
  book.set_ownership(owned, std::vector<uint64_t>(slots, 0));
  owned[9] = 1;
  std::vector<uint64_t> since(slots, 0);
  since[9] = 1;
  book.set_ownership(owned, since);
}

TEST(Coverage, AHolderFirstHeardOfAfterAGainLacksWhatWentToThePreviousOwners) {
  // The holder registered before the gain: its drop at 0 and ops up to 5
  // went to the owners of then.
  coverage_book book{slots};
  gain_slot_9_as_a_standby(book);
  // The home's first sub-batch for this node continues from the drop (all it
  // ever sent here) under the placement that began at 5.
  auto first = ops(at(0), at(6), {9}, 1);
  first.placement_since = at(5);
  cover_step step;
  EXPECT_EQ(run(book, first, &step), (std::vector<uint32_t>{9}));
  EXPECT_TRUE(step.reset); // implied: this node never got the drop
  EXPECT_FALSE(book.label(h, 9).has_value()) << "ops 1..5 of slot 9 are not here";
  EXPECT_TRUE(book.slot_pending(9));
  // A previous owner's copy at 6 has them and this node's op: it is taken.
  EXPECT_EQ(book.judge(h, 9, at(6), true, false), install_verdict::install);
  EXPECT_EQ(book.judge(h, 9, at(4), true, false), install_verdict::wait);
  book.installed(h, 9, at(6));
  EXPECT_EQ(book.label(h, 9), at(6));
}

TEST(Coverage, AHolderFirstHeardOfUnderAPlacementOlderThanItsDropFollows) {
  coverage_book book{slots};
  gain_slot_9_as_a_standby(book);
  book.settle(9);
  // Registered after the placement began: every op of its stream that
  // touched slot 9 was sent here.
  auto first = ops(at(0, 0, 0, 2), at(3, 0, 0, 2), {9}, 1);
  first.placement_since = at(7);
  run(book, first);
  EXPECT_EQ(book.label(h, 9), at(3, 0, 0, 2));
}

TEST(Coverage, AFollowingSlotNotCoveredBySubBatchesKeepsItsLabel) {
  coverage_book book{slots};
  std::vector<uint8_t> owned(slots, 1);
  std::vector<uint64_t> since(slots, 0);
  book.set_ownership(owned, since);
  run(book, drop(at(0)));
  run(book, ops(at(0), at(5), {1}, 2));
  since[9] = 3; // gained at 3, resolved, then an epoch-2 straggler comes
  book.set_ownership(owned, since);
  book.installed(h, 9, at(5));
  EXPECT_EQ(book.label(h, 9), at(5));
  run(book, ops(at(5), at(6), {1}, 2));
  EXPECT_EQ(book.label(h, 9), at(5)); // not at 6: that sub-batch did not cover it
  EXPECT_EQ(book.label(h, 1), at(6));
}

TEST(Coverage, ReplaySkipsTheSlotsWhoseSnapshotIsNewer) {
  coverage_book book{slots};
  run(book, drop(at(0)));
  run(book, ops(at(0), at(5), {1}));
  std::vector<uint64_t> stamps(slots, 0);
  stamps[2] = 100; // slot 2's snapshot holds records up to 100
  book.set_replay(&stamps, 50);
  cover_step step;
  const auto applied = run(book, ops(at(8), at(9), {1, 2}), &step); // a hole in the log
  book.set_replay(nullptr, 0);
  EXPECT_TRUE(step.hole);
  EXPECT_EQ(applied, (std::vector<uint32_t>{1}));
  EXPECT_FALSE(book.label(h, 1).has_value());
  EXPECT_EQ(book.label(h, 2), at(9)); // its snapshot's state stands
}

} // namespace
} // namespace lmcc::actors
