// handoff: merging the marks several sources give for a worker, and the
// takeover plan a new home starts the worker from (the restart rules).
// CAF-free: linked with lmcc_registry.
#include "registry/handoff.hpp"

#if defined(CAF_VERSION)
#error "handoff pulls in CAF"
#endif

#include <gtest/gtest.h>

namespace lmcc::actors {
namespace {

using persistence::seq_mark;
using persistence::seq_state;

location_mark tracking(std::string loc, uint64_t seq, uint64_t inc = 5) {
  return {std::move(loc), inc, seq_mark{seq_state::tracking, seq}};
}

persistence::worker_row row(uint64_t incarnation = 5) {
  // Built in one expression: assigning the short instance id member by
  // member trips GCC 12's -Wrestrict false positive at -O3.
  const std::string instance{"A"};
  return persistence::worker_row{worker_uid(instance, msg::wire_int{0}),
                                 instance,
                                 msg::wire_int{0},
                                 {},
                                 msg::wire_int{0},
                                 std::nullopt,
                                 0,
                                 0,
                                 false,
                                 0,
                                 0,
                                 incarnation};
}

TEST(handoff, merge_keeps_the_highest_tracked_seq_per_location) {
  auto merged = merge_marks({{tracking("cpu", 10), tracking("disk", 3)}, {tracking("cpu", 12)}});
  ASSERT_EQ(merged.size(), 2u);
  EXPECT_EQ(merged[0], tracking("cpu", 12));
  EXPECT_EQ(merged[1], tracking("disk", 3));
}

TEST(handoff, merge_prefers_a_newer_incarnation_and_then_a_mark_that_needs_a_resync) {
  auto merged = merge_marks({{tracking("cpu", 900, 4)}, {tracking("cpu", 2, 5)}});
  EXPECT_EQ(merged.at(0), tracking("cpu", 2, 5));
  const location_mark syncing{"cpu", 5, seq_mark{seq_state::syncing, 0}};
  merged = merge_marks({{tracking("cpu", 50)}, {syncing}});
  EXPECT_EQ(merged.at(0), syncing);
  const location_mark resynced{"cpu", 5, seq_mark{seq_state::resynced, 0}};
  const location_mark none{"cpu", 5, seq_mark{}};
  EXPECT_EQ(merge_marks({{none}, {resynced}}).at(0), resynced);
  EXPECT_EQ(merge_marks({{resynced}, {tracking("cpu", 1)}}).at(0), tracking("cpu", 1));
}

TEST(handoff, a_takeover_continues_tracked_locations_and_checks_their_next_op) {
  auto w = takeover_plan(row(), {tracking("cpu", 41)}, 100.0);
  EXPECT_EQ(w.last_seq.at("cpu"), 41u);
  EXPECT_EQ(w.expected_next.at("cpu"), std::optional<uint64_t>{42});
  EXPECT_TRUE(w.resync_reason.empty());
  EXPECT_EQ(w.record.locations, std::vector<std::string>{"cpu"});
}

TEST(handoff, a_sync_cut_short_by_the_move_asks_for_it_again) {
  auto w = takeover_plan(row(), {{"cpu", 5, seq_mark{seq_state::syncing, 0}}}, 100.0);
  EXPECT_FALSE(w.resync_reason.empty());
}

TEST(handoff, marks_of_an_older_registration_do_not_continue) {
  auto w = takeover_plan(row(6), {tracking("cpu", 41, 5)}, 100.0);
  EXPECT_FALSE(w.last_seq.contains("cpu"));
  EXPECT_FALSE(w.expected_next.contains("cpu")); // so its next op must start at 0
}

TEST(handoff, no_marks_at_all_means_every_location_starts_over) {
  auto w = takeover_plan(row(), {}, 100.0);
  EXPECT_TRUE(w.last_seq.empty());
  EXPECT_TRUE(w.expected_next.empty());
  EXPECT_TRUE(w.resync_reason.empty());
}

} // namespace
} // namespace lmcc::actors
