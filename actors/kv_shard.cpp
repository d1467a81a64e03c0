#include "actors/kv_shard.hpp"

#include <spdlog/spdlog.h>

namespace lmcc::actors {

persistence::store::batch& kv_shard_state::batch() {
  if (!pending)
    pending.emplace();
  return *pending;
}

void kv_shard_state::apply(holder_id h, const kv_op_list& ops) {
  index.apply(h, ops);
  if (!durable())
    return;
  auto& b = batch();
  for (const auto& op : ops) {
    uint32_t slot = slot_of(op.key, durability.slot_count);
    if (op.admit)
      b.admit(slot, op.key, h);
    else
      b.evict(slot, op.key, h);
  }
}

void kv_shard_state::set_watermark(holder_id h, uint64_t value) {
  if (!durable() || watermarks_frozen)
    return;
  // Written once per commit, not once per message: under load a commit covers
  // many messages of the same holder and only the last value matters.
  watermarks[h] = value;
  dirty_watermarks.insert(h);
}

uint64_t kv_shard_state::erase(uint32_t worker_num, int32_t location_index) {
  auto matches = [worker_num, location_index](holder_id h) {
    return worker_of(h) == worker_num &&
           (location_index < 0 || location_of(h) == static_cast<uint32_t>(location_index));
  };
  if (!durable())
    return index.erase_holders(matches);
  auto& b = batch();
  uint64_t erased = index.erase_holders(matches, [&](uint64_t key, holder_id h) {
    b.evict(slot_of(key, durability.slot_count), key, h);
  });
  for (auto it = watermarks.begin(); it != watermarks.end();) {
    if (matches(it->first)) {
      b.delete_watermark(worker_of(it->first), location_of(it->first), durability.shard_index);
      dirty_watermarks.erase(it->first);
      it = watermarks.erase(it);
    } else {
      ++it;
    }
  }
  return erased;
}

void kv_shard_state::commit() {
  // The watermarks go last, in the same write as the ops they cover.
  for (holder_id h : dirty_watermarks)
    batch().put_watermark(persistence::watermark{worker_of(h), location_of(h),
                                                 durability.shard_index, watermarks.at(h)});
  dirty_watermarks.clear();
  if (!pending || pending->empty())
    return;
  size_t ops = pending->size();
  ++commits;
  auto r = durability.store->commit(*pending);
  if (r) {
    pending.reset();
    return;
  }
  ++commit_failures;
  // One line per failure would flood the log while a disk is full; the count
  // is in the stats and every 1000th failure is logged again.
  if (commit_failures % 1000 == 1)
    spdlog::error("store-commit-failed shard={} ops={} failures={} error={}",
                  durability.shard_index, ops, commit_failures, r.error().message);
  if (ops > durability.max_pending_ops) {
    spdlog::error("store-commit-dropped shard={} ops={} watermarks=frozen (workers whose ops "
                  "were dropped will be asked for a full sync after a restart)",
                  durability.shard_index, ops);
    pending.reset();
    watermarks_frozen = true;
  }
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
  s.commits = commits;
  s.commit_failures = commit_failures;
  s.by_holder.assign(index.entries_by_holder().begin(), index.entries_by_holder().end());
  return s;
}

kv_shard_actor::behavior_type kv_shard(kv_shard_actor::stateful_pointer<kv_shard_state> self,
                                       std::shared_ptr<shard_init> init) {
  auto& st = self->state;
  st.durability = std::move(init->durability);
  st.index = std::move(init->index);
  st.watermarks = std::move(init->watermarks);
  init.reset();
  // The flush message queues behind whatever is already in the mailbox, so
  // everything that arrived meanwhile shares one commit.
  auto schedule_flush = [self] {
    auto& s = self->state;
    if (s.durable() && !s.flush_scheduled) {
      s.flush_scheduled = true;
      self->send(self, flush_atom::value);
    }
  };
  self->set_exit_handler([self](caf::exit_msg& m) {
    self->state.commit(); // a clean stop leaves nothing pending behind
    self->quit(m.reason);
  });
  return {
      [self, schedule_flush](apply_atom, holder_id h, const kv_op_list& ops) {
        self->state.apply(h, ops);
        schedule_flush();
      },
      [self, schedule_flush](apply_atom, holder_id h, const kv_op_list& ops, uint64_t seq) {
        self->state.apply(h, ops);
        self->state.set_watermark(h, seq);
        schedule_flush();
      },
      [self, schedule_flush](mark_atom, holder_id h, uint64_t mark) {
        self->state.set_watermark(h, mark);
        schedule_flush();
      },
      [self](erase_atom, uint32_t worker_num, int32_t location_index) {
        auto erased = self->state.erase(worker_num, location_index);
        self->state.commit();
        return erased;
      },
      [self](erase_atom, uint32_t worker_num, int32_t location_index, uint64_t mark) {
        auto erased = self->state.erase(worker_num, location_index);
        if (location_index >= 0)
          self->state.set_watermark(make_holder(worker_num, static_cast<uint32_t>(location_index)),
                                    mark);
        self->state.commit();
        return erased;
      },
      [self](flush_atom) {
        self->state.flush_scheduled = false;
        self->state.commit();
      },
      [self](drain_atom) {
        self->state.commit();
        return !self->state.pending.has_value();
      },
      [self](find_atom, const key_list& keys) { return self->state.find(keys); },
      [self](stats_atom) { return self->state.stats(); },
  };
}

} // namespace lmcc::actors
