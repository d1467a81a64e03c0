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
