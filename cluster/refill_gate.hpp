// refill_gate: whether a cluster node that started with an empty store must
// copy its slots from the other owners before lookups may read them there.
//
// A node whose disk was lost or replaced (or that runs without persistence)
// comes back empty while its peers hold the index: with R = 2 every slot it
// owns has another owner. Until anti-entropy noticed (rounds apart), its
// copies answered lookups with nothing. Now such a node starts "refilling":
// it greets so, and every node reads its slots from the other owners
// (cluster_table::complete). The first peer that greets holding an index
// starts the copy (slot_refill.hpp); when every live peer greeted without
// one, this is a new cluster and there is nothing to copy.
//
//   refill_gate gate{/*started_empty=*/true};
//   switch (gate.on_greeting(holds_index, every_live_peer_greeted)) { ... }
//   gate.done();  // the copy ended
//
// Context: CAF-free; owned by the cluster_node actor (one thread).
#pragma once

namespace lmcc::actors {

class refill_gate {
public:
  enum class step {
    none,  ///< nothing to do
    start, ///< start copying every owned slot
    skip,  ///< no peer holds an index: nothing to copy, stop refilling
  };

  explicit refill_gate(bool started_empty) noexcept
    : phase_(started_empty ? phase::waiting : phase::idle) {}

  /// Lookups must read this node's slots elsewhere.
  bool refilling() const noexcept { return phase_ == phase::waiting || phase_ == phase::copying; }

  /// A peer greeted; `holds_index`: its index has entries.
  /// `every_live_peer_greeted`: every live member has greeted this node.
  step on_greeting(bool holds_index, bool every_live_peer_greeted) noexcept {
    if (phase_ != phase::waiting)
      return step::none;
    if (holds_index) {
      phase_ = phase::copying;
      return step::start;
    }
    if (every_live_peer_greeted) {
      phase_ = phase::idle;
      return step::skip;
    }
    return step::none;
  }

  /// The copy ended.
  void done() noexcept { phase_ = phase::idle; }

private:
  enum class phase { idle, waiting, copying };
  phase phase_;
};

} // namespace lmcc::actors
