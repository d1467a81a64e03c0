// kv_index: one node's part of the chunk index, key -> small set of holders,
// kept per slot.
//
// Layout (memory is the node's budget): every slot has its own open-addressing
// table (absl::flat_hash_map<key, value>, 16 bytes a slot). A key held by one
// holder stores the holder id inline; a key held by several stores, in the same
// 8 bytes, a reference to a block of a holder_arena (bit 63 set, then the
// count, the size class and the block number), so no key costs a heap
// allocation of its own. Per-slot tables keep every rehash small (a slot holds
// about 1/4096 of the keys), are the unit a slot snapshot is written from and a
// handoff ships, and carry a version (bumped on every change: what makes a
// slot dirty for the next snapshot) and a digest (XOR of a hash of every
// (key, holder)) that replicas compare. The arenas are split in groups of
// slots so that start-up can load disjoint slot groups on several threads.
//
// Dropping a holder (a deregistration, a re-registration, a full-sync start)
// is O(1) when it is asked for: begin_drop() takes the holder's entries out of
// the counts at once and queues a drop job; readers skip the holder in every
// slot the job has not cleaned yet, and the writer cleans a slot before it
// applies any new op of that holder there (so a slot never mixes the dropped
// entries with new ones). drop_step() then cleans a bounded number of slots at
// a time, so no single handler holds the lock for long, however large the
// holder was.
//
// Concurrency: one writer (the node's kv_shard actor) and many readers.
// Writers and readers of the whole index go through guards: a write_guard
// holds the index's lock exclusively, a read_guard shares it (statistics,
// slot walks). The writer holds it for up to a few hundred ops at a time.
// Lookups (lookup()) take neither: each key is read under its slot's own lock,
// which the writer holds only while it changes that slot (one op, one slot
// cleaning). Under a saturating flood the shard thread is often preempted
// with the index's lock held; lookups that took it would wait for the shard
// to be scheduled again, 25-70 ms at p99. So a lookup waits only if the one
// slot it reads is the one being changed.
//
//   kv_index idx{4096};
//   { auto w = idx.write(); w.apply(h, ops); }
//   { auto r = idx.read(); r.holders(key, out); }
//   idx.lookup(keys, lists);                      // any thread, any time
//
// Thread-safety: as above; the guards, lookup() (and, before any reader
// exists, the bulk loader) are the only way in. CAF-free.
#pragma once

#include "index/holder_arena.hpp"
#include "index/ids.hpp"
#include "index/internal/slot_lock.hpp"

#include <absl/container/flat_hash_map.h>
#include <absl/container/flat_hash_set.h>
#include <absl/container/inlined_vector.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <span>
#include <vector>

namespace lmcc::actors {

/// Holders of one key, as a lookup collects them (no allocation up to 4).
using holder_list = absl::InlinedVector<holder_id, 4>;

/// A set of holders, e.g. the locations of a worker being dropped.
using holder_set = absl::flat_hash_set<holder_id>;

/// Entries per holder.
using holder_counts = absl::flat_hash_map<holder_id, uint64_t>;

class kv_index {
public:
  // -- member types ----------------------------------------------------------

  /// Most holders one key may have (the count field of a multi-holder value).
  static constexpr uint32_t max_holders_per_key = (uint32_t{1} << 25) - 1;

  /// Keys a slot's table makes room for when it takes its first key: a table
  /// that grows from nothing rehashes 1 -> 3 -> 7 -> ... -> 63 first; 4096
  /// slots at this size cost ~4 MiB. Default: 48
  static constexpr size_t initial_slot_keys = 48;

  /// Slot groups with an arena of their own: consecutive runs of
  /// slot_count / arena_groups slots (see arena_group()).
  static constexpr uint32_t arena_groups = 16;

  /// The arena group of `slot`; bulk loaders of different groups may run at once.
  uint32_t arena_group(uint32_t slot) const noexcept { return slot / group_span_; }

  /// What a slot looks like now.
  struct slot_summary {
    uint64_t keys = 0;
    uint64_t entries = 0;
    uint64_t digest = 0;  ///< XOR of entry_hash over the slot's entries
    uint64_t version = 0; ///< bumped on every change
  };

  class read_guard;
  class write_guard;
  class bulk_loader;

  // -- construction ----------------------------------------------------------

  /// REQUIRES: slot_count is a power of two.
  explicit kv_index(uint32_t slot_count);
  kv_index(const kv_index&) = delete;
  kv_index& operator=(const kv_index&) = delete;

  uint32_t slot_count() const noexcept { return static_cast<uint32_t>(slots_.size()); }

