// refill_leftovers: the slots a refill could not copy, kept until another
// owner can give its copy -- or shows that it lost its copy too.
//
// A node back with an empty store copies each slot it owns from another
// owner (slot_refill.hpp). A slot whose other owners are all down cannot be
// copied yet; if one of them comes back with its disk, its copy is the
// slot's. But if it comes back empty too, both copies are gone: with R = 2 a
// second disk was lost before the first node could copy those slots.
// Nothing in the cluster holds their entries any more; only the workers can
// give them back, so the node asks every worker for a full sync
// (directory_logic::on_slots_lost).
//
// Only the slot's other owners when it was left over may give it, and only
// while they still own it: a node that became an owner since (a member
// removed, a standby added) got its copy from the owners then, this node's
// empty one among them, and a node that stopped owning it may have dropped
// its copy. A slot with no such owner left is lost.
//
// The second node's own refill would copy such a slot from the first, whose
// copy is empty, and then look like a source. So a node greets as
// *unsettled* from its empty start until its own leftovers are settled
// (peer_entry::unsettled), and an owner seen unsettled since this node's
// refill began is never a source for its leftovers; a slot whose other
// owners were all seen unsettled is lost. The two nodes then both see the
// other unsettled, and both report the loss: one ask when both reach a
// worker's home before its next heartbeat, else a second sync.
//
//   refill_leftovers left{node_count};
//   left.seen_unsettled(2);                // n3 came back empty too
//   left.leave(17, others(17));            // no owner could give slot 17
//   auto step = left.take(others, can_give);
//   for (auto [slot, from] : step.copy) ... // copy: copied(slot), or leave() again
//   if (!step.lost.empty()) ask every worker for a full sync
//
// Context: CAF-free; owned by the slot_refill actor (one thread).
#pragma once

#include "cluster/ring.hpp"

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <utility>
#include <vector>

namespace lmcc::actors {

using cluster::node_index;

class refill_leftovers {
public:
  explicit refill_leftovers(size_t node_count) : seen_unsettled_(node_count, false) {}

  /// No owner could give `slot`'s copy (down, or the copy failed); `others`:
  /// its other owners now. A slot left again keeps only those of its
  /// candidates that are still in `others`.
  void leave(uint32_t slot, std::span<const node_index> others);

  /// `slot`'s copy arrived: it is settled.
  void copied(uint32_t slot) { slots_.erase(slot); }

  /// False when `slot` is left over and `n` is not among the owners that
  /// may give it.
  bool may_give(uint32_t slot, node_index n) const;

  /// Node `n` greeted as unsettled: it came back empty, and its copies of
  /// slots it shares with this node may be this node's (empty) ones.
  void seen_unsettled(node_index n);

  bool seen(node_index n) const noexcept {
    return n < seen_unsettled_.size() && seen_unsettled_[n];
  }

  bool empty() const noexcept { return slots_.empty(); }
  size_t size() const noexcept { return slots_.size(); }

  struct step {
    std::vector<std::pair<uint32_t, node_index>> copy; ///< copy slot from node now
    std::vector<uint32_t> lost;                        ///< no copy is left anywhere
  };

  /// Settles what can be: `others(slot)` are the slot's other owners now
  /// (a candidate no longer among them is dropped for good), `can_give(n)`:
  /// n is reachable, greeted this node and not refilling. A node seen
  /// unsettled is never chosen. A slot to copy stays, marked as being
  /// copied, until copied() or leave(); lost slots leave the set; the rest
  /// wait.
  step take(const std::function<std::vector<node_index>(uint32_t)>& others,
            const std::function<bool(node_index)>& can_give);

private:
  struct leftover {
    std::vector<node_index> candidates; ///< other owners since it was left
    bool copying = false;
  };

  /// Keeps the candidates that are in `others`.
  static void narrow(leftover& l, std::span<const node_index> others);

  std::map<uint32_t, leftover> slots_;
  std::vector<bool> seen_unsettled_;
};

} // namespace lmcc::actors
