#include "actors/kv_index.hpp"

#include <algorithm>

namespace lmcc::actors {

int64_t kv_index::apply(holder_id h, std::span<const kv_op> ops) {
  int64_t delta = 0;
  for (const auto& op : ops) {
    if (op.admit)
      delta += admit(op.key, h) ? 1 : 0;
    else
      delta -= evict(op.key, h) ? 1 : 0;
  }
  return delta;
}

bool kv_index::admit(uint64_t key, holder_id h) {
  auto [it, inserted] = map_.try_emplace(key, holder_set{h, 0});
  if (!inserted) {
    holder_set& set = it->second;
    if (set.first == h)
      return false;
    if (set.more == 0) {
      set.more = allocate_pool_slot() + 1;
    } else {
      auto& rest = pool_[set.more - 1];
      if (std::find(rest.begin(), rest.end(), h) != rest.end())
        return false;
    }
    pool_[set.more - 1].push_back(h);
  }
  ++entries_;
  count(h, 1);
  return true;
}

bool kv_index::evict(uint64_t key, holder_id h) {
  auto it = map_.find(key);
  if (it == map_.end())
    return false;
  holder_set& set = it->second;
  if (set.first == h) {
    if (set.more == 0) {
      map_.erase(it);
    } else {
      // Promote the oldest remaining holder so admission order is kept.
      auto& rest = pool_[set.more - 1];
      set.first = rest.front();
      rest.erase(rest.begin());
      if (rest.empty()) {
        release_pool_slot(set.more - 1);
        set.more = 0;
      }
    }
  } else {
    if (set.more == 0)
      return false;
    auto& rest = pool_[set.more - 1];
    auto pos = std::find(rest.begin(), rest.end(), h);
    if (pos == rest.end())
      return false;
    rest.erase(pos);
    if (rest.empty()) {
      release_pool_slot(set.more - 1);
      set.more = 0;
    }
  }
  --entries_;
  count(h, -1);
  return true;
}

uint64_t kv_index::erase_holders(const std::function<bool(holder_id)>& matches,
                                 const std::function<void(uint64_t key, holder_id)>& on_erased) {
  uint64_t removed = 0;
  for (auto it = map_.begin(); it != map_.end();) {
    holder_set& set = it->second;
    holder_list kept;
    auto consider = [&](holder_id h) {
      if (matches(h)) {
        ++removed;
        count(h, -1);
        if (on_erased)
          on_erased(it->first, h);
      } else {
        kept.push_back(h);
      }
    };
    consider(set.first);
    if (set.more != 0) {
      for (holder_id h : pool_[set.more - 1])
        consider(h);
      release_pool_slot(set.more - 1);
      set.more = 0;
    }
    if (kept.empty()) {
      map_.erase(it++);
      continue;
    }
    set.first = kept.front();
    if (kept.size() > 1) {
      set.more = allocate_pool_slot() + 1;
      pool_[set.more - 1].assign(kept.begin() + 1, kept.end());
    }
    ++it;
  }
  entries_ -= removed;
  return removed;
}

kv_index::holder_list kv_index::holders(uint64_t key) const {
  holder_list out;
  auto it = map_.find(key);
  if (it == map_.end())
    return out;
  out.push_back(it->second.first);
  if (it->second.more != 0) {
    const auto& rest = pool_[it->second.more - 1];
    out.insert(out.end(), rest.begin(), rest.end());
  }
  return out;
}

bool kv_index::holds(uint64_t key, holder_id h) const {
  auto it = map_.find(key);
  if (it == map_.end())
    return false;
  if (it->second.first == h)
    return true;
  if (it->second.more == 0)
    return false;
  const auto& rest = pool_[it->second.more - 1];
  return std::find(rest.begin(), rest.end(), h) != rest.end();
}

size_t kv_index::memory_bytes() const noexcept {
  size_t bytes = map_.capacity() * (sizeof(std::pair<uint64_t, holder_set>) + 1);
  bytes += pool_.capacity() * sizeof(holder_list);
  for (const auto& rest : pool_)
    bytes += rest.capacity() * sizeof(holder_id);
  return bytes;
}

uint32_t kv_index::allocate_pool_slot() {
  if (!free_pool_slots_.empty()) {
    uint32_t index = free_pool_slots_.back();
    free_pool_slots_.pop_back();
    return index;
  }
  pool_.emplace_back();
  return static_cast<uint32_t>(pool_.size() - 1);
}

void kv_index::release_pool_slot(uint32_t index) {
  holder_list().swap(pool_[index]);
  free_pool_slots_.push_back(index);
}

void kv_index::count(holder_id h, int64_t delta) {
  auto& c = counts_[h];
  c = static_cast<uint64_t>(static_cast<int64_t>(c) + delta);
  if (c == 0)
    counts_.erase(h);
}

} // namespace lmcc::actors
