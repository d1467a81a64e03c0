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

} // namespace
} // namespace lmcc::actors
