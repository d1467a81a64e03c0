#include "actors/anti_entropy_logic.hpp"

namespace lmcc::actors {

bool peer_is_senior(uint64_t peer_uptime_ms, node_index peer, uint64_t own_uptime_ms,
                    node_index self) noexcept {
  const uint64_t gap = peer_uptime_ms > own_uptime_ms ? peer_uptime_ms - own_uptime_ms
                                                      : own_uptime_ms - peer_uptime_ms;
  if (gap < seniority_tie_ms)
    return peer < self;
  return peer_uptime_ms > own_uptime_ms;
}

bool peer_copy_wins(bool self_new, bool peer_new, bool own_suspect, bool peer_suspect,
                    bool peer_senior) noexcept {
  if (self_new != peer_new)
    return self_new;
  if (own_suspect != peer_suspect)
    return own_suspect;
  return peer_senior;
}

void slot_suspects::mark_all() noexcept {
  for (auto& f : flags_)
    f.store(1, std::memory_order_relaxed);
}

bool slot_suspects::stood_still(int64_t now_ms) noexcept {
  const int64_t last = last_tick_ms_.load(std::memory_order_relaxed);
  if (last < 0 || now_ms - last <= stall_after_ms_)
    return false;
  mark_all();
  return true;
}

void slot_suspects::clear(uint32_t slot) noexcept {
  if (slot < flags_.size())
    flags_[slot].store(0, std::memory_order_relaxed);
}

bool slot_suspects::suspect(uint32_t slot) const noexcept {
  return slot < flags_.size() && flags_[slot].load(std::memory_order_relaxed) != 0;
}

uint32_t slot_suspects::count() const noexcept {
  uint32_t n = 0;
  for (const auto& f : flags_)
    n += f.load(std::memory_order_relaxed) != 0 ? 1 : 0;
  return n;
}

std::vector<uint64_t> slot_suspects::bits(std::span<const uint64_t> slots) const {
  std::vector<uint64_t> words((slots.size() + 63) / 64, 0);
  for (size_t i = 0; i < slots.size(); ++i)
    if (slots[i] < flags_.size() && suspect(static_cast<uint32_t>(slots[i])))
      words[i / 64] |= uint64_t{1} << (i % 64);
  return words;
}

std::vector<uint32_t> divergence_tracker::compare(node_index peer, std::span<const uint32_t> slots,
                                                  std::span<const uint64_t> local,
                                                  std::span<const uint64_t> remote) {
  std::vector<uint32_t> repair;
  for (size_t i = 0; i < slots.size() && i < local.size() && i < remote.size(); ++i) {
    const auto key = std::make_pair(peer, slots[i]);
    if (local[i] == remote[i]) {
      seen_.erase(key);
      continue;
    }
    const auto now = std::make_pair(local[i], remote[i]);
    auto [it, inserted] = seen_.try_emplace(key, now);
    if (!inserted && it->second == now) {
      repair.push_back(slots[i]);
      seen_.erase(it); // repaired now; a new difference starts over
    } else {
      it->second = now;
    }
  }
  return repair;
}

void divergence_tracker::forget(node_index peer) {
  std::erase_if(seen_, [peer](const auto& kv) { return kv.first.first == peer; });
}

} // namespace lmcc::actors