  /// Marks the slots whose entries count toward this node's *share*: in a
  /// cluster, the slots it is the primary of, so that summing the shares of all
  /// nodes counts each entry once (replicas hold copies). Kept incrementally, so
  /// read_guard::share_by_holder() costs nothing per entry.
  /// REQUIRES: the index is empty (call before loading).
  void set_share_slots(const std::vector<uint32_t>& slots);

  /// Shared access for readers.
  read_guard read() const;

  /// Exclusive access for the writer.
  write_guard write();

  /// The holders of each key, as read_guard::holders() gives them, read key by
  /// key under the key's slot lock only: never waits for a sub-batch, only
  /// for an op or a slot cleaning in the same slot. Keys are not read at one
  /// instant (a sub-batch applied meanwhile may show in some of them).
  /// REQUIRES: out.size() == keys.size(); the lists are appended to.
  void lookup(std::span<const uint64_t> keys, std::span<holder_list> out) const;

  /// Whether some holder's entries in `slot` may lack ops until a copy of
  /// another owner's comes (set by the index's writer; any thread reads it).
  bool uncertain(uint32_t slot) const noexcept {
    return slots_[slot].uncertain.load(std::memory_order_relaxed);
  }
  void set_uncertain(uint32_t slot, bool yes) noexcept {
    slots_[slot].uncertain.store(yes, std::memory_order_relaxed);
  }

  /// The hash an entry contributes to its slot's digest.
  static constexpr uint64_t entry_hash(uint64_t key, holder_id h) noexcept {
    return mix64(key ^ mix64(h + 0x9e3779b97f4a7c15ULL));
  }

private:
  // -- member types ----------------------------------------------------------

  using table = absl::flat_hash_map<uint64_t, uint64_t>;

  struct slot_state {
    table map;
    uint64_t entries = 0;
    uint64_t digest = 0;
    uint64_t version = 0;
    /// lookup()'s lock of this slot: beside what every op touches anyway, so
    /// taking it costs no cache miss of its own.
    mutable internal::slot_lock lock;
    /// Some holder's entries here may lack ops (coverage.hpp): the writer
    /// sets it, anti-entropy's answers read it.
    std::atomic<bool> uncertain{false};
  };

  /// A pending holder drop: the slots it has not cleaned yet.
  struct drop_job {
    holder_set holders;
    /// Per slot; a byte each, since lookups read slot i's under slot i's lock
    /// while the writer sets slot j's (a bit would share a word).
    std::vector<uint8_t> done;
    uint32_t remaining = 0; ///< slots not done
    uint32_t cursor = 0;    ///< drop_step resumes here
  };

  // -- value encoding ----------------------------------------------------------

  static constexpr uint64_t multi_flag = uint64_t{1} << 63;
  static constexpr bool is_multi(uint64_t v) noexcept { return (v & multi_flag) != 0; }
  static constexpr uint32_t ref_block(uint64_t v) noexcept { return static_cast<uint32_t>(v); }
  static constexpr uint8_t ref_class(uint64_t v) noexcept { return (v >> 32) & 0x3f; }
  static constexpr uint32_t ref_count(uint64_t v) noexcept {
    return static_cast<uint32_t>((v >> 38) & max_holders_per_key);
  }
  static constexpr uint64_t make_ref(uint32_t count, uint8_t cls, uint32_t block) noexcept {
    return multi_flag | (uint64_t{count} << 38) | (uint64_t{cls} << 32) | block;
  }

  // -- helpers (called under the lock) ------------------------------------------

  uint32_t slot_index(uint64_t key) const noexcept { return slot_of(key, slot_count()); }
  holder_arena& arena(uint32_t slot) noexcept { return arenas_[arena_group(slot)]; }
  const holder_arena& arena(uint32_t slot) const noexcept { return arenas_[arena_group(slot)]; }

