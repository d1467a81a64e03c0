// Helpers shared by the kv_index tests (kv_index_test.cpp and
// kv_index_concurrency_test.cpp): holders, keys that fall in a slot, and
// reads through the public API.
#pragma once
#include "index/kv_index.hpp"

// The index is CAF-free: every test that includes this checks it.
#if defined(CAF_VERSION)
#error "kv_index pulls in CAF"
#endif

#include <algorithm>
#include <cstdint>
#include <vector>

namespace lmcc::actors::kv_index_testing {

inline constexpr uint32_t slots = 64;

inline holder_id holder(int i) {
  return make_holder_id("inst", msg::wire_int{i}, "LocalCPUBackend");
}

/// `n` distinct keys that fall in `slot`.
inline std::vector<uint64_t> slot_keys(uint32_t slot, size_t n, uint32_t slot_count = slots) {
  std::vector<uint64_t> out;
  for (uint64_t k = 1; out.size() < n; ++k)
    if (slot_of(k * 0x9e3779b97f4a7c15ULL, slot_count) == slot)
      out.push_back(k * 0x9e3779b97f4a7c15ULL);
  return out;
}

inline std::vector<holder_id> sorted_holders(const kv_index& idx, uint64_t key) {
  holder_list out;
  idx.read().holders(key, out);
  std::vector<holder_id> v(out.begin(), out.end());
  std::sort(v.begin(), v.end());
  return v;
}

/// Runs the pending drop jobs to the end.
inline void finish_drops(kv_index& idx) {
  auto w = idx.write();
  while (w.drop_step(7)) {
  }
}

} // namespace lmcc::actors::kv_index_testing
