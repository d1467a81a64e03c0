// anti_entropy_logic: which slots a node asks a peer's copy of, and when a
// holder's entries are lost on every copy.
#include "actors/anti_entropy_logic.hpp"

#include <gtest/gtest.h>

namespace lmcc::actors {
namespace {

TEST(anti_entropy, a_slot_that_differs_the_same_way_twice_is_repaired_once) {
  divergence_tracker t;
  const std::vector<uint32_t> slots{3, 4};
  EXPECT_TRUE(
      t.compare(1, slots, std::vector<uint64_t>{1, 2}, std::vector<uint64_t>{9, 2}).empty());
  EXPECT_EQ(t.compare(1, slots, std::vector<uint64_t>{1, 2}, std::vector<uint64_t>{9, 2}),
            (std::vector<uint32_t>{3}));
  // Repaired: the same difference again starts over.
  EXPECT_TRUE(
      t.compare(1, slots, std::vector<uint64_t>{1, 2}, std::vector<uint64_t>{9, 2}).empty());
}

TEST(anti_entropy, a_slot_whose_digests_move_is_ingest_not_drift) {
  divergence_tracker t;
  const std::vector<uint32_t> slots{3};
  for (uint64_t i = 0; i < 5; ++i)
    EXPECT_TRUE(
        t.compare(1, slots, std::vector<uint64_t>{i}, std::vector<uint64_t>{i + 100}).empty());
  EXPECT_EQ(t.differing(), 1u);
  EXPECT_TRUE(t.compare(1, slots, std::vector<uint64_t>{7}, std::vector<uint64_t>{7}).empty());
  EXPECT_EQ(t.differing(), 0u);
}

TEST(anti_entropy, peers_are_tracked_apart_and_forgotten) {
  divergence_tracker t;
  const std::vector<uint32_t> slots{3};
  t.compare(1, slots, std::vector<uint64_t>{1}, std::vector<uint64_t>{2});
  t.compare(2, slots, std::vector<uint64_t>{1}, std::vector<uint64_t>{2});
  t.forget(1);
  EXPECT_TRUE(t.compare(1, slots, std::vector<uint64_t>{1}, std::vector<uint64_t>{2}).empty());
  EXPECT_EQ(t.compare(2, slots, std::vector<uint64_t>{1}, std::vector<uint64_t>{2}),
            (std::vector<uint32_t>{3}));
}

TEST(anti_entropy, flags_travel_as_bit_words_beside_the_digests) {
  const std::vector<uint64_t> slots{5, 70, 200};
  const auto words = flag_words(slots, [](uint64_t s) { return s == 70; });
  ASSERT_EQ(words.size(), 1u);
  EXPECT_FALSE(flag_bit(words, 0));
  EXPECT_TRUE(flag_bit(words, 1));
  EXPECT_FALSE(flag_bit(words, 2));
  EXPECT_FALSE(flag_bit({}, 1)); // a peer that sent none
  EXPECT_EQ(flag_word_count(65), 2u);
}

TEST(uncertainty_ledger, a_pair_uncertain_every_round_while_the_owners_answer_is_lost_once) {
  uncertainty_ledger ledger;
  auto all_answer = [](uint32_t) { return true; };
  for (uint64_t round = 1; round <= 3; ++round) {
    ledger.unresolved(round, 9, 1234, 77);
    EXPECT_TRUE(ledger.close_round(round, 4, all_answer).empty()) << round;
  }
  ledger.unresolved(4, 9, 1234, 77);
  const auto lost = ledger.close_round(4, 4, all_answer);
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_EQ(lost[0].slot, 9u);
  EXPECT_EQ(lost[0].worker_uid, 1234u);
  EXPECT_EQ(lost[0].holder, 77u);
  EXPECT_EQ(lost[0].rounds, 4u);
  ledger.unresolved(5, 9, 1234, 77);
  EXPECT_TRUE(ledger.close_round(5, 4, all_answer).empty()); // counting starts over
}

TEST(uncertainty_ledger, a_round_without_doubt_or_with_an_owner_away_starts_over) {
  uncertainty_ledger ledger;
  ledger.unresolved(1, 9, 1, 77);
  ledger.close_round(1, 2, [](uint32_t) { return true; });
  // Round 2 asked nobody (or the copy covered it): settled.
  EXPECT_TRUE(ledger.close_round(2, 2, [](uint32_t) { return true; }).empty());
  EXPECT_EQ(ledger.size(), 0u);
  // An owner that does not answer may hold the entries: wait for it.
  ledger.unresolved(3, 9, 1, 77);
  ledger.unresolved(4, 9, 1, 77);
  EXPECT_TRUE(ledger.close_round(4, 2, [](uint32_t) { return false; }).empty());
  EXPECT_EQ(ledger.size(), 1u);
  ledger.unresolved(5, 9, 1, 77);
  EXPECT_EQ(ledger.close_round(5, 2, [](uint32_t) { return true; }).size(), 1u);
}

} // namespace
} // namespace lmcc::actors
