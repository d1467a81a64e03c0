// cluster_table: what every thread of a node may need to know about the
// cluster at one moment: who owns which slot, where each worker's entity
// lives, which peers are live and the handles of their actors.
//
// The cluster node actor (cluster_node.hpp) publishes a fresh immutable table
// whenever a peer joins, returns or is lost; the PULL thread (forwarding
// frames of workers homed elsewhere), the lookup path (reading keys of slots
// held elsewhere), the directory (forwarding requests, replicating rows) and
// /cluster/status read the latest one without locking anything but the
// board's mutex for a pointer copy.
//
//   auto t = board.current();
//   node_index home = t->home_of(uid);
//   if (home != t->self && t->peers[home].live) send(t->peers[home].directory, ...);
//
// Thread-safety: tables are immutable; cluster_board is thread-safe.
#pragma once

#include "actors/cluster/peer_handles.hpp"
#include "cluster/hash.hpp"
#include "cluster/membership.hpp"
#include "registry/published.hpp"

#include <caf/actor.hpp>

#include <algorithm>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace lmcc::actors {

using cluster::node_index;

struct peer_entry {
  bool live = false;
  /// Stopping cleanly: out of the live set, but still answering the handoff
  /// of its workers (worker_homes.hpp) until its connection goes.
  bool leaving = false;
  /// Still copying the slots it gained in the current membership change (or
  /// greeting with an older member set): lookups read its slots elsewhere.
  bool copying = false;
  /// Came back with an empty store and copies every slot it owns from the
  /// other owners (refill_gate.hpp): lookups read all its slots elsewhere.
  bool refilling = false;
  /// Greeted this node since it joined (until then `refilling` is presumed).
  bool greeted = false;
  /// Came back empty, and not every slot it owns holds its own copy yet
  /// (refilling, or slots left over, refill_leftovers.hpp): its copies of
  /// those may be this node's, so it is no source for this node's leftovers.
  bool unsettled = false;
  peer_handles handles;
};

struct cluster_table {
  /// Static ownership over the record's members (membership.hpp says why).
  std::shared_ptr<const cluster::placement> owners;
  /// Ownership before the last membership change (== owners at epoch 0).
  std::shared_ptr<const cluster::placement> previous;
  /// The member set: its epoch, and whether a change is under way (joint).
  cluster::membership_record record;
  /// The placement over the live members: where worker entities live.
  std::shared_ptr<const cluster::placement> live_owners;
  node_index self = 0;
  std::vector<peer_entry> peers; ///< by node_index; peers[self] is this node
  std::vector<cluster::membership::member_view> members;
  uint64_t ring_version = 0;
  bool all_live = false;
  /// Every joined peer greeted since it joined, none with a newer member
  /// set: this node's view of the member set is current (a node serves
  /// lookups only then, node_cluster::await_joined).
  bool members_settled = false;

