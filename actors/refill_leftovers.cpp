// refill_leftovers: see refill_leftovers.hpp.
#include "actors/refill_leftovers.hpp"

namespace lmcc::actors {

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
    const auto owners = others(*it);
    bool every_owner_lost_it = true;
    std::optional<node_index> from;
    for (node_index n : owners) {
      const bool lost_it = seen(n);
      every_owner_lost_it = every_owner_lost_it && lost_it;
      if (!lost_it && !from && can_give(n))
        from = n;
    }
    if (from)
      out.copy.emplace_back(*it, *from);
    else if (every_owner_lost_it)
      out.lost.push_back(*it);
    else {
      ++it;
      continue;
    }
    it = slots_.erase(it);
  }
  return out;
}

} // namespace lmcc::actors
