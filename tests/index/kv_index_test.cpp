// kv_index: per-slot tables, multi-holder keys in a holder arena, lazy drop
// jobs, clear_slot and the bulk loader, checked against what the header
// promises and against a plain std::map<key, std::set<holder>> model.
// Readers beside the writer: kv_index_concurrency_test.cpp.
// CAF-free: linked with lmcc_index only.
#include "index/kv_index.hpp"
#include "tests/index/kv_index_test_support.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <thread>

namespace lmcc::actors {
namespace {

using namespace kv_index_testing;

/// What a slot should look like, recomputed from what readers see.
kv_index::slot_summary recompute(const kv_index& idx, uint32_t slot) {
  kv_index::slot_summary s;
  idx.read().for_each_key(slot, [&](uint64_t key, std::span<const holder_id> hs) {
    ++s.keys;
    for (holder_id h : hs) {
      ++s.entries;
      s.digest ^= kv_index::entry_hash(key, h);
    }
  });
  return s;
}

using model = std::map<uint64_t, std::set<holder_id>>;

/// Every slot's keys, entries and digest, the totals and the per-holder
/// counts equal the model's. REQUIRES: no drop pending (keys() and the slot
/// summaries still include what a pending drop hides).
void expect_matches(const kv_index& idx, const model& m) {
  std::vector<kv_index::slot_summary> want(idx.slot_count());
  holder_counts counts;
  uint64_t entries = 0, keys = 0;
  for (const auto& [key, hs] : m) {
    if (hs.empty())
      continue;
    auto& s = want[slot_of(key, idx.slot_count())];
    ++s.keys;
    ++keys;
    for (holder_id h : hs) {
      ++s.entries;
      ++entries;
      ++counts[h];
      s.digest ^= kv_index::entry_hash(key, h);
    }
  }
  auto r = idx.read();
  ASSERT_FALSE(r.drops_pending());
  EXPECT_EQ(r.entries(), entries);
  EXPECT_EQ(r.keys(), keys);
  EXPECT_EQ(r.entries_by_holder(), counts);
  for (uint32_t s = 0; s < idx.slot_count(); ++s) {
    const auto got = r.slot(s);
    ASSERT_EQ(got.keys, want[s].keys) << "slot " << s;
    ASSERT_EQ(got.entries, want[s].entries) << "slot " << s;
    ASSERT_EQ(got.digest, want[s].digest) << "slot " << s;
  }
}

TEST(kv_index, admitting_and_evicting_one_holder_updates_counts_totals_and_its_slot) {
  kv_index idx{slots};
  const auto ks = slot_keys(5, 3);
  {
    auto w = idx.write();
    EXPECT_TRUE(w.admit(ks[0], holder(1)));
    EXPECT_TRUE(w.admit(ks[1], holder(1)));
    EXPECT_TRUE(w.admit(ks[2], holder(2)));
  }
  model m{{ks[0], {holder(1)}}, {ks[1], {holder(1)}}, {ks[2], {holder(2)}}};
  expect_matches(idx, m);
  EXPECT_TRUE(idx.read().holds(ks[0], holder(1)));
  EXPECT_FALSE(idx.read().holds(ks[0], holder(2)));
  EXPECT_EQ(sorted_holders(idx, ks[2]), (std::vector<holder_id>{holder(2)}));
  EXPECT_TRUE(sorted_holders(idx, 12345).empty());
  EXPECT_TRUE(idx.write().evict(ks[0], holder(1)));
  m.erase(ks[0]);
  expect_matches(idx, m);
  EXPECT_FALSE(idx.read().holds(ks[0], holder(1)));
  EXPECT_EQ(idx.read().entries_by_holder().at(holder(1)), 1u);
  EXPECT_TRUE(idx.write().evict(ks[1], holder(1)));
  EXPECT_FALSE(idx.read().entries_by_holder().contains(holder(1))); // no zero counts kept
}

TEST(kv_index, a_key_grows_through_the_size_classes_and_shrinks_back_inline) {
  kv_index idx{slots};
  const uint64_t key = slot_keys(9, 1)[0];
  idx.write().admit(key, holder(0));
  const size_t one_holder = idx.read().memory_bytes();
  std::vector<holder_id> hs{holder(0)};
  size_t previous = one_holder;
  for (int i = 1; i < 70; ++i) { // classes 1 (2 holders) .. 7 (128)
    ASSERT_TRUE(idx.write().admit(key, holder(i)));
    hs.push_back(holder(i));
    std::sort(hs.begin(), hs.end());
    ASSERT_EQ(sorted_holders(idx, key), hs) << i;
    ASSERT_GE(idx.read().memory_bytes(), previous);
    previous = idx.read().memory_bytes();
    for (int j = 0; j <= i; ++j)
      ASSERT_TRUE(idx.read().holds(key, holder(j)));
  }
  EXPECT_GT(previous, one_holder);
  const auto s = idx.read().slot(slot_of(key, slots));
  EXPECT_EQ(s.keys, 1u);
  EXPECT_EQ(s.entries, 70u);
  EXPECT_EQ(s.digest, recompute(idx, slot_of(key, slots)).digest);
  // Shrinking back: every remaining holder stays, memory follows down.
  for (int i = 69; i >= 1; --i) {
    ASSERT_TRUE(idx.write().evict(key, holder(i)));
    hs.erase(std::find(hs.begin(), hs.end(), holder(i)));
    ASSERT_EQ(sorted_holders(idx, key), hs) << i;
    ASSERT_FALSE(idx.read().holds(key, holder(i)));
  }
  EXPECT_EQ(idx.read().memory_bytes(), one_holder); // inline again: no arena chunk left
  EXPECT_EQ(idx.read().entries(), 1u);
  EXPECT_EQ(idx.read().keys(), 1u);
}

TEST(kv_index, repeated_admits_and_absent_evicts_change_nothing) {
  kv_index idx{slots};
  const auto ks = slot_keys(3, 2);
  idx.write().admit(ks[0], holder(1));
  idx.write().admit(ks[1], holder(1));
  idx.write().admit(ks[1], holder(2));
  const auto before = idx.read().slot(3);
  EXPECT_FALSE(idx.write().admit(ks[0], holder(1)));
  EXPECT_FALSE(idx.write().admit(ks[1], holder(2)));
  EXPECT_FALSE(idx.write().evict(ks[0], holder(2)));
  EXPECT_FALSE(idx.write().evict(ks[1], holder(3)));
  EXPECT_FALSE(idx.write().evict(slot_keys(3, 3)[2], holder(1)));
  const auto after = idx.read().slot(3);
  EXPECT_EQ(after.version, before.version);
  EXPECT_EQ(after.digest, before.digest);
  EXPECT_EQ(after.entries, 3u);
  EXPECT_EQ(idx.read().entries(), 3u);
}

TEST(kv_index, versions_bump_on_every_change_and_only_in_the_changed_slot) {
  kv_index idx{slots};
  const auto a = slot_keys(1, 2);
  const uint64_t b = slot_keys(2, 1)[0];
  auto version = [&](uint32_t s) { return idx.read().slot(s).version; };
  uint64_t v1 = version(1);
  const uint64_t v2 = version(2);
  idx.write().admit(a[0], holder(1));
  EXPECT_GT(version(1), v1);
  v1 = version(1);
  idx.write().admit(a[0], holder(2)); // becomes multi-holder
  EXPECT_GT(version(1), v1);
  v1 = version(1);
  idx.write().evict(a[0], holder(1));
  EXPECT_GT(version(1), v1);
  v1 = version(1);
  const kv_op batch[] = {{a[1], true}, {a[1], false}};
  EXPECT_EQ(idx.write().apply(holder(3), batch), 0);
  EXPECT_GE(version(1), v1 + 2); // two changes, even though they cancel out
  v1 = version(1);
  idx.write().begin_drop(holder_set{holder(2)});
  finish_drops(idx);
  EXPECT_GT(version(1), v1); // cleaning changed the slot
  v1 = version(1);
  idx.write().admit(a[1], holder(4));
  idx.write().clear_slot(1);
  EXPECT_GE(version(1), v1 + 2);
  EXPECT_EQ(version(2), v2);
  idx.write().admit(b, holder(1));
  EXPECT_GT(version(2), v2);
}

TEST(kv_index, every_slot_digest_is_the_xor_of_entry_hash_over_its_entries) {
  kv_index idx{slots};
  model m;
  std::mt19937_64 rng{3};
  for (int i = 0; i < 5000; ++i) {
    const uint64_t key = (rng() % 700) * 0x2545f4914f6cdd1dULL;
    const holder_id h = holder(static_cast<int>(rng() % 6));
    if (rng() % 3 == 0) {
      EXPECT_EQ(idx.write().evict(key, h), m[key].erase(h) == 1);
    } else {
      EXPECT_EQ(idx.write().admit(key, h), m[key].insert(h).second);
    }
  }
  expect_matches(idx, m);
  for (uint32_t s = 0; s < slots; ++s) {
    const auto want = recompute(idx, s);
    EXPECT_EQ(idx.read().slot(s).digest, want.digest) << s;
    EXPECT_EQ(idx.read().slot(s).keys, want.keys) << s;
  }
}

TEST(kv_index, begin_drop_hides_the_holder_at_once_and_takes_it_out_of_the_counts) {
  kv_index idx{slots};
  const auto ks = slot_keys(4, 3);
  const uint64_t other_slot = slot_keys(40, 1)[0];
  {
    auto w = idx.write();
    for (uint64_t k : ks)
      w.admit(k, holder(1));
    w.admit(ks[0], holder(2));
    w.admit(other_slot, holder(1));
  }
  idx.write().begin_drop(holder_set{holder(1)});
  auto r = idx.read();
  EXPECT_TRUE(r.drops_pending());
  EXPECT_EQ(r.entries(), 1u);
  EXPECT_EQ(r.entries_by_holder(), (holder_counts{{holder(2), 1}}));
  for (uint64_t k : {ks[0], ks[1], ks[2], other_slot})
    EXPECT_FALSE(r.holds(k, holder(1))) << k;
  holder_list out;
  r.holders(ks[0], out);
  EXPECT_EQ(std::vector<holder_id>(out.begin(), out.end()), (std::vector<holder_id>{holder(2)}));
  out.clear();
  r.holders(ks[1], out);
  EXPECT_TRUE(out.empty());
  size_t visited = 0;
  r.for_each_key(4, [&](uint64_t key, std::span<const holder_id> hs) {
    ++visited;
    EXPECT_EQ(key, ks[0]); // keys with only hidden holders are skipped
    EXPECT_EQ(hs.size(), 1u);
  });
  EXPECT_EQ(visited, 1u);
}

TEST(kv_index, an_op_of_a_dropped_holder_first_cleans_its_slot) {
  kv_index idx{slots};
  const auto ks = slot_keys(7, 3);
  const auto far = slot_keys(50, 2);
  {
    auto w = idx.write();
    w.admit(ks[0], holder(1));
    w.admit(ks[1], holder(1));
    w.admit(ks[1], holder(2));
    w.admit(far[0], holder(1));
  }
  idx.write().begin_drop(holder_set{holder(1)});
  // A new op of holder 1 in slot 7: the old entries of slot 7 go first.
  EXPECT_TRUE(idx.write().admit(ks[2], holder(1)));
  EXPECT_TRUE(idx.write().admit(ks[0], holder(1))); // re-admitted: it was dropped
  auto r = idx.read();
  const auto s7 = r.slot(7);
  EXPECT_EQ(s7.entries, 3u); // ks[0]:1, ks[1]:2, ks[2]:1 -- the old ks[1]:1 is gone
  EXPECT_EQ(s7.digest, recompute(idx, 7).digest);
  EXPECT_TRUE(r.holds(ks[2], holder(1)));
  EXPECT_TRUE(r.holds(ks[0], holder(1)));
  EXPECT_FALSE(r.holds(ks[1], holder(1)));
  EXPECT_FALSE(r.holds(far[0], holder(1))); // slot 50 is still hidden, not yet cleaned
  EXPECT_EQ(r.entries_by_holder().at(holder(1)), 2u);
  EXPECT_EQ(r.entries(), 3u);
  EXPECT_TRUE(r.drops_pending());
}

TEST(kv_index, drop_step_cleans_a_bounded_number_of_slots_until_the_job_is_done) {
  kv_index idx{slots};
  model m;
  for (uint32_t s = 0; s < slots; ++s)
    for (uint64_t k : slot_keys(s, 2)) {
      idx.write().admit(k, holder(1));
      idx.write().admit(k, holder(2));
      m[k] = {holder(2)};
    }
  idx.write().begin_drop(holder_set{holder(1)});
  int steps = 0;
  {
    auto w = idx.write();
    while (w.drop_step(16))
      ++steps;
  }
  EXPECT_EQ(steps, 3); // 64 slots, 16 a step: the fourth step finishes
  EXPECT_FALSE(idx.read().drops_pending());
  expect_matches(idx, m);
}

TEST(kv_index, several_pending_drop_jobs_are_cleaned_together_and_keep_the_others) {
  // A fleet deregistering at once: one job per worker, cleaned in one pass per slot.
  kv_index idx{slots};
  model m;
  for (uint32_t s = 0; s < slots; ++s)
    for (uint64_t k : slot_keys(s, 3)) {
      for (int h : {1, 2, 3, 4})
        idx.write().admit(k, holder(h));
      m[k] = {holder(4)};
    }
  const uint64_t lone = slot_keys(7, 4)[3];
  idx.write().admit(lone, holder(2)); // a key held only by a dropped holder
  for (int h : {1, 2, 3})
    idx.write().begin_drop(holder_set{holder(h)});
  EXPECT_EQ(idx.read().entries(), m.size()); // hidden at once
  int steps = 0;
  {
    auto w = idx.write();
    while (w.drop_step(16))
      ++steps;
  }
  EXPECT_EQ(steps, 3); // 64 slots for all three jobs, 16 a step
  EXPECT_FALSE(idx.read().drops_pending());
  EXPECT_FALSE(idx.read().holds(lone, holder(2)));
  expect_matches(idx, m);
}

TEST(kv_index, a_drop_step_stops_early_once_its_slots_held_max_keys) {
  kv_index idx{slots};
  for (uint32_t s = 0; s < slots; ++s)
    for (uint64_t k : slot_keys(s, 5))
      idx.write().admit(k, holder(1));
  idx.write().begin_drop(holder_set{holder(1)});
  int steps = 0;
  {
    auto w = idx.write();
    // 5 keys a slot: a budget of 12 keys stops after the third slot (15 walked).
    while (w.drop_step(16, 12))
      ++steps;
  }
  EXPECT_EQ(steps, 21); // 64 slots, 3 a step: the 22nd step finishes
  EXPECT_EQ(idx.read().entries(), 0u);
  EXPECT_FALSE(idx.read().drops_pending());
}

TEST(kv_index, dropping_a_holder_twice_removes_what_it_admitted_in_between) {
  kv_index idx{slots};
  const auto a = slot_keys(10, 2);
  const auto b = slot_keys(20, 2);
  idx.write().admit(a[0], holder(1));
  idx.write().admit(b[0], holder(1));
  idx.write().begin_drop(holder_set{holder(1)});
  idx.write().admit(a[1], holder(1)); // cleans slot 10, lands there
  EXPECT_EQ(idx.read().entries(), 1u);
  idx.write().begin_drop(holder_set{holder(1), holder(3)});
  EXPECT_EQ(idx.read().entries(), 0u);
  EXPECT_FALSE(idx.read().holds(a[1], holder(1)));
  idx.write().admit(b[1], holder(1)); // cleans slot 20 for both jobs
  finish_drops(idx);
  expect_matches(idx, model{{b[1], {holder(1)}}});
}

TEST(kv_index, begin_drop_with_a_skip_bitmap_cleans_only_the_other_slots) {
  kv_index idx{slots};
  const uint64_t in5 = slot_keys(5, 1)[0];
  const uint64_t in6 = slot_keys(6, 1)[0];
  idx.write().admit(in5, holder(1));
  idx.write().admit(in6, holder(2));
  std::vector<bool> skip(slots, true);
  skip[5] = false; // only slot 5 holds entries of holder 1
  idx.write().begin_drop(holder_set{holder(1)}, &skip);
  EXPECT_TRUE(idx.read().drops_pending());
  EXPECT_FALSE(idx.read().holds(in5, holder(1)));
  {
    auto w = idx.write();
    EXPECT_FALSE(w.drop_step(1)); // one slot to clean: done in one step
  }
  expect_matches(idx, model{{in6, {holder(2)}}});
  // Every slot skipped (a holder with nothing left anywhere): no job queued.
  const std::vector<bool> all(slots, true);
  idx.write().begin_drop(holder_set{holder(9)}, &all);
  EXPECT_FALSE(idx.read().drops_pending());
  expect_matches(idx, model{{in6, {holder(2)}}});
}

TEST(kv_index, clear_slot_empties_one_slot_and_its_counts_even_with_a_drop_pending) {
  kv_index idx{slots};
  const auto ks = slot_keys(11, 3);
  const uint64_t keep = slot_keys(12, 1)[0];
  {
    auto w = idx.write();
    w.admit(ks[0], holder(1));
    w.admit(ks[1], holder(1));
    w.admit(ks[1], holder(2));
    w.admit(ks[2], holder(3));
    w.admit(keep, holder(1));
  }
  idx.write().begin_drop(holder_set{holder(3)});
  EXPECT_EQ(idx.write().clear_slot(11), 3u); // what readers saw there
  finish_drops(idx);
  expect_matches(idx, model{{keep, {holder(1)}}});
  EXPECT_EQ(idx.write().clear_slot(11), 0u);
}

TEST(kv_index, apply_returns_the_net_change_and_apply_where_skips_unwanted_slots) {
  kv_index idx{slots};
  const uint64_t a = slot_keys(1, 1)[0];
  const uint64_t b = slot_keys(2, 1)[0];
  const kv_op ops[] = {{a, true}, {b, true}, {a, true}, {b, false}, {a, false}, {a, true}};
  EXPECT_EQ(idx.write().apply(holder(1), ops), 1);
  expect_matches(idx, model{{a, {holder(1)}}});
  const kv_op more[] = {{a, false}, {b, true}};
  EXPECT_EQ(idx.write().apply_where(holder(1), more, [](uint32_t s) { return s == 2; }), 1);
  expect_matches(idx, model{{a, {holder(1)}}, {b, {holder(1)}}});
}

TEST(kv_index, bulk_loaders_on_several_threads_give_the_same_index_as_sequential_admits) {
  constexpr uint32_t n_slots = 256;
  std::map<uint32_t, std::vector<std::pair<uint64_t, std::vector<holder_id>>>> data;
  std::mt19937_64 rng{17};
  for (int i = 0; i < 20'000; ++i) {
    const uint64_t key = rng();
    std::vector<holder_id> hs{holder(static_cast<int>(rng() % 3))};
    if (i % 3 == 0)
      hs.push_back(holder(3 + static_cast<int>(rng() % 40)));
    if (i % 7 == 0)
      for (int j = 50; j < 60; ++j)
        hs.push_back(holder(j));
    data[slot_of(key, n_slots)].emplace_back(key, hs);
  }
  kv_index sequential{n_slots};
  for (const auto& [slot, keys] : data)
    for (const auto& [key, hs] : keys)
      for (holder_id h : hs)
        sequential.write().admit(key, h);

  kv_index loaded{n_slots};
  constexpr int threads = 4; // four arena groups each
  std::vector<kv_index::bulk_loader> loaders(threads, kv_index::bulk_loader{loaded});
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      for (const auto& [slot, keys] : data) {
        if (static_cast<int>(loaded.arena_group(slot)) / 4 != t)
          continue;
        loaders[t].reserve(slot, keys.size());
        for (const auto& [key, hs] : keys)
          loaders[t].add(slot, key, hs);
      }
    });
  for (auto& th : pool)
    th.join();
  for (auto& l : loaders)
    l.merge();

