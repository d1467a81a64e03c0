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

TEST(peer_lag_hints, a_hint_is_per_peer_and_slot_and_ends_when_cleared) {
  peer_lag_hints hints{128};
  const std::vector<uint64_t> slots{3, 70, 500}; // 500: beyond the slot count
  EXPECT_EQ(hints.add("n1", "n3", slots), 2u);
  EXPECT_EQ(hints.add("n1", "n3", std::vector<uint64_t>{3}), 0u); // already marked
  EXPECT_TRUE(hints.lagging("n1", 3));
  EXPECT_TRUE(hints.lagging("n1", 70));
  EXPECT_FALSE(hints.lagging("n2", 3)); // another peer's copies are not hinted
  EXPECT_EQ(hints.count(), 2u);
  // As a digest answer carries them: bit i for the i-th slot asked about.
  const std::vector<uint64_t> asked{1, 3, 5, 70};
  EXPECT_EQ(hints.bits("n1", asked), std::vector<uint64_t>{0b1010});
  EXPECT_TRUE(hints.bits("n2", asked).empty());
  hints.clear("n1", 3);
  EXPECT_FALSE(hints.lagging("n1", 3));
  hints.clear("n1", 70);
  EXPECT_TRUE(hints.bits("n1", asked).empty()); // none left: no words
  EXPECT_EQ(hints.count(), 0u);
}

TEST(peer_lag_hints, a_home_that_caught_the_peer_up_ends_only_its_own_hints) {
  peer_lag_hints hints{128};
  hints.add("n1", "n3", std::vector<uint64_t>{3, 4});
  hints.add("n1", "n2", std::vector<uint64_t>{4, 5});
  hints.clear_source("n1", "n3"); // n3's queue reached n1; n2's did not yet
  EXPECT_FALSE(hints.lagging("n1", 3));
  EXPECT_TRUE(hints.lagging("n1", 4));
  EXPECT_TRUE(hints.lagging("n1", 5));
  hints.clear("n1", 4); // equal digests end every home's hint of the slot
  EXPECT_FALSE(hints.lagging("n1", 4));
  EXPECT_EQ(hints.count(), 1u);
}

TEST(peer_lag_hints, what_is_saved_on_each_change_loads_back_after_a_restart) {
  std::vector<std::string> saved;
  {
    peer_lag_hints hints{4096};
    hints.set_save([&](const std::string& text) { saved.push_back(text); });
    hints.add("n1", "n3", std::vector<uint64_t>{7, 4095});
    hints.add("n2", "n3", std::vector<uint64_t>{12});
    hints.add("n2", "n3", std::vector<uint64_t>{12}); // no change, nothing saved
    hints.clear("n1", 7);
    hints.clear("n1", 7);
    hints.clear_source("n2", "n1"); // none from n1: no change
  }
  ASSERT_EQ(saved.size(), 3u);
  peer_lag_hints restarted{4096};
  // A torn or foreign line is skipped, the rest is read.
  EXPECT_EQ(restarted.load_text(saved.back() + "n4 n3 12 x 13\nn5\n\n"), 3u);
  EXPECT_FALSE(restarted.lagging("n1", 7));
  EXPECT_TRUE(restarted.lagging("n1", 4095));
  EXPECT_TRUE(restarted.lagging("n2", 12));
  EXPECT_TRUE(restarted.lagging("n4", 12));
  EXPECT_FALSE(restarted.lagging("n4", 13)); // after the bad field
  restarted.clear_source("n1", "n3");        // sources survive the restart too
  EXPECT_FALSE(restarted.lagging("n1", 4095));
}

} // namespace
} // namespace lmcc::actors
