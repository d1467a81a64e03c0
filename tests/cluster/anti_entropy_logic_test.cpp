// anti_entropy_logic: which slots a node asks a peer's copy of, and when a
// holder's entries are lost on every copy.
#include "cluster/anti_entropy_logic.hpp"

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

TEST(uncertainty_ledger, a_pair_left_uncertain_by_copies_over_four_rounds_is_lost_once) {
  uncertainty_ledger ledger;
  auto all_answer = [](uint32_t) { return true; };
  auto uncertain = [](uint32_t) { return true; };
  for (uint64_t round = 1; round <= 3; ++round) {
    ledger.after_copy(round, 9, {{1234, 77}});
    EXPECT_TRUE(ledger.close_round(4, all_answer, uncertain).empty()) << round;
  }
  ledger.after_copy(4, 9, {{1234, 77}});
  const auto lost = ledger.close_round(4, all_answer, uncertain);
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_EQ(lost[0].slot, 9u);
  EXPECT_EQ(lost[0].worker_uid, 1234u);
  EXPECT_EQ(lost[0].holder, 77u);
  EXPECT_EQ(lost[0].rounds, 4u);
  ledger.after_copy(5, 9, {{1234, 77}});
  EXPECT_TRUE(ledger.close_round(4, all_answer, uncertain).empty()); // counting starts over
}

TEST(uncertainty_ledger, rounds_that_did_not_ask_for_the_slot_neither_settle_nor_restart_it) {
  // More uncertain slots than a round may ask for: slot 9 is asked every
  // third round, and is lost all the same.
  uncertainty_ledger ledger;
  auto all_answer = [](uint32_t) { return true; };
  auto uncertain = [](uint32_t) { return true; };
  ledger.after_copy(1, 9, {{1, 77}});
  EXPECT_TRUE(ledger.close_round(4, all_answer, uncertain).empty());
  ledger.after_copy(4, 9, {{1, 77}});
  EXPECT_EQ(ledger.close_round(4, all_answer, uncertain).size(), 1u);
}

TEST(uncertainty_ledger, a_copy_that_covers_the_pair_or_a_slot_resolved_settles_it) {
  uncertainty_ledger ledger;
  auto all_answer = [](uint32_t) { return true; };
  ledger.after_copy(1, 9, {{1, 77}, {2, 88}});
  ledger.after_copy(2, 9, {{2, 88}}); // holder 77 covered by the second copy
  EXPECT_EQ(ledger.size(), 1u);
  EXPECT_TRUE(ledger.close_round(1, all_answer, [](uint32_t) { return false; }).empty());
  EXPECT_EQ(ledger.size(), 0u); // the slot is whole now
  // An owner that does not answer may hold the entries: wait for it.
  ledger.after_copy(3, 9, {{1, 77}});
  ledger.after_copy(4, 9, {{1, 77}});
  EXPECT_TRUE(ledger
                  .close_round(
                      2, [](uint32_t) { return false; }, [](uint32_t) { return true; })
                  .empty());
  EXPECT_EQ(ledger.size(), 1u);
  EXPECT_EQ(ledger.close_round(2, all_answer, [](uint32_t) { return true; }).size(), 1u);
}

// A holder whose entries came only with copies (owners that lost their
// disks) is not tied to a worker in the shard: its doubt used to end with
// nobody asked, round after round, the slot uncertain for good.
TEST(uncertainty_ledger, an_untied_holders_lost_pair_is_asked_of_the_directorys_worker) {
  using lost_pair = uncertainty_ledger::lost_pair;
  const std::vector<lost_pair> lost{{3, 0, 70, 4}, {54, 0, 70, 4}, {9, 11, 80, 4}, {12, 0, 90, 4}};
  const auto by_worker = lost_by_worker(lost, [](uint64_t holder) -> uint64_t {
    return holder == 70 ? 7 : 0; // 90: no registered worker has it
  });
  ASSERT_EQ(by_worker.size(), 3u);
  ASSERT_EQ(by_worker.at(7).size(), 2u);
  EXPECT_EQ(by_worker.at(7)[0].slot, 3u);
  EXPECT_EQ(by_worker.at(7)[1].worker_uid, 7u);
  EXPECT_EQ(by_worker.at(11).size(), 1u);
  ASSERT_EQ(by_worker.at(0).size(), 1u);
  EXPECT_EQ(by_worker.at(0)[0].holder, 90u);
  // Without the directory's word they stay unasked.
  EXPECT_EQ(lost_by_worker(lost, {}).at(0).size(), 3u);
}

TEST(blank_slot_ledger, blank_after_every_other_owners_copy_over_four_rounds_is_lost_once) {
  blank_slot_ledger ledger;
  auto others = [](uint32_t) { return uint64_t{0b110}; }; // owners 1 and 2 besides this node
  auto all_answer = [](uint32_t) { return true; };
  auto uncertain = [](uint32_t) { return true; };
  ledger.after_copy(1, 5, 1, true);
  ledger.after_copy(6, 5, 1, true); // asked again five rounds on (many uncertain slots)
  EXPECT_TRUE(ledger.close_round(4, others, all_answer, uncertain).empty()); // owner 2 unheard
  ledger.after_copy(7, 5, 2, true);
  EXPECT_EQ(ledger.close_round(4, others, all_answer, uncertain), (std::vector<uint32_t>{5}));
  EXPECT_EQ(ledger.size(), 0u);
  // A whole copy taken, or the slot no longer uncertain, settles it.
  ledger.after_copy(8, 5, 1, true);
  ledger.after_copy(9, 5, 2, false);
  EXPECT_EQ(ledger.size(), 0u);
  ledger.after_copy(10, 6, 1, true);
  EXPECT_TRUE(ledger.close_round(1, others, all_answer, [](uint32_t) { return false; }).empty());
  EXPECT_EQ(ledger.size(), 0u);
}

} // namespace
} // namespace lmcc::actors
