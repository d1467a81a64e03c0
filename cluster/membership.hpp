// membership: what one node knows about the cluster: the configured members,
// which of them it currently sees alive (a heartbeat failure detector), who
// owns each slot and where each worker's entity lives.
//
// Data ownership is static: the placement over the whole configured member
// set, whatever is live, so every node computes the same owners without
// agreeing on anything. A node that is down keeps its slots; what is sent to
// it waits (bounded) in its peer's queue and is re-sent when it returns, and
// its copies are served by the other owners meanwhile (lookups read from a
// live owner).
//
// Worker entities move: a worker's home is the first *live* member of its
// uid's slot's preference list (`live_placement`), so when a node dies its
// workers are taken over by the next owner of their slot, which holds their
// replicated Directory rows and seq watermarks, and they return when it is
// back. Along any slot's preference list a node's home is never behind itself,
// so requests forwarded from node to node towards the home cannot loop.
//
// The failure detector: a peer is presumed live from the start (presume_live)
// until a connection attempt fails or failure_timeout passes in silence, so a
// node that restarts computes the same homes as the running nodes instead of
// taking every worker for itself; it stays live while greetings arrive within
// failure_timeout; a lost connection takes it down at once. Time is passed in.
//
//   membership m{opts, "n1"};          // fails like placement::compute
//   m.on_greeting("n2", now);
//   m.tick(now);                       // true when liveness changed
//   uint64_t mask = m.owner_mask(slot);
//
// Context: owned by one actor (the cluster node); not thread-safe. CAF-free.
#pragma once

#include "cluster/cluster_options.hpp"
#include "cluster/placement.hpp"

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace lmcc::cluster {

// -- the ownership rules, over any placement and liveness view -----------------
// (membership and the actors' published cluster_table both answer with these)

/// Bit i set when member i owns `slot`.
uint64_t owner_mask(const placement& owners, uint32_t slot) noexcept;
/// Every slot's owner mask, for the worker actors' split.
std::vector<uint64_t> owner_masks(const placement& owners);
/// Where the entity (WorkerActor) of the worker with uid `worker_uid` lives:
/// the primary of the uid's slot in `live` (a placement over the live members).
node_index home_of(const placement& owners, uint64_t worker_uid) noexcept;
/// The owner of `slot` to read from: `self` when it holds the slot, else the
/// first owner in preference order that `live(n)` says is up, else the primary.
template <class Live>
node_index read_owner(const placement& owners, node_index self, uint32_t slot, Live&& live) {
  auto list = owners.owner_indices(slot);
  for (node_index n : list)
    if (n == self)
      return n;
  for (node_index n : list)
    if (live(n))
      return n;
  return list.front();
}

class membership {
public:
  using time_point = std::chrono::steady_clock::time_point;

  /// One member as this node sees it.
  struct member_view {
    member_address address;
    bool self = false;
    bool live = false;
    uint32_t primary_slots = 0;
    uint32_t replica_slots = 0;
  };

  [[nodiscard]] static expected<membership> make(const cluster_options& opts, std::string self_id,
                                                 uint32_t slot_count);

  // -- failure detector ---------------------------------------------------------

  /// A greeting (or the handshake) from `id` at `now`; true when liveness
  /// changed. A greeting that says the peer is leaving (a clean stop under
  /// way) takes it out of the live set at once; it stays reachable for the
  /// handoff of its workers until its connection goes.
  bool on_greeting(std::string_view id, time_point now, bool leaving = false);
  /// This node stops: it leaves the live set (every home moves away).
  void leave();
  bool leaving() const noexcept { return leaving_[self_] != 0; }
  bool leaving(node_index i) const noexcept { return leaving_[i] != 0; }
  /// The connection to `id` is gone; true when it was live.
  bool on_lost(std::string_view id);
  /// Takes down every peer silent for longer than the timeout; true when any.
  bool tick(time_point now);

  /// Every member live, as if greeted at `now`: a node starts presuming its
  /// peers up until a connection attempt fails (on_lost) or they stay silent.
  void presume_live(time_point now);

  bool live(node_index i) const noexcept { return live_[i] != 0; }
  bool all_live() const noexcept;
  size_t live_count() const noexcept;

  /// The placement over the live members' fingerprint: equal on nodes that
  /// see the same live set.
  uint64_t ring_version() const noexcept { return live_placement_.fingerprint(); }
  /// The placement over the live members: where worker entities live.
  const placement& live_placement() const noexcept { return live_placement_; }

  // -- ownership (static: over every configured member) -------------------------

  const placement& owners() const noexcept { return owners_; }
  node_index self() const noexcept { return self_; }
  size_t size() const noexcept { return addresses_.size(); }
  /// The member with node_index i (member_set order: ids sorted).
  const member_address& address(node_index i) const { return addresses_[i]; }
  std::optional<node_index> index_of(std::string_view id) const noexcept {
    return owners_.members().index_of(id);
  }

  uint64_t owner_mask(uint32_t slot) const noexcept { return cluster::owner_mask(owners_, slot); }
  std::vector<uint64_t> owner_masks() const { return cluster::owner_masks(owners_); }
  /// Does this node hold `slot` (as primary or replica)?
  bool holds(uint32_t slot) const noexcept { return (owner_mask(slot) >> self_) & 1U; }
  /// read_owner() and home_of() above, with this node's view of liveness.
  node_index read_owner(uint32_t slot) const {
    return cluster::read_owner(owners_, self_, slot, [this](node_index n) { return live(n); });
  }
  node_index home_of(uint64_t worker_uid) const noexcept {
    return cluster::home_of(live_placement_, worker_uid);
  }

  std::vector<member_view> view() const;

private:
  membership(std::vector<member_address> addresses, node_index self, placement owners,
             placement live_placement, std::chrono::milliseconds timeout);
  void recompute_live_placement();

  std::vector<member_address> addresses_; // by node_index
  node_index self_;
  placement owners_;
  placement live_placement_;
  std::vector<uint8_t> live_;
  std::vector<uint8_t> leaving_;
  std::vector<time_point> last_seen_;
  std::chrono::milliseconds timeout_;
};

} // namespace lmcc::cluster
