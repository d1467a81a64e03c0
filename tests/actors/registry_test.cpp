#include "actors/registry.hpp"

#include <gtest/gtest.h>

using namespace lmcc::actors;
using lmcc::msg::wire_int;

namespace {

uint32_t add(registry& r, const std::string& inst, int64_t worker, const std::string& ip,
             double now = 1.0, std::optional<std::string> peer = std::nullopt) {
  return r.register_worker(inst, worker, ip, 8500 + worker, peer, now).worker_num;
}

} // namespace

TEST(registry, keeps_instances_and_workers_in_registration_order) {
  registry r;
  add(r, "B", 1, "10.0.0.2");
  add(r, "A", 0, "10.0.0.1");
  add(r, "B", 0, "10.0.0.2");
  std::vector<std::pair<std::string, int64_t>> order;
  for (const auto* w : r.all_workers())
    order.emplace_back(w->instance_id, w->worker_id.as_int64());
  EXPECT_EQ(order, (std::vector<std::pair<std::string, int64_t>>{{"B", 1}, {"B", 0}, {"A", 0}}));
  auto view = r.make_view();
  auto a0 = *r.find("A", 0);
  EXPECT_EQ(view->find(a0)->instance_rank, 1u);
  EXPECT_EQ(view->find(*r.find("B", 0))->worker_rank, 1u);
}

TEST(registry, duplicate_registration_keeps_the_number_and_takes_the_new_address) {
  registry r;
  auto first = r.register_worker("A", 0, "10.0.0.1", 8500, std::nullopt, 1.0);
  auto again = r.register_worker("A", 0, "10.0.0.9", 8600, "10.0.0.9:8200", 2.0);
  EXPECT_TRUE(first.is_new);
  EXPECT_FALSE(again.is_new);
  EXPECT_EQ(first.worker_num, again.worker_num);
  EXPECT_EQ(r.worker_count(), 1u);
  EXPECT_EQ(r.record(first.worker_num)->control_endpoint(), "10.0.0.9:8600");
}

TEST(registry, removing_the_last_worker_removes_the_instance) {
  registry r;
  add(r, "A", 0, "10.0.0.1");
  add(r, "A", 1, "10.0.0.1");
  EXPECT_TRUE(r.remove("A", 0));
  EXPECT_EQ(r.instance_by_ip("10.0.0.1"), "A");
  EXPECT_TRUE(r.remove("A", 1));
  EXPECT_EQ(r.instance_by_ip("10.0.0.1"), std::nullopt);
  EXPECT_FALSE(r.remove("A", 1));
  EXPECT_TRUE(r.control_targets("A").empty());
}

TEST(registry, instance_by_ip_returns_the_first_registered_instance) {
  registry r;
  add(r, "X", 0, "10.0.0.7");
  add(r, "Y", 0, "10.0.0.7");
  EXPECT_EQ(r.instance_by_ip("10.0.0.7"), "X");
}

TEST(registry, control_targets_are_sorted_by_worker_id) {
  registry r;
  add(r, "A", 2, "h");
  add(r, "A", 0, "h");
  add(r, "A", 1, "h");
  std::vector<int64_t> ids;
  for (const auto& t : r.control_targets("A"))
    ids.push_back(t.worker_id.as_int64());
  EXPECT_EQ(ids, (std::vector<int64_t>{0, 1, 2}));
  EXPECT_EQ(r.control_targets("A")[0].endpoint, "h:8500");
}

TEST(registry, worker_infos_follow_lmcache_query_worker_info) {
  registry r;
  add(r, "A", 1, "h");
  add(r, "A", 0, "h");
  add(r, "B", 0, "g");
  EXPECT_EQ(r.worker_infos("all", std::nullopt).size(), 3u);
  EXPECT_EQ(r.worker_infos("all", std::vector<wire_int>{0}).size(), 2u);
  auto a = r.worker_infos("A", std::nullopt);
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(a[0].worker_id, wire_int{0});
  EXPECT_EQ(r.worker_infos("A", std::vector<wire_int>{1, 7}).size(), 1u);
  EXPECT_TRUE(r.worker_infos("nope", std::nullopt).empty());
}

TEST(registry, reaps_only_workers_that_heartbeated_and_then_went_silent) {
  registry r;
  add(r, "quiet", 0, "h", 0.0); // never heartbeats: LMCache workers' default
  add(r, "talker", 0, "h", 0.0);
  r.heartbeat("talker", 0, 10.0);
  EXPECT_TRUE(r.silent_workers(100.0, 300.0).empty());
  auto silent = r.silent_workers(311.0, 300.0);
  ASSERT_EQ(silent.size(), 1u);
  EXPECT_EQ(silent[0].first, "talker");
}

TEST(registry, asks_every_worker_for_a_sync_until_enough_have_synced) {
  registry r;
  auto w0 = add(r, "A", 0, "h");
  auto w1 = add(r, "A", 1, "h");
  EXPECT_EQ(r.should_request_full_sync(w0),
            std::make_pair(true, std::string("controller_restart")));
  r.set_sync_state(w0, sync_phase::syncing, 3);
  EXPECT_FALSE(r.should_request_full_sync(w0).first);
  EXPECT_EQ(r.missing_batches_total(), 3u);
  EXPECT_DOUBLE_EQ(r.global_progress(), 0.5); // w1 never asked: counts as ready, as in LMCache
  EXPECT_FALSE(r.can_exit_freeze(0.8));
  r.set_sync_state(w0, sync_phase::completed, 0);
  EXPECT_TRUE(r.can_exit_freeze(0.8));
  EXPECT_FALSE(r.need_full_sync_all());
  EXPECT_FALSE(r.should_request_full_sync(w1).first);
  r.set_sync_state(w1, sync_phase::failed, 0);
  EXPECT_EQ(r.should_request_full_sync(w1), std::make_pair(true, std::string("sync_failed_retry")));
}

TEST(registry, interns_at_most_256_locations_per_worker) {
  registry r;
  auto w = add(r, "A", 0, "h");
  EXPECT_EQ(r.intern_location(w, "LocalCPUBackend"), 0u);
  EXPECT_EQ(r.intern_location(w, "LocalDiskBackend"), 1u);
  EXPECT_EQ(r.intern_location(w, "LocalCPUBackend"), 0u);
  for (int i = 2; i < 256; ++i)
    ASSERT_TRUE(r.intern_location(w, "loc" + std::to_string(i)));
  EXPECT_EQ(r.intern_location(w, "one-too-many"), std::nullopt);
  EXPECT_EQ(r.intern_location(999, "x"), std::nullopt);
}
