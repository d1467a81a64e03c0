// kv_shard: the actor that owns one shard of the chunk index, in memory and,
// with a store, on disk.
//
// Keys are spread over shards by slot (slot = mix64(key) mod slot_count,
// shard = slot mod shard_count), so every shard sees a uniform share. All
// writes for one worker come from that worker's actor, which CAF delivers in
// order, so a shard applies each worker's admits and evicts in the order the
// worker sent them. Lookups read whole key lists in one message.
//
// Durability (when the shard has a store): every change is applied in memory
// and appended to a pending store batch; the first change after a commit sends
// the shard a flush message, which lands behind everything already in its
// mailbox, so one commit covers all changes that queued up meanwhile (one
// commit per message when idle, large group commits under load). An
// incremental sub-batch carries the worker's seq watermark for the location and
// the shard commits it in the same write as the ops, so the disk never claims a
// seq whose ops it lacks. An erase commits before it replies, which is what
// lets a worker actor know a reset is durable on every shard. A commit that
// fails is kept and retried with the next one; past max_pending_ops the shard
// drops it and stops advancing watermarks, so a restart sees the gap and asks
// the affected workers for a full sync instead of trusting a hole.
//
//   auto shard = sys.spawn(kv_shard, std::make_shared<shard_init>(...));
//   anon_send(shard, apply_atom::value, make_holder(3, 0), kv_op_list{{42, true}}, seq);
//
// Context: a CAF actor; its state is only touched by its own handlers.
#pragma once

#include "actors/type_ids.hpp"
#include "persistence/store.hpp"

#include <map>
#include <memory>
#include <set>

namespace lmcc::actors {

using kv_shard_actor = caf::typed_actor<
    // Full-sync admits: no watermark moves.
    caf::reacts_to<apply_atom, holder_id, kv_op_list>,
    // Incremental ops and the batch's last seq_num for this holder.
    caf::reacts_to<apply_atom, holder_id, kv_op_list, uint64_t>,
    // Sets the holder's watermark to a mark (persistence::watermark_resynced).
    caf::reacts_to<mark_atom, holder_id, uint64_t>,
    // Drops (worker, location) or, with location -1, all of the worker's
    // entries and watermarks; committed before the reply (entries removed).
    caf::replies_to<erase_atom, uint32_t, int32_t>::with<uint64_t>,
    // The same, then sets the location's watermark to `mark` (a full-sync start).
    caf::replies_to<erase_atom, uint32_t, int32_t, uint64_t>::with<uint64_t>,
    caf::reacts_to<flush_atom>,
    // Commits what is pending; answers once it is on disk (a clean stop).
    caf::replies_to<drain_atom>::with<bool>,
    caf::replies_to<find_atom, key_list>::with<holder_lists>,
    caf::replies_to<stats_atom>::with<shard_stats>>;

/// How a shard keeps its slots on disk; a null store keeps it in memory only.
struct shard_durability {
  std::shared_ptr<persistence::store> store;
  uint32_t shard_index = 0;
  /// For the slot of every key written (slot = mix64(key) mod slot_count).
  uint32_t slot_count = 4096;
  /// Ops kept while commits fail before they are dropped (then the shard's
  /// watermarks stop moving). Default: 1M ops (~40 MB).
  size_t max_pending_ops = 1'000'000;
};

/// What a shard starts with: its durability and, after a restart, the index
/// and watermarks loaded from the store.
struct shard_init {
  shard_durability durability;
  kv_index index;
  std::map<holder_id, uint64_t> watermarks;
};

struct kv_shard_state {
  static inline const char* name = "lmcc.kv_shard";

  kv_index index;
  shard_durability durability;
  /// This shard's watermark per holder as last written (mirrors the store).
  std::map<holder_id, uint64_t> watermarks;
  /// Holders whose watermark changed since the last commit (written by commit()).
  std::set<holder_id> dirty_watermarks;
  std::optional<persistence::store::batch> pending;
  bool flush_scheduled = false;
  /// Set when pending ops had to be dropped: watermarks no longer move.
  bool watermarks_frozen = false;
  uint64_t commits = 0;
  uint64_t commit_failures = 0;

  bool durable() const noexcept { return durability.store != nullptr; }

  /// Applies ops in memory and, when durable, appends them to `pending`.
  void apply(holder_id h, const kv_op_list& ops);

  /// Records the holder's watermark; the next commit writes it.
  void set_watermark(holder_id h, uint64_t value);

  /// Removes (worker, location) or, with location -1, all of the worker's
  /// entries and watermarks; how many entries.
  uint64_t erase(uint32_t worker_num, int32_t location_index);

  /// Commits `pending`; keeps it for a retry when the store refuses.
  void commit();

  holder_lists find(const key_list& keys) const;

  shard_stats stats() const;

private:
  persistence::store::batch& batch();
};

kv_shard_actor::behavior_type kv_shard(kv_shard_actor::stateful_pointer<kv_shard_state> self,
                                       std::shared_ptr<shard_init> init);

} // namespace lmcc::actors
