#include "index/kv_shard_core.hpp"

#include <absl/container/flat_hash_set.h>
#include <spdlog/spdlog.h>

#include <algorithm>

namespace lmcc::actors {

kv_shard_core::kv_shard_core(shard_options opts, std::shared_ptr<kv_index> index,
                             std::shared_ptr<persistence::store> store, shard_start_state start)
  : opts_(opts), index_(std::move(index)), store_(std::move(store)),
    holders_(std::move(start.holders)),
    cover_(start.covers ? std::move(start.covers)
                        : std::make_shared<coverage_book>(opts_.slot_count)),
    next_position_(std::max<uint64_t>(1, start.next_position)),
    slot_positions_(opts_.slot_count, 0), slot_stamps_(std::move(start.slot_stamps)),
    snapshotted_versions_(std::move(start.clean_versions)), last_round_start_ms_(start.started_ms) {
  slot_stamps_.resize(opts_.slot_count, 0);
  snapshotted_versions_.resize(opts_.slot_count, 0);
  // Drop jobs a restart left in the index still need their background steps.
  drops_pending_ = index_->read().drops_pending();
  for (uint32_t slot = 0; slot < opts_.slot_count; ++slot)
    index_->set_uncertain(slot, cover_->slot_pending(slot));
  // What the restart replayed from the log goes into slot snapshots now, so
  // the next restart reads it from them and the log can be truncated.
  if (durable() && dirty_entries() > 0)
    snapshot_requested_ = true;
}

uint64_t kv_shard_core::dirty_entries() const {
  uint64_t n = 0;
  auto r = index_->read();
  for (uint32_t slot = 0; slot < opts_.slot_count; ++slot)
    if (const auto s = r.slot(slot); s.version != snapshotted_versions_[slot])
      n += s.entries;
  return n;
}

// -- write path ----------------------------------------------------------------

size_t kv_shard_core::retire_older(std::span<const cluster::registration_ref> known) {
  absl::flat_hash_map<uint64_t, uint64_t> current;
  for (const auto& r : known) {
    auto& inc = current[r.worker_uid];
    inc = std::max(inc, r.incarnation);
  }
  std::vector<std::pair<holder_id, uint64_t>> stale;
  for (const auto& [h, meta] : holders_)
    if (auto it = current.find(meta.worker_uid);
        it != current.end() && meta.worker_uid != 0 && meta.incarnation < it->second)
      stale.emplace_back(h, it->second);
  for (const auto& [h, incarnation] : stale) { // after the scan: apply() may add to holders_
    const auto& meta = holders_.at(h);
    spdlog::debug("holder-retired holder={} worker_uid={} incarnation={} registration={}", h,
                  meta.worker_uid, meta.incarnation, incarnation);
    drop_holder(h, incarnation);
  }
  return stale.size();
}

void kv_shard_core::drop_holder(holder_id h, uint64_t incarnation) {
  kv_sub_batch drop;
  drop.holder = h;
  drop.incarnation = incarnation;
  drop.drop = true;
  drop.end = stream_pos{incarnation, 0, 0, 0}; // the registration's own drop
  apply(drop);
}

void kv_shard_core::apply(const kv_sub_batch& sb) {
  ++counters_.sub_batches;
  auto& meta = holders_[sb.holder];
  if (sb.has_intro &&
      (meta.worker_uid != sb.intro_worker_uid || meta.location != sb.intro_location)) {
    meta.worker_uid = sb.intro_worker_uid;
    meta.location = sb.intro_location;
    meta.intro_durable = false;
    meta.changed = true;
  }
  auto& owed = owed_[sb.stream];
  owed = std::max(owed, sb.number);
  if (sb.incarnation < meta.incarnation) {
    // A sub-batch of a registration that has been replaced (a worker actor
    // of an older incarnation still draining): its entries were dropped.
    ++counters_.fenced;
    // Once per holder and older incarnation: a short drain is normal, but an
    // entity that keeps sending under a replaced registration loses every op
    // until its home renews it, and this line names it (the renewal is
    // guarded by directory_logic_test's
    // an_entity_older_than_a_registration_taken_elsewhere_is_behind).
    if (meta.fenced_logged_incarnation != sb.incarnation) {
      meta.fenced_logged_incarnation = sb.incarnation;
      spdlog::warn("sub-batch-fenced holder={} worker_uid={} incarnation={} current={} ops={} "
                   "drop={} reason=older-registration",
                   sb.holder, meta.worker_uid, sb.incarnation, meta.incarnation, sb.ops.size(),
                   sb.drop);
    }
    return;
  }
  if (sb.incarnation > meta.incarnation) {
    meta.incarnation = sb.incarnation;
    meta.durable.reset();
    meta.changed = true;
  }
  if (!sb.drop && !sb.ops.empty() &&
      opts_.planted.strikes(faults::planted_bug::drop_acked_sub_batch))
    return; // planted bug: acknowledged (the caller acks every apply), never applied
  // What the sub-batch does to this node's copy follows from where it stands
  // in the holder's stream (coverage.hpp): a stale one does nothing, a drop
  // (or an era whose drop never came) empties the holder, and ops land in
  // the slots whose copy they continue.
  const auto* known = cover_->find(sb.holder);
  const stream_pos before = known ? known->applied : stream_pos{};
  const cover_step step = cover_->begin(sb);
  if (step.stale) {
    ++counters_.fenced;
    if (step.era_behind) {
      ++counters_.era_behind;
      if (meta.era_behind_reported != before.era && meta.worker_uid != 0) {
        meta.era_behind_reported = before.era;
        era_behind_.push_back(meta.worker_uid);
        spdlog::warn("stream-era-behind holder={} worker_uid={} location={} applied={} end={} "
                     "ops={} action=full-sync-requested",
                     sb.holder, meta.worker_uid, meta.location, persistence::to_string(before),
                     persistence::to_string(sb.end), sb.ops.size());
      }
    }
    cover_->finish(sb);
    return;
  }
  if (step.hole) {
    ++counters_.holes;
    spdlog::info("holder-copy-gap holder={} worker_uid={} location={} applied={} prev={} end={} "
                 "action=copy-from-other-owners",
                 sb.holder, meta.worker_uid, meta.location, persistence::to_string(before),
                 persistence::to_string(sb.prev), persistence::to_string(sb.end));
  }
  if (step.reset) {
    if (!sb.drop && !before.none())
      ++counters_.implied_drops;
    auto w = index_->write();
    if (step.keep.empty()) {
      w.begin_drop(holder_set{sb.holder});
    } else {
      std::vector<bool> keep(opts_.slot_count, false);
      for (uint32_t slot : step.keep)
        keep[slot] = true;
      w.begin_drop(holder_set{sb.holder}, &keep);
    }
    drops_pending_ = w.drops_pending();
  }
  if (!sb.ops.empty() && step.ops != cover_step::ops_mode::none) {
    const size_t step_ops = std::max<size_t>(1, opts_.write_lock_ops);
    std::span<const kv_op> ops{sb.ops};
    const bool all = step.ops == cover_step::ops_mode::all;
    for (size_t at = 0; at < ops.size(); at += step_ops) {
      auto w = index_->write();
      const auto part = ops.subspan(at, std::min(step_ops, ops.size() - at));
      if (all)
        w.apply(sb.holder, part);
      else
        w.apply_where(sb.holder, part, [this](uint32_t slot) { return cover_->wants(slot); });
      drops_pending_ = w.drops_pending();
    }
  }
  cover_->finish(sb);
  touch_changed_covers();
  meta.changed = true; // its position moved: the next round writes it
  counters_.ops += sb.ops.size();
  if (sb.drop && !sb.has_mark) {
    meta.mark = seq_mark{};
    meta.changed = true;
  }
  // The durable seq only grows within a registration and a seq sequence:
  // a sub-batch re-sent by a peer's link after a rejoin carries an older one.
  if (sb.drop || (sb.has_mark && sb.mark.state != seq_state::tracking))
    meta.durable.reset();
  else if (sb.has_durable)
    meta.durable = std::max(meta.durable.value_or(0), sb.durable_seq);
  if (sb.has_mark) {
    // Lost records (a given-up commit) make the holder's watermark unknown
    // until something replaces its entries: a full sync or a drop.
    const bool keeps_gap =
        meta.mark.state == seq_state::gap && !sb.drop && sb.mark.state != seq_state::syncing;
    if (!keeps_gap && meta.mark != sb.mark) {
      meta.mark = sb.mark;
      meta.changed = true;
    }
  }
  if (durable())
    append_record(sb, meta);
}

uint64_t kv_shard_core::repair_slot(uint32_t slot, std::span<const uint64_t> flat, bool keep_own) {
  if (slot >= opts_.slot_count)
    return 0;
  absl::flat_hash_set<std::pair<uint64_t, holder_id>> wanted;
  for (size_t i = 0; i + 1 < flat.size(); i += 2)
    if (slot_of(flat[i], opts_.slot_count) == slot)
      wanted.emplace(flat[i], flat[i + 1]);
  std::vector<std::pair<uint64_t, holder_id>> extra;
  {
    auto r = index_->read();
    r.for_each_key(slot, [&](uint64_t key, std::span<const holder_id> holders) {
      for (holder_id h : holders)
        if (!wanted.erase({key, h}) && !keep_own)
          extra.emplace_back(key, h);
    });
  }
  {
    auto w = index_->write();
    for (const auto& [key, h] : extra)
      w.evict(key, h);
    for (const auto& [key, h] : wanted)
      w.admit(key, h);
  }
  // Emptied (a slot given away): what the holders' covers say of it no longer
  // describes these entries.
  if (flat.empty() && !keep_own) {
    cover_->blank_slot(slot);
    touch_changed_covers();
  }
  return extra.size() + wanted.size();
}

void kv_shard_core::touch_changed_covers() {
  auto changed = cover_->take_changed();
  if (changed.empty())
    return;
  std::sort(changed.begin(), changed.end());
  changed.erase(std::unique(changed.begin(), changed.end()), changed.end());
  for (uint32_t slot : changed)
    index_->set_uncertain(slot, cover_->slot_pending(slot));
  auto w = index_->write();
  for (uint32_t slot : changed)
    w.touch(slot);
}

void kv_shard_core::set_ownership(std::vector<uint8_t> owned, std::vector<uint64_t> owned_since) {
  cover_->set_ownership(std::move(owned), std::move(owned_since));
  touch_changed_covers();
}

void kv_shard_core::settle(std::span<const uint32_t> slots) {
  for (uint32_t slot : slots)
    cover_->settle(slot);
  touch_changed_covers();
}

void kv_shard_core::settle_all() {
  cover_->settle_all();
  touch_changed_covers();
}

void kv_shard_core::set_ownership_words(std::span<const uint64_t> words) {
  cover_->set_ownership(words);
  touch_changed_covers();
}

slot_copy kv_shard_core::copy_of(uint32_t slot) const {
  slot_copy copy;
  copy.slot = slot;
  if (slot >= opts_.slot_count)
    return copy;
  copy.complete = !cover_->blank(slot);
  absl::flat_hash_map<holder_id, std::vector<uint64_t>> keys;
  {
    auto r = index_->read();
    r.for_each_key(slot, [&](uint64_t key, std::span<const holder_id> holders) {
      for (holder_id h : holders)
        keys[h].push_back(key);
    });
  }
  auto add = [&](holder_id h, std::vector<uint64_t> ks) {
    holder_slot_copy part;
    part.holder = h;
    if (auto it = holders_.find(h); it != holders_.end())
      part.worker_uid = it->second.worker_uid;
    const auto label = cover_->label(h, slot);
    part.certain = label.has_value();
    part.pos = label.value_or(stream_pos{});
    part.keys = std::move(ks);
    copy.holders.push_back(std::move(part));
  };
  for (holder_id h : cover_->holders()) {
    auto it = keys.find(h);
    add(h, it == keys.end() ? std::vector<uint64_t>{} : std::move(it->second));
    if (it != keys.end())
      keys.erase(it);
  }
  // Entries of holders the book never heard of (loaded from an older
  // snapshot): labeled none, they never win over a known copy.
  for (auto& [h, ks] : keys)
    add(h, std::move(ks));
  return copy;
}

copy_outcome kv_shard_core::install(const slot_copy& copy) {
  copy_outcome result;
  const uint32_t slot = copy.slot;
  if (slot >= opts_.slot_count)
    return result;
  // This node's entries of the slot, per holder.
  absl::flat_hash_map<holder_id, std::vector<uint64_t>> mine;
  {
    auto r = index_->read();
    r.for_each_key(slot, [&](uint64_t key, std::span<const holder_id> holders) {
      for (holder_id h : holders)
        mine[h].push_back(key);
    });
  }
  // A blank slot holds of each holder only what it applied since it came
  // back empty: at the label a whole copy has, theirs is the whole of it.
  // It becomes whole only if it takes every part it differs from.
  const bool blank = cover_->blank(slot);
  bool whole = copy.complete;
  for (const auto& part : copy.holders) {
    std::vector<uint64_t> theirs = part.keys;
    std::sort(theirs.begin(), theirs.end());
    theirs.erase(std::unique(theirs.begin(), theirs.end()), theirs.end());
    auto& own = mine[part.holder];
    std::sort(own.begin(), own.end());
    const bool same = own == theirs;
    auto verdict = cover_->judge(part.holder, slot, part.pos, part.certain, same);
    if (blank && verdict == install_verdict::conflict)
      verdict = install_verdict::install;
    else if (blank && !same && verdict != install_verdict::install)
      whole = false; // theirs is behind this node's ops, or uncertain: a newer copy must come
    const uint64_t uid =
        part.worker_uid != 0
            ? part.worker_uid
            : (holders_.contains(part.holder) ? holders_.at(part.holder).worker_uid : 0);
    switch (verdict) {
    case install_verdict::keep:
      break;
    case install_verdict::wait:
      ++result.waiting;
      break;
    case install_verdict::conflict:
      ++counters_.copy_conflicts;
      result.conflicts.emplace_back(uid, part.holder);
      break;
    case install_verdict::install: {
      auto w = index_->write();
      std::vector<uint64_t> gone;
      std::set_difference(own.begin(), own.end(), theirs.begin(), theirs.end(),
                          std::back_inserter(gone));
      std::vector<uint64_t> come;
      std::set_difference(theirs.begin(), theirs.end(), own.begin(), own.end(),
                          std::back_inserter(come));
      for (uint64_t k : gone)
        w.evict(k, part.holder);
      for (uint64_t k : come)
        w.admit(k, part.holder);
      w.touch(slot);
      drops_pending_ = w.drops_pending();
      result.changed += gone.size() + come.size();
      ++result.installed;
      ++counters_.copies_installed;
      auto& meta = holders_[part.holder];
      if (meta.worker_uid == 0 && part.worker_uid != 0) {
        meta.worker_uid = part.worker_uid;
        meta.changed = true;
      }
      cover_->installed(part.holder, slot, part.pos);
      break;
    }
    }
  }
  // A copy of an owner that is not blank lists every holder of the slot: a
  // blank one here has all it lacked, once it took every part it lacked.
  if (whole)
    cover_->settle(slot);
  result.still_blank = cover_->blank(slot);
  for (holder_id h : cover_->holders())
    if (cover_->cover(h, slot).state == cover_state::pending) {
      const auto it = holders_.find(h);
      result.unresolved.emplace_back(it == holders_.end() ? 0 : it->second.worker_uid, h);
    }
  touch_changed_covers();
  return result;
}

std::vector<location_mark> kv_shard_core::marks_of(uint64_t worker_uid) const {
  std::vector<location_mark> out;
  for (const auto& [h, meta] : holders_)
    if (meta.worker_uid == worker_uid) {
      // A node taking the worker over continues from what every owner
      // acknowledged, not from a mark that may have outrun its batch's ops.
      seq_mark mark = meta.mark;
      if (mark.state == seq_state::tracking && meta.durable && *meta.durable < mark.seq) {
        spdlog::debug("marks-durable-behind uid={} location={} mark={} durable={}", worker_uid,
                      meta.location, mark.seq, *meta.durable);
        mark.seq = *meta.durable;
      }
      const auto* cover = cover_->find(h);
      out.push_back(location_mark{meta.location, meta.incarnation, mark,
                                  cover ? cover->applied : stream_pos{}});
    }
  return out;
}

void kv_shard_core::append_record(const kv_sub_batch& sb, holder_meta& meta) {
  const uint64_t position = next_position_++;
  for (const auto& op : sb.ops)
    slot_positions_[slot_of(op.key, opts_.slot_count)] = position;
  const bool write_mark = sb.has_mark || sb.drop || meta.mark.state == seq_state::gap;
  persistence::holder_intro intro;
  const bool write_intro = !meta.intro_durable && meta.worker_uid != 0;
  if (write_intro) {
    intro.worker_uid = meta.worker_uid;
    intro.location = meta.location;
    meta.intro_durable = true;
  }
  scratch_.clear();
  persistence::encode_log_record(persistence::log_header{sb.holder, meta.incarnation, sb.drop,
                                                         sb.prev, sb.end, sb.placement_epoch,
                                                         sb.placement_since},
                                 write_mark ? std::optional<seq_mark>{meta.mark} : std::nullopt,
                                 write_intro ? &intro : nullptr, sb.ops, scratch_);
  if (!pending_)
    pending_.emplace(store_->new_batch());
  pending_->append_log(position, scratch_);
  ++pending_records_;
  pending_holders_.insert(sb.holder);
  ++counters_.log_records;
  counters_.log_bytes += scratch_.size();
  log_bytes_total_ += scratch_.size();
  log_bytes_since_round_ += scratch_.size();
}

kv_shard_core::commit_result kv_shard_core::commit(uint64_t now_ms) {
  return write_pending(now_ms);
}

kv_shard_core::commit_result kv_shard_core::write_pending(uint64_t now_ms) {
  commit_result result;
  if (!durable() || !pending_ || pending_->empty()) {
    result.acks.swap(owed_);
    return result;
  }
  auto r = store_->commit(*pending_);
  if (r) {
    ++counters_.commits;
    pending_.reset();
    pending_records_ = 0;
    pending_holders_.clear();
    pending_slots_.clear();
    pending_holder_states_.clear();
    failing_since_ms_.reset();
    result.acks.swap(owed_);
    if (pending_floor_) {
      if (auto released = store_->release_log_files(*pending_floor_); !released)
        spdlog::warn("store-log-files-release-failed floor={} error={}", *pending_floor_,
                     released.error().message);
      pending_floor_.reset();
    }
    return result;
  }
  ++counters_.commit_failures;
  result.ok = false;
  result.error = r.error().message;
  if (!failing_since_ms_)
    failing_since_ms_ = now_ms;
  if (now_ms - *failing_since_ms_ < static_cast<uint64_t>(opts_.commit_failure_grace.count()))
    return result; // kept for a retry; acks wait
  // Given up: the index keeps the ops, the disk will not. Their holders are
  // marked `gap` (in a record of their own, committed with the next batch),
  // the slots this batch would have snapshotted are dirty again, and the
  // senders get their acks so that ingest goes on.
  spdlog::error("store-commit-given-up records={} holders={} failing_ms={} error={} "
                "(the holders' workers will be asked to resync after a restart)",
                pending_records_, pending_holders_.size(), now_ms - *failing_since_ms_,
                result.error);
  counters_.records_given_up += pending_records_;
  for (uint32_t slot : pending_slots_)
    snapshotted_versions_[slot] = 0;
  pending_slots_.clear();
  // Holder states that were in the lost batch are written by the next round.
  for (holder_id h : pending_holder_states_)
    if (auto it = holders_.find(h); it != holders_.end()) {
      it->second.changed = true;
      it->second.intro_durable = false;
    }
  pending_holder_states_.clear();
  if (round_) {
    spdlog::warn("snapshot-round-aborted start_position={} reason=commit-given-up",
                 round_->start_position);
    for (const auto& state : round_->holders) // the next round writes them
      if (auto it = holders_.find(state.holder); it != holders_.end()) {
        it->second.changed = true;
        it->second.intro_durable = false;
      }
    round_.reset();
  }
  const holder_set lost = std::move(pending_holders_);
  pending_floor_.reset();
  pending_.reset();
  pending_records_ = 0;
  pending_holders_.clear();
  failing_since_ms_.reset();
  result.acks.swap(owed_);
  for (holder_id h : lost) {
    auto& meta = holders_[h];
    meta.mark = seq_mark{seq_state::gap, 0};
    meta.intro_durable = false;
    meta.changed = true;
    kv_sub_batch mark_only;
    mark_only.holder = h;
    mark_only.incarnation = meta.incarnation;
    if (const auto* c = cover_->find(h)) // no new position: a mark, not an event
      mark_only.prev = mark_only.end = c->applied;
    mark_only.has_mark = true;
    mark_only.mark = meta.mark;
    append_record(mark_only, meta);
  }
  return result;
}

// -- background work -------------------------------------------------------------

bool kv_shard_core::snapshot_due(uint64_t now_ms) const {
  if (!durable() || round_)
    return false;
  if (snapshot_requested_)
    return true;
  const uint64_t since = now_ms - last_round_start_ms_;
  if (since < static_cast<uint64_t>(opts_.snapshot_min_interval.count()))
    return false;
  if (log_bytes_since_round_ >= snapshot_log_threshold())
    return true;
  return since >= static_cast<uint64_t>(opts_.snapshot_interval.count()) &&
         log_bytes_since_round_ > 0;
}

uint64_t kv_shard_core::snapshot_log_threshold() const noexcept {
  return std::max(opts_.snapshot_log_bytes, last_round_bytes_ / 100 * opts_.snapshot_log_percent);
}

bool kv_shard_core::background_due(uint64_t now_ms) const {
  return drops_pending_ || round_.has_value() || snapshot_due(now_ms);
}

std::optional<uint64_t> kv_shard_core::next_idle_work_ms(uint64_t now_ms) const {
  if (background_due(now_ms) || work_pending())
    return now_ms;
  std::optional<uint64_t> next;
  auto soonest = [&next](uint64_t at) { next = next ? std::min(*next, at) : at; };
  if (durable() && opts_.idle_flush.count() > 0 && !idle_flushed_)
    soonest(idle_since_ms_ + static_cast<uint64_t>(opts_.idle_flush.count()));
  if (durable() && log_bytes_since_round_ > 0)
    soonest(last_round_start_ms_ +
            static_cast<uint64_t>(
                std::max(opts_.snapshot_interval, opts_.snapshot_min_interval).count()));
  return next;
}

bool kv_shard_core::flush_if_idle(uint64_t now_ms) {
  if (!durable() || opts_.idle_flush.count() <= 0)
    return false;
  const uint64_t activity = next_position_ + counters_.commits;
  if (activity != idle_activity_ || round_ || work_pending()) {
    idle_activity_ = activity;
    idle_since_ms_ = now_ms;
    idle_flushed_ = false;
    return false;
  }
  if (idle_flushed_ || now_ms - idle_since_ms_ < static_cast<uint64_t>(opts_.idle_flush.count()))
    return false;
  idle_flushed_ = true; // once per idle spell, whether or not it was worth it
  const auto memory = store_->memory_usage();
  if (memory.memtable_bytes < opts_.idle_flush_min_bytes)
    return false;
  if (auto r = store_->request_flush(); !r) {
    spdlog::warn("store-idle-flush-failed error={}", r.error().message);
    return false;
  }
  spdlog::info("store-idle-flush memtable_bytes={} idle_ms={}", memory.memtable_bytes,
               now_ms - idle_since_ms_);
  return true;
}

void kv_shard_core::request_snapshot() {
  if (durable())
    snapshot_requested_ = true;
}

kv_shard_core::commit_result kv_shard_core::background_step(uint64_t now_ms) {
  if (drops_pending_) {
    auto w = index_->write();
    drops_pending_ = w.drop_step(opts_.drop_step_slots, opts_.drop_step_keys);
    return commit_result{}; // nothing to write: the drop records are logged already
  }
  if (!round_ && snapshot_due(now_ms)) {
    snapshot_requested_ = false;
    round_state round;
    round.start_position = next_position_ - 1;
    // The log is replayed from P0 on: each holder starts there as it stood at P0.
    for (auto& [h, meta] : holders_) {
      if (!meta.changed)
        continue;
      persistence::holder_state state{h, meta.worker_uid, meta.location, meta.incarnation,
                                      meta.mark};
      if (const auto* c = cover_->find(h)) {
        state.applied = c->applied;
        state.hole = c->hole;
        state.placement_epoch = c->placement_epoch;
      }
      round.holders.push_back(std::move(state));
      meta.changed = false;
      meta.intro_durable = true;
    }
    round.start_log_bytes = log_bytes_total_;
    round.started_ms = now_ms;
    {
      auto r = index_->read();
      for (uint32_t slot = 0; slot < opts_.slot_count; ++slot)
        if (r.slot(slot).version != snapshotted_versions_[slot])
          round.slots.push_back(slot);
    }
    spdlog::debug("snapshot-round-start start_position={} dirty_slots={} log_bytes={}",
                  round.start_position, round.slots.size(), log_bytes_since_round_);
    round_ = std::move(round);
    last_round_start_ms_ = now_ms;
  }
  if (!round_)
    return commit_result{};
  snapshot_some();
  if (round_->cursor >= round_->slots.size())
    finish_round(now_ms);
  return write_pending(now_ms);
}

void kv_shard_core::snapshot_some() {
  if (!pending_)
    pending_.emplace(store_->new_batch());
  // Covers every record applied so far: the pending ones commit in the same write.
  const uint64_t stamp = next_position_ - 1;
  uint64_t budget = opts_.snapshot_step_entries;
  while (round_->cursor < round_->slots.size() && budget > 0) {
    const uint32_t slot = round_->slots[round_->cursor++];
    {
      auto w = index_->write();
      w.finish_drops_in(slot);
      drops_pending_ = w.drops_pending();
    }
    auto r = index_->read();
    const auto summary = r.slot(slot);
    // How the holders whose copy of the slot does not follow their stream stand.
    std::vector<persistence::slot_cover_record> covers;
    if (cover_->blank(slot))
      covers.push_back(
          persistence::slot_cover_record{0, coverage_book::blank_record_state, false, {}, {}});
    for (holder_id h : cover_->holders()) {
      const auto c = cover_->cover(h, slot);
      if (c.state != cover_state::following)
        covers.push_back(persistence::slot_cover_record{h, static_cast<uint8_t>(c.state),
                                                        c.uncovered, c.pos, cover_->find(h)->hole});
    }
    if (summary.entries == 0 && covers.empty()) {
      pending_->delete_slot(slot);
    } else {
      persistence::slot_snapshot_writer writer{slot, stamp};
      for (const auto& c : covers)
        writer.add_cover(c);
      writer.reserve(summary.keys, summary.entries);
      r.for_each_key(slot,
                     [&](uint64_t key, std::span<const holder_id> hs) { writer.add(key, hs); });
      scratch_.clear();
      writer.finish(scratch_);
      pending_->put_slot(slot, scratch_);
      counters_.snapshot_bytes += scratch_.size();
      round_->bytes_written += scratch_.size();
    }
    snapshotted_versions_[slot] = summary.version;
    slot_stamps_[slot] = stamp;
    pending_slots_.push_back(slot);
    ++counters_.snapshot_slots;
    budget -= std::min(budget, std::max<uint64_t>(summary.entries, 64));
  }
}

void kv_shard_core::finish_round(uint64_t now_ms) {
  uint64_t written = 0;
  for (const auto& state : round_->holders) {
    pending_->put_holder(state);
    pending_holder_states_.push_back(state.holder);
    ++written;
  }
  pending_->truncate_log(round_->start_position + 1);
  pending_floor_ = round_->start_position + 1;
  ++counters_.snapshot_rounds;
  counters_.last_round_ms = static_cast<double>(now_ms - round_->started_ms);
  log_bytes_since_round_ = log_bytes_total_ - round_->start_log_bytes;
  last_round_bytes_ = round_->bytes_written;
  spdlog::info("snapshot-round-done floor={} slots={} holders={} ms={} bytes={} "
               "log_bytes_left={} next_round_after_log_bytes={}",
               round_->start_position + 1, round_->slots.size(), written, counters_.last_round_ms,
               last_round_bytes_, log_bytes_since_round_, snapshot_log_threshold());
  round_.reset();
}

} // namespace lmcc::actors
