// hash: the hash functions every node computes the same way, shared by the
// ids of index/ids.hpp (worker uids, holder ids, the slot of a key) and the
// ring of cluster/ring.hpp (virtual-node points, placement fingerprints).
//
// - mix64: splitmix64's finalizer, a bijection on 64-bit values that makes
//   every input bit reach every output bit.
// - slot_of: the slot of a key, mix64(key) mod slot_count.
// - fnv1a_hasher: FNV-1a, 64 bit, fed field by field with length prefixes and
//   finished with mix64.
//
// They are part of the disk format (worker uids and holder ids are stored, see
// persistence/schema.hpp) and of the cluster's agreement (every node must place
// the same slot on the same nodes), so their values are pinned by tests
// (tests/index/ids_test.cpp, tests/cluster/hash_test.cpp). Kept in a header of
// their own, free of persistence/ and CAF, so that cluster/ needs nothing else.
//
//   uint32_t s = slot_of(key, 4096);
//   uint64_t h = fnv1a_hasher{}.add("n1").add_u64(7).finish();
//
// Context: pure constexpr functions; thread-safe. CAF-free.
#pragma once

#include <cstdint>
#include <string_view>

namespace lmcc::cluster {

/// splitmix64's finalizer: spreads chunk hashes (already hashes, but not
/// uniformly in their low bits after CPython's mod 2^61-1) over slots.
constexpr uint64_t mix64(uint64_t x) noexcept {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}

/// slot = mix64(key) mod slot_count; REQUIRES: slot_count is a power of two.
constexpr uint32_t slot_of(uint64_t key, uint32_t slot_count) noexcept {
  return static_cast<uint32_t>(mix64(key) & (slot_count - 1));
}

/// FNV-1a, 64 bit, fed field by field. add(bytes) prefixes the length so that
/// ("ab", "c") and ("a", "bc") differ; add_u64 feeds 8 bytes, little-endian.
class fnv1a_hasher {
public:
  constexpr fnv1a_hasher& add(std::string_view bytes) noexcept {
    add_u64(bytes.size());
    for (char c : bytes)
      add_byte(static_cast<uint8_t>(c));
    return *this;
  }
  constexpr fnv1a_hasher& add_u64(uint64_t v) noexcept {
    for (int i = 0; i < 8; ++i)
      add_byte(static_cast<uint8_t>(v >> (8 * i)));
    return *this;
  }
  constexpr fnv1a_hasher& add_byte(uint8_t b) noexcept {
    state_ ^= b;
    state_ *= 0x100000001b3ULL;
    return *this;
  }
  /// The hash of everything added so far, mixed.
  constexpr uint64_t finish() const noexcept { return mix64(state_); }

private:
  uint64_t state_ = 0xcbf29ce484222325ULL;
};

} // namespace lmcc::cluster
