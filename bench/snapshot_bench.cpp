// lmcc-microbench, persistence part: encoding one slot's snapshot value, the
// step a snapshot round repeats for every dirty slot (4096 slots: a node with
// 10 M entries writes ~2,400 entries per slot).
//
// One iteration is one slot: add every entry, then finish(); items/s counts
// entries. Inputs are drawn from a fixed seed.
#include "persistence/records.hpp"

#include <benchmark/benchmark.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace {

using lmcc::persistence::slot_snapshot_writer;

struct slot_entries {
  std::vector<uint64_t> keys;
  std::vector<uint64_t> holders; ///< one per key: most keys have one holder
};

/// `n` random keys (chunk hashes), each held by one of `holder_count` holders.
slot_entries make_slot(size_t n, size_t holder_count) {
  std::mt19937_64 rng{7};
  std::vector<uint64_t> pool(holder_count);
  for (auto& h : pool)
    h = rng() >> 1;
  slot_entries s;
  for (size_t i = 0; i < n; ++i) {
    s.keys.push_back(rng());
    s.holders.push_back(pool[rng() % holder_count]);
  }
  return s;
}

void BM_SlotSnapshot_Encode(benchmark::State& state) {
  const auto slot =
      make_slot(static_cast<size_t>(state.range(0)), static_cast<size_t>(state.range(1)));
  std::string out;
  for (auto _ : state) {
    slot_snapshot_writer w{17, 123456};
    w.reserve(slot.keys.size(), slot.keys.size()); // as the shard does
    for (size_t i = 0; i < slot.keys.size(); ++i)
      w.add(slot.keys[i], std::span<const uint64_t>(&slot.holders[i], 1));
    out.clear();
    w.finish(out);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * out.size()));
}
// 10 M and 1 M entries over 4096 slots; 8 workers, and a fleet of 64 holders.
BENCHMARK(BM_SlotSnapshot_Encode)->Args({2441, 8})->Args({244, 8})->Args({2441, 64});

} // namespace
