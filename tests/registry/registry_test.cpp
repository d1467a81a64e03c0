// registry: workers named by uid, ordered by HLC stamps (instance first, then
// worker), re-registration, restore, locations and holder ids, the full-sync
// tracker and the lookup view. CAF-free: linked with lmcc_registry only.
#include "registry/registry.hpp"

#if defined(CAF_VERSION)
#error "registry pulls in CAF"
#endif

#include <gtest/gtest.h>

namespace lmcc::actors {
namespace {

using msg::wire_int;

uint64_t stamp_counter = 1000;

uint64_t add(registry& r, const std::string& inst, int64_t worker, const std::string& ip,
             double now = 1.0, std::optional<std::string> peer = std::nullopt) {
  auto reg = r.register_worker(inst, worker, ip, 8500 + worker, peer, now, ++stamp_counter);
  EXPECT_TRUE(reg.refused.empty()) << reg.refused;
  return reg.uid;
}

std::vector<std::pair<std::string, int64_t>> order_of(const registry& r) {
  std::vector<std::pair<std::string, int64_t>> out;
  for (const auto* w : r.all_workers())
    out.emplace_back(w->instance_id, w->worker_id.as_int64());
  return out;
}

TEST(registry, keeps_instances_and_workers_in_registration_order) {
  registry r;
  add(r, "B", 1, "10.0.0.2");
  add(r, "A", 0, "10.0.0.1");
  add(r, "B", 0, "10.0.0.2");
  EXPECT_EQ(order_of(r),
            (std::vector<std::pair<std::string, int64_t>>{{"B", 1}, {"B", 0}, {"A", 0}}));
  const auto* b0 = r.find("B", 0);
  ASSERT_NE(b0, nullptr);
  EXPECT_EQ(b0->uid, worker_uid("B", wire_int{0}));
  EXPECT_EQ(b0->instance_order, r.find("B", 1)->instance_order); // the instance's first stamp
  EXPECT_LT(r.find("B", 1)->registration_order, b0->registration_order);
  EXPECT_EQ(b0->incarnation, b0->registration_order);
}

TEST(registry, an_instance_keeps_its_position_while_it_has_workers) {
  registry r;
  add(r, "A", 0, "h");
  add(r, "B", 0, "h");
  add(r, "A", 1, "h");
  ASSERT_TRUE(r.remove("A", 0)); // A's first worker goes; A keeps its place before B
  EXPECT_EQ(order_of(r), (std::vector<std::pair<std::string, int64_t>>{{"A", 1}, {"B", 0}}));
  add(r, "A", 0, "h"); // comes back: behind A's remaining worker, still before B
  EXPECT_EQ(order_of(r),
            (std::vector<std::pair<std::string, int64_t>>{{"A", 1}, {"A", 0}, {"B", 0}}));
  ASSERT_TRUE(r.remove("A", 0));
  ASSERT_TRUE(r.remove("A", 1)); // A is gone: a new A comes after B
  add(r, "A", 5, "h");
  EXPECT_EQ(order_of(r), (std::vector<std::pair<std::string, int64_t>>{{"B", 0}, {"A", 5}}));
}

TEST(registry, reregistration_keeps_the_position_bumps_the_incarnation_and_takes_the_address) {
  registry r;
  auto first = r.register_worker("A", 0, "10.0.0.1", 8500, std::nullopt, 1.0, 100);
  add(r, "A", 1, "h");
  r.add_location(first.uid, "cpu");
  auto again = r.register_worker("A", 0, "10.0.0.9", 8600, "10.0.0.9:8200", 2.0, 5000);
  EXPECT_TRUE(first.is_new);
  EXPECT_FALSE(again.is_new);
  EXPECT_EQ(first.uid, again.uid);
  EXPECT_EQ(first.incarnation, 100u);
  EXPECT_EQ(again.incarnation, 5000u);
  EXPECT_EQ(r.worker_count(), 2u);
  const auto* rec = r.record(first.uid);
  EXPECT_EQ(rec->control_endpoint(), "10.0.0.9:8600");
  EXPECT_EQ(rec->peer_init_url, "10.0.0.9:8200");
  EXPECT_EQ(rec->registration_order, 100u);
  EXPECT_EQ(rec->registration_time, 1.0);
  EXPECT_EQ(rec->incarnation, 5000u);
  EXPECT_TRUE(rec->locations.empty()); // the old registration's holders are dropped
  EXPECT_EQ(order_of(r).front(), (std::pair<std::string, int64_t>{"A", 0}));
}

TEST(registry, restore_worker_puts_rows_back_in_order_in_any_order) {
  registry r;
  auto rec = [](std::string inst, int64_t w, uint64_t order, uint64_t inst_order) {
    worker_record x;
    x.instance_id = std::move(inst);
    x.worker_id = w;
    x.uid = worker_uid(x.instance_id, x.worker_id);
    x.registration_order = order;
    x.instance_order = inst_order;
    x.incarnation = order + 1;
    x.locations = {"cpu"};
    return x;
  };
  r.restore_worker(rec("B", 0, 20, 20));
  r.restore_worker(rec("A", 1, 30, 10)); // A's first worker left; A keeps order 10
  r.restore_worker(rec("A", 2, 40, 10));
  EXPECT_EQ(order_of(r),
            (std::vector<std::pair<std::string, int64_t>>{{"A", 1}, {"A", 2}, {"B", 0}}));
  // A row that remembers an earlier instance order moves the instance up.
  r.restore_worker(rec("C", 0, 50, 50));
  r.restore_worker(rec("C", 1, 60, 5));
  EXPECT_EQ(order_of(r).front(), (std::pair<std::string, int64_t>{"C", 0}));
  // A new registration joins a restored instance at its place.
  r.register_worker("B", 7, "h", 1, std::nullopt, 0, 70);
  EXPECT_EQ(r.find("B", 7)->instance_order, 20u);
  // Restored locations name their holders in the view.
  auto view = r.make_view();
  auto [w, e] = view->find(make_holder_id("A", wire_int{2}, "cpu"));
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->instance_id, "A");
  // Restoring the same uid again replaces it.
  r.restore_worker(rec("A", 2, 40, 10));
  EXPECT_EQ(r.worker_count(), 6u);
}

TEST(registry, removing_the_last_worker_removes_the_instance) {
  registry r;
  add(r, "A", 0, "10.0.0.1");
  add(r, "A", 1, "10.0.0.1");
  EXPECT_TRUE(r.remove("A", 0));
  EXPECT_EQ(r.instance_by_ip("10.0.0.1"), "A");
  auto last = r.remove("A", 1);
  ASSERT_TRUE(last);
  EXPECT_EQ(last->worker_id, wire_int{1});
  EXPECT_EQ(r.instance_by_ip("10.0.0.1"), std::nullopt);
  EXPECT_FALSE(r.remove("A", 1));
  EXPECT_TRUE(r.control_targets("A").empty());
  EXPECT_EQ(r.find("A", 1), nullptr);
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
  add(r, "A", 1, "h", 1.0, "h:8201");
  std::vector<int64_t> ids;
  for (const auto& t : r.control_targets("A"))
    ids.push_back(t.worker_id.as_int64());
  EXPECT_EQ(ids, (std::vector<int64_t>{0, 1, 2}));
  EXPECT_EQ(r.control_targets("A")[0].endpoint, "h:8500");
  EXPECT_EQ(r.control_targets("A")[1].peer_init_url, "h:8201");
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
  auto asked = r.worker_infos("A", std::vector<wire_int>{1, 7, 0});
  ASSERT_EQ(asked.size(), 2u);
  EXPECT_EQ(asked[0].worker_id, wire_int{1}); // in the order asked for
  EXPECT_TRUE(r.worker_infos("nope", std::nullopt).empty());
}

TEST(registry, reaps_only_workers_that_heartbeated_and_then_went_silent) {
  registry r;
  add(r, "quiet", 0, "h", 0.0); // never heartbeats: LMCache workers' default
  add(r, "talker", 0, "h", 0.0);
  EXPECT_TRUE(r.heartbeat("talker", 0, 10.0, 10.0));
  EXPECT_FALSE(r.heartbeat("stranger", 0, 10.0, 10.0));
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
  EXPECT_EQ(r.workers_in(sync_phase::syncing), 1u);
  EXPECT_DOUBLE_EQ(r.global_progress(), 0.5); // w1 never asked: counts as ready, as in LMCache
  EXPECT_FALSE(r.can_exit_freeze(0.8));
  EXPECT_TRUE(r.need_full_sync_all());
  r.set_sync_state(w0, sync_phase::completed, 0);
  EXPECT_TRUE(r.can_exit_freeze(0.8));
  EXPECT_FALSE(r.need_full_sync_all());
  EXPECT_FALSE(r.should_request_full_sync(w1).first);
  r.set_sync_state(w1, sync_phase::failed, 0);
  EXPECT_EQ(r.should_request_full_sync(w1), std::make_pair(true, std::string("sync_failed_retry")));
  EXPECT_EQ(r.should_request_full_sync(999), std::make_pair(false, std::string()));
}

TEST(registry, a_per_worker_resync_reason_holds_until_its_sync_starts) {
  registry r;
  r.set_need_full_sync_all(false);
  auto w = add(r, "A", 0, "h");
  auto other = add(r, "A", 1, "h");
  r.request_full_sync(w, "seq_gap_after_restart");
  EXPECT_EQ(r.should_request_full_sync(w),
            std::make_pair(true, std::string("seq_gap_after_restart")));
  EXPECT_FALSE(r.should_request_full_sync(other).first);
  r.set_sync_state(w, sync_phase::syncing, 1);
  EXPECT_FALSE(r.should_request_full_sync(w).first);
  r.set_sync_state(w, sync_phase::completed, 0);
  EXPECT_FALSE(r.should_request_full_sync(w).first); // cleared when the sync started
  r.request_full_sync(w, "snapshot_damaged");
  r.register_worker("A", 0, "h", 8500, std::nullopt, 2.0, ++stamp_counter);
  EXPECT_FALSE(r.should_request_full_sync(w).first); // cleared by a re-registration
}

// Chaos seed 1725: an entity split proven 13 ms after the worker's full sync
// had started was never asked for, because the sync's next progress report
// (a batch arrived) cleared the owed reason as its start had.
TEST(registry, a_resync_owed_during_a_sync_survives_its_progress_and_is_asked_after_it) {
  registry r;
  r.set_need_full_sync_all(false);
  auto w = add(r, "A", 0, "h");
  r.request_full_sync(w, "frames_lost_with_node");
  r.set_sync_state(w, sync_phase::syncing, 1);       // the sync asked for starts
  r.request_full_sync(w, "entity_split");            // a proof made after its start
  r.set_sync_state(w, sync_phase::syncing, 0);       // its batch arrived
  EXPECT_FALSE(r.should_request_full_sync(w).first); // not while it runs
  r.set_sync_state(w, sync_phase::completed, 0);
  EXPECT_EQ(r.should_request_full_sync(w), std::make_pair(true, std::string("entity_split")));
  r.set_sync_state(w, sync_phase::syncing, 1); // the next sync starts: the proof is answered
  r.set_sync_state(w, sync_phase::completed, 0);
  EXPECT_FALSE(r.should_request_full_sync(w).first);
}

TEST(registry, locations_get_holder_ids_at_most_256_per_worker) {
  registry r;
  auto w = add(r, "A", 0, "h");
  EXPECT_TRUE(r.add_location(w, "LocalCPUBackend"));
  EXPECT_TRUE(r.add_location(w, "LocalDiskBackend"));
  EXPECT_TRUE(r.add_location(w, "LocalCPUBackend")); // known: fine, not twice
  EXPECT_EQ(r.record(w)->locations,
            (std::vector<std::string>{"LocalCPUBackend", "LocalDiskBackend"}));
  EXPECT_EQ(r.record(w)->holder("LocalDiskBackend"),
            make_holder_id("A", wire_int{0}, "LocalDiskBackend"));
  for (int i = 2; i < 256; ++i)
    ASSERT_TRUE(r.add_location(w, "loc" + std::to_string(i)));
  EXPECT_FALSE(r.add_location(w, "one-too-many"));
  EXPECT_FALSE(r.add_location(999, "x"));
}

TEST(registry, the_view_maps_holders_to_workers_locations_and_ranks) {
  registry r;
  auto b = add(r, "B", 0, "h", 1.0, "b:1");
  auto a0 = add(r, "A", 0, "h");
  auto a1 = add(r, "A", 1, "h");
  r.add_location(a1, "disk");
  r.add_location(a1, "cpu");
  r.add_location(a0, "cpu");
  r.add_location(b, "cpu");
  auto view = r.make_view();
  ASSERT_EQ(view->workers.size(), 3u);
  EXPECT_EQ(view->workers[0].instance_id, "B");
  EXPECT_EQ(view->workers[0].peer_init_url, "b:1");
  auto [w, e] = view->find(make_holder_id("A", wire_int{1}, "cpu"));
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->uid, a1);
  EXPECT_EQ(w->instance_rank, 1u);
  EXPECT_EQ(w->worker_rank, 1u);
  EXPECT_EQ(e->location, "cpu");
  EXPECT_EQ(e->location_rank, 1u); // "disk" was reported first
  EXPECT_EQ(view->find(make_holder_id("A", wire_int{0}, "cpu")).first->worker_rank, 0u);
  EXPECT_EQ(view->find(make_holder_id("A", wire_int{0}, "disk")).first, nullptr);
  r.remove("A", 1);
  EXPECT_EQ(r.make_view()->find(make_holder_id("A", wire_int{1}, "cpu")).first, nullptr);
  EXPECT_NE(view->find(make_holder_id("A", wire_int{1}, "cpu")).first, nullptr); // immutable
}

} // namespace
} // namespace lmcc::actors
