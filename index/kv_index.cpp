#include "index/kv_index.hpp"

#include <algorithm>
#include <bit>

namespace lmcc::actors {

kv_index::kv_index(uint32_t slot_count)
  : slots_(slot_count), group_span_(std::max(1U, slot_count / arena_groups)) {}

kv_index::all_slots_lock::all_slots_lock(const kv_index& idx) : idx_(&idx) {
  for (uint32_t slot = 0; slot < idx.slot_count(); ++slot)
    idx.slot_lock(slot).lock();
}

kv_index::all_slots_lock::~all_slots_lock() {
  for (uint32_t slot = 0; slot < idx_->slot_count(); ++slot)
    idx_->slot_lock(slot).unlock();
}

void kv_index::lookup(std::span<const uint64_t> keys, std::span<holder_list> out) const {
  for (size_t i = 0; i < keys.size(); ++i) {
    const uint32_t slot = slot_index(keys[i]);
    std::shared_lock lock{slot_lock(slot)};
    append_visible(slot, keys[i], out[i]);
  }
}

void kv_index::append_visible(uint32_t slot, uint64_t key, holder_list& out) const {
  const auto& s = slots_[slot];
  auto it = s.map.find(key);
  if (it == s.map.end())
    return;
  const size_t from = out.size();
  append_holders(slot, it->second, out);
  if (dropping_.empty())
    return;
  out.erase(std::remove_if(out.begin() + static_cast<std::ptrdiff_t>(from), out.end(),
                           [&](holder_id h) { return dropped(slot, h); }),
            out.end());
}

// -- slot-level mutation (under the exclusive lock, or a bulk loader's slot) -------

bool kv_index::admit(uint32_t slot, uint64_t key, holder_id h, uint64_t& keys) {
  slot_state& s = slots_[slot];
  if (s.map.capacity() == 0)
    s.map.reserve(initial_slot_keys); // skip the first, tiny rehashes of a slot
  auto [it, inserted] = s.map.try_emplace(key, h);
  if (!inserted) {
    holder_arena& a = arena(slot);
    const uint64_t v = it->second;
    if (!is_multi(v)) {
      if (v == h)
        return false;
      const uint32_t block = a.allocate(1);
      uint64_t* d = a.data(1, block);
      d[0] = v;
      d[1] = h;
      it->second = make_ref(2, 1, block);
    } else {
      const uint32_t n = ref_count(v);
      uint8_t cls = ref_class(v);
      uint32_t block = ref_block(v);
      uint64_t* d = a.data(cls, block);
      if (std::find(d, d + n, h) != d + n || n == max_holders_per_key)
        return false;
      if (n == (uint32_t{1} << cls)) {
        // Full: move to the next size class.
        const auto bigger_class = static_cast<uint8_t>(cls + 1);
        const uint32_t bigger = a.allocate(bigger_class);
        uint64_t* nd = a.data(bigger_class, bigger);
        std::copy(d, d + n, nd);
        a.release(cls, block);
        cls = bigger_class;
        block = bigger;
        d = nd;
      }
      d[n] = h;
      it->second = make_ref(n + 1, cls, block);
    }
  } else {
    ++keys;
  }
  ++s.entries;
  ++s.version;
  s.digest ^= entry_hash(key, h);
  return true;
}

bool kv_index::evict(uint32_t slot, uint64_t key, holder_id h, uint64_t& keys) {
  slot_state& s = slots_[slot];
  auto it = s.map.find(key);
  if (it == s.map.end())
    return false;
  const uint64_t v = it->second;
  if (!is_multi(v)) {
    if (v != h)
      return false;
    s.map.erase(it);
    --keys;
  } else {
    holder_arena& a = arena(slot);
    const uint32_t n = ref_count(v);
    const uint8_t cls = ref_class(v);
    const uint32_t block = ref_block(v);
    uint64_t* d = a.data(cls, block);
    uint64_t* pos = std::find(d, d + n, h);
    if (pos == d + n)
      return false;
    *pos = d[n - 1]; // order inside a key does not matter (answers sort by registration)
    const uint32_t left = n - 1;
    if (left == 1) {
      it->second = d[0];
      a.release(cls, block);
    } else if (cls > 1 && left * 4 <= (uint32_t{1} << cls)) {
      // Mostly empty: move to the smallest class that fits, so memory follows
      // the holders (a popular key's holders deregistering).
      const auto smaller =
          static_cast<uint8_t>(std::max(1U, static_cast<unsigned>(std::bit_width(left - 1))));
      const uint32_t nb = a.allocate(smaller);
      std::copy(d, d + left, a.data(smaller, nb));
      a.release(cls, block);
      it->second = make_ref(left, smaller, nb);
    } else {
      it->second = make_ref(left, cls, block);
    }
  }
  --s.entries;
  ++s.version;
  s.digest ^= entry_hash(key, h);
  return true;
}

uint64_t kv_index::drop(uint32_t slot, const holder_set& holders, bool counted) {
  slot_state& s = slots_[slot];
  holder_arena& a = arena(slot);
  uint64_t removed = 0;
  for (auto it = s.map.begin(); it != s.map.end();) {
    const uint64_t key = it->first;
    const uint64_t v = it->second;
    if (!is_multi(v)) {
      if (holders.contains(v)) {
        s.digest ^= entry_hash(key, v);
        if (counted) {
          count(v, -1);
          count_share(slot, v, -1);
        }
        ++removed;
        --keys_;
        s.map.erase(it++);
        continue;
      }
      ++it;
      continue;
    }
    const uint32_t n = ref_count(v);
    const uint8_t cls = ref_class(v);
    const uint32_t block = ref_block(v);
    uint64_t* d = a.data(cls, block);
    uint32_t kept = 0;
    for (uint32_t i = 0; i < n; ++i) {
      if (holders.contains(d[i])) {
        s.digest ^= entry_hash(key, d[i]);
        if (counted) {
          count(d[i], -1);
          count_share(slot, d[i], -1);
        }
        ++removed;
      } else {
        d[kept++] = d[i];
      }
    }
    if (kept == n) {
      ++it;
    } else if (kept == 0) {
      a.release(cls, block);
      --keys_;
      s.map.erase(it++);
    } else if (kept == 1) {
      it->second = d[0];
      a.release(cls, block);
      ++it;
    } else {
      it->second = make_ref(kept, cls, block);
      ++it;
    }
  }
  if (removed == 0)
    return 0;
  s.entries -= removed;
  ++s.version;
  if (counted)
    entries_ -= removed;
  // A table that lost most of its keys gives the memory back (one rehash per
  // slot, not an allocation per key).
  if (s.map.empty())
    table{}.swap(s.map);
  else if (s.map.size() * 4 < s.map.capacity())
    s.map.rehash(0);
  return removed;
}

void kv_index::set_share_slots(const std::vector<uint32_t>& slots) {
  share_slots_.assign(slot_count(), 0);
  for (uint32_t slot : slots)
    share_slots_.at(slot) = 1;
  share_counts_.clear();
  share_entries_ = 0;
}

void kv_index::add_share(holder_id h, int64_t delta) {
  if (delta == 0)
    return;
  share_entries_ = static_cast<uint64_t>(static_cast<int64_t>(share_entries_) + delta);
  auto it = share_counts_.try_emplace(h, 0).first;
  it->second = static_cast<uint64_t>(static_cast<int64_t>(it->second) + delta);
  if (it->second == 0)
    share_counts_.erase(it);
}

void kv_index::count(holder_id h, int64_t delta) {
  if (delta == 0)
    return;
  auto it = counts_.try_emplace(h, 0).first;
  it->second = static_cast<uint64_t>(static_cast<int64_t>(it->second) + delta);
  if (it->second == 0)
    counts_.erase(it);
}

void kv_index::append_holders(uint32_t slot, uint64_t value, holder_list& out) const {
  if (!is_multi(value)) {
    out.push_back(value);
    return;
  }
  const uint64_t* d = arena(slot).data(ref_class(value), ref_block(value));
  out.insert(out.end(), d, d + ref_count(value));
}

bool kv_index::value_holds(uint32_t slot, uint64_t value, holder_id h) const {
  if (!is_multi(value))
    return value == h;
  const uint64_t* d = arena(slot).data(ref_class(value), ref_block(value));
  const uint32_t n = ref_count(value);
  return std::find(d, d + n, h) != d + n;
}

// -- drop jobs -------------------------------------------------------------------

bool kv_index::dropped(uint32_t slot, holder_id h) const {
  if (!dropping_.contains(h))
    return false;
  for (const auto& job : drops_)
    if (!job.done[slot] && job.holders.contains(h))
      return true;
  return false;
}

void kv_index::clean_for(uint32_t slot, holder_id h) {
  for (auto& job : drops_)
    if (!job.done[slot] && job.holders.contains(h)) {
      clean_slot(slot);
      return;
    }
}

void kv_index::clean_slot(uint32_t slot) {
  // Every job not yet done here is dropped in one pass over the slot: when a
  // fleet deregisters at once (one job per worker) a pass per job would walk
  // each slot once per worker.
  const drop_job* only = nullptr;
  holder_set merged;
  for (const auto& job : drops_) {
    if (job.done[slot])
      continue;
    if (!only) {
      only = &job;
      continue;
    }
    if (merged.empty())
      merged.insert(only->holders.begin(), only->holders.end());
    merged.insert(job.holders.begin(), job.holders.end());
  }
  if (!only)
    return;
  bool finished = false;
  {
    std::lock_guard lock{slot_lock(slot)};
    drop(slot, merged.empty() ? only->holders : merged, false);
    for (auto& job : drops_) {
      if (job.done[slot])
        continue;
      job.done[slot] = 1;
      finished |= --job.remaining == 0;
    }
  }
  if (finished)
    retire_finished_drops();
}

void kv_index::retire_finished_drops() {
  all_slots_lock lock{*this};
  std::erase_if(drops_, [](const drop_job& j) { return j.remaining == 0; });
  dropping_.clear();
  for (const auto& job : drops_)
    dropping_.insert(job.holders.begin(), job.holders.end());
}

// -- write_guard ---------------------------------------------------------------

bool kv_index::write_guard::admit(uint64_t key, holder_id h) {
  const kv_op op{key, true};
  return apply(h, std::span<const kv_op>{&op, 1}) == 1;
}

bool kv_index::write_guard::evict(uint64_t key, holder_id h) {
  const kv_op op{key, false};
  return apply(h, std::span<const kv_op>{&op, 1}) == -1;
}

int64_t kv_index::write_guard::apply(holder_id h, std::span<const kv_op> ops) {
  return apply_where(h, ops, [](uint32_t) { return true; });
}

void kv_index::write_guard::reshare(const std::vector<uint32_t>& slots) {
  std::vector<uint8_t> next(idx_->slot_count(), 0);
  for (uint32_t slot : slots)
    next.at(slot) = 1;
  if (idx_->share_slots_.empty())
    idx_->share_slots_.assign(idx_->slot_count(), 0);
  holder_list held;
  for (uint32_t slot = 0; slot < idx_->slot_count(); ++slot) {
    if (next[slot] == idx_->share_slots_[slot])
      continue;
    finish_drops_in(slot);
    const int64_t delta = next[slot] ? 1 : -1;
    for (const auto& [key, v] : idx_->slots_[slot].map) {
      held.clear();
      idx_->append_holders(slot, v, held);
      for (holder_id h : held)
        idx_->add_share(h, delta);
    }
    idx_->share_slots_[slot] = next[slot];
  }
}

uint64_t kv_index::write_guard::clear_slot(uint32_t slot) {
  finish_drops_in(slot);
  std::lock_guard lock{idx_->slot_lock(slot)};
  auto& s = idx_->slots_[slot];
  holder_arena& a = idx_->arena(slot);
  const uint64_t removed = s.entries;
  for (const auto& [key, v] : s.map) {
    if (!is_multi(v)) {
      idx_->count(v, -1);
      idx_->count_share(slot, v, -1);
      continue;
    }
    const uint64_t* d = a.data(ref_class(v), ref_block(v));
    for (uint32_t i = 0; i < ref_count(v); ++i) {
      idx_->count(d[i], -1);
      idx_->count_share(slot, d[i], -1);
    }
    a.release(ref_class(v), ref_block(v));
  }
  idx_->keys_ -= s.map.size();
  idx_->entries_ -= removed;
  table{}.swap(s.map);
  s.entries = 0;
  s.digest = 0;
  ++s.version;
  return removed;
}

void kv_index::write_guard::begin_drop(holder_set holders, const std::vector<bool>* skip) {
  for (holder_id h : holders) {
    if (auto it = idx_->counts_.find(h); it != idx_->counts_.end()) {
      idx_->entries_ -= it->second;
      idx_->counts_.erase(it);
    }
    if (auto it = idx_->share_counts_.find(h); it != idx_->share_counts_.end()) {
      idx_->share_entries_ -= it->second;
      idx_->share_counts_.erase(it);
    }
  }
  // The entries the drop leaves (in skipped slots) are counted again.
  if (skip)
    for (uint32_t slot = 0; slot < skip->size() && slot < idx_->slot_count(); ++slot) {
      if (!(*skip)[slot] || idx_->slots_[slot].entries == 0)
        continue;
      holder_list list;
      for (const auto& [key, value] : idx_->slots_[slot].map) {
        list.clear();
        idx_->append_visible(slot, key, list);
        for (holder_id h : list)
          if (holders.contains(h)) {
            idx_->count(h, 1);
            idx_->count_share(slot, h, 1);
            ++idx_->entries_;
          }
      }
    }
  drop_job job;
  job.done.assign(idx_->slot_count(), 0);
  if (skip)
    for (size_t slot = 0; slot < skip->size() && slot < job.done.size(); ++slot)
      job.done[slot] = (*skip)[slot] ? 1 : 0;
  job.remaining = static_cast<uint32_t>(std::count(job.done.begin(), job.done.end(), 0));
  if (job.remaining == 0)
    return;
  all_slots_lock lock{*idx_}; // lookups read drops_ and dropping_
  idx_->dropping_.insert(holders.begin(), holders.end());
  job.holders = std::move(holders);
  idx_->drops_.push_back(std::move(job));
}

void kv_index::write_guard::touch(uint32_t slot) {
  std::lock_guard lock{idx_->slot_lock(slot)};
  ++idx_->slots_[slot].version;
}

uint64_t kv_index::write_guard::drop_now(uint32_t slot, const holder_set& holders) {
  finish_drops_in(slot);
  std::lock_guard lock{idx_->slot_lock(slot)};
  return idx_->drop(slot, holders, true);
}

bool kv_index::write_guard::drop_step(uint32_t max_slots, uint64_t max_keys) {
  uint64_t walked = 0;
  while (max_slots > 0 && walked < max_keys && !idx_->drops_.empty()) {
    auto& job = idx_->drops_.front();
    while (job.cursor < job.done.size() && job.done[job.cursor])
      ++job.cursor;
    if (job.cursor >= job.done.size())
      break; // cannot happen: a job with no slot left is removed
    walked += idx_->slots_[job.cursor].map.size();
    idx_->clean_slot(job.cursor); // may remove `job`
    --max_slots;
  }
  return !idx_->drops_.empty();
}

void kv_index::write_guard::finish_drops_in(uint32_t slot) {
  if (!idx_->drops_.empty())
    idx_->clean_slot(slot);
}

kv_index::slot_summary kv_index::write_guard::slot(uint32_t slot) const {
  const auto& s = idx_->slots_[slot];
  return {s.map.size(), s.entries, s.digest, s.version};
}

// -- read_guard ----------------------------------------------------------------

void kv_index::read_guard::holders(uint64_t key, holder_list& out) const {
  idx_->append_visible(idx_->slot_index(key), key, out);
}

bool kv_index::read_guard::holds(uint64_t key, holder_id h) const {
  const uint32_t slot = idx_->slot_index(key);
  const auto& s = idx_->slots_[slot];
  auto it = s.map.find(key);
  return it != s.map.end() && idx_->value_holds(slot, it->second, h) && !idx_->dropped(slot, h);
}

kv_index::slot_summary kv_index::read_guard::slot(uint32_t slot) const {
  const auto& s = idx_->slots_[slot];
  return {s.map.size(), s.entries, s.digest, s.version};
}

void kv_index::read_guard::for_each_key(
    uint32_t slot, const std::function<void(uint64_t, std::span<const holder_id>)>& fn) const {
  holder_list held;
  for (const auto& [key, v] : idx_->slots_[slot].map) {
    held.clear();
    idx_->append_holders(slot, v, held);
    if (!idx_->dropping_.empty()) {
      held.erase(std::remove_if(held.begin(), held.end(),
                                [&](holder_id h) { return idx_->dropped(slot, h); }),
                 held.end());
      if (held.empty())
        continue;
    }
    fn(key, std::span<const holder_id>{held.data(), held.size()});
  }
}

size_t kv_index::read_guard::memory_bytes() const noexcept {
  size_t bytes = idx_->slots_.capacity() * sizeof(slot_state);
  for (const auto& a : idx_->arenas_)
    bytes += a.memory_bytes();
  for (const auto& s : idx_->slots_)
    bytes += s.map.capacity() * (sizeof(std::pair<uint64_t, uint64_t>) + 1);
  return bytes;
}

// -- bulk_loader -------------------------------------------------------------------

void kv_index::bulk_loader::reserve(uint32_t slot, size_t keys) {
  auto& m = idx_->slots_[slot].map;
  m.reserve(m.size() + keys);
}

void kv_index::bulk_loader::add(uint32_t slot, uint64_t key, std::span<const holder_id> holders) {
  const bool shared = !idx_->share_slots_.empty() && idx_->share_slots_[slot];
  for (holder_id h : holders)
    if (idx_->admit(slot, key, h, keys_)) {
      ++entries_;
      ++counts_[h];
      if (shared)
        ++share_counts_[h];
    }
}

void kv_index::bulk_loader::merge() {
  for (const auto& [h, n] : counts_)
    idx_->counts_[h] += n;
  for (const auto& [h, n] : share_counts_)
    idx_->add_share(h, static_cast<int64_t>(n));
  share_counts_.clear();
  idx_->entries_ += entries_;
  idx_->keys_ += keys_;
  counts_.clear();
  entries_ = 0;
  keys_ = 0;
}

} // namespace lmcc::actors
