// lmcc-microbench, index part: the shard's apply step, one sub-batch of ops
// into a kv_index that already holds millions of keys (cold tables, as under a
// flood), and the lookup a P2P request makes beside it.
//
// BM_IndexApply: one iteration applies one sub-batch of `range(0)` admits of
// new random keys for one holder (the index grows as it runs); items/s counts
// ops. BM_IndexGrowFromEmpty: what an index growing from nothing costs per op
// (every table doubling; fresh pages or reused ones). BM_IndexLookup8: one iteration
// reads the holders of 8 keys.
#include "index/kv_index.hpp"

#include <benchmark/benchmark.h>

#include <cstdint>
#include <malloc.h>
#include <memory>
#include <random>
#include <vector>

namespace {

using lmcc::actors::holder_id;
using lmcc::actors::holder_list;
using lmcc::actors::kv_index;
using lmcc::actors::kv_op;

constexpr uint32_t slot_count = 4096;
constexpr size_t prefilled_keys = 4'000'000;

/// An index of `prefilled_keys` random keys, one holder each; `keys` gets them.
kv_index& prefilled(std::vector<uint64_t>& keys) {
  static kv_index index{slot_count};
  static std::vector<uint64_t> all;
  if (all.empty()) {
    std::mt19937_64 rng{3};
    std::vector<kv_op> ops;
    for (size_t i = 0; i < prefilled_keys; ++i) {
      all.push_back(rng());
      ops.push_back(kv_op{all.back(), true});
      if (ops.size() == 256) {
        index.write().apply(holder_id{1}, ops);
        ops.clear();
      }
    }
  }
  keys = all;
  return index;
}

void BM_IndexApply(benchmark::State& state) {
  std::vector<uint64_t> keys;
  kv_index& index = prefilled(keys);
  std::mt19937_64 rng{static_cast<uint64_t>(state.range(0))};
  std::vector<kv_op> ops(static_cast<size_t>(state.range(0)));
  for (auto _ : state) {
    state.PauseTiming();
    for (auto& op : ops)
      op = kv_op{rng(), true};
    state.ResumeTiming();
    index.write().apply(holder_id{2}, ops);
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_IndexApply)->Arg(50)->Arg(256);

/// What a steady ingest costs the index while it grows: one iteration fills an
/// empty index with `range(0)` random keys (one holder) in sub-batches of 1000,
/// as a node's shard applies a 10 ms round at 100 k ops/s. Unlike
/// BM_IndexApply this pays every table doubling. With `range(1)` = 1 the last
/// index's memory goes back to the kernel first (malloc_trim), so that every
/// page is fresh, as in a node whose index grows: on a VM a page's first touch
/// is dear. With 0 the next index reuses the freed memory.
void BM_IndexGrowFromEmpty(benchmark::State& state) {
  const auto keys = static_cast<size_t>(state.range(0));
  std::mt19937_64 rng{7};
  std::vector<kv_op> ops(1000);
  std::unique_ptr<kv_index> index;
  for (auto _ : state) {
    state.PauseTiming(); // the last index's destruction is not ingest
    index.reset();
    if (state.range(1) != 0)
      malloc_trim(0);
    index = std::make_unique<kv_index>(slot_count);
    state.ResumeTiming();
    for (size_t done = 0; done < keys; done += ops.size()) {
      for (auto& op : ops)
        op = kv_op{rng(), true};
      index->write().apply(holder_id{1}, ops);
    }
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(keys));
}
BENCHMARK(BM_IndexGrowFromEmpty)
    ->ArgsProduct({{2'000'000}, {0, 1}})
    ->ArgNames({"keys", "fresh_pages"})
    ->Unit(benchmark::kMillisecond);

void BM_IndexLookup8(benchmark::State& state) {
  std::vector<uint64_t> keys;
  const kv_index& index = prefilled(keys);
  std::mt19937_64 rng{5};
  std::vector<uint64_t> wanted(8);
  std::vector<holder_list> out(8);
  for (auto _ : state) {
    for (auto& k : wanted)
      k = keys[rng() % keys.size()];
    for (auto& l : out)
      l.clear();
    index.lookup(wanted, out);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(state.iterations() * 8);
}
BENCHMARK(BM_IndexLookup8);

} // namespace
