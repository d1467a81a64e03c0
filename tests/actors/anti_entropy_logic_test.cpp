// anti_entropy_logic: a slot is repaired only when it differs the same way in
// two rounds, and only from the more senior owner. CAF-free.
#include "actors/anti_entropy_logic.hpp"

#if defined(CAF_VERSION)
#error "anti_entropy_logic pulls in CAF"
#endif

#include <gtest/gtest.h>

namespace lmcc::actors {
namespace {

TEST(anti_entropy, a_slot_that_differs_the_same_way_twice_is_repaired_once) {
  divergence_tracker t;
  const std::vector<uint32_t> slots{4, 9};
  EXPECT_TRUE(
      t.compare(1, slots, std::vector<uint64_t>{10, 20}, std::vector<uint64_t>{10, 21}).empty());
  EXPECT_EQ(t.differing(), 1u);
  EXPECT_EQ(t.compare(1, slots, std::vector<uint64_t>{10, 20}, std::vector<uint64_t>{10, 21}),
            std::vector<uint32_t>{9});
  EXPECT_EQ(t.differing(), 0u);
}

TEST(anti_entropy, a_slot_whose_digests_move_is_ingest_not_drift) {
  divergence_tracker t;
  const std::vector<uint32_t> slots{7};
  for (uint64_t round = 0; round < 5; ++round)
    EXPECT_TRUE(
        t.compare(2, slots, std::vector<uint64_t>{100 + round}, std::vector<uint64_t>{200 + round})
            .empty())
        << round;
  // Equal again: nothing is left to repair.
  EXPECT_TRUE(t.compare(2, slots, std::vector<uint64_t>{5}, std::vector<uint64_t>{5}).empty());
  EXPECT_EQ(t.differing(), 0u);
}

TEST(anti_entropy, peers_are_tracked_apart_and_forgotten) {
  divergence_tracker t;
  const std::vector<uint32_t> slots{3};
  t.compare(1, slots, std::vector<uint64_t>{1}, std::vector<uint64_t>{2});
  t.compare(2, slots, std::vector<uint64_t>{1}, std::vector<uint64_t>{3});
  EXPECT_EQ(t.differing(), 2u);
  t.forget(1);
  EXPECT_EQ(t.differing(), 1u);
  EXPECT_TRUE(t.compare(1, slots, std::vector<uint64_t>{1}, std::vector<uint64_t>{2}).empty());
}

TEST(anti_entropy, the_owner_up_longest_is_senior_and_only_one_side_copies) {
  EXPECT_TRUE(peer_is_senior(60'000, 2, 5'000, 0));  // this node restarted
  EXPECT_FALSE(peer_is_senior(5'000, 0, 60'000, 2)); // the other side of it
  // Started together: the lower index wins, on both sides alike.
  EXPECT_TRUE(peer_is_senior(10'000, 0, 10'400, 1));
  EXPECT_FALSE(peer_is_senior(10'400, 1, 10'000, 0));
}

TEST(anti_entropy, a_suspect_copy_gives_way_whatever_the_uptimes) {
  // Seed 1033: the frozen node has been up longest, yet its copy loses to
  // the restarted owner's, on both sides alike.
  const bool frozen_senior = true;
  EXPECT_TRUE(peer_copy_wins(false, false, /*own_suspect=*/true, false, !frozen_senior));
  EXPECT_FALSE(peer_copy_wins(false, false, false, /*peer_suspect=*/true, frozen_senior));
  // Both or neither suspect: seniority decides.
  EXPECT_TRUE(peer_copy_wins(false, false, true, true, true));
  EXPECT_FALSE(peer_copy_wins(false, false, false, false, false));
  // An owner that gained the slot in a membership change gives way first.
  EXPECT_FALSE(peer_copy_wins(false, /*peer_new=*/true, true, false, true));
  EXPECT_TRUE(peer_copy_wins(/*self_new=*/true, false, false, true, false));
}

TEST(anti_entropy, suspect_slots_travel_as_bits_beside_the_digests) {
  slot_suspects suspects{300, 2000};
  EXPECT_EQ(suspects.count(), 0u);
  const std::vector<uint64_t> asked{5, 70, 299, 1000}; // 1000: no such slot
  EXPECT_EQ(suspects.bits(asked), std::vector<uint64_t>{0});
  suspects.mark_all();
  EXPECT_EQ(suspects.count(), 300u);
  suspects.clear(70);
  const auto words = suspects.bits(asked);
  ASSERT_EQ(words.size(), 1u);
  EXPECT_TRUE(slot_suspects::bit(words, 0));
  EXPECT_FALSE(slot_suspects::bit(words, 1)); // cleared
  EXPECT_TRUE(slot_suspects::bit(words, 2));
  EXPECT_FALSE(slot_suspects::bit(words, 3)); // out of range: never suspect
  EXPECT_FALSE(slot_suspects::bit({}, 0));    // a peer that sends no bits
  std::vector<uint64_t> many(130);
  for (uint64_t i = 0; i < many.size(); ++i)
    many[i] = i;
  const auto wide = suspects.bits(many);
  ASSERT_EQ(wide.size(), 3u);
  EXPECT_TRUE(slot_suspects::bit(wide, 129));
  EXPECT_FALSE(slot_suspects::bit(wide, 70));
  EXPECT_EQ(suspects.count(), 299u);
}

TEST(anti_entropy, a_node_whose_tick_stood_still_marks_its_slots_before_answering) {
  slot_suspects suspects{8, 2000};
  EXPECT_FALSE(suspects.stood_still(50'000)); // no tick yet: a node starting
  suspects.ticked(50'000);
  EXPECT_FALSE(suspects.stood_still(51'000));
  EXPECT_FALSE(suspects.stood_still(52'000)); // the timeout itself is not a stall
  EXPECT_EQ(suspects.count(), 0u);
  // Thawed after 10 s: a digest answer comes before the tick runs again.
  EXPECT_TRUE(suspects.stood_still(60'000));
  EXPECT_EQ(suspects.count(), 8u);
  suspects.ticked(60'010);
  suspects.clear(3);
  EXPECT_FALSE(suspects.stood_still(60'020));
  EXPECT_EQ(suspects.count(), 7u);
}

} // namespace
} // namespace lmcc::actors
