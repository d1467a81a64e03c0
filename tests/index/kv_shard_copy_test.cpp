// kv_shard_core's copies between owners with a real store: a stale entity's
// sub-batch, a sub-batch that does not continue a copy, copies taken holder by
// holder, a node back empty waiting for a whole owner's copy, what of it
// outlives a restart (docs/convergence.md), and the check a copy from another
// node passes before it is installed. Linked with lmcc_index only.
#include "index/kv_shard_core.hpp"
#include "tests/index/shard_test_util.hpp"

#include <gtest/gtest.h>

namespace lmcc::actors {
namespace {

using namespace test;

/// `f` as a node back with an empty disk: every slot blank, owning what
/// `owned` says (null: every slot).
void back_empty(shard_fixture& f, const std::vector<uint8_t>* owned = nullptr) {
  shard_start_state start;
  start.covers = std::make_shared<coverage_book>(64);
  if (owned)
    start.covers->set_ownership(*owned, std::vector<uint64_t>(64, 0));
  start.covers->blank_all(); // its disk was replaced
  f.core = std::make_unique<kv_shard_core>(f.opts, f.index, f.store, std::move(start));
}

TEST(kv_shard_core, a_sub_batch_older_than_the_copy_is_a_stale_entity_and_is_not_applied) {
  shard_fixture f;
  const auto k = keys_in(2, 3, 64);
  const stream_pos start{5, 0, 0, 0};
  f.core->apply(sb(1, 1, h1, {{k[0], true}}).incarnation(5).pos(start, {5, 0, 10, 0}));
  f.core->apply(sb(1, 2, h1, {{k[0], false}}).incarnation(5).pos({5, 0, 10, 0}, {5, 0, 11, 0}));
  // A frozen node's copy of the entity replays the admit it still held.
  f.core->apply(
      sb(2, 1, h1, {{k[0], true}, {k[1], true}}).incarnation(5).pos(start, {5, 0, 10, 0}));
  auto acks = f.commit();
  EXPECT_EQ(acks, (absl::flat_hash_map<uint64_t, uint64_t>{{1, 2}, {2, 1}})); // acked all the same
  EXPECT_EQ(f.core->counters().fenced, 1u);
  EXPECT_FALSE(f.index->read().holds(k[0], h1));
  EXPECT_FALSE(f.index->read().holds(k[1], h1));
  EXPECT_EQ(f.core->covers().label(h1, 2), (stream_pos{5, 0, 11, 0}));
  // Frames the worker sent out of order (a smaller seq after a larger one)
  // get the next position from the home, and are applied.
  f.core->apply(sb(1, 3, h1, {{k[1], true}}).incarnation(5).pos({5, 0, 11, 0}, {5, 0, 11, 1}));
  f.commit();
  EXPECT_TRUE(f.index->read().holds(k[1], h1));
  // A full sync is an era of its own: its drop empties the holder first.
  f.core->apply(sb(3, 1, h1).incarnation(5).drop().pos({5, 9, 0, 0}, {5, 9, 0, 0}));
  f.core->apply(sb(3, 2, h1, {{k[2], true}}).incarnation(5).pos({5, 9, 0, 0}, {5, 9, 0, 1}));
  f.commit();
  EXPECT_FALSE(f.index->read().holds(k[1], h1));
  EXPECT_TRUE(f.index->read().holds(k[2], h1));
}

TEST(kv_shard_core, a_sub_batch_that_does_not_continue_the_copy_leaves_it_uncertain) {
  shard_fixture f;
  const auto k = keys_in(2, 2, 64);
  const stream_pos start{5, 0, 0, 0};
  f.core->apply(sb(1, 1, h1, {{k[0], true}}).incarnation(5).pos(start, {5, 0, 10, 0}));
  // The sender had sent this node up to 12; 11 and 12 never came.
  f.core->apply(sb(1, 2, h1, {{k[1], true}}).incarnation(5).pos({5, 0, 12, 0}, {5, 0, 13, 0}));
  f.commit();
  EXPECT_EQ(f.core->counters().holes, 1u);
  EXPECT_TRUE(f.index->read().holds(k[1], h1)); // applied, but not trusted
  EXPECT_FALSE(f.core->covers().label(h1, 2).has_value());
  EXPECT_TRUE(f.index->uncertain(2));
  EXPECT_TRUE(f.index->uncertain(40)); // every owned slot may lack 11 and 12
  // Another owner's copy at 13 covers the gap: slot 2 is certain again.
  slot_copy copy{2, true, {holder_slot_copy{h1, 0, true, {5, 0, 13, 0}, {k[0]}}}};
  const auto outcome = f.core->install(copy);
  EXPECT_EQ(outcome.installed, 1u);
  EXPECT_TRUE(outcome.unresolved.empty());
  EXPECT_TRUE(f.index->read().holds(k[0], h1));
  EXPECT_FALSE(f.index->read().holds(k[1], h1)); // the copy says it is gone
  EXPECT_EQ(f.core->covers().label(h1, 2), (stream_pos{5, 0, 13, 0}));
  EXPECT_FALSE(f.index->uncertain(2));
  EXPECT_TRUE(f.index->uncertain(40));
}

TEST(kv_shard_core, a_copy_is_taken_holder_by_holder_where_it_is_newer) {
  shard_fixture f;
  const auto k = keys_in(5, 4, 64);
  f.core->apply(sb(1, 1, h1, {{k[0], true}}).incarnation(1).pos({1, 0, 0, 0}, {1, 0, 7, 0}));
  f.core->apply(sb(2, 1, h2, {{k[1], true}}).incarnation(1).pos({1, 0, 0, 0}, {1, 0, 9, 0}));
  f.commit();
  // The other owner is ahead for h1 (it evicted k0, admitted k2) and behind for h2.
  slot_copy copy{5,
                 true,
                 {holder_slot_copy{h1, 0, true, {1, 0, 8, 0}, {k[2]}},
                  holder_slot_copy{h2, 0, true, {1, 0, 3, 0}, {k[3]}}}};
  const auto outcome = f.core->install(copy);
  EXPECT_EQ(outcome.installed, 1u);
  EXPECT_FALSE(f.index->read().holds(k[0], h1));
  EXPECT_TRUE(f.index->read().holds(k[2], h1));
  EXPECT_TRUE(f.index->read().holds(k[1], h2)); // this node's is newer: kept
  EXPECT_FALSE(f.index->read().holds(k[3], h2));
  // The same copy again changes nothing; a copy with this node's own label
  // and other entries is a conflict only the worker can settle.
  EXPECT_EQ(f.core->install(copy).changed, 0u);
  slot_copy other{5, true, {holder_slot_copy{h2, uid_of(2), true, {1, 0, 9, 0}, {k[3]}}}};
  const auto conflict = f.core->install(other);
  ASSERT_EQ(conflict.conflicts.size(), 1u);
  EXPECT_EQ(conflict.conflicts[0].second, h2);
  EXPECT_TRUE(f.index->read().holds(k[1], h2)); // nothing taken
}

TEST(kv_shard_core, a_node_back_empty_waits_for_a_copy_of_an_owner_that_is_not_empty_too) {
  shard_fixture f;
  const auto k = keys_in(4, 2, 64);
  back_empty(f);
  EXPECT_TRUE(f.index->uncertain(4));
  // Another empty node's copy says nothing of the holders it never heard of.
  slot_copy empty{4, true, {}};
  empty.complete = false;
  const auto still = f.core->install(empty);
  EXPECT_TRUE(still.still_blank); // anti-entropy counts the rounds of that
  EXPECT_TRUE(f.index->uncertain(4));
  // A whole owner's copy lists every holder of the slot: all it lacked.
  slot_copy whole{4, true, {holder_slot_copy{h1, 0, true, {1, 0, 9, 0}, {k[0], k[1]}}}};
  const auto taken = f.core->install(whole);
  EXPECT_EQ(taken.installed, 1u);
  EXPECT_FALSE(taken.still_blank);
  EXPECT_FALSE(f.index->uncertain(4));
  EXPECT_TRUE(f.index->read().holds(k[1], h1));
  // Slots nobody holds any more stop waiting once the refill says so.
  EXPECT_TRUE(f.index->uncertain(5));
  f.core->settle(std::vector<uint32_t>{5});
  EXPECT_FALSE(f.index->uncertain(5));
  EXPECT_TRUE(f.index->uncertain(6));
  f.core->settle_all();
  EXPECT_FALSE(f.index->uncertain(6));
}

TEST(kv_shard_core, a_node_back_empty_offers_no_slot_whole_not_even_one_it_does_not_own) {
  // A standby back with an empty disk owned nothing, so it
  // had no blank slot; a membership change made it a previous owner of
  // slots whose other previous owner had lost its disk too, and the new
  // owners took its empty copies as whole ones: entries lost everywhere.
  std::vector<uint8_t> none(64, 0);
  std::vector<uint64_t> since(64, 0);
  shard_fixture back;
  back_empty(back, &none);                // a standby that owns nothing
  EXPECT_FALSE(back.index->uncertain(4)); // owned elsewhere: nothing it reads or waits for
  EXPECT_FALSE(back.core->copy_of(4).complete);
  // Joint with a change: it is a previous owner of slot 4, still blank.
  auto owned = none;
  owned[4] = 1;
  back.core->set_ownership(owned, since);
  EXPECT_TRUE(back.index->uncertain(4));
  EXPECT_FALSE(back.core->copy_of(4).complete);
  // The node that gains slot 4 takes that copy and stays blank.
  shard_fixture gains;
  gains.core->set_ownership(none, since);
  auto gained_since = since;
  gained_since[4] = 1;
  gains.core->set_ownership(owned, gained_since);
  EXPECT_TRUE(gains.index->uncertain(4));
  const auto outcome = gains.core->install(back.core->copy_of(4));
  EXPECT_TRUE(outcome.still_blank);
  EXPECT_TRUE(gains.index->uncertain(4));
}

TEST(kv_shard_core, a_slot_given_away_and_emptied_offers_no_whole_copy_when_asked_again) {
  // A node dropped a slot it no longer owned, a later change
  // gave the slot back to it while another node came back empty; the empty
  // node's refill took the dropped copy, still labeled as following the
  // stream, as whole: a prompt answered short.
  shard_fixture f;
  const auto k = keys_in(4, 2, 64);
  f.core->apply(sb(1, 1, h1, {{k[0], true}, {k[1], true}}).incarnation(1));
  f.commit();
  EXPECT_TRUE(f.core->copy_of(4).complete);
  std::vector<uint8_t> owned(64, 1);
  owned[4] = 0;
  f.core->set_ownership(owned, std::vector<uint64_t>(64, 0));
  f.core->repair_slot(4, {}); // the mover's drop, after the grace
  EXPECT_FALSE(f.index->read().holds(k[0], h1));
  EXPECT_FALSE(f.core->copy_of(4).complete);
  EXPECT_FALSE(f.index->uncertain(4)); // not owned: nothing it reads or waits for
  owned[4] = 1;
  std::vector<uint64_t> since(64, 0);
  since[4] = 2;
  f.core->set_ownership(owned, since); // back: blank until a whole copy comes
  EXPECT_TRUE(f.index->uncertain(4));
  EXPECT_FALSE(f.core->copy_of(4).complete);
}

TEST(kv_shard_core, a_blank_slot_takes_a_whole_copy_at_its_own_label_and_waits_for_a_newer_one) {
  // A node back empty applied the worker's next op, then
  // its refill brought the other owner's copy at that same position; the
  // parts were taken for a conflict, left out, and the slot was settled with
  // only the op since the restart: a lookup read it short.
  shard_fixture f;
  const auto k = keys_in(4, 3, 64);
  back_empty(f);
  f.core->apply(sb(1, 1, h1, {{k[2], true}}).incarnation(1).pos({1, 0, 4, 0}, {1, 0, 5, 0}));
  f.commit();
  // Another owner's whole copy, behind this node's op: not taken, still blank.
  slot_copy behind{4, true, {holder_slot_copy{h1, 0, true, {1, 0, 4, 0}, {k[0], k[1]}}}};
  auto outcome = f.core->install(behind);
  EXPECT_TRUE(outcome.still_blank);
  EXPECT_TRUE(f.index->uncertain(4));
  // At this node's label: the whole of it.
  slot_copy at{4, true, {holder_slot_copy{h1, 0, true, {1, 0, 5, 0}, {k[0], k[1], k[2]}}}};
  outcome = f.core->install(at);
  EXPECT_TRUE(outcome.conflicts.empty());
  EXPECT_EQ(outcome.installed, 1u);
  EXPECT_FALSE(outcome.still_blank);
  EXPECT_FALSE(f.index->uncertain(4));
  for (uint64_t key : k)
    EXPECT_TRUE(f.index->read().holds(key, h1));
}

TEST(kv_shard_core, a_copy_outlives_a_restart_and_so_does_an_uncertain_slot) {
  shard_fixture f;
  const auto k = keys_in(3, 2, 64);
  f.core->apply(sb(1, 1, h1, {{k[0], true}}).incarnation(1).pos({1, 0, 0, 0}, {1, 0, 4, 0}));
  f.core->apply(sb(1, 2, h1, {{k[1], true}}).incarnation(1).pos({1, 0, 6, 0}, {1, 0, 7, 0}));
  f.commit();
  ASSERT_TRUE(f.index->uncertain(3));
  slot_copy copy{3, true, {holder_slot_copy{h1, 0, true, {1, 0, 7, 0}, {k[0], k[1]}}}};
  ASSERT_EQ(f.core->install(copy).installed, 1u);
  f.snapshot();
  auto r = f.restore();
  EXPECT_EQ(r.start.covers->label(h1, 3), (stream_pos{1, 0, 7, 0}));
  EXPECT_TRUE(r.start.covers->slot_pending(9)); // not copied yet: still waits
  EXPECT_FALSE(r.start.covers->slot_pending(3));
  // And without a snapshot since: the log replays on top of the snapshot.
  f.core->apply(sb(1, 3, h1, {{k[0], false}}).incarnation(1).pos({1, 0, 7, 0}, {1, 0, 8, 0}));
  f.commit();
  auto again = f.restore();
  EXPECT_EQ(again.start.covers->label(h1, 3), (stream_pos{1, 0, 8, 0}));
  EXPECT_FALSE(again.index->read().holds(k[0], h1));
  EXPECT_TRUE(again.start.covers->slot_pending(9));
}

TEST(slot_copy, a_copy_from_another_node_is_checked_before_it_is_installed) {
  const auto k = keys_in(3, 2, 64);
  const auto other = keys_in(4, 1, 64);
  const slot_copy good{3, true, {holder_slot_copy{h1, 0, true, {1, 0, 7, 0}, {k[0], k[1]}}}};
  EXPECT_EQ(check_slot_copy(good, 64), "");
  EXPECT_EQ(good.key_count(), 2u);
  EXPECT_EQ(check_slot_copy(slot_copy{3, false, {}}, 64), ""); // a blank owner's copy
  auto out_of_range = good;
  out_of_range.slot = 64;
  EXPECT_EQ(check_slot_copy(out_of_range, 64), "slot copy: slot 64 out of range");
  auto foreign_key = good;
  foreign_key.holders[0].keys.push_back(other[0]);
  EXPECT_EQ(check_slot_copy(foreign_key, 64),
            "slot copy: key " + std::to_string(other[0]) + " is not of slot 3");
  auto bad_holder = good;
  bad_holder.holders[0].holder = ~holder_id{0};
  EXPECT_EQ(check_slot_copy(bad_holder, 64),
            "slot copy: holder " + std::to_string(~uint64_t{0}) + " is not a holder id");
}

} // namespace
} // namespace lmcc::actors
