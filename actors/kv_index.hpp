// kv_index: one shard's part of the chunk index, key -> small set of holders.
//
// A holder is an interned (instance, worker, location) triple; see holder_id.
// The index is flat and compact because it is the node's memory: a key held
// by one holder costs one 16-byte slot of an open-addressing table; keys held
// by several holders (every TP rank of an instance holds the same chunks) keep
// the extra holders in a side pool. Per-holder entry counts are kept so that
// statistics never scan.
//
//   kv_index idx;
//   idx.apply(make_holder(7, 0), ops);       // admits/evicts in order
//   if (auto* hs = idx.find(key)) for (holder_id h : *hs) ...
//   idx.erase_holders([](holder_id h) { return worker_of(h) == 7; });
//
// Context: owned by one kv_shard actor; not thread-safe. CAF-free.
#pragma once

#include <absl/container/flat_hash_map.h>

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

namespace lmcc::actors {

/// (worker number << 8) | location index: the worker number is unique per
/// registration inside a node; a worker has at most 256 locations.
using holder_id = uint32_t;

constexpr holder_id make_holder(uint32_t worker_num, uint32_t location_index) noexcept {
  return (worker_num << 8) | (location_index & 0xff);
}
constexpr uint32_t worker_of(holder_id h) noexcept {
  return h >> 8;
}
constexpr uint32_t location_of(holder_id h) noexcept {
  return h & 0xff;
}

/// One admit or evict of a key (its 64-bit pattern).
struct kv_op {
  uint64_t key = 0;
  bool admit = true;
  friend bool operator==(const kv_op&, const kv_op&) = default;
};

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

class kv_index {
public:
  // -- member types ----------------------------------------------------------

  using holder_list = std::vector<holder_id>;

  // -- mutation --------------------------------------------------------------

  /// Applies ops in order: admit adds `h` to the key's holders, evict removes
  /// it (no-op when absent). Returns how many entries were added minus removed.
  int64_t apply(holder_id h, std::span<const kv_op> ops);

  /// True when (key, h) was added, false when it was already there.
  bool admit(uint64_t key, holder_id h);

  /// True when (key, h) was removed, false when it was not there.
  bool evict(uint64_t key, holder_id h);

  /// Removes every entry whose holder matches; returns how many. on_erased
  /// (optional) sees each removed (key, holder), e.g. to delete it on disk.
  uint64_t erase_holders(const std::function<bool(holder_id)>& matches,
                         const std::function<void(uint64_t key, holder_id)>& on_erased = {});

  // -- queries ---------------------------------------------------------------

  /// The holders of `key` in admission order (empty if none).
  holder_list holders(uint64_t key) const;

  /// Whether `h` holds `key`.
  bool holds(uint64_t key, holder_id h) const;

  /// Number of (key, holder) entries.
  uint64_t entries() const noexcept { return entries_; }

  /// Number of distinct keys.
  uint64_t keys() const noexcept { return map_.size(); }

  /// Entries per holder (only holders with at least one entry).
  const absl::flat_hash_map<holder_id, uint64_t>& entries_by_holder() const noexcept {
    return counts_;
  }

  /// Bytes held by the table and pool (capacity, not size), for the memory gauge.
  size_t memory_bytes() const noexcept;

private:
  // -- member types ----------------------------------------------------------

  /// First holder inline; further holders in pool_[more - 1] (0 = none).
  struct holder_set {
    holder_id first = 0;
    uint32_t more = 0;
  };

  // -- helpers ---------------------------------------------------------------

  uint32_t allocate_pool_slot();
  void release_pool_slot(uint32_t index);
  void count(holder_id h, int64_t delta);

  // -- member variables ------------------------------------------------------

  absl::flat_hash_map<uint64_t, holder_set> map_;
  std::vector<holder_list> pool_;
  std::vector<uint32_t> free_pool_slots_;
  absl::flat_hash_map<holder_id, uint64_t> counts_;
  uint64_t entries_ = 0;
};

} // namespace lmcc::actors
