// worker_logic in a PULL round (begin_round / end_round): consecutive batches
// of a location go to the shard as one sub-batch, and everything else keeps the
// order of ops, marks and gaps the batches had one by one. CAF-free: linked
// with lmcc_registry.
#include "registry/worker_logic.hpp"
#include "tests/registry/worker_test_util.hpp"

#include <gtest/gtest.h>

#include <set>

namespace lmcc::actors {
namespace {

using msg::wire_int;
using namespace worker_test;

std::vector<uint64_t> keys_of(const kv_sub_batch& sb) {
  std::vector<uint64_t> keys;
  for (const auto& op : sb.ops)
    keys.push_back(op.key);
  return keys;
}

TEST(worker_logic, a_rounds_consecutive_batches_of_a_location_go_as_one_sub_batch) {
  recording_outbox out;
  worker_logic w{config(), out};
  w.begin_round();
  w.on_push(batch("cpu", 0, 3));
  w.on_push(batch("cpu", 3, 2));
  w.on_push(batch("cpu", 5, 1));
  EXPECT_TRUE(out.sent.empty()) << "held until the round ends";
  w.end_round();
  ASSERT_EQ(out.sent.size(), 1u);
  const auto& sb = out.sent[0].second;
  EXPECT_EQ(keys_of(sb), (std::vector<uint64_t>{0, 1, 2, 300, 301, 500}));
  EXPECT_EQ(sb.mark, (seq_mark{seq_state::tracking, 5}));
  EXPECT_TRUE(sb.has_intro);
  EXPECT_TRUE(out.gaps.empty());
  // One ack gives back every batch's credits.
  w.on_ack(base, sb.number);
  EXPECT_EQ(out.credits, 6u);
  EXPECT_TRUE(w.stream().idle());
}

TEST(worker_logic, a_round_keeps_the_order_across_locations_gaps_and_a_seq_that_starts_over) {
  recording_outbox out;
  worker_logic w{config(), out};
  const auto push_all = [](worker_logic& l) {
    l.on_push(batch("cpu", 0, 2)); // held
    l.on_push(batch("cpu", 2, 2)); // continues: joins
    l.on_push(batch("gpu", 0, 1)); // another location: cpu goes first
    l.on_push(batch("cpu", 4, 1)); // gpu goes; cpu continues from 3 but starts a new hold
    l.on_push(batch("cpu", 9, 1)); // a gap: sent apart, and counted
    l.on_push(batch("cpu", 0, 1)); // starts over: the reset mark follows what came before
  };
  w.begin_round();
  push_all(w);
  w.end_round();
  std::vector<std::pair<std::vector<uint64_t>, seq_mark>> got;
  for (const auto& [d, sb] : out.sent)
    got.emplace_back(keys_of(sb), sb.mark);
  const std::vector<std::pair<std::vector<uint64_t>, seq_mark>> expected{
      {{0, 1, 200, 201}, seq_mark{seq_state::tracking, 3}},
      {{0}, seq_mark{seq_state::tracking, 0}}, // gpu
      {{400}, seq_mark{seq_state::tracking, 4}},
      {{900}, seq_mark{seq_state::tracking, 9}},
      {{}, seq_mark{}}, // the reset
      {{0}, seq_mark{seq_state::tracking, 0}},
  };
  EXPECT_EQ(got, expected);

  // Only the grouping differs from the same batches outside a round: the ops
  // in the same order, the same gaps.
  recording_outbox plain_out;
  worker_logic plain{config(), plain_out};
  push_all(plain);
  EXPECT_EQ(plain_out.sent.size(), 7u);
  std::vector<uint64_t> round_keys, plain_keys;
  for (const auto& [d, sb] : out.sent)
    for (uint64_t k : keys_of(sb))
      round_keys.push_back(k);
  for (const auto& [d, sb] : plain_out.sent)
    for (uint64_t k : keys_of(sb))
      plain_keys.push_back(k);
  EXPECT_EQ(round_keys, plain_keys);
  EXPECT_EQ(out.gaps.size(), plain_out.gaps.size());
  EXPECT_EQ(out.gaps.size(), 2u); // the jump to 9, and the start over
}

TEST(worker_logic, outside_a_round_every_batch_is_its_own_sub_batch) {
  recording_outbox out;
  worker_logic w{config(), out};
  w.on_push(batch("cpu", 0, 2));
  w.on_push(batch("cpu", 2, 2));
  EXPECT_EQ(out.sent.size(), 2u);
}

TEST(worker_logic, a_round_split_over_destinations_sends_one_sub_batch_per_destination) {
  recording_outbox out;
  worker_logic w{config(2), out};
  w.begin_round();
  for (uint64_t first = 0; first < 40; first += 4)
    w.on_push(batch("cpu", first, 4));
  w.end_round();
  std::set<uint32_t> destinations;
  size_t ops = 0;
  for (const auto& [d, sb] : out.sent) {
    destinations.insert(d);
    ops += sb.ops.size();
  }
  EXPECT_EQ(out.sent.size(), destinations.size()) << "one per destination";
  EXPECT_EQ(ops, 40u);
}

} // namespace
} // namespace lmcc::actors
