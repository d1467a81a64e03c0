// membership: what one node knows about the cluster: the configured members,
// which of them it currently sees alive (a heartbeat failure detector), who
// owns each slot and where each worker's entity lives.
//
// Data ownership is static between membership changes: the placement over the
// record's member set (membership_record.hpp), whatever is live, so every node
// computes the same owners without agreeing on anything. The ring is built
// over every configured address (members and standby nodes alike); a node
// that is not a member is skipped in every preference list exactly as a dead
// one is, so node indices stay the same through a membership change and the
// placement equals the one over the members alone. A node that is down keeps its slots; what is
// sent to it waits (bounded) in its peer's queue and is re-sent when it returns, and its copies are
// served by the other owners meanwhile (lookups read from a live owner).
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
#include "cluster/membership_record.hpp"
#include "cluster/placement.hpp"

#include <algorithm>
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
/// Is member `n` one of `slot`'s owners in `p`?
bool owns(const placement& p, node_index n, uint32_t slot) noexcept;
/// Did member `n` gain `slot` going from `previous` to `owners` (a membership
/// change)? It then copies the slot, never the other way.
bool gained(const placement& owners, const placement& previous, node_index n,
            uint32_t slot) noexcept;
/// Where a sub-batch of `slot` goes: its owners, and during a change
/// (`previous` not null: the joint placement) its previous owners as well.
uint64_t write_mask(const placement& owners, const placement* previous, uint32_t slot) noexcept;
std::vector<uint64_t> write_masks(const placement& owners, const placement* previous);
/// Where the entity (WorkerActor) of the worker with uid `worker_uid` lives:
/// the primary of the uid's slot in `live` (a placement over the live members).
node_index home_of(const placement& owners, uint64_t worker_uid) noexcept;
/// The owner of `slot` to read from: `self` when it holds the slot, else the
/// first owner in preference order that `live(n)` says is up, else the primary.
/// During a membership change (`previous` not null: the joint placement) only
/// an owner that held the slot before has all of it: self if it did, else a
/// live owner under both placements, else a live previous owner, else a live
/// new one (still copying: a partial answer beats none).
template <class Live>
node_index read_owner(const placement& owners, const placement* previous, node_index self,
                      uint32_t slot, Live&& live) {
  auto list = owners.owner_indices(slot);
  if (previous) {
    auto before = previous->owner_indices(slot);
    auto held = [&](node_index n) {
      return std::find(before.begin(), before.end(), n) != before.end();
    };
    if (held(self))
      return self;
    for (node_index n : list)
      if (held(n) && live(n))
        return n;
    for (node_index n : before)
      if (live(n))
        return n;
  } else {
    for (node_index n : list)
      if (n == self)
        return n;
  }
  for (node_index n : list)
    if (live(n))
      return n;
  return list.empty() ? self : list.front();
}

class membership {
public:
  using time_point = std::chrono::steady_clock::time_point;

  /// One member as this node sees it.
  struct member_view {
    member_address address;
    bool self = false;
    bool live = false;
    bool member = false; ///< owns slots under the current record (else standby or removed)
    uint32_t primary_slots = 0;
    uint32_t replica_slots = 0;
  };

  /// The members of `record` (initial: the configured non-standby ones) over
  /// a ring of every configured address plus those the record brings.
  [[nodiscard]] static expected<membership> make(const cluster_options& opts, std::string self_id,
                                                 uint32_t slot_count,
                                                 std::optional<membership_record> record = {});

  // -- the member set --------------------------------------------------------------

  const membership_record& record() const noexcept { return record_; }
  /// A change is under way: writes go to the owners under both placements.
  bool joint() const noexcept { return !record_.committed; }
  /// Takes `r` as the member set (the caller checked supersedes()); fails,
  /// changing nothing, when it names a node without a known address.
  expected<bool> adopt(const membership_record& r);
  bool member(node_index i) const noexcept { return member_[i] != 0; }
  /// The placement before the last change (equal to owners() at epoch 0).
  const placement& previous() const noexcept { return previous_; }
  /// Did node `n` gain `slot` in the last change (it then copies the slot
  /// from an owner that held it, never the other way)?
  bool gained(node_index n, uint32_t slot) const noexcept;
  /// Where a sub-batch of `slot` goes: its owners, and while joint also its
  /// previous owners.
  uint64_t write_mask(uint32_t slot) const noexcept;
  std::vector<uint64_t> write_masks() const;

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
  /// When this node itself did not tick for longer than the timeout (frozen,
  /// a VM paused, a stalled loop), its peers' greetings wait unread in its
  /// sockets and their silence proves nothing: each live peer gets a fresh
  /// timeout from `now` instead, or a thawed node would take over workers
  /// from its stale shard at once (guarded by membership_test's
  /// a_node_that_stood_still_gives_its_peers_a_fresh_timeout).
  bool tick(time_point now);
  /// When the first live peer's silence passes the timeout if it greets no
  /// more (its last greeting plus the timeout): the latest a tick may come
  /// to notice it in time. nullopt without live peers.
  std::optional<time_point> next_silence_deadline() const;
  /// How often tick() found this node itself stood still, and for how long
  /// the last time (what its peers may have written around it meanwhile).
  uint64_t stalls() const noexcept { return stalls_; }
  std::chrono::milliseconds last_stall() const noexcept { return last_stall_; }

  /// Every configured node live, as if greeted at `now`: a node starts presuming its
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

  // -- ownership (static between membership changes) ------------------------------

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
    return cluster::read_owner(owners_, joint() ? &previous_ : nullptr, self_, slot,
                               [this](node_index n) { return live(n); });
  }
  node_index home_of(uint64_t worker_uid) const noexcept {
    return cluster::home_of(live_placement_, worker_uid);
  }

  std::vector<member_view> view() const;

private:
  membership(std::vector<member_address> addresses, node_index self, membership_record record,
             placement owners, placement previous, placement live_placement,
             std::chrono::milliseconds timeout);
  void recompute_live_placement();

  std::vector<member_address> addresses_; // by node_index: every configured node
  node_index self_;
  membership_record record_;
  std::vector<uint8_t> member_; // by node_index
  placement owners_;
  placement previous_;
  placement live_placement_;
  std::vector<uint8_t> live_;
  std::vector<uint8_t> leaving_;
  std::vector<time_point> last_seen_;
  std::optional<time_point> last_tick_;
  uint64_t stalls_ = 0;
  std::chrono::milliseconds last_stall_{0};
  std::chrono::milliseconds timeout_;
};

} // namespace lmcc::cluster
