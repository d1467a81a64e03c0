#include "actors/worker_actor.hpp"

#include "actors/clock.hpp"
#include "actors/drain.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>

namespace lmcc::actors {
namespace {

using self_ptr = worker_actor::stateful_pointer<worker_actor_state>;

uint32_t shard_of(uint64_t key, const worker_config& cfg) {
  return slot_of(key, cfg.slot_count) % static_cast<uint32_t>(cfg.shards.size());
}

/// Full-sync admits: only to the shards that have keys, no watermark.
void send_to_shards(self_ptr self, holder_id h, std::vector<kv_op_list>& per_shard) {
  for (size_t i = 0; i < per_shard.size(); ++i)
    if (!per_shard[i].empty())
      self->send(self->state.cfg.shards[i], apply_atom::value, h, std::move(per_shard[i]));
}

/// Incremental ops with the batch's last seq_num. With durable shards every
/// shard gets the seq, also with no ops, so that every shard's watermark moves
/// and a restart can take the minimum over all of them.
void send_increments(self_ptr self, holder_id h, std::vector<kv_op_list>& per_shard,
                     uint64_t last_seq) {
  const bool every_shard = self->state.cfg.durable;
  for (size_t i = 0; i < per_shard.size(); ++i)
    if (every_shard || !per_shard[i].empty())
      self->send(self->state.cfg.shards[i], apply_atom::value, h, std::move(per_shard[i]),
                 last_seq);
}

/// Erases (worker, location) or, with -1, the whole worker on every shard, then
/// sets `mark` as the location's watermark when given. `done` runs with the
/// entries removed once every shard has committed its part.
void erase_everywhere(self_ptr self, int32_t location_index, std::optional<uint64_t> mark,
                      std::function<void(uint64_t erased)> done = {}) {
  auto& st = self->state;
  struct tally {
    size_t waiting = 0;
    uint64_t erased = 0;
    std::function<void(uint64_t)> done;
  };
  auto t = std::make_shared<tally>(tally{st.cfg.shards.size(), 0, std::move(done)});
  auto arrived = [t](uint64_t erased) {
    t->erased += erased;
    if (--t->waiting == 0 && t->done)
      t->done(t->erased);
  };
  // An erase waits for a commit; a minute covers a slow disk, and a shard that
  // does not answer at all only delays `done` (logged), it loses nothing.
  constexpr auto erase_timeout = std::chrono::seconds(60);
  auto on_error = [self, location_index](caf::error& e) {
    spdlog::error("shard-erase-failed instance={} worker={} location={} error={}",
                  self->state.cfg.instance_id, self->state.cfg.worker_id.to_string(),
                  location_index, caf::to_string(e));
  };
  for (const auto& shard : st.cfg.shards) {
    if (mark)
      self->request(shard, erase_timeout, erase_atom::value, st.cfg.worker_num, location_index,
                    *mark)
          .then(arrived, on_error);
    else
      self->request(shard, erase_timeout, erase_atom::value, st.cfg.worker_num, location_index)
          .then(arrived, on_error);
  }
}

void report_sync(self_ptr self) {
  const auto& s = self->state.session;
  self->send(self->state.cfg.directory, sync_state_atom::value, self->state.cfg.worker_num,
             s ? s->phase() : sync_phase::none, s ? s->missing_batch_count() : uint64_t{0});
}

std::chrono::milliseconds tick_interval(const worker_config& cfg) {
  auto ms = static_cast<int64_t>(cfg.full_sync_timeout_s * 1000.0 / 10.0);
  return std::chrono::milliseconds{std::clamp<int64_t>(ms, 10, 1000)};
}

msg::Msg start_sync(self_ptr self, uint32_t location_index, const msg::FullSyncStartMsg& m) {
  auto& st = self->state;
  if (st.syncing() && st.session->sync_id() != m.sync_id) {
    return msg::FullSyncStartRetMsg{m.sync_id, false,
                                    "Failed to start sync: worker already syncing with different "
                                    "sync_id or worker not found"};
  }
  uint64_t batches = m.batch_count.is_negative() ? 0 : m.batch_count.bits();
  if (batches > full_sync_session::max_batch_count) {
    return msg::FullSyncStartRetMsg{m.sync_id, false,
                                    "Failed to start sync: batch_count " +
                                        m.batch_count.to_string() + " exceeds the limit of " +
                                        std::to_string(full_sync_session::max_batch_count)};
  }
  uint64_t total = m.total_keys.is_negative() ? 0 : m.total_keys.bits();
  st.session.emplace(m.sync_id, total, batches, wall_now());
  st.last_seq.erase(location_index);
  st.sync_location_index = location_index;
  st.checked_after_restore.insert(location_index); // the sync rebuilds it
  erase_everywhere(self, static_cast<int32_t>(location_index), persistence::watermark_syncing);
  spdlog::info("full-sync-start instance={} worker={} location={} sync_id={} total_keys={} "
               "batches={}",
               st.cfg.instance_id, st.cfg.worker_id.to_string(), m.location, m.sync_id, total,
               batches);
  report_sync(self);
  self->delayed_send(self, tick_interval(st.cfg), tick_atom::value);
  return msg::FullSyncStartRetMsg{m.sync_id, true, std::nullopt};
}

void sync_batch(self_ptr self, uint32_t location_index, const msg::FullSyncBatchMsg& m) {
  auto& st = self->state;
  if (!st.syncing() || st.session->sync_id() != m.sync_id) {
    spdlog::warn("full-sync-batch-dropped instance={} worker={} sync_id={} batch_id={} keys={} "
                 "reason=no-matching-session",
                 st.cfg.instance_id, st.cfg.worker_id.to_string(), m.sync_id,
                 m.batch_id.to_string(), m.keys.size());
    return;
  }
  st.session->record_batch(m.batch_id.is_negative() ? UINT64_MAX : m.batch_id.bits(), m.keys.size(),
                           wall_now());
  auto per_shard = st.split_keys_by_shard(m.keys);
  send_to_shards(self, make_holder(st.cfg.worker_num, location_index), per_shard);
  report_sync(self);
}

void sync_end(self_ptr self, const msg::FullSyncEndMsg& m) {
  auto& st = self->state;
  if (!st.session || st.session->sync_id() != m.sync_id)
    return;
  uint64_t actual = m.actual_total_keys.is_negative() ? 0 : m.actual_total_keys.bits();
  bool counts_match = st.session->complete(actual, wall_now());
  if (st.cfg.durable)
    for (const auto& shard : st.cfg.shards)
      self->send(shard, mark_atom::value, make_holder(st.cfg.worker_num, st.sync_location_index),
                 persistence::watermark_resynced);
  if (counts_match)
    spdlog::info("full-sync-complete instance={} worker={} sync_id={} keys={}", st.cfg.instance_id,
                 st.cfg.worker_id.to_string(), m.sync_id, actual);
  else
    spdlog::warn("full-sync-complete-count-mismatch instance={} worker={} sync_id={} received={} "
                 "actual_total_keys={}",
                 st.cfg.instance_id, st.cfg.worker_id.to_string(), m.sync_id,
                 st.session->received_keys(), actual);
  report_sync(self);
}

// The worker's part of the status; the directory fills in the global part when
// this reply reaches it (after this worker's sync-state reports, which CAF
// delivers first because they travel the same actor pair).
msg::Msg sync_status(self_ptr self, const msg::FullSyncStatusMsg& m) {
  auto& st = self->state;
  msg::FullSyncStatusRetMsg ret;
  ret.sync_id = m.sync_id;
  bool matches = st.session && st.session->sync_id() == m.sync_id;
  ret.is_complete = matches && st.session->phase() == sync_phase::completed;
  if (matches)
    for (uint64_t b : st.session->missing_batches())
      ret.missing_batches.push_back(msg::wire_int::from_unsigned(b));
  return ret;
}

void apply_batch(self_ptr self, uint32_t location_index, const msg::BatchedKVOperationMsg& m) {
  auto& st = self->state;
  if (m.operations.empty())
    return;
  if (st.syncing()) {
    ++st.discarded_batches; // spec 4.8.5: increments are discarded while SYNCING
    return;
  }
  if (auto expected = st.restore_expectation(location_index)) {
    uint64_t first = m.operations.front().seq_num.bits();
    if (first != *expected) {
      spdlog::warn("seq-gap-after-restart instance={} worker={} location={} expected={} got={} "
                   "action=full-sync-requested",
                   st.cfg.instance_id, st.cfg.worker_id.to_string(), m.location, *expected, first);
      self->send(st.cfg.directory, resync_atom::value, st.cfg.worker_num,
                 std::string{"seq_gap_after_restart"});
    }
  }
  if (auto gap = st.check_seq(location_index, m.operations)) {
    spdlog::warn("seq-gap instance={} worker={} location={} expected={} got={}", st.cfg.instance_id,
                 st.cfg.worker_id.to_string(), m.location, gap->expected, gap->got);
    self->send(st.cfg.directory, seq_gap_atom::value, st.cfg.worker_num, uint64_t{1});
  }
  auto per_shard = st.split_by_shard(m.operations);
  send_increments(self, make_holder(st.cfg.worker_num, location_index), per_shard,
                  m.operations.back().seq_num.bits());
}

} // namespace

std::optional<uint64_t> worker_actor_state::restore_expectation(uint32_t location_index) {
  if (!cfg.restored || !checked_after_restore.insert(location_index).second)
    return std::nullopt;
  auto it = cfg.expected_next.find(location_index);
  if (it == cfg.expected_next.end())
    return uint64_t{0}; // a location first reported after the restart starts at 0
  return it->second;
}

std::optional<seq_gap> worker_actor_state::check_seq(uint32_t location_index,
                                                     const std::vector<msg::KVOpEvent>& ops) {
  std::optional<seq_gap> first_gap;
  auto it = last_seq.find(location_index);
  std::optional<uint64_t> last;
  if (it != last_seq.end())
    last = it->second;
  for (const auto& op : ops) {
    uint64_t seq = op.seq_num.bits();
    if (last && seq != *last + 1 && !first_gap)
      first_gap = seq_gap{*last + 1, seq};
    last = seq;
  }
  if (last)
    last_seq[location_index] = *last;
  return first_gap;
}

std::vector<kv_op_list>
worker_actor_state::split_by_shard(const std::vector<msg::KVOpEvent>& ops) const {
  std::vector<kv_op_list> out(cfg.shards.size());
  for (const auto& op : ops) {
    uint64_t key = op.key.bits();
    out[shard_of(key, cfg)].push_back(kv_op{key, op.op_type == msg::OpType::admit});
  }
  return out;
}

std::vector<kv_op_list>
worker_actor_state::split_keys_by_shard(const std::vector<msg::wire_int>& keys) const {
  std::vector<kv_op_list> out(cfg.shards.size());
  for (const auto& k : keys)
    out[shard_of(k.bits(), cfg)].push_back(kv_op{k.bits(), true});
  return out;
}

worker_actor::behavior_type worker_main(worker_actor::stateful_pointer<worker_actor_state> self,
                                        worker_config cfg) {
  self->state.cfg = std::move(cfg);
  self->state.last_seq = self->state.cfg.initial_last_seq;
  return {
      [self](batch_atom, uint32_t loc, const msg::BatchedKVOperationMsg& m) {
        apply_batch(self, loc, m);
      },
      [self](sync_start_atom, uint32_t loc, const msg::FullSyncStartMsg& m) {
        return start_sync(self, loc, m);
      },
      [self](sync_batch_atom, uint32_t loc, const msg::FullSyncBatchMsg& m) {
        sync_batch(self, loc, m);
      },
      [self](sync_end_atom, const msg::FullSyncEndMsg& m) { sync_end(self, m); },
      [self](sync_status_atom, const msg::FullSyncStatusMsg& m) { return sync_status(self, m); },
      [self](reset_atom) {
        // Re-registration (spec 4.7.1): the worker's KV state and trackers go.
        auto& st = self->state;
        st.last_seq.clear();
        st.session.reset();
        st.cfg.restored = false; // a new incarnation: nothing to continue
        erase_everywhere(self, -1, std::nullopt, [self](uint64_t erased) {
          self->send(self->state.cfg.directory, reset_done_atom::value, self->state.cfg.worker_num,
                     erased);
        });
        report_sync(self);
      },
      [self](retire_atom) {
        erase_everywhere(self, -1, std::nullopt);
        self->quit();
      },
      [self](drain_atom) -> caf::result<bool> { return drain_all(self, self->state.cfg.shards); },
      [self](tick_atom) {
        auto& st = self->state;
        if (!st.syncing())
          return;
        if (st.session->expire(wall_now(), st.cfg.full_sync_timeout_s)) {
          spdlog::warn("full-sync-timeout instance={} worker={} sync_id={} idle_s>{}",
                       st.cfg.instance_id, st.cfg.worker_id.to_string(), st.session->sync_id(),
                       st.cfg.full_sync_timeout_s);
          report_sync(self);
          return;
        }
        self->delayed_send(self, tick_interval(st.cfg), tick_atom::value);
      },
  };
}

} // namespace lmcc::actors