  /// The slot-level part of an admit/evict; the caller keeps the counts.
  bool admit(uint32_t slot, uint64_t key, holder_id h, uint64_t& keys);
  bool evict(uint32_t slot, uint64_t key, holder_id h, uint64_t& keys);
  /// Removes `holders`' entries from the slot (allocates nothing per key;
  /// shrinks the table when it emptied); `counted`: also from the counts
  /// (false for drop jobs, whose holders left the counts at begin_drop).
  uint64_t drop(uint32_t slot, const holder_set& holders, bool counted);
  void count(holder_id h, int64_t delta);
  /// Counts `delta` entries of `h` in `slot` toward the share when the slot is in it.
  void count_share(uint32_t slot, holder_id h, int64_t delta) {
    if (!share_slots_.empty() && share_slots_[slot])
      add_share(h, delta);
  }
  void add_share(holder_id h, int64_t delta);
  void append_holders(uint32_t slot, uint64_t value, holder_list& out) const;
  bool value_holds(uint32_t slot, uint64_t value, holder_id h) const;
  /// Appends the holders of `key` no pending drop hides (the caller holds the
  /// index's lock or the slot's).
  void append_visible(uint32_t slot, uint64_t key, holder_list& out) const;
  /// True when a pending drop hides `h` in `slot`.
  bool dropped(uint32_t slot, holder_id h) const;
  /// Cleans the pending drops of `h` in `slot` (before an op of `h` lands there).
  void clean_for(uint32_t slot, holder_id h);
  /// Cleans every pending drop of `slot` under its slot lock.
  void clean_slot(uint32_t slot);
  /// Removes the jobs with no slot left (under every slot lock: lookups read drops_).
  void retire_finished_drops();
  /// The lock lookups of `slot` share and the writer takes to change it.
  internal::slot_lock& slot_lock(uint32_t slot) const noexcept { return slots_[slot].lock; }

  /// Every slot lock, exclusively (changing what lookups read of all slots).
  class all_slots_lock {
  public:
    explicit all_slots_lock(const kv_index& idx);
    ~all_slots_lock();
    all_slots_lock(const all_slots_lock&) = delete;
    all_slots_lock& operator=(const all_slots_lock&) = delete;

  private:
    const kv_index* idx_;
  };

  // -- member variables ------------------------------------------------------

  mutable std::shared_mutex mutex_;
  /// Each with its lock (lookup()); the writer takes slot i's while it changes
  /// slot i's table, entries or drop marks, and all of them to change drops_.
  std::vector<slot_state> slots_;
  uint32_t group_span_ = 1; ///< slots per arena group
  std::array<holder_arena, arena_groups> arenas_;
  holder_counts counts_;
  uint64_t entries_ = 0;
  uint64_t keys_ = 0;
  /// set_share_slots(): 1 for a slot of the share (empty: no share kept).
  std::vector<uint8_t> share_slots_;
  holder_counts share_counts_;
  uint64_t share_entries_ = 0;
  std::vector<drop_job> drops_;
  /// Holders with a pending drop (the union of drops_' sets), for a quick test.
  holder_set dropping_;
};

/// Shared access: any number at once, alongside no writer.
class kv_index::read_guard {
public:
  explicit read_guard(const kv_index& idx) : idx_(&idx), lock_(idx.mutex_) {}

  /// Appends the holders of `key` to `out` (in no particular order).
  void holders(uint64_t key, holder_list& out) const;

  bool holds(uint64_t key, holder_id h) const;

  uint64_t entries() const noexcept { return idx_->entries_; }
  uint64_t keys() const noexcept { return idx_->keys_; }

  /// Entries per holder (holders with at least one).
  const holder_counts& entries_by_holder() const noexcept { return idx_->counts_; }

  /// The same over the share's slots only (kv_index::set_share_slots).
  const holder_counts& share_by_holder() const noexcept { return idx_->share_counts_; }
  uint64_t share_entries() const noexcept { return idx_->share_entries_; }

  slot_summary slot(uint32_t slot) const;

  /// Calls fn(key, holders) for every key of `slot`.
  void for_each_key(uint32_t slot,
                    const std::function<void(uint64_t, std::span<const holder_id>)>& fn) const;

  /// Bytes held by the tables and the arenas (capacity, not size).
  size_t memory_bytes() const noexcept;

  bool drops_pending() const noexcept { return !idx_->drops_.empty(); }

private:
  const kv_index* idx_;
  std::shared_lock<std::shared_mutex> lock_;
};

/// Exclusive access: the writer's.
class kv_index::write_guard {
public:
  explicit write_guard(kv_index& idx) : idx_(&idx), lock_(idx.mutex_) {}

  /// True when (key, h) was added, false when it was already there (or the
  /// key has max_holders_per_key holders).
  bool admit(uint64_t key, holder_id h);

  /// True when (key, h) was removed, false when it was not there.
  bool evict(uint64_t key, holder_id h);

  /// Applies ops in order for holder `h`; returns entries added minus removed.
  int64_t apply(holder_id h, std::span<const kv_op> ops);

  /// Applies ops of `h` only in the slots `wanted` says yes to (a restart
  /// replaying a record onto slots whose snapshot is older than it).
  template <class Wanted>
  int64_t apply_where(holder_id h, std::span<const kv_op> ops, Wanted&& wanted);

  /// Removes everything in `slot`; how many entries.
  uint64_t clear_slot(uint32_t slot);

