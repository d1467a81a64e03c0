#include "actors/anti_entropy_logic.hpp"

#include <algorithm>

namespace lmcc::actors {

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

void uncertainty_ledger::unresolved(uint64_t round, uint32_t slot, uint64_t worker_uid,
                                    uint64_t holder) {
  auto [it, inserted] = pairs_.try_emplace({slot, holder}, entry{round, round, worker_uid});
  if (!inserted) {
    it->second.last = std::max(it->second.last, round);
    if (worker_uid != 0)
      it->second.worker_uid = worker_uid;
  }
}

std::vector<uncertainty_ledger::lost_pair>
uncertainty_ledger::close_round(uint64_t round, uint64_t rounds_for_loss,
                                const std::function<bool(uint32_t slot)>& owners_answer) {
  std::vector<lost_pair> lost;
  for (auto it = pairs_.begin(); it != pairs_.end();) {
    const auto& [key, e] = *it;
    if (e.last < round) { // not uncertain this round: settled, or nobody was asked
      it = pairs_.erase(it);
      continue;
    }
    const uint64_t rounds = round - e.first + 1;
    if (rounds >= rounds_for_loss && owners_answer(key.first)) {
      lost.push_back(lost_pair{key.first, e.worker_uid, key.second, rounds});
      it = pairs_.erase(it); // asked once; a new round of doubt starts over
      continue;
    }
    ++it;
  }
  return lost;
}

} // namespace lmcc::actors
