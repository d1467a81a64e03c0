#include "actors/kv_shard.hpp"

namespace lmcc::actors {

uint64_t kv_shard_state::erase(uint32_t worker_num, int32_t location_index) {
  if (location_index < 0)
    return index.erase_holders([worker_num](holder_id h) { return worker_of(h) == worker_num; });
  holder_id target = make_holder(worker_num, static_cast<uint32_t>(location_index));
  return index.erase_holders([target](holder_id h) { return h == target; });
}

holder_lists kv_shard_state::find(const key_list& keys) const {
  holder_lists out;
  out.reserve(keys.size());
  for (uint64_t k : keys)
    out.push_back(index.holders(k));
  return out;
}

shard_stats kv_shard_state::stats() const {
  shard_stats s;
  s.entries = index.entries();
  s.keys = index.keys();
  s.memory_bytes = index.memory_bytes();
  s.by_holder.assign(index.entries_by_holder().begin(), index.entries_by_holder().end());
  return s;
}

kv_shard_actor::behavior_type kv_shard(kv_shard_actor::stateful_pointer<kv_shard_state> self) {
  return {
      [self](apply_atom, holder_id h, const kv_op_list& ops) { self->state.index.apply(h, ops); },
      [self](erase_atom, uint32_t worker_num, int32_t location_index) {
        self->state.erase(worker_num, location_index);
      },
      [self](find_atom, const key_list& keys) { return self->state.find(keys); },
      [self](stats_atom) { return self->state.stats(); },
  };
}

} // namespace lmcc::actors
