// kv_index read beside its one writer: readers and lookups on other threads
// while the writer applies, holds a slot, grows and empties the holder arena,
// and drops holders -- they see only real holders, each once, and never wait
// for the writer's index-wide lock. CAF-free: linked with lmcc_index only.
#include "index/kv_index.hpp"
#include "tests/index/kv_index_test_support.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <set>
#include <thread>

namespace lmcc::actors {
namespace {

using namespace kv_index_testing;

TEST(kv_index, readers_see_consistent_keys_while_the_writer_applies) {
  kv_index idx{slots};
  std::atomic<bool> done{false};
  std::atomic<bool> failed{false};
  std::atomic<uint64_t> reads{0};
  std::vector<std::thread> readers;
  const auto ks = slot_keys(3, 50);
  for (int t = 0; t < 2; ++t)
    readers.emplace_back([&] {
      while (!done.load()) {
        for (uint64_t k : ks) {
          holder_list out;
          auto r = idx.read();
          r.holders(k, out);
          std::set<holder_id> unique(out.begin(), out.end());
          if (unique.size() != out.size() || r.slot(3).entries > ks.size() * 8) {
            failed = true; // a holder twice, or more entries than can exist
            return;
          }
        }
        reads.fetch_add(1);
      }
    });
  std::mt19937_64 rng{9};
  for (int i = 0; i < 20'000; ++i) {
    const uint64_t k = ks[rng() % ks.size()];
    const holder_id h = holder(static_cast<int>(rng() % 8));
    if (i % 3000 == 2999)
      idx.write().begin_drop(holder_set{h});
    else if (rng() % 2 == 0)
      idx.write().admit(k, h);
    else
      idx.write().evict(k, h);
    if (i % 100 == 0)
      idx.write().drop_step(4);
  }
  // Let the readers finish at least one more pass over a settled index.
  const uint64_t seen = reads.load();
  while (reads.load() < seen + 2 && !failed.load())
    std::this_thread::yield();
  done = true;
  for (auto& t : readers)
    t.join();
  EXPECT_FALSE(failed.load());
  EXPECT_GT(reads.load(), 0u);
}

TEST(kv_index, a_lookup_reads_while_the_writer_holds_the_index) {
  kv_index idx{slots};
  const auto ks = slot_keys(5, 2);
  idx.write().admit(ks[0], holder(1));
  idx.write().admit(ks[0], holder(2));
  idx.write().admit(ks[1], holder(3));
  // The shard between two ops of a sub-batch, e.g. preempted with the lock held.
  std::optional<kv_index::write_guard> writer;
  writer.emplace(idx.write());
  auto looked_up = std::async(std::launch::async, [&] {
    std::vector<holder_list> out(ks.size());
    idx.lookup(ks, out);
    return out;
  });
  const bool answered = looked_up.wait_for(std::chrono::seconds(10)) == std::future_status::ready;
  writer.reset(); // lets a blocked lookup finish either way
  ASSERT_TRUE(answered) << "lookup waited for the writer's index lock";
  auto out = looked_up.get();
  std::sort(out[0].begin(), out[0].end());
  std::vector<holder_id> both{holder(1), holder(2)};
  std::sort(both.begin(), both.end());
  EXPECT_EQ(std::vector<holder_id>(out[0].begin(), out[0].end()), both);
  EXPECT_EQ(std::vector<holder_id>(out[1].begin(), out[1].end()),
            std::vector<holder_id>{holder(3)});
}

TEST(kv_index, lookup_hides_a_dropped_holder_like_holders_does) {
  kv_index idx{slots};
  const auto ks = slot_keys(7, 3);
  for (uint64_t k : ks) {
    idx.write().admit(k, holder(1));
    idx.write().admit(k, holder(2));
  }
  idx.write().begin_drop(holder_set{holder(1)});
  std::vector<holder_list> out(ks.size());
  idx.lookup(ks, out);
  for (size_t i = 0; i < ks.size(); ++i) {
    EXPECT_EQ(std::vector<holder_id>(out[i].begin(), out[i].end()), sorted_holders(idx, ks[i]));
    EXPECT_EQ(std::vector<holder_id>(out[i].begin(), out[i].end()),
              std::vector<holder_id>{holder(2)});
  }
}

TEST(kv_index, lookups_beside_a_writer_that_grows_and_empties_the_arena_see_only_real_holders) {
  // Keys with up to 40 holders walk the arena's size classes up and down; drops
  // empty whole classes (their chunks and directories given back) while
  // lookups of other slots read blocks of the same arena group.
  kv_index idx{slots};
  std::vector<uint64_t> ks;
  for (uint32_t slot = 0; slot < 8; ++slot)
    for (uint64_t k : slot_keys(slot, 12))
      ks.push_back(k);
  std::set<holder_id> real;
  for (int i = 0; i < 40; ++i)
    real.insert(holder(i));
  std::atomic<bool> done{false};
  std::atomic<bool> failed{false};
  std::atomic<uint64_t> passes{0};
  std::vector<std::thread> readers;
  for (int t = 0; t < 2; ++t)
    readers.emplace_back([&] {
      std::vector<holder_list> out(ks.size());
      while (!done.load()) {
        for (auto& l : out)
          l.clear();
        idx.lookup(ks, out);
        for (const auto& l : out) {
          std::set<holder_id> unique(l.begin(), l.end());
          if (unique.size() != l.size() ||
              !std::includes(real.begin(), real.end(), unique.begin(), unique.end())) {
            failed = true; // a holder twice, or a value that is no holder at all
            return;
          }
        }
        passes.fetch_add(1);
      }
    });
  std::mt19937_64 rng{11};
  for (int round = 0; round < 60 && !failed.load(); ++round) {
    for (int i = 0; i < 2'000; ++i) {
      const uint64_t k = ks[rng() % ks.size()];
      const holder_id h = holder(static_cast<int>(rng() % 40));
      if (rng() % 4 != 0)
        idx.write().admit(k, h);
      else
        idx.write().evict(k, h);
    }
    holder_set all(real.begin(), real.end());
    idx.write().begin_drop(std::move(all));
    finish_drops(idx);
  }
  const uint64_t seen = passes.load();
  while (passes.load() < seen + 2 && !failed.load())
    std::this_thread::yield();
  done = true;
  for (auto& t : readers)
    t.join();
  EXPECT_FALSE(failed.load());
  EXPECT_EQ(idx.read().entries(), 0u);
}

} // namespace
} // namespace lmcc::actors
