// heartbeat_reader: heartbeats answered from the registry's heartbeat_view on
// the socket thread. Every answer it gives must equal the directory's own
// (directory_logic::on_heartbeat) for the same state, and a view must stop
// answering as soon as anything that could alter an answer changes.
// CAF-free: linked with lmcc_registry only.
#include "registry/heartbeat_reader.hpp"
#include "registry/restore_plan.hpp"
#include "tests/registry/directory_test_support.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>

namespace lmcc::actors {
namespace {

using msg::wire_int;
using namespace directory_testing;

/// What the reader says now, with a view fresh from `d`'s registry.
std::optional<msg::HeartbeatRetMsg> fresh_answer(heartbeat_reader& reader, const directory_logic& d,
                                                 const msg::HeartbeatMsg& m) {
  reader.publish(d.reg().make_heartbeat_view());
  return reader.answer(m, 0);
}

/// The reader answers `m` exactly as the directory does in the same state.
void expect_same_answer(heartbeat_reader& reader, directory_logic& d, const msg::HeartbeatMsg& m,
                        double now) {
  const auto fast = fresh_answer(reader, d, m);
  ASSERT_TRUE(fast.has_value()) << m.instance_id << "/" << m.worker_id.to_string();
  EXPECT_EQ(msg::Msg{*fast}, d.on_heartbeat(m, now, wall, now));
}

TEST(heartbeat_reader, answers_as_the_directory_through_a_full_sync_and_an_owed_resync) {
  recording_outbox out;
  directory_logic d{controller_options{}, out};
  heartbeat_reader reader;
  d.on_register(reg("A", 0), 1, wall, std::nullopt);
  const uint64_t uid = worker_uid("A", wire_int{0});
  // The first heartbeat is stored: only the directory answers it.
  EXPECT_FALSE(fresh_answer(reader, d, hb("A", 0)).has_value());
  EXPECT_EQ(commands_of(d.on_heartbeat(hb("A", 0), 2, wall, 2)),
            (std::vector<std::string>{"controller_restart"}));
  expect_same_answer(reader, d, hb("A", 0), 3); // still frozen: asked again
  // A start refused by the entity: asked again. One on its way to the
  // session, whose report comes after the reply: not asked meanwhile.
  d.on_sync_start_sent(uid);
  EXPECT_TRUE(fresh_answer(reader, d, hb("A", 0))->commands.empty());
  d.on_sync_start_refused(uid);
  expect_same_answer(reader, d, hb("A", 0), 3);
  EXPECT_EQ(fresh_answer(reader, d, hb("A", 0))->commands.size(), 1u);
  d.on_sync_start_sent(uid);
  expect_same_answer(reader, d, hb("A", 0), 3);
  EXPECT_TRUE(fresh_answer(reader, d, hb("A", 0))->commands.empty());
  d.on_sync_state(uid, sync_phase::syncing, 3);
  expect_same_answer(reader, d, hb("A", 0), 4);
  EXPECT_TRUE(fresh_answer(reader, d, hb("A", 0))->commands.empty());
  d.on_sync_state(uid, sync_phase::failed, 0);
  expect_same_answer(reader, d, hb("A", 0), 5);
  EXPECT_EQ(fresh_answer(reader, d, hb("A", 0))->commands.size(), 1u);
  d.on_sync_state(uid, sync_phase::completed, 0);
  msg::FullSyncStatusRetMsg status;
  d.complete_status(status); // ends the freeze
  expect_same_answer(reader, d, hb("A", 0), 6);
  EXPECT_TRUE(fresh_answer(reader, d, hb("A", 0))->commands.empty());
  d.on_resync(uid, "seq_gap_after_restart");
  expect_same_answer(reader, d, hb("A", 0), 7);
  EXPECT_EQ(commands_of(msg::Msg{*fresh_answer(reader, d, hb("A", 0))}),
            (std::vector<std::string>{"seq_gap_after_restart"}));
}

TEST(heartbeat_reader, a_view_goes_stale_with_every_change_of_an_answer_and_not_with_heartbeats) {
  recording_outbox out;
  directory_logic d{controller_options{}, out};
  heartbeat_reader reader;
  d.on_register(reg("A", 0), 1, wall, std::nullopt);
  d.on_heartbeat(hb("A", 0), 2, wall, 2);
  reader.publish(d.reg().make_heartbeat_view());
  ASSERT_TRUE(reader.answer(hb("A", 0), 0).has_value());

  // Neither heartbeats nor a new location alter an answer, nor a replica's
  // row that only brings a newer heartbeat time (one per heartbeat in a cluster).
  EXPECT_TRUE(d.on_heartbeat_heard("A", wire_int{0}, 3, 3));
  d.on_heartbeat(hb("A", 0), 4, wall, 4);
  d.on_location(worker_uid("A", wire_int{0}), "LocalCPUBackend");
  auto row = to_row(*d.reg().find("A", 0));
  row.last_heartbeat_time = 9;
  EXPECT_TRUE(d.apply_replica(row, 9, wall, 9));
  EXPECT_DOUBLE_EQ(d.reg().find("A", 0)->last_heartbeat_time, 9);
  EXPECT_TRUE(reader.answer(hb("A", 0), 0).has_value());

  // Each of these may: the published view stops answering at once.
  const std::vector<std::pair<std::string, std::function<void()>>> changes = {
      {"a registration", [&] { d.on_register(reg("B", 0), 5, wall, std::nullopt); }},
      {"a first heartbeat", [&] { d.on_heartbeat(hb("B", 0), 5, wall, 5); }},
      {"a sync state",
       [&] { d.on_sync_state(worker_uid("B", wire_int{0}), sync_phase::syncing, 1); }},
      {"an owed resync", [&] { d.on_resync(worker_uid("A", wire_int{0}), "lost_frames"); }},
      {"a sync start sent", [&] { d.on_sync_start_sent(worker_uid("A", wire_int{0})); }},
      {"a sync start refused", [&] { d.on_sync_start_refused(worker_uid("A", wire_int{0})); }},
      {"a re-registration", [&] { d.on_register(reg("A", 0), 6, wall, std::nullopt); }},
      {"a replica's newer registration",
       [&] {
         auto row = to_row(*d.reg().find("B", 0));
         row.incarnation += 1;
         row.has_heartbeated = false;
         d.apply_replica(row, 6, wall, 6);
       }},
      {"a deregistration", [&] { d.on_deregister("B", 0, "test", wall); }},
  };
  for (const auto& [what, change] : changes) {
    reader.publish(d.reg().make_heartbeat_view());
    ASSERT_TRUE(reader.current()->current()) << what;
    change();
    EXPECT_FALSE(reader.current()->current()) << what;
    EXPECT_FALSE(reader.answer(hb("A", 0), 0).has_value()) << what;
  }
}

TEST(heartbeat_reader, leaves_unknown_workers_others_homes_asks_and_empty_views_to_the_directory) {
  recording_outbox out;
  directory_logic d{controller_options{}, out};
  const uint64_t a = worker_uid("A", wire_int{0});
  const uint64_t b = worker_uid("B", wire_int{0});
  heartbeat_reader nothing_published;
  EXPECT_FALSE(nothing_published.answer(hb("A", 0), 0).has_value());

  d.on_register(reg("A", 0), 1, wall, std::nullopt);
  d.on_register(reg("B", 0), 1, wall, std::nullopt);
  d.on_heartbeat(hb("A", 0), 2, wall, 2);
  d.on_heartbeat(hb("B", 0), 2, wall, 2);
  heartbeat_reader homes{[a](uint64_t uid) { return uid == a; }};
  homes.publish(d.reg().make_heartbeat_view());
  // A fresh registry owes every worker a full sync (controller_restart):
  // only the home asks.
  ASSERT_TRUE(d.reg().should_request_full_sync(b).first);
  EXPECT_TRUE(homes.answer(hb("A", 0), 0).has_value());
  EXPECT_FALSE(homes.answer(hb("B", 0), 0).has_value()) << "B's home is another node, and it asks";
  EXPECT_FALSE(homes.answer(hb("C", 0), 0).has_value()) << "unknown: the directory re-registers it";
  EXPECT_FALSE(homes.answer(hb("A", 1), 0).has_value());

  // Once nothing is owed, B's heartbeats are answered here too, as its home would.
  d.on_sync_state(b, sync_phase::syncing, 0);
  d.on_sync_state(b, sync_phase::completed, 0);
  ASSERT_FALSE(d.reg().should_request_full_sync(b).first);
  homes.publish(d.reg().make_heartbeat_view());
  const auto answer = homes.answer(hb("B", 0), 0);
  ASSERT_TRUE(answer.has_value()) << "nothing owed: a node that is not B's home answers";
  EXPECT_EQ(msg::Msg{*answer}, d.on_heartbeat(hb("B", 0), 3, wall, 3));
  // A proof reaches every node (resync_atom): the copy owes a sync again.
  d.on_replicated_resync(b, "seq_gap");
  homes.publish(d.reg().make_heartbeat_view());
  EXPECT_FALSE(homes.answer(hb("B", 0), 0).has_value()) << "owed: only the home asks";
}

TEST(heartbeat_reader,
     a_home_takes_the_heartbeats_another_node_answered_only_for_a_heartbeated_registration) {
  recording_outbox out;
  directory_logic d{controller_options{}, out};
  const uint64_t a = worker_uid("A", wire_int{0});
  d.on_register(reg("A", 0), 1, wall, std::nullopt);
  EXPECT_EQ(d.on_heartbeat_heard_elsewhere(a, 5, 5), nullptr)
      << "no heartbeat yet: its first is stored by the directory that answers it";
  d.on_heartbeat(hb("A", 0), 2, wall, 2);
  const auto* rec = d.on_heartbeat_heard_elsewhere(a, 7, 7);
  ASSERT_NE(rec, nullptr);
  EXPECT_DOUBLE_EQ(rec->last_heartbeat_time, 7);
  EXPECT_DOUBLE_EQ(rec->heard_at, 7);
  rec = d.on_heartbeat_heard_elsewhere(a, 6, 8);
  ASSERT_NE(rec, nullptr);
  EXPECT_DOUBLE_EQ(rec->last_heartbeat_time, 7) << "a late report never moves the time back";
  EXPECT_EQ(d.on_heartbeat_heard_elsewhere(worker_uid("Z", wire_int{0}), 9, 9), nullptr);
}

TEST(heartbeat_reader, a_heard_heartbeat_moves_the_reapers_clock_and_skips_a_worker_gone_since) {
  recording_outbox out;
  controller_options o;
  o.lmcache_worker_timeout = std::chrono::seconds{10};
  directory_logic d{o, out};
  d.on_register(reg("A", 0), 1, wall, std::nullopt);
  d.on_heartbeat(hb("A", 0), 2, wall, 2);
  EXPECT_TRUE(d.on_heartbeat_heard("A", wire_int{0}, 11, 11));
  EXPECT_DOUBLE_EQ(d.reg().find("A", 0)->last_heartbeat_time, 11);
  d.reap(20, wall); // 9 s after the heard one: not silent
  ASSERT_NE(d.reg().find("A", 0), nullptr);
  d.on_deregister("A", 0, "test", wall);
  EXPECT_FALSE(d.on_heartbeat_heard("A", wire_int{0}, 21, 21));
  EXPECT_EQ(d.reg().find("A", 0), nullptr) << "a heard heartbeat never registers";
}

TEST(heartbeat_reader, keeps_each_workers_latest_heard_heartbeat_until_the_directory_takes_them) {
  heartbeat_reader reader;
  EXPECT_TRUE(reader.note_heard(hb("A", 0), 1.0)) << "the first: the directory must be told";
  EXPECT_FALSE(reader.note_heard(hb("B", 0), 1.5));
  EXPECT_FALSE(reader.note_heard(hb("A", 0), 2.0));
  auto taken = reader.take_heard();
  std::sort(taken.begin(), taken.end(),
            [](const auto& x, const auto& y) { return x.instance_id < y.instance_id; });
  ASSERT_EQ(taken.size(), 2u) << "one per worker";
  EXPECT_EQ(taken[0].instance_id, "A");
  EXPECT_EQ(taken[0].worker_id, wire_int{0});
  EXPECT_DOUBLE_EQ(taken[0].mono_s, 2.0) << "the worker's latest";
  EXPECT_EQ(taken[1].instance_id, "B");
  EXPECT_DOUBLE_EQ(taken[1].mono_s, 1.5);
  EXPECT_TRUE(reader.take_heard().empty());
  EXPECT_TRUE(reader.note_heard(hb("A", 0), 3.0)) << "taken: the next one tells again";
}

} // namespace
} // namespace lmcc::actors
