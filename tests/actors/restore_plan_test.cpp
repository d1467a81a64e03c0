// restore_plan: what a restarted node decides per worker and location from the
// rows and per-shard watermarks it loaded. Expected values are written out by
// hand from the rules in actors/restore_plan.hpp.
#include "actors/restore_plan.hpp"

#include <gtest/gtest.h>

namespace lmcc::actors {
namespace {

using persistence::watermark;
using persistence::watermark_resynced;
using persistence::watermark_syncing;
using persistence::worker_row;

worker_row row(uint32_t num, std::string instance, std::vector<std::string> locations) {
  worker_row r;
  r.worker_num = num;
  r.instance_id = std::move(instance);
  r.worker_id = msg::wire_int{0};
  r.ip = "10.0.0.1";
  r.port = msg::wire_int{8500};
  r.registration_time = 1000.5;
  r.last_heartbeat_time = 1001.5;
  r.has_heartbeated = true;
  r.locations = std::move(locations);
  return r;
}

/// Watermarks of one (worker, location) on shards 0..n-1 with these values.
std::vector<watermark> marks(uint32_t worker, uint32_t loc, std::vector<uint64_t> per_shard) {
  std::vector<watermark> out;
  for (uint32_t s = 0; s < per_shard.size(); ++s)
    out.push_back({worker, loc, s, per_shard[s]});
  return out;
}

constexpr double now = 5000.0;

TEST(restore_plan, agreeing_shards_give_the_next_seq_and_the_tracker) {
  auto plan = plan_restore({row(1, "A", {"cpu"})}, marks(1, 0, {49, 49, 49}), 3, now);
  ASSERT_EQ(plan.workers.size(), 1U);
  const auto& w = plan.workers[0];
  EXPECT_EQ(w.resync_reason, "");
  EXPECT_EQ(w.last_seq, (std::map<uint32_t, uint64_t>{{0, 49}}));
  EXPECT_EQ(w.expected_next, (std::map<uint32_t, std::optional<uint64_t>>{{0, 50}}));
  EXPECT_TRUE(plan.stale_watermarks.empty());
  EXPECT_TRUE(plan.dropped_workers.empty());
  // Each shard starts with its own value.
  ASSERT_EQ(plan.shard_watermarks.size(), 3U);
  for (const auto& m : plan.shard_watermarks)
    EXPECT_EQ(m, (std::map<holder_id, uint64_t>{{make_holder(1, 0), 49}}));
}

TEST(restore_plan, shards_that_lag_set_the_watermark_to_their_minimum) {
  auto plan = plan_restore({row(1, "A", {"cpu"})}, marks(1, 0, {149, 99, 149}), 3, now);
  EXPECT_EQ(plan.workers[0].expected_next.at(0), 100U);
  EXPECT_EQ(plan.workers[0].last_seq.at(0), 99U);
}

TEST(restore_plan, a_shard_without_a_watermark_means_the_location_starts_at_zero) {
  auto some = marks(1, 0, {149, 149});
  auto plan = plan_restore({row(1, "A", {"cpu", "disk"})}, some, 3, now);
  const auto& w = plan.workers[0];
  EXPECT_EQ(w.expected_next.at(0), 0U); // shard 2 has nothing of "cpu"
  EXPECT_EQ(w.expected_next.at(1), 0U); // no shard has anything of "disk"
  EXPECT_TRUE(w.last_seq.empty());
  EXPECT_EQ(w.resync_reason, "");
}

TEST(restore_plan, a_full_sync_cut_by_the_restart_asks_for_a_new_one) {
  auto m = marks(1, 1, {watermark_syncing, 7});
  auto plan = plan_restore({row(1, "A", {"cpu", "disk"})}, m, 2, now);
  const auto& w = plan.workers[0];
  EXPECT_EQ(w.resync_reason, "restart_during_full_sync");
  EXPECT_EQ(w.expected_next.at(1), std::nullopt);
}

TEST(restore_plan, a_completed_full_sync_is_not_checked_unless_shards_diverge) {
  auto done = plan_restore({row(1, "A", {"cpu"})},
                           marks(1, 0, {watermark_resynced, watermark_resynced}), 2, now);
  EXPECT_EQ(done.workers[0].resync_reason, "");
  EXPECT_EQ(done.workers[0].expected_next.at(0), std::nullopt);

  auto diverged =
      plan_restore({row(1, "A", {"cpu"})}, marks(1, 0, {watermark_resynced, 12}), 2, now);
  EXPECT_EQ(diverged.workers[0].resync_reason, "watermarks_diverged");
}

TEST(restore_plan, a_pending_reset_is_finished_the_worker_keeps_nothing) {
  auto r = row(2, "B", {"cpu"});
  r.reset_pending = true;
  auto plan = plan_restore(
      {row(1, "A", {"cpu"}), r},
      [] {
        auto m = marks(1, 0, {5});
        auto n = marks(2, 0, {9});
        m.insert(m.end(), n.begin(), n.end());
        return m;
      }(),
      1, now);
  ASSERT_EQ(plan.workers.size(), 2U);
  EXPECT_FALSE(plan.workers[0].reset_finished);
  EXPECT_TRUE(plan.workers[1].reset_finished);
  EXPECT_EQ(plan.workers[1].expected_next.at(0), 0U);
  EXPECT_EQ(plan.dropped_workers, (std::set<uint32_t>{2}));
  EXPECT_EQ(plan.stale_watermarks, (std::vector<watermark>{{2, 0, 0, 9}}));
  EXPECT_EQ(plan.shard_watermarks[0], (std::map<holder_id, uint64_t>{{make_holder(1, 0), 5}}));
}

TEST(restore_plan, watermarks_of_unknown_workers_shards_or_locations_are_stale) {
  std::vector<watermark> m = {{1, 0, 0, 3},
                              {1, 0, 1, 3},
                              {1, 0, 2, 3},  // shard 2 of a 2-shard node
                              {1, 4, 0, 3},  // location 4 of a worker with one
                              {7, 0, 0, 3}}; // worker 7 has no row
  auto plan = plan_restore({row(1, "A", {"cpu"})}, m, 2, now);
  EXPECT_EQ(plan.stale_watermarks,
            (std::vector<watermark>{{1, 0, 2, 3}, {1, 4, 0, 3}, {7, 0, 0, 3}}));
  EXPECT_EQ(plan.dropped_workers, (std::set<uint32_t>{7}));
  EXPECT_EQ(plan.workers[0].expected_next.at(0), 4U);
}

TEST(restore_plan, records_keep_their_row_and_silence_counts_from_the_restart) {
  auto r = row(3, "C", {"cpu", "disk"});
  r.peer_init_url = "tcp://10.0.0.1:7000";
  auto plan = plan_restore({r}, {}, 1, now);
  const auto& rec = plan.workers[0].record;
  EXPECT_EQ(rec.worker_num, 3U);
  EXPECT_EQ(rec.instance_id, "C");
  EXPECT_EQ(rec.peer_init_url, std::optional<std::string>{"tcp://10.0.0.1:7000"});
  EXPECT_EQ(rec.registration_time, 1000.5);
  EXPECT_EQ(rec.last_heartbeat_time, now);
  EXPECT_TRUE(rec.has_heartbeated);
  EXPECT_EQ(rec.locations, (std::vector<std::string>{"cpu", "disk"}));
  EXPECT_EQ(rec.sync, sync_phase::none);
  // And back to a row for the store.
  auto back = to_row(rec, true);
  EXPECT_EQ(back.locations, r.locations);
  EXPECT_TRUE(back.reset_pending);
}

} // namespace
} // namespace lmcc::actors
