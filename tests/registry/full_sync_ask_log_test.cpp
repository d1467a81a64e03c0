// full_sync_ask_log: a worker asked on every heartbeat gets a log line for its
// first ask under each state of the registry's answers, then one per interval.
// CAF-free: linked with lmcc_registry only.
#include "registry/full_sync_ask_log.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <string_view>

namespace lmcc::actors {
namespace {

using msg::wire_int;
using std::chrono::milliseconds;

/// Worker `uid` (instance "A", worker id `uid`) asked for `reason` under
/// answers version `version` at `now_ms`: whether it was logged.
bool ask(full_sync_ask_log& asks, uint64_t uid, std::string_view reason, uint64_t version,
         uint64_t now_ms) {
  return asks.asked(uid, "A", wire_int{static_cast<int64_t>(uid)}, reason, version, now_ms);
}

TEST(full_sync_ask_log, logs_the_first_ask_then_one_per_interval) {
  full_sync_ask_log asks{milliseconds{1000}};
  EXPECT_TRUE(ask(asks, 7, "controller_restart", 3, 10'000));
  for (uint64_t t = 10'001; t < 11'000; t += 100)
    EXPECT_FALSE(ask(asks, 7, "controller_restart", 3, t)) << t;
  EXPECT_TRUE(ask(asks, 7, "controller_restart", 3, 11'000));
  EXPECT_FALSE(ask(asks, 7, "controller_restart", 3, 11'001));
}

TEST(full_sync_ask_log, a_new_reason_or_answers_version_is_logged_at_once) {
  // Each proof moves the registry's answers version; the ask after it must be
  // in the log (the chaos checker pairs proofs with asks).
  full_sync_ask_log asks{milliseconds{60'000}};
  ASSERT_TRUE(ask(asks, 7, "controller_restart", 3, 0));
  EXPECT_TRUE(ask(asks, 7, "sync_failed_retry", 3, 1));
  EXPECT_TRUE(ask(asks, 7, "sync_failed_retry", 4, 2));
  EXPECT_FALSE(ask(asks, 7, "sync_failed_retry", 4, 3));
}

TEST(full_sync_ask_log, workers_are_paced_apart) {
  full_sync_ask_log asks{milliseconds{60'000}};
  ASSERT_TRUE(ask(asks, 7, "controller_restart", 3, 0));
  EXPECT_TRUE(ask(asks, 8, "controller_restart", 3, 1));
  EXPECT_FALSE(ask(asks, 7, "controller_restart", 3, 2));
  EXPECT_FALSE(ask(asks, 8, "controller_restart", 3, 2));
}

TEST(full_sync_ask_log, forgets_quiet_workers_so_a_churning_fleet_stays_bounded) {
  full_sync_ask_log asks{milliseconds{1000}};
  const size_t n = full_sync_ask_log::sweep_above;
  for (uint64_t uid = 0; uid < n; ++uid)
    ask(asks, uid, "controller_restart", 1, 0);
  EXPECT_EQ(asks.tracked(), n);
  // A minute later other workers are asked: the quiet ones are forgotten.
  for (uint64_t uid = n; uid < 2 * n + 2; ++uid)
    ask(asks, uid, "controller_restart", 1, 60'000);
  EXPECT_LE(asks.tracked(), n + 2);
  // A forgotten worker's next ask is simply logged again.
  EXPECT_TRUE(ask(asks, 0, "controller_restart", 1, 60'001));
}

} // namespace
} // namespace lmcc::actors