  auto a = sequential.read();
  auto b = loaded.read();
  EXPECT_EQ(b.entries(), a.entries());
  EXPECT_EQ(b.keys(), a.keys());
  EXPECT_EQ(b.entries_by_holder(), a.entries_by_holder());
  for (uint32_t s = 0; s < n_slots; ++s) {
    ASSERT_EQ(b.slot(s).digest, a.slot(s).digest) << s;
    ASSERT_EQ(b.slot(s).entries, a.slot(s).entries) << s;
    ASSERT_EQ(b.slot(s).keys, a.slot(s).keys) << s;
  }
  for (const auto& [slot, keys] : data)
    for (const auto& [key, hs] : keys) {
      holder_list x, y;
      a.holders(key, x);
      b.holders(key, y);
      std::sort(x.begin(), x.end());
      std::sort(y.begin(), y.end());
      ASSERT_EQ(x, y);
    }
}

TEST(kv_index, after_every_holder_is_dropped_and_cleaned_memory_is_back_near_empty) {
  kv_index idx{slots};
  const size_t empty = idx.read().memory_bytes();
  std::mt19937_64 rng{5};
  holder_set all;
  for (int h = 0; h < 12; ++h)
    all.insert(holder(h));
  for (int i = 0; i < 60'000; ++i) {
    const uint64_t key = rng() % 20'000;
    idx.write().admit(key * 0x9e3779b97f4a7c15ULL, holder(static_cast<int>(rng() % 12)));
  }
  EXPECT_GT(idx.read().memory_bytes(), empty + 200'000);
  // A deregistration of every rank: one drop per holder, cleaned in steps.
  for (holder_id h : all)
    idx.write().begin_drop(holder_set{h});
  EXPECT_EQ(idx.read().entries(), 0u);
  finish_drops(idx);
  expect_matches(idx, model{});
  EXPECT_LE(idx.read().memory_bytes(), empty + 1024) << "tables or arena chunks leaked";
}

TEST(kv_index, randomized_operations_match_a_map_of_sets) {
  kv_index idx{slots};
  model m;
  std::mt19937_64 rng{20240611};
  std::vector<uint64_t> pool;
  for (int i = 0; i < 600; ++i)
    pool.push_back(rng());
  auto pick_holder = [&] { return holder(static_cast<int>(rng() % 10)); };
  for (int step = 0; step < 30'000; ++step) {
    const uint64_t key = pool[rng() % pool.size()];
    const auto dice = rng() % 1000;
    if (dice < 450) {
      const holder_id h = pick_holder();
      ASSERT_EQ(idx.write().admit(key, h), m[key].insert(h).second) << step;
    } else if (dice < 800) {
      const holder_id h = pick_holder();
      ASSERT_EQ(idx.write().evict(key, h), m[key].erase(h) == 1) << step;
    } else if (dice < 900) {
      const holder_id h = pick_holder();
      std::vector<kv_op> ops;
      int64_t net = 0;
      for (int i = 0; i < 20; ++i) {
        const uint64_t k = pool[rng() % pool.size()];
        const bool admit = rng() % 2 == 0;
        ops.push_back({k, admit});
        net += admit ? (m[k].insert(h).second ? 1 : 0) : -(m[k].erase(h) == 1 ? 1 : 0);
      }
      ASSERT_EQ(idx.write().apply(h, ops), net) << step;
    } else if (dice < 920) {
      holder_set hs{pick_holder()};
      if (rng() % 2 == 0)
        hs.insert(pick_holder());
      for (auto& [k, set] : m)
        for (holder_id h : hs)
          set.erase(h);
      idx.write().begin_drop(std::move(hs));
    } else if (dice < 995) {
      idx.write().drop_step(static_cast<uint32_t>(1 + rng() % 8));
    } else {
      const auto s = static_cast<uint32_t>(rng() % slots);
      uint64_t visible = 0;
      for (auto& [k, set] : m)
        if (slot_of(k, slots) == s) {
          visible += set.size();
          set.clear();
        }
      ASSERT_EQ(idx.write().clear_slot(s), visible) << step;
    }
    if (step % 500 == 0 || step == 29'999) {
      auto r = idx.read();
      uint64_t entries = 0;
      holder_counts counts;
      for (const auto& [k, set] : m) {
        std::vector<holder_id> want(set.begin(), set.end());
        ASSERT_EQ(sorted_holders(idx, k), want) << "step " << step << " key " << k;
        for (holder_id h : set)
          ++counts[h];
        entries += set.size();
      }
      ASSERT_EQ(r.entries(), entries) << step;
      ASSERT_EQ(r.entries_by_holder(), counts) << step;
    }
    if (step % 5000 == 4999) {
      finish_drops(idx);
      expect_matches(idx, m);
      ASSERT_FALSE(HasFatalFailure()) << step;
    }
  }
}

} // namespace
} // namespace lmcc::actors

