// lmcc-microbench, index part: the shard's apply step, one sub-batch of ops
// into a kv_index that already holds millions of keys (cold tables, as under a
// flood), and the lookup a P2P request makes beside it.
//
// BM_IndexApply: one iteration applies one sub-batch of `range(0)` admits of
// new random keys for one holder (the index grows as it runs); items/s counts
// ops. BM_IndexLookup8: one iteration reads the holders of 8 keys.
#include "actors/kv_index.hpp"

#include <benchmark/benchmark.h>

#include <cstdint>
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
