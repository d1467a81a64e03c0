// kv_shard: the actor that owns one shard of the chunk index.
//
// Keys are spread over shards by slot (slot = mix64(key) mod slot_count,
// shard = slot mod shard_count), so every shard sees a uniform share. All
// writes for one worker come from that worker's actor, which CAF delivers in
// order, so a shard applies each worker's admits and evicts in the order the
// worker sent them. Lookups read whole key lists in one message.
//
//   auto shard = sys.spawn(kv_shard);
//   anon_send(shard, apply_atom::value, make_holder(3, 0), kv_op_list{{42, true}});
//
// Context: a CAF actor; its state is only touched by its own handlers.
#pragma once

#include "actors/type_ids.hpp"

namespace lmcc::actors {

using kv_shard_actor =
    caf::typed_actor<caf::reacts_to<apply_atom, holder_id, kv_op_list>,
                     caf::reacts_to<erase_atom, uint32_t, int32_t>, // worker number, location index
                                                                    // or -1 for all
                     caf::replies_to<find_atom, key_list>::with<holder_lists>,
                     caf::replies_to<stats_atom>::with<shard_stats>>;

struct kv_shard_state {
  static inline const char* name = "lmcc.kv_shard";

  kv_index index;

  /// Removes (worker, location) or, with location -1, all of the worker's entries.
  uint64_t erase(uint32_t worker_num, int32_t location_index);

  holder_lists find(const key_list& keys) const;

  shard_stats stats() const;
};

kv_shard_actor::behavior_type kv_shard(kv_shard_actor::stateful_pointer<kv_shard_state> self);

} // namespace lmcc::actors
