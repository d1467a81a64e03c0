// sync_session_logic with a recording session_outbox: buffering before go,
// drop + syncing first, keys filed under the session's holder, End and
// completion only once everything is acknowledged, expiry, status, abort and
// replacement. CAF-free: linked with lmcc_registry only.
#include "registry/sync_session_logic.hpp"
#include "tests/registry/worker_test_util.hpp"

#if defined(CAF_VERSION)
#error "sync_session_logic pulls in CAF"
#endif

#include <gtest/gtest.h>

namespace lmcc::actors {
namespace {

using msg::wire_int;
using worker_test::round_robin_placement;

struct recording_outbox : session_outbox {
  std::vector<std::pair<uint32_t, kv_sub_batch>> sent;
  uint64_t credits = 0;
  std::vector<std::pair<sync_phase, uint64_t>> reports;
  std::vector<std::pair<std::string, bool>> ended_calls;

  void send(uint32_t d, kv_sub_batch&& sb) override { sent.emplace_back(d, std::move(sb)); }
  void give_credits(uint64_t n) override { credits += n; }
  void report(sync_phase p, uint64_t missing) override { reports.emplace_back(p, missing); }
  void ended(const std::string& id, bool completed, const session_stream&) override {
    ended_calls.emplace_back(id, completed);
  }
};

constexpr uint64_t base = 5000;
const holder_id cpu = make_holder_id("A", wire_int{0}, "cpu");

session_config config(uint32_t destinations = 1) {
  session_config c;
  c.slot_count = 64;
  c.destinations = destinations;
  c.stream_base = base;
  c.timeout_s = 300;
  if (destinations > 1)
    c.placement = round_robin_placement(destinations);
  return c;
}

session_params params(std::string sync_id, uint64_t batches = 2, uint64_t incarnation = 9) {
  return session_params{.sync_id = std::move(sync_id),
                        .location = "cpu",
                        .holder = cpu,
                        .worker_uid = worker_uid("A", wire_int{0}),
                        .incarnation = incarnation,
                        .era = 3,
                        .total_keys = 4,
                        .batch_count = batches};
}

pushed_msg batch(std::string sync_id, uint64_t id, std::vector<uint64_t> keys,
                 std::string location = "cpu") {
  std::vector<wire_int> k;
  for (uint64_t x : keys)
    k.push_back(wire_int::from_unsigned(x));
  const uint64_t n = keys.size();
  return pushed_msg{msg::Msg{msg::FullSyncBatchMsg{"A", 0, std::move(location), std::move(sync_id),
                                                   wire_int::from_unsigned(id), std::move(k)}},
                    n};
}

pushed_msg end(std::string sync_id, uint64_t total) {
  return pushed_msg{msg::Msg{msg::FullSyncEndMsg{"A", 0, "cpu", std::move(sync_id),
                                                 wire_int::from_unsigned(total)}},
                    1};
}

TEST(sync_session_logic, input_before_go_is_buffered_and_go_sends_drop_and_syncing_first) {
  recording_outbox out;
  sync_session_logic s{config(), out};
  s.start(params("s1"), 10.0);
  EXPECT_EQ(s.phase(), sync_phase::syncing);
  EXPECT_EQ(out.reports.back(), (std::pair{sync_phase::syncing, uint64_t{2}}));
  s.on_input(batch("s1", 0, {1, 2}), 11.0);
  EXPECT_TRUE(out.sent.empty());
  EXPECT_EQ(out.credits, 0u); // held by the buffer
  s.go();
  ASSERT_EQ(out.sent.size(), 2u);
  const auto& first = out.sent[0].second;
  EXPECT_TRUE(first.drop);
  EXPECT_TRUE(first.ops.empty());
  EXPECT_EQ(first.mark, (seq_mark{seq_state::syncing, 0}));
  EXPECT_EQ(first.holder, cpu);
  EXPECT_EQ(first.incarnation, 9u);
  EXPECT_TRUE(first.has_intro);
  EXPECT_EQ(first.intro_location, "cpu");
  EXPECT_EQ(first.stream, base);
  EXPECT_EQ(first.number, 1u);
  const auto& keys = out.sent[1].second;
  EXPECT_FALSE(keys.drop);
  EXPECT_FALSE(keys.has_mark);
  EXPECT_FALSE(keys.has_intro);
  EXPECT_EQ(keys.ops, (std::vector<kv_op>{{1, true}, {2, true}}));
  EXPECT_EQ(keys.number, 2u);
  EXPECT_EQ(out.reports.back(), (std::pair{sync_phase::syncing, uint64_t{1}}));
  s.go(); // once
  EXPECT_EQ(out.sent.size(), 2u);
}

TEST(sync_session_logic, keys_are_filed_under_the_sessions_holder_whatever_the_batch_names) {
  recording_outbox out;
  sync_session_logic s{config(), out};
  s.start(params("s1"), 0);
  s.go();
  s.on_input(batch("s1", 0, {7}, "LocalDiskBackend"), 1);
  EXPECT_EQ(out.sent.back().second.holder, cpu);
  s.on_input(batch("other", 1, {8}), 1); // another sync id: dropped, credits back
  EXPECT_EQ(out.credits, 1u);
  EXPECT_EQ(out.sent.size(), 2u);
}

TEST(sync_session_logic, end_sends_resynced_and_completes_only_once_everything_is_acked) {
  recording_outbox out;
  sync_session_logic s{config(), out};
  s.start(params("s1"), 0);
  s.go();
  s.on_input(batch("s1", 0, {1, 2}), 1);
  s.on_input(batch("s1", 1, {3, 4}), 2);
  s.on_input(end("s1", 4), 3);
  EXPECT_TRUE(s.ending());
  EXPECT_EQ(out.credits, 1u); // the End's own credit, at once
  ASSERT_EQ(out.sent.size(), 4u);
  EXPECT_EQ(out.sent[3].second.mark, (seq_mark{seq_state::resynced, 0}));
  EXPECT_FALSE(out.sent[3].second.drop);
  EXPECT_TRUE(out.ended_calls.empty());
  s.on_ack(base, 3, 5.0);
  EXPECT_EQ(out.credits, 5u);
  EXPECT_TRUE(out.ended_calls.empty()); // the resynced mark is not acknowledged yet
  EXPECT_EQ(s.phase(), sync_phase::syncing);
  EXPECT_FALSE(s.status(msg::FullSyncStatusMsg{"A", 0, "s1"}).is_complete);
  s.on_ack(base, 4, 5.0);
  EXPECT_EQ(s.phase(), sync_phase::completed);
  EXPECT_EQ(out.ended_calls, (std::vector<std::pair<std::string, bool>>{{"s1", true}}));
  EXPECT_EQ(out.reports.back(), (std::pair{sync_phase::completed, uint64_t{0}}));
  EXPECT_TRUE(s.idle());
  EXPECT_TRUE(s.status(msg::FullSyncStatusMsg{"A", 0, "s1"}).is_complete);
  // A second End is ignored.
  s.on_input(end("s1", 4), 4);
  EXPECT_EQ(out.ended_calls.size(), 1u);
}

TEST(sync_session_logic, an_end_before_go_is_kept_in_order_behind_the_batches) {
  recording_outbox out;
  sync_session_logic s{config(), out};
  s.start(params("s1", 1), 0);
  s.on_input(batch("s1", 0, {1}), 1);
  s.on_input(end("s1", 1), 2);
  EXPECT_EQ(out.credits, 1u);
  EXPECT_TRUE(out.sent.empty());
  s.go();
  ASSERT_EQ(out.sent.size(), 3u); // drop, keys, resynced
  EXPECT_TRUE(out.sent[0].second.drop);
  EXPECT_EQ(out.sent[1].second.ops.size(), 1u);
  EXPECT_EQ(out.sent[2].second.mark.state, seq_state::resynced);
  s.on_ack(base, 3, 5.0);
  EXPECT_EQ(s.phase(), sync_phase::completed);
  EXPECT_EQ(out.credits, 2u);
}

TEST(sync_session_logic, an_idle_session_expires_and_an_end_after_that_is_ignored) {
  recording_outbox out;
  sync_session_logic s{config(), out};
  s.start(params("s1"), 0);
  s.go();
  s.on_input(batch("s1", 0, {1, 2}), 100);
  EXPECT_FALSE(s.expire(399));
  EXPECT_TRUE(s.expire(401));
  EXPECT_EQ(s.phase(), sync_phase::failed);
  EXPECT_EQ(out.ended_calls, (std::vector<std::pair<std::string, bool>>{{"s1", false}}));
  EXPECT_EQ(out.reports.back(), (std::pair{sync_phase::failed, uint64_t{0}}));
  EXPECT_FALSE(s.expire(1000)); // once
  const size_t sent = out.sent.size();
  s.on_input(end("s1", 2), 402);
  EXPECT_EQ(s.phase(), sync_phase::failed);
  EXPECT_EQ(out.sent.size(), sent); // no resynced mark for a sync that may have holes
  s.on_ack(base, 100, 5.0);
  EXPECT_EQ(s.phase(), sync_phase::failed);
  EXPECT_EQ(out.ended_calls.size(), 1u);
  s.on_input(batch("s1", 1, {3}), 403); // late batches: dropped, credits back
  EXPECT_EQ(out.sent.size(), sent);
}

TEST(sync_session_logic, status_reports_missing_batches_of_the_matching_sync_only) {
  recording_outbox out;
  sync_session_logic s{config(), out};
  EXPECT_EQ(s.phase(), sync_phase::none);
  s.start(params("s1", 4), 0);
  s.go();
  s.on_input(batch("s1", 1, {1}), 1);
  s.on_input(batch("s1", 3, {2}), 1);
  auto st = s.status(msg::FullSyncStatusMsg{"A", 0, "s1"});
  EXPECT_EQ(st.sync_id, "s1");
  EXPECT_FALSE(st.is_complete);
  EXPECT_EQ(st.missing_batches, (std::vector<wire_int>{0, 2}));
  auto other = s.status(msg::FullSyncStatusMsg{"A", 0, "zzz"});
  EXPECT_EQ(other.sync_id, "zzz");
  EXPECT_FALSE(other.is_complete);
  EXPECT_TRUE(other.missing_batches.empty());
}

TEST(sync_session_logic, abort_gives_back_buffered_and_outstanding_credits) {
  recording_outbox out;
  sync_session_logic s{config(), out};
  s.start(params("s1"), 0);
  s.go();
  s.on_input(batch("s1", 0, {1, 2, 3}), 1);
  s.on_ack(base, 1, 5.0);                // the drop: 0 credits
  s.start(params("s2"), 2);              // replaces s1; s1's keys are still in flight
  s.on_input(batch("s2", 0, {4, 5}), 3); // buffered: s2 has not gone yet
  EXPECT_EQ(out.credits, 0u);
  s.abort();
  EXPECT_EQ(out.credits, 5u);
}

TEST(sync_session_logic, a_new_sync_replaces_the_old_one_and_returns_its_buffered_credits) {
  recording_outbox out;
  sync_session_logic s{config(), out};
  s.start(params("s1"), 0);
  s.on_input(batch("s1", 0, {1, 2, 3}), 1);
  s.start(params("s2", 1, 10), 2);
  EXPECT_EQ(out.credits, 3u);
  EXPECT_EQ(s.sync_id(), "s2");
  s.on_input(batch("s1", 1, {9}), 3); // the old sync's batch: dropped
  EXPECT_EQ(out.credits, 4u);
  s.go();
  ASSERT_EQ(out.sent.size(), 1u);
  EXPECT_EQ(out.sent[0].second.incarnation, 10u);
  EXPECT_TRUE(out.sent[0].second.has_intro); // the intro was never sent by s1 (no go)
  s.on_input(end("s2", 0), 4);
  s.on_ack(base, 2, 5.0);
  EXPECT_EQ(out.ended_calls, (std::vector<std::pair<std::string, bool>>{{"s2", true}}));
}

TEST(sync_session_logic, keys_split_by_slot_owner_with_credits_given_back_in_full) {
  recording_outbox out;
  sync_session_logic s{config(3), out};
  s.start(params("s1"), 0);
  s.go();
  EXPECT_EQ(out.sent.size(), 3u); // a drop and the syncing mark on every destination
  std::vector<uint64_t> keys;
  for (uint64_t k = 0; k < 50; ++k)
    keys.push_back(k * 0x9e3779b97f4a7c15ULL);
  s.on_input(batch("s1", 0, keys), 1);
  uint64_t ops = 0;
  for (size_t i = 3; i < out.sent.size(); ++i) {
    const auto& [d, sb] = out.sent[i];
    EXPECT_EQ(sb.stream, base + d);
    for (const auto& op : sb.ops)
      EXPECT_EQ(slot_of(op.key, 64) % 3, d);
    ops += sb.ops.size();
  }
  EXPECT_EQ(ops, 50u);
  s.on_input(end("s1", 50), 2);
  for (uint32_t d = 0; d < 3; ++d)
    s.on_ack(base + d, 10, 5.0);
  EXPECT_EQ(out.credits, 50u + 1u); // every key's credit and the End's
  EXPECT_EQ(s.phase(), sync_phase::completed);
}

} // namespace
} // namespace lmcc::actors
