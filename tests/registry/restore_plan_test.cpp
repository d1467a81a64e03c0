// restore_plan: what a restarted node decides per worker and location from
// the rows and the holder states its shard rebuilt. Expected values are
// written out by hand from the rules in registry/restore_plan.hpp.
// CAF-free: linked with lmcc_registry only.
#include "registry/restore_plan.hpp"

#if defined(CAF_VERSION)
#error "restore_plan pulls in CAF"
#endif

#include <gtest/gtest.h>

namespace lmcc::actors {
namespace {

using msg::wire_int;
using persistence::worker_row;

worker_row row(std::string instance, int64_t worker, uint64_t order, uint64_t incarnation = 50) {
  worker_row r;
  r.uid = worker_uid(instance, wire_int{worker});
  r.instance_id = std::move(instance);
  r.worker_id = worker;
  r.ip = "10.0.0.1";
  r.port = 8500;
  r.peer_init_url = "10.0.0.1:8200";
  r.registration_time = 1000.5;
  r.last_heartbeat_time = 1001.5;
  r.has_heartbeated = true;
  r.registration_order = order;
  r.instance_order = order;
  r.incarnation = incarnation;
  return r;
}

holder_id hid(const std::string& instance, int64_t worker, const std::string& location) {
  return make_holder_id(instance, wire_int{worker}, location);
}

/// A holder state of (instance, worker, location).
std::pair<holder_id, holder_meta> holder(const std::string& instance, int64_t worker,
                                         const std::string& location, seq_mark mark,
                                         uint64_t incarnation = 50) {
  return {hid(instance, worker, location), holder_meta{worker_uid(instance, wire_int{worker}),
                                                       location, incarnation, mark, true, false}};
}

constexpr double now = 5000.0;
const shard_restore_report clean{};

TEST(restore_plan, tracking_gives_the_next_seq_and_the_tracker) {
  holder_metas hs{holder("A", 0, "cpu", {seq_state::tracking, 49})};
  auto plan = plan_restore({row("A", 0, 10)}, hs, clean, now);
  ASSERT_EQ(plan.workers.size(), 1u);
  const auto& w = plan.workers[0];
  EXPECT_EQ(w.resync_reason, "");
  EXPECT_EQ(w.last_seq, (std::map<std::string, uint64_t>{{"cpu", 49}}));
  EXPECT_EQ(w.expected_next, (std::map<std::string, std::optional<uint64_t>>{{"cpu", 50}}));
  EXPECT_EQ(w.record.locations, (std::vector<std::string>{"cpu"}));
  EXPECT_TRUE(plan.drop_holders.empty());
}

TEST(restore_plan, the_record_is_the_row_with_the_restart_as_its_last_heartbeat) {
  const auto r = row("A", 3, 10, 77);
  auto plan = plan_restore({r}, {}, clean, now);
  ASSERT_EQ(plan.workers.size(), 1u);
  const auto& rec = plan.workers[0].record;
  EXPECT_EQ(rec.uid, r.uid);
  EXPECT_EQ(rec.instance_id, "A");
  EXPECT_EQ(rec.worker_id, wire_int{3});
  EXPECT_EQ(rec.control_endpoint(), "10.0.0.1:8500");
  EXPECT_EQ(rec.peer_init_url, "10.0.0.1:8200");
  EXPECT_EQ(rec.registration_time, 1000.5);
  EXPECT_EQ(rec.last_heartbeat_time, now); // the node was down, not the worker
  EXPECT_TRUE(rec.has_heartbeated);
  EXPECT_EQ(rec.incarnation, 77u);
  EXPECT_TRUE(rec.locations.empty());
  // to_row gives the row back (but the heartbeat time is the restart's).
  auto back = to_row(rec);
  auto want = r;
  want.last_heartbeat_time = now;
  EXPECT_EQ(back, want);
}

TEST(restore_plan, each_mark_decides_the_first_op_or_a_full_sync) {
  holder_metas hs{holder("A", 0, "resynced", {seq_state::resynced, 0}),
                  holder("A", 0, "none", {seq_state::none, 0}),
                  holder("B", 0, "syncing", {seq_state::syncing, 0}),
                  holder("C", 0, "gap", {seq_state::gap, 0}),
                  holder("C", 0, "ok", {seq_state::tracking, 7})};
  auto plan = plan_restore({row("A", 0, 10), row("B", 0, 20), row("C", 0, 30)}, hs, clean, now);
  ASSERT_EQ(plan.workers.size(), 3u);
  const auto& a = plan.workers[0];
  EXPECT_EQ(a.record.instance_id, "A");
  EXPECT_EQ(a.resync_reason, "");
  EXPECT_EQ(a.expected_next, (std::map<std::string, std::optional<uint64_t>>{
                                 {"none", 0}, {"resynced", std::nullopt}}));
  EXPECT_TRUE(a.last_seq.empty());
  EXPECT_EQ(a.record.locations, (std::vector<std::string>{"none", "resynced"})); // by name
  EXPECT_EQ(plan.workers[1].resync_reason, "restart_during_full_sync");
  EXPECT_EQ(plan.workers[2].resync_reason, "store_commit_failed");
  EXPECT_EQ(plan.workers[2].expected_next.at("ok"), 8u);
  EXPECT_TRUE(plan.drop_holders.empty());
}

TEST(restore_plan, damage_names_the_workers_that_must_resync) {
  holder_metas hs{holder("A", 0, "cpu", {seq_state::tracking, 1}),
                  holder("B", 0, "cpu", {seq_state::tracking, 1})};
  shard_restore_report damaged;
  damaged.damaged_holders.insert(hid("B", 0, "cpu"));
  auto plan = plan_restore({row("A", 0, 10), row("B", 0, 20)}, hs, damaged, now);
  EXPECT_EQ(plan.workers[0].resync_reason, "");
  EXPECT_EQ(plan.workers[1].resync_reason, "snapshot_damaged");
  shard_restore_report unknown;
  unknown.damaged_unknown = true;
  plan = plan_restore({row("A", 0, 10), row("B", 0, 20)}, hs, unknown, now);
  EXPECT_EQ(plan.workers[0].resync_reason, "snapshot_damaged");
  EXPECT_EQ(plan.workers[1].resync_reason, "snapshot_damaged");
  // A reason from a mark comes first.
  holder_metas syncing{holder("A", 0, "cpu", {seq_state::syncing, 0})};
  plan = plan_restore({row("A", 0, 10)}, syncing, unknown, now);
  EXPECT_EQ(plan.workers[0].resync_reason, "restart_during_full_sync");
}

TEST(restore_plan, stale_and_orphaned_holders_are_dropped_with_a_fencing_incarnation) {
  holder_metas hs{holder("A", 0, "old", {seq_state::tracking, 3}, 40), // before the row's 50
                  holder("A", 0, "cur", {seq_state::tracking, 4}, 50),
                  holder("Gone", 0, "cpu", {seq_state::tracking, 9}, 60)}; // no row
  auto plan = plan_restore({row("A", 0, 10)}, hs, clean, now);
  ASSERT_EQ(plan.workers.size(), 1u);
  EXPECT_EQ(plan.workers[0].record.locations, (std::vector<std::string>{"cur"}));
  std::map<holder_id, uint64_t> drops(plan.drop_holders.begin(), plan.drop_holders.end());
  EXPECT_EQ(drops,
            (std::map<holder_id, uint64_t>{{hid("A", 0, "old"), 50}, {hid("Gone", 0, "cpu"), 61}}));
}

TEST(restore_plan, a_holder_never_introduced_here_is_kept) {
  // A node that came back empty got the holder's entries by slot copies and
  // sub-batches without an intro: no worker uid. Not an orphan.
  auto unnamed = holder("A", 0, "cpu", {seq_state::tracking, 7}, 50);
  unnamed.second.worker_uid = 0;
  auto plan = plan_restore({row("A", 0, 10)}, holder_metas{unnamed}, clean, now);
  EXPECT_TRUE(plan.drop_holders.empty());
  ASSERT_EQ(plan.workers.size(), 1u);
  EXPECT_TRUE(plan.workers[0].record.locations.empty()); // its location is not known either
}

TEST(restore_plan, a_holder_newer_than_its_row_raises_the_incarnation) {
  holder_metas hs{holder("A", 0, "cpu", {seq_state::none, 0}, 90)};
  auto plan = plan_restore({row("A", 0, 10, 50)}, hs, clean, now);
  EXPECT_EQ(plan.workers[0].record.incarnation, 90u);
  EXPECT_EQ(plan.workers[0].record.locations, (std::vector<std::string>{"cpu"}));
  EXPECT_TRUE(plan.drop_holders.empty());
}

TEST(restore_plan, a_holder_whose_id_does_not_match_its_intro_is_dropped) {
  auto [h, meta] = holder("A", 0, "cpu", {seq_state::tracking, 1});
  meta.location = "disk"; // a damaged intro: the id is not (A, 0, disk)'s
  auto plan = plan_restore({row("A", 0, 10)}, holder_metas{{h, meta}}, clean, now);
  EXPECT_TRUE(plan.workers[0].record.locations.empty());
  EXPECT_EQ(plan.drop_holders, (std::vector<std::pair<holder_id, uint64_t>>{{h, 50}}));
}

TEST(restore_plan, workers_come_back_in_registration_order) {
  auto a1 = row("A", 1, 30);
  a1.instance_order = 10; // A's first worker left; A kept its place
  auto plan = plan_restore({row("C", 0, 5), row("B", 0, 20), a1, row("A", 0, 10)}, {}, clean, now);
  std::vector<std::string> order;
  for (const auto& w : plan.workers)
    order.push_back(w.record.instance_id + "/" + w.record.worker_id.to_string());
  EXPECT_EQ(order, (std::vector<std::string>{"C/0", "A/0", "A/1", "B/0"}));
}

TEST(restore_plan, the_plan_does_not_depend_on_the_order_holders_are_met) {
  // Two locations of one worker: ids sort one way for (x, y), the other for (y, x).
  const std::string x = "LocalCPUBackend", y = "LocalDiskBackend";
  const bool x_first = hid("A", 0, x) < hid("A", 0, y);
  const std::string lower = x_first ? x : y, higher = x_first ? y : x;
  for (bool newer_is_lower : {false, true}) {
    SCOPED_TRACE(newer_is_lower);
    // The row's update was lost (50); one holder's drop carried 90, the other is still at 50.
    holder_metas hs{holder("A", 0, lower, {seq_state::tracking, 1}, newer_is_lower ? 90 : 50),
                    holder("A", 0, higher, {seq_state::tracking, 1}, newer_is_lower ? 50 : 90)};
    auto plan = plan_restore({row("A", 0, 10, 50)}, hs, clean, now);
    const std::string& stale = newer_is_lower ? higher : lower;
    const std::string& fresh = newer_is_lower ? lower : higher;
    EXPECT_EQ(plan.workers[0].record.incarnation, 90u);
    EXPECT_EQ(plan.workers[0].record.locations, (std::vector<std::string>{fresh}));
    EXPECT_EQ(plan.drop_holders,
              (std::vector<std::pair<holder_id, uint64_t>>{{hid("A", 0, stale), 90}}));
  }
}

} // namespace
} // namespace lmcc::actors
