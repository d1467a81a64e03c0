#include "actors/kv_index.hpp"

#include <gtest/gtest.h>

#include <random>
#include <set>

using namespace lmcc::actors;

namespace {

const holder_id a0 = make_holder(1, 0);
const holder_id a1 = make_holder(1, 1);
const holder_id b0 = make_holder(2, 0);

} // namespace

TEST(kv_index, admit_then_evict_leaves_nothing_behind) {
  kv_index idx;
  EXPECT_TRUE(idx.admit(42, a0));
  EXPECT_FALSE(idx.admit(42, a0)); // a set, not a multiset
  EXPECT_EQ(idx.entries(), 1u);
  EXPECT_TRUE(idx.evict(42, a0));
  EXPECT_FALSE(idx.evict(42, a0));
  EXPECT_EQ(idx.entries(), 0u);
  EXPECT_EQ(idx.keys(), 0u);
  EXPECT_TRUE(idx.entries_by_holder().empty());
}

TEST(kv_index, holders_keep_admission_order_when_the_first_one_leaves) {
  kv_index idx;
  idx.admit(7, b0);
  idx.admit(7, a0);
  idx.admit(7, a1);
  EXPECT_EQ(idx.holders(7), (kv_index::holder_list{b0, a0, a1}));
  idx.evict(7, b0);
  EXPECT_EQ(idx.holders(7), (kv_index::holder_list{a0, a1}));
  idx.evict(7, a1);
  EXPECT_EQ(idx.holders(7), (kv_index::holder_list{a0}));
  EXPECT_TRUE(idx.holds(7, a0));
  EXPECT_FALSE(idx.holds(7, a1));
}

TEST(kv_index, evicting_an_absent_key_is_a_no_op) {
  kv_index idx;
  idx.admit(1, a0);
  EXPECT_FALSE(idx.evict(2, a0));
  EXPECT_FALSE(idx.evict(1, b0));
  EXPECT_EQ(idx.entries(), 1u);
}

TEST(kv_index, apply_runs_ops_in_order) {
  kv_index idx;
  std::vector<kv_op> ops{{5, true}, {5, false}, {6, true}, {5, true}, {6, false}};
  EXPECT_EQ(idx.apply(a0, ops), 1);
  EXPECT_TRUE(idx.holds(5, a0));
  EXPECT_FALSE(idx.holds(6, a0));
}

TEST(kv_index, erase_holders_removes_one_location_or_a_whole_worker) {
  kv_index idx;
  for (uint64_t k = 0; k < 100; ++k) {
    idx.admit(k, a0);
    if (k % 2 == 0)
      idx.admit(k, a1);
    if (k % 3 == 0)
      idx.admit(k, b0);
  }
  EXPECT_EQ(idx.erase_holders([](holder_id h) { return h == a1; }), 50u);
  EXPECT_EQ(idx.entries_by_holder().count(a1), 0u);
  EXPECT_EQ(idx.erase_holders([](holder_id h) { return worker_of(h) == 1; }), 100u);
  EXPECT_EQ(idx.entries(), 34u);
  EXPECT_EQ(idx.keys(), 34u);
  EXPECT_EQ(idx.holders(3), (kv_index::holder_list{b0}));
}

TEST(kv_index, matches_a_reference_model_under_random_operations) {
  std::mt19937_64 rng{12345};
  kv_index idx;
  std::set<std::pair<uint64_t, holder_id>> model;
  const holder_id holders[] = {a0, a1, b0, make_holder(3, 2)};
  for (int i = 0; i < 200000; ++i) {
    uint64_t key = rng() % 500;
    holder_id h = holders[rng() % 4];
    if (rng() % 3 != 0) {
      EXPECT_EQ(idx.admit(key, h), model.emplace(key, h).second);
    } else {
      EXPECT_EQ(idx.evict(key, h), model.erase({key, h}) == 1);
    }
    if (i % 50000 == 0)
      idx.erase_holders([&](holder_id x) { return x == holders[i % 4]; }),
          std::erase_if(model, [&](const auto& e) { return e.second == holders[i % 4]; });
  }
  EXPECT_EQ(idx.entries(), model.size());
  for (const auto& [key, h] : model)
    ASSERT_TRUE(idx.holds(key, h));
  uint64_t total = 0;
  for (const auto& [h, n] : idx.entries_by_holder())
    total += n;
  EXPECT_EQ(total, model.size());
}

TEST(kv_index, slot_of_spreads_sequential_keys_over_all_slots) {
  std::vector<int> per_slot(64, 0);
  for (uint64_t k = 0; k < 64 * 1000; ++k)
    ++per_slot[slot_of(k << 20, 64)];
  for (int n : per_slot) {
    EXPECT_GT(n, 800);
    EXPECT_LT(n, 1200);
  }
}
