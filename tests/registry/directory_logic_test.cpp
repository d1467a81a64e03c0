// directory_logic with a recording directory_outbox: registration order from
// the HLC, re-registration, the heartbeat recovery path, deregistration and
// the reaper, resync reasons, locations, restore and the view.
// CAF-free: linked with lmcc_registry only.
#include "registry/directory_logic.hpp"
#include "tests/registry/directory_test_support.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>

namespace lmcc::actors {
namespace {

using msg::wire_int;
using namespace directory_testing;

std::vector<std::string> instances_in_order(const directory_logic& d) {
  std::vector<std::string> out;
  for (const auto* w : d.reg().all_workers())
    out.push_back(w->instance_id + "/" + w->worker_id.to_string());
  return out;
}

TEST(directory_logic, registration_answers_with_the_heartbeat_url_and_persists_the_row) {
  recording_outbox out;
  directory_logic d{controller_options{}, out};
  auto ret = d.on_register(reg("A", 0), 1.5, wall, std::string{"ctl:8082"});
  const auto& r = std::get<msg::RegisterRetMsg>(ret);
  ASSERT_EQ(r.extra_config.size(), 1u);
  EXPECT_EQ(r.extra_config.begin()->first, "heartbeat_url");
  EXPECT_EQ(r.extra_config.begin()->second, "ctl:8082");
  EXPECT_TRUE(std::get<msg::RegisterRetMsg>(d.on_register(reg("A", 1), 1.5, wall, std::nullopt))
                  .extra_config.empty());
  const uint64_t uid = worker_uid("A", wire_int{0});
  ASSERT_EQ(out.spawned.size(), 2u);
  EXPECT_EQ(out.spawned[0], (std::pair<uint64_t, bool>{uid, false}));
  ASSERT_EQ(out.rows.size(), 2u);
  EXPECT_EQ(out.rows[0].uid, uid);
  EXPECT_EQ(out.rows[0].registration_time, 1.5);
  EXPECT_EQ(out.rows[0], to_row(*d.reg().record(uid)));
  EXPECT_EQ(std::count(out.events.begin(), out.events.end(), "worker_registered"), 2);
  EXPECT_TRUE(d.take_changed());
  EXPECT_FALSE(d.take_changed());
}

TEST(directory_logic, registration_order_follows_hlc_stamps_even_when_the_wall_clock_steps_back) {
  recording_outbox out;
  directory_logic d{controller_options{}, out};
  d.on_register(reg("B", 0), 1, wall, std::nullopt);
  d.on_register(reg("A", 0), 1, wall, std::nullopt);          // the same millisecond
  d.on_register(reg("C", 0), 1, wall - 60'000, std::nullopt); // the clock stepped back
  EXPECT_EQ(instances_in_order(d), (std::vector<std::string>{"B/0", "A/0", "C/0"}));
  const auto* b = d.reg().find("B", 0);
  const auto* a = d.reg().find("A", 0);
  const auto* c = d.reg().find("C", 0);
  EXPECT_EQ(cluster::hlc::physical_of(b->registration_order), wall);
  EXPECT_LT(b->registration_order, a->registration_order);
  EXPECT_LT(a->registration_order, c->registration_order);
}

TEST(directory_logic, an_instance_keeps_its_position_after_its_first_worker_deregisters) {
  recording_outbox out;
  directory_logic d{controller_options{}, out};
  d.on_register(reg("A", 0), 1, wall, std::nullopt);
  d.on_register(reg("B", 0), 1, wall + 1, std::nullopt);
  d.on_register(reg("A", 1), 1, wall + 2, std::nullopt);
  ASSERT_TRUE(d.on_deregister("A", 0, "test", wall));
  d.on_register(reg("A", 2), 1, wall + 3, std::nullopt);
  EXPECT_EQ(instances_in_order(d), (std::vector<std::string>{"A/1", "A/2", "B/0"}));
  EXPECT_EQ(out.rows.back().instance_order, d.reg().find("A", 1)->instance_order);
}

TEST(directory_logic, reregistration_keeps_the_position_and_resets_under_a_new_incarnation) {
  recording_outbox out;
  directory_logic d{controller_options{}, out};
  d.on_register(reg("A", 0), 1, wall, std::nullopt);
  d.on_register(reg("B", 0), 1, wall, std::nullopt);
  const uint64_t uid = worker_uid("A", wire_int{0});
  const uint64_t first = d.reg().record(uid)->incarnation;
  d.on_sync_state(uid, sync_phase::failed, 0);
  d.take_changed();
  d.on_register(reg("A", 0, "10.0.0.9", 9000), 2, wall + 5, std::nullopt);
  const auto* rec = d.reg().record(uid);
  EXPECT_GT(rec->incarnation, first);
  EXPECT_EQ(out.resets, (std::vector<std::pair<uint64_t, uint64_t>>{{uid, rec->incarnation}}));
  EXPECT_EQ(out.spawned.size(), 2u); // no new actor
  EXPECT_EQ(rec->sync, sync_phase::none);
  EXPECT_EQ(rec->control_endpoint(), "10.0.0.9:9000");
  EXPECT_EQ(instances_in_order(d).front(), "A/0");
  EXPECT_EQ(out.rows.back().incarnation, rec->incarnation);
  EXPECT_EQ(out.rows.back().port, wire_int{9000});
  EXPECT_EQ(std::count(out.events.begin(), out.events.end(), "worker_reregistered"), 1);
  EXPECT_TRUE(d.take_changed());
}

TEST(directory_logic, a_heartbeat_of_an_unknown_worker_reregisters_it_and_asks_for_a_full_sync) {
  recording_outbox out;
  directory_logic d{controller_options{}, out};
  auto ret = d.on_heartbeat(hb("A", 3), 7.0, wall, 7.0);
  EXPECT_EQ(commands_of(ret), (std::vector<std::string>{"worker_re_registered"}));
  const uint64_t uid = worker_uid("A", wire_int{3});
  ASSERT_NE(d.reg().record(uid), nullptr);
  EXPECT_TRUE(d.reg().record(uid)->has_heartbeated);
  EXPECT_EQ(out.spawned, (std::vector<std::pair<uint64_t, bool>>{{uid, false}}));
  ASSERT_FALSE(out.rows.empty());
}

TEST(directory_logic, a_worker_reregistered_by_its_heartbeat_is_persisted_as_heartbeating) {
  recording_outbox out;
  directory_logic d{controller_options{}, out};
  d.on_heartbeat(hb("A", 3), 7.0, wall, 7.0);
  d.on_heartbeat(hb("A", 3), 8.0, wall, 8.0);
  ASSERT_FALSE(out.rows.empty());
  EXPECT_TRUE(d.reg().find("A", 3)->has_heartbeated);
  EXPECT_TRUE(out.rows.back().has_heartbeated) << "the durable row disagrees with the registry";
}

TEST(directory_logic, the_first_heartbeat_persists_the_row_and_requests_follow_the_registry) {
  recording_outbox out;
  directory_logic d{controller_options{}, out};
  d.on_register(reg("A", 0), 1, wall, std::nullopt);
  const uint64_t uid = worker_uid("A", wire_int{0});
  EXPECT_EQ(out.rows.size(), 1u);
  // A fresh controller asks every worker (LMCache's need_full_sync_all).
  EXPECT_EQ(commands_of(d.on_heartbeat(hb("A", 0), 2, wall, 2)),
            (std::vector<std::string>{"controller_restart"}));
  ASSERT_EQ(out.rows.size(), 2u);
  EXPECT_TRUE(out.rows[1].has_heartbeated);
  EXPECT_EQ(out.rows[1].last_heartbeat_time, 2.0);
  d.on_sync_state(uid, sync_phase::syncing, 3);
  EXPECT_TRUE(commands_of(d.on_heartbeat(hb("A", 0), 3, wall, 3)).empty());
  EXPECT_EQ(out.rows.size(), 2u); // later heartbeats are not persisted
  d.on_sync_state(uid, sync_phase::completed, 0);
  msg::FullSyncStatusRetMsg status;
  d.complete_status(status);
  EXPECT_DOUBLE_EQ(status.global_progress, 1.0);
  EXPECT_TRUE(status.can_exit_freeze);
  d.on_sync_state(uid, sync_phase::failed, 0);
  EXPECT_EQ(commands_of(d.on_heartbeat(hb("A", 0), 4, wall, 4)),
            (std::vector<std::string>{"sync_failed_retry"}));
}

TEST(directory_logic, a_sync_completed_on_another_node_ends_the_freeze_here_too) {
  recording_outbox out;
  directory_logic d{controller_options{}, out};
  d.on_register(reg("A", 0), 1, wall, std::nullopt); // homed here
  d.on_register(reg("B", 0), 1, wall, std::nullopt); // a replica of a worker homed elsewhere
  const uint64_t a = worker_uid("A", wire_int{0});
  const uint64_t b = worker_uid("B", wire_int{0});
  d.on_sync_state(a, sync_phase::syncing, 1);
  d.on_sync_state(b, sync_phase::syncing, 1);
  // A's sync ends here while B's still runs: its status query cannot end the freeze.
  d.on_sync_state(a, sync_phase::completed, 0);
  msg::FullSyncStatusRetMsg status;
  d.complete_status(status);
  EXPECT_FALSE(status.can_exit_freeze);
  EXPECT_TRUE(d.reg().need_full_sync_all());
  // B's ends at its home; this node hears of it and ends the freeze as well.
  // A worker this node takes over later (no sync of its own yet) is asked
  // while the freeze lasts...
  d.on_register(reg("C", 0), 1, wall, std::nullopt);
  EXPECT_EQ(commands_of(d.on_heartbeat(hb("C", 0), 2, wall, 2)),
            (std::vector<std::string>{"controller_restart"}));
  // B's sync ends at its home; this node hears of it and ends the freeze too.
  d.on_sync_state(b, sync_phase::completed, 0);
  d.on_peer_sync_completed();
  EXPECT_FALSE(d.reg().need_full_sync_all());
  EXPECT_TRUE(commands_of(d.on_heartbeat(hb("C", 0), 3, wall, 3)).empty());
}

TEST(directory_logic, a_node_back_empty_while_its_peers_hold_the_index_asks_no_worker) {
  recording_outbox out;
  directory_logic d{controller_options{}, out};
  // The peers hand the empty node the registry: workers that synced long ago.
  d.on_register(reg("A", 0), 1, wall, std::nullopt);
  d.on_register(reg("B", 0), 1, wall, std::nullopt);
  EXPECT_EQ(commands_of(d.on_heartbeat(hb("A", 0), 2, wall, 2)),
            (std::vector<std::string>{"controller_restart"}));
  // A peer greets holding the index: the node copies its slots instead.
  d.on_index_held_by_peers();
  EXPECT_FALSE(d.reg().need_full_sync_all());
  EXPECT_TRUE(commands_of(d.on_heartbeat(hb("A", 0), 3, wall, 3)).empty());
  EXPECT_TRUE(commands_of(d.on_heartbeat(hb("B", 0), 3, wall, 3)).empty());
  // Proofs still ask: only the freeze's blanket ask is gone.
  d.on_resync(worker_uid("B", wire_int{0}), "seq_gap");
  EXPECT_EQ(commands_of(d.on_heartbeat(hb("B", 0), 4, wall, 4)),
            (std::vector<std::string>{"seq_gap"}));
}

TEST(directory_logic, slots_lost_on_every_owner_ask_every_worker_for_a_full_sync) {
  recording_outbox out;
  directory_logic d{controller_options{}, out};
  d.on_index_held_by_peers(); // no freeze: the cluster held the index
  d.on_register(reg("A", 0), 1, wall, std::nullopt);
  d.on_register(reg("B", 0), 1, wall, std::nullopt);
  EXPECT_TRUE(commands_of(d.on_heartbeat(hb("A", 0), 2, wall, 2)).empty());
  EXPECT_EQ(d.on_slots_lost(3, /*replica=*/false), 2u);
  const std::vector<std::string> lost{std::string{slot_copies_lost_reason}};
  EXPECT_EQ(commands_of(d.on_heartbeat(hb("A", 0), 3, wall, 3)), lost);
  EXPECT_EQ(commands_of(d.on_heartbeat(hb("B", 0), 3, wall, 3)), lost);
}

TEST(directory_logic, a_resync_reason_is_asked_of_that_worker_alone) {
  recording_outbox out;
  directory_logic d{controller_options{}, out};
  std::vector<restored_worker> none;
  d.restore(none, false, wall, 0); // a restored node: no controller_restart
  d.on_register(reg("A", 0), 1, wall, std::nullopt);
  d.on_register(reg("A", 1), 1, wall, std::nullopt);
  d.on_resync(worker_uid("A", wire_int{1}), "seq_gap_after_restart");
  EXPECT_TRUE(commands_of(d.on_heartbeat(hb("A", 0), 2, wall, 2)).empty());
  EXPECT_EQ(commands_of(d.on_heartbeat(hb("A", 1), 2, wall, 2)),
            (std::vector<std::string>{"seq_gap_after_restart"}));
  EXPECT_EQ(
      std::count(out.events.begin(), out.events.end(), "full_sync_requested_seq_gap_after_restart"),
      1);
  d.on_seq_gap(3);
  d.on_seq_gap(2);
  EXPECT_EQ(d.seq_discontinuities(), 5u);
}

// A restored node (no start-up freeze) with worker A/0 registered, homed
// here while `home_here` says so: the tests of whose sync phase counts.
struct one_worker_restored {
  recording_outbox out;
  directory_logic d{controller_options{}, out};
  bool home_here = true;
  uint64_t uid = worker_uid("A", wire_int{0});

  explicit one_worker_restored(bool homed_here) : home_here(homed_here) {
    std::vector<restored_worker> none;
    d.restore(none, false, wall, 0);
    d.set_home_filter([this](uint64_t) { return home_here; });
    d.on_register(reg("A", 0), 1, wall, std::nullopt);
  }
  std::vector<std::string> heartbeat(double at) {
    return commands_of(d.on_heartbeat(hb("A", 0), at, wall, at));
  }
};

// The 2-hour soak's end check: a partition let two nodes each host a worker;
// the far one asked it for a full sync, the worker came back home, and the
// far node's `syncing` reached the home, whose heartbeats then never asked for
// the sync it owed (500,000 entries missing at the end). Only the home's own
// session says `syncing` there.
TEST(directory_logic, a_peers_syncing_does_not_hold_off_the_sync_the_home_owes) {
  one_worker_restored t{true};
  EXPECT_FALSE(t.d.on_peer_sync_state(t.uid, sync_phase::syncing, 3));
  t.d.on_resync(t.uid, "entity_split");
  EXPECT_EQ(t.heartbeat(2), (std::vector<std::string>{"entity_split"}));
  // Where the worker is a replica the peer's phase is the home's word: kept.
  t.home_here = false;
  EXPECT_TRUE(t.d.on_peer_sync_state(t.uid, sync_phase::syncing, 3));
  EXPECT_EQ(t.d.reg().record(t.uid)->sync, sync_phase::syncing);
}

// The same soak, 30 minutes earlier: a node took a worker over while the
// previous home's session ran; the replica's `syncing` stayed and the
// takeover's ask (restart_during_full_sync) was never made.
TEST(directory_logic, a_takeover_drops_the_previous_homes_syncing) {
  one_worker_restored t{false};
  ASSERT_TRUE(t.d.on_peer_sync_state(t.uid, sync_phase::syncing, 3));
  t.home_here = true;
  t.d.on_resync(t.uid, "restart_during_full_sync");
  EXPECT_TRUE(t.heartbeat(2).empty());
  t.d.on_taken_over(t.uid);
  EXPECT_EQ(t.heartbeat(3), (std::vector<std::string>{"restart_during_full_sync"}));
}

// The soak's next run: the worker's heartbeats reached a replica whose copy
// still said `syncing` (a session that ran elsewhere and was cut short); it
// answered "nothing owed" for 106 s while the home told it, every second,
// what the worker owed. The home's phase, sent before the reason, ends it.
TEST(directory_logic, a_replicas_syncing_gives_way_to_the_homes_phase) {
  one_worker_restored t{false};
  ASSERT_TRUE(t.d.on_peer_sync_state(t.uid, sync_phase::syncing, 3)); // the far session
  t.d.on_replicated_resync(t.uid, "restart_during_full_sync");        // the home's word
  EXPECT_TRUE(t.heartbeat(2).empty());
  ASSERT_TRUE(t.d.on_peer_sync_state(t.uid, sync_phase::none, 0)); // the home's phase
  EXPECT_EQ(t.heartbeat(3), (std::vector<std::string>{"restart_during_full_sync"}));
}

TEST(directory_logic, deregistration_retires_deletes_and_forgets_the_worker) {
  recording_outbox out;
  directory_logic d{controller_options{}, out};
  d.on_register(reg("A", 0, "10.0.0.5", 8600), 1, wall, std::nullopt);
  d.take_changed();
  const uint64_t uid = worker_uid("A", wire_int{0});
  EXPECT_TRUE(d.on_deregister("A", 0, "DeRegisterMsg", wall));
  EXPECT_EQ(out.retired, (std::vector<uint64_t>{uid}));
  EXPECT_EQ(out.deleted, (std::vector<uint64_t>{uid}));
  EXPECT_EQ(out.forgotten, (std::vector<std::string>{"10.0.0.5:8600"}));
  EXPECT_EQ(std::count(out.events.begin(), out.events.end(), "worker_deregistered"), 1);
  EXPECT_TRUE(d.take_changed());
  EXPECT_EQ(d.reg().worker_count(), 0u);
  EXPECT_FALSE(d.on_deregister("A", 0, "again", wall)); // unknown: no effects
  EXPECT_EQ(out.retired.size(), 1u);
  EXPECT_FALSE(d.take_changed());
}

// A node that was down while a worker deregistered restores its row: the
// peers' tombstones keep it from coming back, on the peers and on that node.
TEST(directory_logic, a_deregistered_incarnation_is_refused_and_buried_where_it_was_restored) {
  recording_outbox home_out, away_out;
  directory_logic home{controller_options{}, home_out};
  directory_logic away{controller_options{}, away_out};
  home.on_register(reg("A", 0), 1, wall, std::nullopt);
  const uint64_t uid = worker_uid("A", wire_int{0});
  const auto row = home_out.rows.back();
  ASSERT_TRUE(away.apply_replica(row, 1, wall, 1)); // replicated before "away" went down
  ASSERT_TRUE(home.on_deregister("A", 0, "DeRegisterMsg", wall + 10));

  // "away" comes back and sends its restored row: refused.
  EXPECT_FALSE(home.apply_replica(row, 2, wall + 20, 2));
  EXPECT_EQ(home.reg().worker_count(), 0u);
  // The home's tombstones, applied at "away", end the stale row there.
  const auto tombs = home.tombstones(wall + 20);
  ASSERT_EQ(tombs, (std::vector<worker_tombstone>{{uid, row.incarnation}}));
  EXPECT_TRUE(away.apply_tombstone(tombs[0], wall + 20));
  EXPECT_EQ(away.reg().worker_count(), 0u);
  EXPECT_EQ(away_out.deleted, (std::vector<uint64_t>{uid}));
  // As home of it now, "away" ends the entity too (its holders are dropped).
  EXPECT_EQ(away_out.retired, (std::vector<uint64_t>{uid}));

  // A later registration of the same worker is a new incarnation: accepted.
  home.on_register(reg("A", 0), 3, wall + 30, std::nullopt);
  EXPECT_GT(home_out.rows.back().incarnation, row.incarnation);
  EXPECT_TRUE(away.apply_replica(home_out.rows.back(), 3, wall + 30, 3));
  EXPECT_EQ(away.reg().worker_count(), 1u);
  // A late copy of the old registration's row does not replace it either.
  EXPECT_FALSE(away.apply_replica(row, 4, wall + 35, 4));
  EXPECT_EQ(away.reg().record(uid)->incarnation, home_out.rows.back().incarnation);
  // ... and an old tombstone arriving late does not end it.
  EXPECT_FALSE(away.apply_tombstone(tombs[0], wall + 40));
  EXPECT_EQ(away.reg().worker_count(), 1u);
}

TEST(directory_logic, an_entity_older_than_a_registration_taken_elsewhere_is_behind) {
  // Seed 1853: a partition let another node take the worker's registration;
  // this node's copy then got the newer row by a path that renewed nothing.
  recording_outbox home_out, other_out;
  directory_logic home{controller_options{}, home_out};
  directory_logic other{controller_options{}, other_out};
  home.on_register(reg("A", 0), 1, wall, std::nullopt);
  home.on_register(reg("B", 0), 1, wall, std::nullopt);
  const uint64_t a = worker_uid("A", wire_int{0});
  const uint64_t b = worker_uid("B", wire_int{0});
  const uint64_t a_first = home.reg().record(a)->incarnation;
  const uint64_t b_first = home.reg().record(b)->incarnation;
  const std::map<uint64_t, uint64_t> entities{{a, a_first}, {b, b_first}};
  EXPECT_TRUE(home.entities_behind(entities).empty());

  ASSERT_TRUE(other.apply_replica(home_out.rows.back(), 1, wall, 1));
  ASSERT_TRUE(other.apply_replica(home_out.rows.front(), 1, wall, 1));
  other.on_register(reg("A", 0), 2, wall + 10, std::nullopt); // taken over there
  ASSERT_TRUE(home.apply_replica(other_out.rows.back(), 2, wall + 10, 2));
  ASSERT_GT(home.reg().record(a)->incarnation, a_first);
  EXPECT_EQ(home.entities_behind(entities), std::vector<uint64_t>{a});
  // Renewed (made again from the record): no longer behind.
  auto renewed = entities;
  renewed[a] = home.reg().record(a)->incarnation;
  EXPECT_TRUE(home.entities_behind(renewed).empty());
  // An entity of a worker the registry no longer has is not "behind".
  ASSERT_TRUE(home.on_deregister("B", 0, "DeRegisterMsg", wall + 20));
  EXPECT_TRUE(home.entities_behind(renewed).empty());
}

TEST(directory_logic, tombstones_expire_after_their_ttl) {
  recording_outbox out;
  directory_logic d{controller_options{}, out};
  d.set_tombstone_ttl(std::chrono::milliseconds{1000});
  d.on_register(reg("A", 0), 1, wall, std::nullopt);
  const auto row = out.rows.back();
  d.on_deregister("A", 0, "DeRegisterMsg", wall);
  EXPECT_EQ(d.tombstones(wall + 1000).size(), 1u);
  EXPECT_TRUE(d.tombstones(wall + 1001).empty());
  // Forgotten: the row comes back (the home's reaper is the backstop).
  EXPECT_TRUE(d.apply_replica(row, 2, wall + 1002, 2));
}

/// Options with a 30 s worker timeout (the reaper tests).
controller_options reaper_options() {
  controller_options o;
  o.lmcache_worker_timeout = std::chrono::milliseconds{30'000};
  return o;
}

TEST(directory_logic, the_reaper_removes_silent_workers_that_once_heartbeated) {
  recording_outbox out;
  directory_logic d{reaper_options(), out};
  d.on_register(reg("quiet", 0), 0, wall, std::nullopt);
  d.on_register(reg("talker", 0), 0, wall, std::nullopt);
  d.on_heartbeat(hb("talker", 0), 10, wall, 10);
  d.reap(39, wall);
  EXPECT_TRUE(out.retired.empty());
  d.reap(41, wall);
  EXPECT_EQ(out.retired, (std::vector<uint64_t>{worker_uid("talker", wire_int{0})}));
  d.reap(1e9, wall);
  EXPECT_EQ(out.retired.size(), 1u); // a worker that never heartbeated stays
}

TEST(directory_logic, the_reaper_counts_silence_on_the_monotonic_clock) {
  const auto o = reaper_options();
  recording_outbox out;
  directory_logic d{o, out};
  d.on_register(reg("w", 0), 1000, wall, std::nullopt);
  d.on_heartbeat(hb("w", 0), 1000, wall, /*mono_s=*/10);
  // The wall clock jumps an hour ahead: LMCache's timestamps say so, the
  // silence is counted on the monotonic clock.
  d.on_heartbeat(hb("w", 0), 1000 + 3600, wall + 3'600'000, 20);
  EXPECT_EQ(d.reg().find("w", 0)->last_heartbeat_time, 4600);
  d.reap(45, wall);
  EXPECT_TRUE(out.retired.empty());

  // A replica hears of heartbeats through its home's rows: a newer
  // last_heartbeat_time, in whatever clock the home has, is one.
  recording_outbox home_out, replica_out;
  directory_logic home{o, home_out};
  directory_logic replica{o, replica_out};
  home.on_register(reg("r", 0), 5, wall, std::nullopt);
  home.on_heartbeat(hb("r", 0), 5, wall, 0);
  ASSERT_TRUE(replica.apply_replica(home_out.rows.back(), 99'999, wall, 100));
  ASSERT_TRUE(replica.apply_replica(home_out.rows.back(), 99'999, wall, 120)); // the same row
  replica.reap(125, wall);
  EXPECT_TRUE(replica_out.retired.empty());
  replica.reap(131, wall); // silent since 100, not 120
  EXPECT_EQ(replica_out.retired, (std::vector<uint64_t>{worker_uid("r", wire_int{0})}));
}

// Every heartbeat at a worker's home replicates its row to the other nodes.
// A row that moved only the heartbeat time must not mark the directory
// changed: that rebuilds the lookup view and the routes, O(workers) each.
TEST(directory_logic, a_replicated_heartbeat_moves_the_time_without_a_new_view) {
  recording_outbox home_out, replica_out;
  directory_logic home{reaper_options(), home_out};
  directory_logic replica{reaper_options(), replica_out};
  home.on_register(reg("r", 0), 5, wall, std::nullopt);
  home.on_heartbeat(hb("r", 0), 5, wall, 0);
  ASSERT_TRUE(replica.apply_replica(home_out.rows.back(), 99'999, wall, 100));
  EXPECT_TRUE(replica.take_changed()); // a worker new here
  const size_t rows_stored = replica_out.rows.size();

  home.on_heartbeat(hb("r", 0), 6, wall + 1000, 1);
  const auto heartbeat_row = to_row(*home.reg().find("r", 0)); // what the home replicates
  ASSERT_EQ(heartbeat_row.last_heartbeat_time, 6);
  const auto applied = replica.apply_replica(heartbeat_row, 99'999, wall + 1000, 110);
  ASSERT_TRUE(applied);
  EXPECT_TRUE(applied.time_only);
  EXPECT_FALSE(replica.take_changed());
  EXPECT_EQ(replica_out.rows.size(), rows_stored); // a heartbeat time is not stored
  const auto* rec = replica.reg().find("r", 0);
  ASSERT_NE(rec, nullptr);
  EXPECT_EQ(rec->last_heartbeat_time, 6);

  // Anything else in a row is a change: here a worker registered elsewhere.
  recording_outbox other_out;
  directory_logic other{reaper_options(), other_out};
  other.on_register(reg("s", 0), 7, wall + 2000, std::nullopt);
  const auto registered = replica.apply_replica(other_out.rows.back(), 99'999, wall + 2000, 112);
  ASSERT_TRUE(registered);
  EXPECT_FALSE(registered.time_only);
  EXPECT_TRUE(replica.take_changed());
  EXPECT_EQ(replica_out.rows.size(), rows_stored + 1);
  EXPECT_EQ(replica.reg().make_view()->workers.size(), 2u);

  // The reaper counts r's silence from the newer heartbeat (110), not the first (100).
  replica.reap(135, wall);
  EXPECT_TRUE(replica_out.retired.empty());
  replica.reap(141, wall);
  EXPECT_EQ(replica_out.retired, (std::vector<uint64_t>{worker_uid("r", wire_int{0})}));
}

TEST(directory_logic, locations_enter_the_view_with_their_ranks) {
  recording_outbox out;
  directory_logic d{controller_options{}, out};
  d.on_register(reg("A", 0), 1, wall, std::nullopt);
  d.on_register(reg("B", 0), 1, wall, std::nullopt);
  d.take_changed();
  const uint64_t a = worker_uid("A", wire_int{0}), b = worker_uid("B", wire_int{0});
  d.on_location(b, "disk");
  EXPECT_TRUE(d.take_changed());
  d.on_location(b, "cpu");
  d.on_location(a, "cpu");
  auto view = d.reg().make_view();
  auto [w, e] = view->find(make_holder_id("B", wire_int{0}, "cpu"));
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->uid, b);
  EXPECT_EQ(w->instance_rank, 1u);
  EXPECT_EQ(e->location, "cpu");
  EXPECT_EQ(e->location_rank, 1u);
  d.on_location(999, "x"); // unknown worker: refused and counted
  EXPECT_EQ(std::count(out.events.begin(), out.events.end(), "worker_location_refused"), 1);
}

TEST(directory_logic, restore_spawns_restored_workers_with_their_plans_and_later_stamps_follow) {
  recording_outbox out;
  directory_logic d{controller_options{}, out};
  std::vector<restored_worker> workers(2);
  const uint64_t future = (wall + 3'600'000) << cluster::hlc::logical_bits; // a faster clock
  for (int i = 0; i < 2; ++i) {
    auto& rec = workers[static_cast<size_t>(i)].record;
    rec.instance_id = "R";
    rec.worker_id = i;
    rec.uid = worker_uid("R", wire_int{i});
    rec.registration_order = future + static_cast<uint64_t>(i);
    rec.instance_order = future;
    rec.incarnation = future + 10 + static_cast<uint64_t>(i);
    rec.locations = {"cpu"};
  }
  workers[1].resync_reason = "snapshot_damaged";
  d.restore(workers, false, wall, 0);
  EXPECT_TRUE(d.take_changed());
  ASSERT_EQ(out.spawned.size(), 2u);
  EXPECT_TRUE(out.spawned[0].second);
  EXPECT_EQ(out.spawned_plans[1], &workers[1]);
  EXPECT_FALSE(d.reg().need_full_sync_all());
  EXPECT_TRUE(commands_of(d.on_heartbeat(hb("R", 0), 5, wall, 5)).empty());
  EXPECT_EQ(commands_of(d.on_heartbeat(hb("R", 1), 5, wall, 5)),
            (std::vector<std::string>{"snapshot_damaged"}));
  // A new registration on this node's slower clock still comes after them.
  d.on_register(reg("R", 2), 5, wall, std::nullopt);
  EXPECT_GT(d.reg().find("R", 2)->registration_order, future + 11);
  EXPECT_EQ(instances_in_order(d), (std::vector<std::string>{"R/0", "R/1", "R/2"}));
  // Re-registering a restored worker gets a newer incarnation than its row's.
  d.on_register(reg("R", 0), 6, wall, std::nullopt);
  EXPECT_GT(out.resets.back().second, future + 10);
}

} // namespace
} // namespace lmcc::actors