  /// The worker's home as this table's liveness places it.
  node_index home_of(uint64_t worker_uid) const noexcept {
    return cluster::home_of(*live_owners, worker_uid);
  }
  /// A peer this node can talk to now: live (greeted, or presumed at start)
  /// and joined (its handles known).
  bool reachable(node_index n) const noexcept {
    return n == self || (peers[n].live && peers[n].handles.node);
  }
  bool joint() const noexcept { return !record.committed; }
  /// The node whose directory actor is `directory` (a message's sender).
  std::optional<node_index> peer_with_directory(const caf::actor& directory) const noexcept {
    for (size_t i = 0; i < peers.size(); ++i)
      if (directory && peers[i].handles.directory == directory)
        return static_cast<node_index>(i);
    return std::nullopt;
  }
  /// Whether node `n` holds all of `slot`: a node still copying lacks only
  /// the slots it gained in the last membership change, not those it held;
  /// a refilling node lacks all of them.
  bool complete(node_index n, uint32_t slot) const noexcept {
    return !peers[n].refilling && (!peers[n].copying || !previous || !gained(n, slot));
  }
  /// cluster::read_owner() over the peers whose key-read endpoint is known,
  /// passing over owners still copying the slot (they gained it) when another
  /// can answer, and over `avoid` (owners a lookup already gave up on; then
  /// no_node when none is left). With `complete_only` (a hedge, while the
  /// avoided owner may still answer) never an owner still copying the slot:
  /// no_node instead.
  node_index read_owner(uint32_t slot, std::span<const node_index> avoid = {},
                        bool complete_only = false) const {
    const cluster::placement* before = joint() ? previous.get() : nullptr;
    auto reachable = [this, avoid](node_index n) {
      if (std::find(avoid.begin(), avoid.end(), n) != avoid.end())
        return false;
      return n == self || (peers[n].live && !peers[n].handles.read.empty());
    };
    auto whole = [this, slot](node_index n) { return complete(n, slot); };
    const node_index me = whole(self) ? self : cluster::no_node;
    const node_index first = cluster::read_owner(
        *owners, before, me, slot, [&](node_index n) { return reachable(n) && whole(n); });
    if (first != cluster::no_node && reachable(first) && whole(first))
      return first;
    if (complete_only)
      return cluster::no_node;
    if (!whole(self)) {
      // This node is known to lack the slot (it gained it); a peer marked
      // copying may only be unconfirmed (its readiness is re-learnt from its
      // next greeting after a change is adopted), so it comes before this
      // node. A node that restarted into a committed change read its own
      // gained slots here and answered lookups partially until its copy ended.
      const node_index other =
          cluster::read_owner(*owners, before, cluster::no_node, slot,
                              [&](node_index n) { return n != self && reachable(n); });
      if (other != cluster::no_node && other != self && reachable(other))
        return other;
    }
    const node_index any = cluster::read_owner(*owners, before, self, slot, reachable);
    if (!avoid.empty() && !reachable(any))
      return cluster::no_node;
    return any;
  }
  /// Where each slot's sub-batches go: its owners, and while joint its
  /// previous owners too (membership::write_mask).
  std::vector<uint64_t> write_masks() const {
    return cluster::write_masks(*owners, joint() ? previous.get() : nullptr);
  }
  /// Did node `n` gain `slot` in the last membership change?
  bool gained(node_index n, uint32_t slot) const noexcept {
    return cluster::gained(*owners, *previous, n, slot);
  }
  /// Node `n` holds every entry of `slot` it owns, as far as its greetings
  /// say: greeted, not refilling, not still copying the slot, and not
  /// unsettled (a slot it left over holds nothing: refill_leftovers.hpp).
  bool whole(node_index n, uint32_t slot) const noexcept {
    return peers[n].greeted && !peers[n].unsettled && complete(n, slot);
  }
  /// The previous owner a node that gained `slot` copies it from: a whole()
  /// one that keeps the slot (it saw every write of both placements); while
  /// the change is joint, a whole() one that gives it up (it still gets every
  /// write; after the commit it empties the slot); else one that keeps it;
  /// else any. A node back empty and still refilling holds little of what it
  /// owns: its copy would leave the gaining node short for good once the
  /// other previous owner empties the slot. `usable(n)`: this node can ask n
  /// now. nullopt: none can be asked.
  template <class Usable>
  std::optional<node_index> move_source(uint32_t slot, Usable&& usable) const {
    const auto before = previous->owner_indices(slot);
    for (const bool need_whole : {true, false})
      for (const bool need_keeps : {true, false}) {
        if (need_whole && !need_keeps && !joint())
          continue;
        for (node_index n : before)
          if (n != self && usable(n) && (!need_whole || whole(n, slot)) &&
              (!need_keeps || cluster::owns(*owners, n, slot)))
            return n;
      }
    return std::nullopt;
  }
};

using cluster_board = published<cluster_table>;

} // namespace lmcc::actors