  /// Drops every entry of `holders` (see the header); cleaning is left to
  /// drop_step() and to later ops of those holders. `skip` (optional) marks
  /// slots whose entries stay (they stay counted).
  void begin_drop(holder_set holders, const std::vector<bool>* skip = nullptr);

  /// Marks `slot` changed (its next snapshot is due) without changing its
  /// entries: what the node knows about them changed (coverage.hpp).
  void touch(uint32_t slot);

  /// Removes `holders`' entries from `slot` now, counted (a restart replaying
  /// a drop onto the slots older than it); how many.
  uint64_t drop_now(uint32_t slot, const holder_set& holders);

  /// Cleans pending drops in up to `max_slots` slots, stopping early once the
  /// slots cleaned held `max_keys` keys (cleaning walks a slot's whole table;
  /// at least one slot per step); true while work is left.
  bool drop_step(uint32_t max_slots, uint64_t max_keys = UINT64_MAX);

  /// Cleans every pending drop of `slot` now (before the slot is snapshotted).
  void finish_drops_in(uint32_t slot);

  /// Makes `slots` the share (kv_index::set_share_slots) of a loaded index:
  /// the slots that join or leave it are walked once, the rest cost nothing
  /// (a cluster's membership change moves ~1/N of the primaries).
  void reshare(const std::vector<uint32_t>& slots);

  bool drops_pending() const noexcept { return !idx_->drops_.empty(); }

  slot_summary slot(uint32_t slot) const;

private:
  kv_index* idx_;
  std::unique_lock<std::shared_mutex> lock_;
};

/// Loads whole slots before anyone reads the index: threads may load slots of
/// different arena groups (arena_group(slot)) at the same time, each with its
/// own loader; merge() folds a loader's counts in once every thread is done.
///
/// REQUIRES: no guard is in use while loaders are; a slot is loaded once.
class kv_index::bulk_loader {
public:
  explicit bulk_loader(kv_index& idx) : idx_(&idx) {}

  /// Room for `keys` keys in `slot`.
  void reserve(uint32_t slot, size_t keys);

  /// Adds the key's holders to `slot` (the key must belong to it).
  void add(uint32_t slot, uint64_t key, std::span<const holder_id> holders);

  /// Folds this loader's counts into the index (one thread at a time).
  void merge();

private:
  kv_index* idx_;
  holder_counts counts_;
  holder_counts share_counts_;
  uint64_t entries_ = 0;
  uint64_t keys_ = 0;
};

inline kv_index::read_guard kv_index::read() const {
  return read_guard{*this};
}

inline kv_index::write_guard kv_index::write() {
  return write_guard{*this};
}

template <class Wanted>
int64_t kv_index::write_guard::apply_where(holder_id h, std::span<const kv_op> ops,
                                           Wanted&& wanted) {
  int64_t delta = 0;
  int64_t share_delta = 0;
  const std::vector<uint8_t>* share = idx_->share_slots_.empty() ? nullptr : &idx_->share_slots_;
  const bool dropping = idx_->dropping_.contains(h);
  // Ops hit random slots: the tables' memory is mostly cold. Working in
  // groups, the probe positions of a group are prefetched before any insert,
  // so the cache misses overlap instead of queueing one after another.
  constexpr size_t group = 16;
  uint32_t slots[group];
  for (size_t base = 0; base < ops.size(); base += group) {
    const size_t n = std::min(group, ops.size() - base);
    for (size_t i = 0; i < n; ++i) {
      slots[i] = idx_->slot_index(ops[base + i].key);
      idx_->slots_[slots[i]].map.prefetch(ops[base + i].key);
    }
    for (size_t i = 0; i < n; ++i) {
      const auto& op = ops[base + i];
      const uint32_t slot = slots[i];
      if (!wanted(slot))
        continue;
      if (dropping)
        idx_->clean_for(slot, h);
      std::lock_guard slot_lock{idx_->slot_lock(slot)};
      int64_t d = 0;
      if (op.admit)
        d = idx_->admit(slot, op.key, h, idx_->keys_) ? 1 : 0;
      else
        d = idx_->evict(slot, op.key, h, idx_->keys_) ? -1 : 0;
      delta += d;
      if (d != 0 && share)
        share_delta += (*share)[slot] ? d : 0;
    }
  }
  idx_->entries_ = static_cast<uint64_t>(static_cast<int64_t>(idx_->entries_) + delta);
  // One count update per sub-batch: every op of it has the same holder.
  idx_->count(h, delta);
  if (share)
    idx_->add_share(h, share_delta);
  return delta;
}

} // namespace lmcc::actors
