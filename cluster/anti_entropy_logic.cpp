#include "cluster/anti_entropy_logic.hpp"

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

void uncertainty_ledger::after_copy(uint64_t round, uint32_t slot,
                                    const std::vector<holder_pair>& unresolved) {
  for (auto it = pairs_.lower_bound({slot, 0}); it != pairs_.end() && it->first.first == slot;) {
    const bool still = std::any_of(unresolved.begin(), unresolved.end(), [&](const holder_pair& p) {
      return p.second == it->first.second;
    });
    it = still ? std::next(it) : pairs_.erase(it);
  }
  for (const auto& [worker_uid, holder] : unresolved) {
    auto [it, inserted] = pairs_.try_emplace({slot, holder}, entry{round, round, worker_uid});
    if (!inserted) {
      it->second.last = std::max(it->second.last, round);
      if (worker_uid != 0)
        it->second.worker_uid = worker_uid;
    }
  }
}

std::vector<uncertainty_ledger::lost_pair>
uncertainty_ledger::close_round(uint64_t rounds_for_loss,
                                const std::function<bool(uint32_t slot)>& owners_answer,
                                const std::function<bool(uint32_t slot)>& still_uncertain) {
  std::vector<lost_pair> lost;
  for (auto it = pairs_.begin(); it != pairs_.end();) {
    const auto& [key, e] = *it;
    if (!still_uncertain(key.first)) {
      it = pairs_.erase(it);
      continue;
    }
    const uint64_t rounds = e.last - e.first + 1;
    if (rounds >= rounds_for_loss && owners_answer(key.first)) {
      lost.push_back(lost_pair{key.first, e.worker_uid, key.second, rounds});
      it = pairs_.erase(it); // asked once; a new round of doubt starts over
      continue;
    }
    ++it;
  }
  return lost;
}

std::map<uint64_t, std::vector<uncertainty_ledger::lost_pair>>
lost_by_worker(const std::vector<uncertainty_ledger::lost_pair>& lost,
               const std::function<uint64_t(uint64_t holder)>& worker_of) {
  std::map<uint64_t, std::vector<uncertainty_ledger::lost_pair>> out;
  for (auto pair : lost) {
    if (pair.worker_uid == 0 && worker_of)
      pair.worker_uid = worker_of(pair.holder);
    out[pair.worker_uid].push_back(pair);
  }
  return out;
}

void blank_slot_ledger::after_copy(uint64_t round, uint32_t slot, node_index owner,
                                   bool still_blank) {
  if (!still_blank) {
    slots_.erase(slot);
    return;
  }
  auto [it, inserted] = slots_.try_emplace(slot, sighting{round, round, 0});
  it->second.last = std::max(it->second.last, round);
  it->second.owners |= uint64_t{1} << owner;
}

std::vector<uint32_t>
blank_slot_ledger::close_round(uint64_t rounds_for_loss,
                               const std::function<uint64_t(uint32_t slot)>& other_owners,
                               const std::function<bool(uint32_t slot)>& owners_answer,
                               const std::function<bool(uint32_t slot)>& still_uncertain) {
  std::vector<uint32_t> lost;
  for (auto it = slots_.begin(); it != slots_.end();) {
    const auto& [slot, seen] = *it;
    if (!still_uncertain(slot)) {
      it = slots_.erase(it);
      continue;
    }
    const uint64_t others = other_owners(slot);
    if (seen.last - seen.first + 1 >= rounds_for_loss && (seen.owners & others) == others &&
        owners_answer(slot)) {
      lost.push_back(slot);
      it = slots_.erase(it);
      continue;
    }
    ++it;
  }
  return lost;
}

} // namespace lmcc::actors
