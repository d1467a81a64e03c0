// restart_race: a renewal proves lost frames only when an older
// incarnation's entity saw a seq run start within the window, in either
// order of arrival; time is passed in.
#include "cluster/restart_race.hpp"

#include <gtest/gtest.h>

namespace lmcc::actors {
namespace {

constexpr uint64_t window = 30'000;

TEST(restart_race, a_start_seen_by_the_old_entity_then_its_renewal_is_a_proof) {
  restart_race race{window};
  EXPECT_FALSE(race.on_seq_start(7, 5, 1'000));
  EXPECT_TRUE(race.on_renewed(7, 6, 1'050));
  EXPECT_EQ(race.tracked(), 0u); // one proof, asked once
  EXPECT_FALSE(race.on_renewed(7, 6, 1'060));
}

TEST(restart_race, a_start_reported_after_the_renewal_is_a_proof_too) {
  // The old actor's report waited in the directory's mailbox behind the renewal.
  restart_race race{window};
  EXPECT_FALSE(race.on_renewed(7, 6, 1'000));
  EXPECT_TRUE(race.on_seq_start(7, 5, 1'010));
  EXPECT_EQ(race.tracked(), 0u);
}

TEST(restart_race, the_new_entitys_own_start_proves_nothing) {
  restart_race race{window};
  EXPECT_FALSE(race.on_renewed(7, 6, 1'000));
  EXPECT_FALSE(race.on_seq_start(7, 6, 1'010)); // the new process, at its new entity
  // ... and it is no proof for the registration after it either unless within
  // the window: a crash loop is asked (documented), a later restart is not.
  EXPECT_FALSE(race.on_renewed(7, 7, 1'010 + window + 1));
}

TEST(restart_race, starts_and_renewals_outside_the_window_prove_nothing) {
  restart_race race{window};
  EXPECT_FALSE(race.on_seq_start(7, 5, 1'000));
  EXPECT_FALSE(race.on_renewed(7, 6, 1'000 + window + 1));
  EXPECT_FALSE(race.on_seq_start(8, 5, 50'000 + window + 2));
  EXPECT_FALSE(race.on_seq_start(7, 5, 1'000 + 2 * window + 3)); // renewal forgotten
}

TEST(restart_race, workers_do_not_mix) {
  restart_race race{window};
  EXPECT_FALSE(race.on_seq_start(7, 5, 1'000));
  EXPECT_FALSE(race.on_renewed(8, 6, 1'010));
  EXPECT_TRUE(race.on_renewed(7, 6, 1'020));
}

TEST(restart_race, nothing_is_kept_beyond_the_window) {
  restart_race race{window};
  for (uint64_t uid = 0; uid < 1000; ++uid)
    race.on_seq_start(uid, 1, 1'000);
  EXPECT_EQ(race.tracked(), 1000u);
  race.on_seq_start(5'000, 1, 1'000 + window + 1);
  EXPECT_EQ(race.tracked(), 1u);
}

} // namespace
} // namespace lmcc::actors
