// refill_leftovers: see refill_leftovers.hpp.
#include "cluster/refill_leftovers.hpp"

#include <algorithm>

namespace lmcc::actors {

void refill_leftovers::narrow(leftover& l, std::span<const node_index> others) {
  std::erase_if(l.candidates, [&](node_index n) {
    return std::find(others.begin(), others.end(), n) == others.end();
  });
}

void refill_leftovers::leave(uint32_t slot, std::span<const node_index> others) {
  auto [it, fresh] = slots_.try_emplace(slot);
  if (fresh)
    it->second.candidates.assign(others.begin(), others.end());
  else
    narrow(it->second, others);
  it->second.copying = false;
}

bool refill_leftovers::may_give(uint32_t slot, node_index n) const {
  const auto it = slots_.find(slot);
  if (it == slots_.end())
    return true;
  const auto& c = it->second.candidates;
  return std::find(c.begin(), c.end(), n) != c.end();
}

void refill_leftovers::seen_unsettled(node_index n) {
  if (n >= seen_unsettled_.size())
    seen_unsettled_.resize(n + 1, false);
  seen_unsettled_[n] = true;
}

refill_leftovers::step
refill_leftovers::take(const std::function<std::vector<node_index>(uint32_t)>& others,
                       const std::function<bool(node_index)>& can_give) {
  step out;
  for (auto it = slots_.begin(); it != slots_.end();) {
    auto& [slot, left] = *it;
    if (left.copying) {
      ++it;
      continue;
    }
    narrow(left, others(slot));
    bool every_candidate_lost_it = true;
    std::optional<node_index> from;
    for (node_index n : left.candidates) {
      const bool lost_it = seen(n);
      every_candidate_lost_it = every_candidate_lost_it && lost_it;
      if (!lost_it && !from && can_give(n))
        from = n;
    }
    if (from) {
      out.copy.emplace_back(slot, *from);
      left.copying = true;
      ++it;
    } else if (every_candidate_lost_it) {
      out.lost.push_back(slot);
      it = slots_.erase(it);
    } else {
      ++it;
    }
  }
  return out;
}

} // namespace lmcc::actors