namespace lmcc::actors {
namespace {

/// Entries per holder over `share` slots, from the index's own contents.
holder_counts walk_share(const kv_index& idx, const std::set<uint32_t>& share) {
  holder_counts out;
  auto r = idx.read();
  for (uint32_t slot : share)
    r.for_each_key(slot, [&](uint64_t, std::span<const holder_id> hs) {
      for (holder_id h : hs)
        ++out[h];
    });
  return out;
}

TEST(kv_index_share, share_counts_follow_admits_evicts_drops_clears_and_loads) {
  const std::set<uint32_t> share{1, 2, 5, 40};
  kv_index idx{slots};
  idx.set_share_slots({share.begin(), share.end()});
  std::mt19937_64 rng{7};
  auto check = [&](const char* when) {
    const auto want = walk_share(idx, share);
    auto r = idx.read();
    EXPECT_EQ(r.share_by_holder(), want) << when;
    uint64_t total = 0;
    for (const auto& [h, n] : want)
      total += n;
    EXPECT_EQ(r.share_entries(), total) << when;
  };
  std::vector<uint64_t> keys;
  for (uint32_t slot : {0U, 1U, 2U, 5U, 9U, 40U, 63U})
    for (uint64_t k : slot_keys(slot, 30))
      keys.push_back(k);
  for (int round = 0; round < 2000; ++round) {
    const uint64_t k = keys[rng() % keys.size()];
    const holder_id h = holder(static_cast<int>(rng() % 3));
    std::vector<kv_op> ops{{k, rng() % 3 != 0}};
    idx.write().apply(h, ops);
  }
  check("after random admits and evicts");
  idx.write().begin_drop(holder_set{holder(1)});
  check("right after a drop began");
  finish_drops(idx);
  check("after the drop finished");
  EXPECT_FALSE(idx.read().share_by_holder().contains(holder(1)));
  idx.write().clear_slot(5);
  check("after a share slot was cleared");

  // A reload counts the same share.
  kv_index loaded{slots};
  loaded.set_share_slots({share.begin(), share.end()});
  {
    kv_index::bulk_loader loader{loaded};
    auto r = idx.read();
    for (uint32_t slot = 0; slot < slots; ++slot)
      r.for_each_key(
          slot, [&](uint64_t key, std::span<const holder_id> hs) { loader.add(slot, key, hs); });
    loader.merge();
  }
  EXPECT_EQ(loaded.read().share_by_holder(), idx.read().share_by_holder());
  EXPECT_EQ(loaded.read().share_entries(), idx.read().share_entries());
  EXPECT_LT(idx.read().share_entries(), idx.read().entries()); // other slots hold some too
}

} // namespace
} // namespace lmcc::actors
