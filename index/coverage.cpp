#include "index/coverage.hpp"

#include <algorithm>

namespace lmcc::actors {

const char* to_string(cover_state s) noexcept {
  switch (s) {
  case cover_state::following:
    return "following";
  case cover_state::labeled:
    return "labeled";
  case cover_state::pending:
    return "pending";
  }
  return "?";
}

coverage_book::coverage_book(uint32_t slot_count)
  : slot_count_(slot_count), decided_(slot_count, 0), pending_per_slot_(slot_count, 0),
    blank_(slot_count, 0) {}

void coverage_book::blank_all() {
  for (uint32_t s = 0; s < slot_count_; ++s)
    if (blank_[s] == 0) {
      blank_[s] = 1;
      changed_.push_back(s);
    }
}

void coverage_book::blank_slot(uint32_t slot) {
  if (slot < slot_count_ && blank_[slot] == 0) {
    blank_[slot] = 1;
    changed_.push_back(slot);
  }
}

void coverage_book::settle(uint32_t slot) {
  if (slot < slot_count_ && blank_[slot] != 0) {
    blank_[slot] = 0;
    changed_.push_back(slot);
  }
}

void coverage_book::settle_all() {
  for (uint32_t s = 0; s < slot_count_; ++s)
    settle(s);
}

// -- ownership -----------------------------------------------------------------------

void coverage_book::set_ownership(std::vector<uint8_t> owned, std::vector<uint64_t> owned_since) {
  owned.resize(owned.empty() ? 0 : slot_count_, 0);
  owned_since.resize(owned_since.empty() ? 0 : slot_count_, 0);
  // Gained: owned now, and not before (a first call counts the slots owned
  // since an epoch after 0 as gained: a restart into a change).
  std::vector<uint32_t> gained;
  for (uint32_t s = 0; s < slot_count_ && !owned.empty(); ++s) {
    const bool now = owned[s] != 0;
    const bool before = ownership_known_ ? owns(s) : owned_since.empty() || owned_since[s] == 0;
    if (now && !before)
      gained.push_back(s);
  }
  // Slots no longer owned: what this node keeps of them does not count, nor
  // does a blank one stay uncertain (nobody reads or waits for it here); it
  // stays blank all the same, so that its copy never passes for a whole one.
  for (uint32_t s = 0; s < slot_count_ && !owned.empty(); ++s)
    if (owned[s] == 0 && blank_[s] != 0)
      changed_.push_back(s);
  for (auto& [h, hc] : holders_) {
    if (hc.slots.empty())
      continue;
    for (uint32_t s = 0; s < slot_count_; ++s)
      if (!owned.empty() && owned[s] == 0 && hc.slots[s].state != cover_state::following)
        set_slot(hc, s, slot_cover{});
    compact(hc);
  }
  const bool first = !ownership_known_;
  owned_ = std::move(owned);
  owned_since_ = std::move(owned_since);
  ownership_known_ = true;
  newest_gain_ = 0;
  for (uint32_t s = 0; s < owned_since_.size(); ++s)
    if (owns(s))
      newest_gain_ = std::max(newest_gain_, owned_since_[s]);
  if (gained.empty())
    return;
  // A gained slot says nothing of the holders this node has not heard of:
  // blank until a whole previous owner's copy is installed. (A restart keeps
  // what its snapshots recorded: a blank slot is stored as one.)
  if (!first)
    for (uint32_t s : gained)
      if (blank_[s] == 0) {
        blank_[s] = 1;
        changed_.push_back(s);
      }
  for (auto& [h, hc] : holders_) {
    for (uint32_t s : gained) {
      const bool uncovered = hc.placement_epoch < owned_since_[s];
      // A restart trusts what its snapshot says of a slot once its holder
      // sent a sub-batch that covers it (the change was recorded with it).
      if (first && (!uncovered || cover(h, s).state != cover_state::following))
        continue;
      materialize(hc);
      if (!uncovered) // the home splits for this placement already: since when is unknown
        hc.hole = std::max(hc.hole, hc.applied);
      set_slot(hc, s, slot_cover{cover_state::pending, uncovered, stream_pos{}});
    }
    compact(hc);
  }
}

void coverage_book::set_ownership(std::span<const uint64_t> words) {
  std::vector<uint8_t> owned(slot_count_, 0);
  std::vector<uint64_t> since(slot_count_, 0);
  for (uint32_t s = 0; s < slot_count_ && s < words.size(); ++s) {
    owned[s] = words[s] != not_owned ? 1 : 0;
    since[s] = words[s] != not_owned ? words[s] : 0;
  }
  set_ownership(std::move(owned), std::move(since));
}

// -- the write path ----------------------------------------------------------------------

void coverage_book::reset(holder_cover& hc, const stream_pos& at, cover_step& step) {
  step.reset = true;
  if (!hc.slots.empty()) {
    for (uint32_t s = 0; s < slot_count_; ++s) {
      const auto& c = hc.slots[s];
      if (c.state == cover_state::following)
        continue;
      if (!replays(s) || (c.state == cover_state::labeled && c.pos > at)) {
        step.keep.push_back(s); // a copy newer than the drop, or replay's: its snapshot is newer
        continue;
      }
      set_slot(hc, s, slot_cover{});
    }
  }
  hc.applied = at;
  compact(hc);
}

cover_step coverage_book::begin(const kv_sub_batch& sb) {
  auto& hc = holder(sb.holder);
  cover_step step;
  slow_ = false;
  const stream_pos& end = sb.end;
  if (sb.drop) {
    step.ops = cover_step::ops_mode::none;
    if (end <= hc.applied) {
      step.stale = true;
      return step;
    }
    reset(hc, end, step);
    hc.placement_epoch = std::max(hc.placement_epoch, sb.placement_epoch);
    return step;
  }
  if (end < hc.applied || (end == hc.applied && !sb.ops.empty())) {
    // Already applied (a re-send), or a sender that lost the stream to a
    // newer one (a stale entity): nothing of it is newer than what is here.
    step.stale = true;
    step.ops = cover_step::ops_mode::none;
    step.era_behind = !sb.ops.empty() && end.incarnation == hc.applied.incarnation &&
                      end.era < hc.applied.era && end.n > hc.applied.n;
    return step;
  }
  if (end == hc.applied) {
    step.ops = cover_step::ops_mode::none; // a mark at the stream's position: no event
    return step;
  }
  // A newer era whose drop never reached this node: the drop is implied
  // (every era starts with one).
  if (std::tie(end.incarnation, end.era) > std::tie(hc.applied.incarnation, hc.applied.era)) {
    reset(hc, end.era_start(), step);
    // The drop went to the owners of its time. When the sender's placement
    // began after it, a slot this node gained got none of the ops in
    // between: it holds the stream at the drop (empty), and the loop below
    // finds the gap up to where this node's ops begin.
    if (sb.placement_since > end.era_start()) {
      materialize(hc);
      for (uint32_t s = 0; s < slot_count_; ++s)
        if (owns(s) && gained(s) && replays(s) && hc.slots[s].state == cover_state::following)
          set_slot(hc, s, slot_cover{cover_state::labeled, false, end.era_start()});
      compact(hc); // nothing gained: every slot follows still
    }
  }
  const stream_pos before = hc.applied;
  step.hole = sb.prev > before;
  const uint64_t epoch = sb.placement_epoch;
  const bool all_covered = owned_since_.empty() || epoch >= newest_gain_;
  if (hc.slots.empty() && !step.hole && all_covered) {
    // The common case: every slot follows and keeps following (a replay's
    // caller skips the slots whose snapshot is newer by itself).
    hc.applied = end;
    hc.placement_epoch = std::max(hc.placement_epoch, epoch);
    return step;
  }
  slow_ = true;
  step.ops = cover_step::ops_mode::some;
  materialize(hc);
  bool raise_to_end = false;
  for (uint32_t s = 0; s < slot_count_; ++s) {
    if (!owns(s)) {
      decided_[s] = 1; // not this node's by its view: kept as sent, not accounted
      continue;
    }
    if (!replays(s)) {
      decided_[s] = 0; // its snapshot holds this record already
      continue;
    }
    const slot_cover c = hc.slots[s];
    const bool in = covered(s, epoch);
    // A slot this node gained got ops from the sender only since it split
    // with a placement that gives it the slot, whatever it sent before.
    const stream_pos& from = gained(s) ? std::max(sb.prev, sb.placement_since) : sb.prev;
    switch (c.state) {
    case cover_state::following:
      if (!in) {
        set_slot(hc, s, slot_cover{cover_state::labeled, false, before});
        decided_[s] = 0;
      } else {
        if (step.hole)
          set_slot(hc, s, slot_cover{cover_state::pending, false, stream_pos{}});
        decided_[s] = 1;
      }
      break;
    case cover_state::labeled:
      if (!in) {
        decided_[s] = 0;
      } else if (from <= c.pos) {
        decided_[s] = end > c.pos ? 1 : 0;
        if (end > c.pos)
          set_slot(hc, s, slot_cover{cover_state::labeled, false, end});
      } else {
        // The copy stops before where this sub-batch continues from.
        set_slot(hc, s, slot_cover{cover_state::pending, false, stream_pos{}});
        hc.hole = std::max(hc.hole, from);
        decided_[s] = 1;
      }
      break;
    case cover_state::pending:
      if (!in) {
        raise_to_end = true; // its ops in this sub-batch went to the other owners
        decided_[s] = 0;
      } else {
        if (c.uncovered) {
          set_slot(hc, s, slot_cover{cover_state::pending, false, c.pos});
          hc.hole = std::max(hc.hole, from);
        }
        decided_[s] = 1;
      }
      break;
    }
  }
  if (step.hole)
    hc.hole = std::max(hc.hole, sb.prev);
  if (raise_to_end)
    hc.hole = std::max(hc.hole, end);
  hc.applied = end;
  hc.placement_epoch = std::max(hc.placement_epoch, epoch);
  return step;
}

void coverage_book::finish(const kv_sub_batch& sb) {
  if (!slow_)
    return;
  slow_ = false;
  auto it = holders_.find(sb.holder);
  if (it == holders_.end() || it->second.slots.empty())
    return;
  auto& hc = it->second;
  if (hc.pending > 0)
    for (const auto& op : sb.ops) {
      const uint32_t s = slot_of(op.key, slot_count_);
      auto& c = hc.slots[s];
      if (decided_[s] && owns(s) && c.state == cover_state::pending && sb.end > c.pos)
        c.pos = sb.end; // a copy must cover what was applied here since
    }
  // A label the stream caught up with follows it again.
  for (uint32_t s = 0; s < slot_count_ && hc.exceptions > 0; ++s)
    if (hc.slots[s].state == cover_state::labeled && hc.slots[s].pos == hc.applied)
      set_slot(hc, s, slot_cover{});
  compact(hc);
}

// -- copies between owners -----------------------------------------------------------------

slot_cover coverage_book::cover(holder_id h, uint32_t slot) const {
  auto it = holders_.find(h);
  if (it == holders_.end() || it->second.slots.empty() || slot >= slot_count_)
    return slot_cover{};
  return it->second.slots[slot];
}

std::optional<stream_pos> coverage_book::label(holder_id h, uint32_t slot) const {
  auto it = holders_.find(h);
  if (it == holders_.end())
    return stream_pos{};
  const auto c = cover(h, slot);
  switch (c.state) {
  case cover_state::following:
    return it->second.applied;
  case cover_state::labeled:
    return c.pos;
  case cover_state::pending:
    return std::nullopt;
  }
  return std::nullopt;
}

install_verdict coverage_book::judge(holder_id h, uint32_t slot, const stream_pos& pos,
                                     bool certain, bool same_entries) const {
  if (!certain)
    return install_verdict::keep;
  auto it = holders_.find(h);
  if (it == holders_.end())
    return pos.none() || same_entries ? install_verdict::keep : install_verdict::install;
  const auto& hc = it->second;
  const auto c = cover(h, slot);
  auto against = [&](const stream_pos& mine) {
    if (pos > mine)
      return install_verdict::install; // (entries alike: only the label moves)
    if (pos == mine && !same_entries)
      return install_verdict::conflict;
    return install_verdict::keep;
  };
  switch (c.state) {
  case cover_state::following:
    return against(hc.applied);
  case cover_state::labeled:
    return against(c.pos);
  case cover_state::pending:
    if (c.uncovered)
      return install_verdict::install;
    return pos >= std::max(hc.hole, c.pos) && !pos.none() ? install_verdict::install
                                                          : install_verdict::wait;
  }
  return install_verdict::keep;
}

void coverage_book::installed(holder_id h, uint32_t slot, const stream_pos& pos) {
  if (slot >= slot_count_)
    return;
  auto& hc = holder(h);
  const auto c = cover(h, slot);
  materialize(hc);
  const bool resolves = c.state == cover_state::pending && !c.uncovered;
  if ((resolves && pos <= hc.applied) || pos == hc.applied)
    set_slot(hc, slot, slot_cover{});
  else
    set_slot(hc, slot, slot_cover{cover_state::labeled, false, pos});
  compact(hc);
}

// -- what others read ------------------------------------------------------------------------

const holder_cover* coverage_book::find(holder_id h) const {
  auto it = holders_.find(h);
  return it == holders_.end() ? nullptr : &it->second;
}

std::vector<holder_id> coverage_book::holders() const {
  std::vector<holder_id> out;
  out.reserve(holders_.size());
  for (const auto& [h, hc] : holders_)
    out.push_back(h);
  return out;
}

uint64_t coverage_book::pending_count() const noexcept {
  uint64_t n = 0;
  for (const auto& [h, hc] : holders_)
    n += hc.pending;
  return n;
}

// -- restart ---------------------------------------------------------------------------------

void coverage_book::restore_holder(holder_id h, const stream_pos& applied, const stream_pos& hole,
                                   uint64_t placement_epoch) {
  auto& hc = holder(h);
  hc.applied = applied;
  hc.hole = std::max(hc.hole, hole);
  hc.placement_epoch = placement_epoch;
}

void coverage_book::restore_cover(holder_id h, uint32_t slot, const slot_cover& c,
                                  const stream_pos& hole) {
  if (slot >= slot_count_ || c.state == cover_state::following)
    return;
  auto& hc = holder(h);
  materialize(hc);
  set_slot(hc, slot, c);
  if (c.state == cover_state::pending)
    hc.hole = std::max(hc.hole, hole);
}

// -- internals ----------------------------------------------------------------------------------

void coverage_book::materialize(holder_cover& hc) {
  if (hc.slots.empty())
    hc.slots.assign(slot_count_, slot_cover{});
}

void coverage_book::set_slot(holder_cover& hc, uint32_t slot, const slot_cover& c) {
  auto& old = hc.slots[slot];
  if (old == c)
    return;
  hc.exceptions -= old.state != cover_state::following ? 1 : 0;
  hc.exceptions += c.state != cover_state::following ? 1 : 0;
  if (old.state == cover_state::pending) {
    --hc.pending;
    --pending_per_slot_[slot];
  }
  if (c.state == cover_state::pending) {
    ++hc.pending;
    ++pending_per_slot_[slot];
  }
  old = c;
  changed_.push_back(slot);
}

void coverage_book::compact(holder_cover& hc) {
  if (hc.pending == 0)
    hc.hole = stream_pos{};
  if (hc.exceptions == 0 && !hc.slots.empty()) {
    hc.slots.clear();
    hc.slots.shrink_to_fit();
  }
}

} // namespace lmcc::actors
