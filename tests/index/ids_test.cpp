// ids: worker uids, holder ids and slots are hashes every node computes the
// same way, and they are part of the disk format: the values are pinned here,
// so a change to the hash is a test failure, not a silent format break.
// CAF-free: linked with lmcc_index only.
#include "index/ids.hpp"

#if defined(CAF_VERSION)
#error "ids pulls in CAF"
#endif

#include <gtest/gtest.h>

#include <set>
#include <vector>

namespace lmcc::actors {
namespace {

using msg::wire_int;

TEST(ids, the_hashes_are_pinned_because_they_are_on_disk) {
  EXPECT_EQ(worker_uid("vllm-0", wire_int{0}), 7237140643972914756ULL);
  EXPECT_EQ(make_holder_id("vllm-0", wire_int{0}, "LocalCPUBackend"), 3475087183308975504ULL);
  EXPECT_EQ(mix64(1), 6238072747940578789ULL);
  EXPECT_EQ(slot_of(1, 4096), 1509u);
  static_assert(worker_uid("a", wire_int{1}) == worker_uid("a", wire_int{1})); // constexpr
}

TEST(ids, holder_ids_keep_bit_63_clear) {
  for (int w = 0; w < 2000; ++w)
    for (const char* loc : {"LocalCPUBackend", "LocalDiskBackend", ""})
      ASSERT_EQ(make_holder_id("inst", wire_int{w}, loc) >> 63, 0u) << w << loc;
}

TEST(ids, every_field_and_the_sign_of_the_worker_id_count) {
  // Length prefixes: ("ab", "c") is not ("a", "bc").
  EXPECT_NE(make_holder_id("ab", wire_int{0}, "c"), make_holder_id("a", wire_int{0}, "bc"));
  EXPECT_NE(worker_uid("a", wire_int{-1}), worker_uid("a", wire_int::from_unsigned(UINT64_MAX)));
  EXPECT_NE(worker_uid("a", wire_int{0}), worker_uid("b", wire_int{0}));
  EXPECT_NE(make_holder_id("a", wire_int{0}, "x"), make_holder_id("a", wire_int{1}, "x"));
  EXPECT_NE(make_holder_id("a", wire_int{0}, "x"), make_holder_id("a", wire_int{0}, "y"));
  // A holder id is not its worker's uid with the top bit cleared.
  EXPECT_NE(make_holder_id("a", wire_int{0}, ""), worker_uid("a", wire_int{0}) & holder_id_mask);
  std::set<uint64_t> seen;
  for (int i = 0; i < 10'000; ++i)
    seen.insert(worker_uid("vllm-" + std::to_string(i % 100), wire_int{i / 100}));
  EXPECT_EQ(seen.size(), 10'000u);
}

TEST(ids, slots_spread_keys_with_biased_low_bits_evenly) {
  // CPython's chunk hashes are mod 2^61-1: keys that differ only in high bits
  // must still land all over the slots.
  constexpr uint32_t slots = 64;
  std::vector<int> per_slot(slots);
  for (uint64_t i = 0; i < 64'000; ++i)
    ++per_slot[slot_of(i << 20, slots)];
  for (uint32_t s = 0; s < slots; ++s) {
    EXPECT_GT(per_slot[s], 800) << s;
    EXPECT_LT(per_slot[s], 1200) << s;
  }
  EXPECT_EQ(slot_of(UINT64_MAX, 1), 0u);
}

} // namespace
} // namespace lmcc::actors
