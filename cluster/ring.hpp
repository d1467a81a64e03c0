// ring: the consistent-hash ring every node builds from the member list, and
// the preference list of each slot.
//
// Every member places `virtual_nodes` points on a 64-bit ring, point i of node
// `id` at fnv1a(id, i) (cluster/hash.hpp). Slot s sits at s * 2^64/slot_count:
// slots are already uniform hashes of the keys (slot_of), so spacing their
// points evenly adds no second sampling noise to a node's share (hashed slot
// points would add a binomial ±sqrt(slots/N) on top of the ring's own
// imbalance). A slot's preference list is the sequence of distinct members met
// walking clockwise from the slot's point; the placement (placement.hpp) takes
// the first R live ones as its owners.
//
// Why this moves little: when a node joins, a slot changes primary only if the
// newcomer's first point comes before every other node's on the walk, i.e. the
// newcomer takes its own share (~1/N) and nothing moves between old nodes;
// a leave is the mirror image. Liveness never changes the ring, only which
// entries of a list are skipped, so a node that comes back gets its slots back.
//
// The ring depends only on the member set and the options, never on the order
// the ids were given in: members are sorted, equal points are ordered by id.
//
//   expected<member_set> m = member_set::make({"n2", "n1", "n3"});
//   expected<hash_ring> r = hash_ring::make(*m, ring_options{});
//   std::vector<node_index> list = r->preference(17);   // e.g. {2, 0, 1}
//   const std::string& first = r->members().id(list[0]); // "n3"
//
// Context: immutable after make(); thread-safe to share. Pure, CAF-free.
#pragma once

#include "cluster/expected.hpp"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace lmcc::cluster {

// -- limits ----------------------------------------------------------------------------

/// Most members a ring takes (node_index is 16 bits; the ring holds
/// members * virtual_nodes points).
constexpr std::size_t max_members = 1024;

/// Most slots a cluster may have: a placement keeps R owner entries per slot.
/// (A single node's --slots allows up to 2^31; a cluster refuses more than this.)
constexpr uint32_t max_slot_count = uint32_t{1} << 20;

/// Most virtual nodes per member.
constexpr uint32_t max_virtual_nodes = 16384;

// -- options -----------------------------------------------------------------------------

/// How the ring is cut and how many owners a slot has. All three go into the
/// placement fingerprint: nodes with different options never agree by accident.
struct ring_options {
  /// Slots the key space is cut into (slot = slot_of(key, slot_count)); the unit
  /// of ownership and handoff. Must be a power of two, at most max_slot_count,
  /// and the same on every node for the life of the cluster's data (changing it
  /// re-slots every key). More slots move in finer steps; each costs R owner
  /// entries in every placement. Default: 4096
  uint32_t slot_count = 4096;

  /// Points each member places on the ring. A member's share of the slots is
  /// the sum of the arcs ending at its points: relative standard deviation
  /// about 1/sqrt(virtual_nodes), plus the grain of the slots (a node's arcs
  /// catch whole slot points). Measured at 4096 slots, over 40 random id sets
  /// per N: rms deviation of a node's slot count from the mean is 6 % at 256,
  /// 4.5 % at 512, 2.8-4.0 % at 1024 (N = 3..10) and no better at 2048 or 4096,
  /// where the slot grain dominates (N = 10: 4.0 % against a grain floor of
  /// about sqrt(N / slots) = 5 % for slots placed independently). So 1024 is
  /// the smallest power of two that reaches the floor; at it "n1".."nN" stay
  /// within ±10 % of the mean for N = 3..10 (worst 5.3 %; 512 gives 10.7 %),
  /// and so does the share that moves when one of them joins or leaves. Not a
  /// guarantee for every id set: about 1 in 10 random 10-node sets has a node
  /// off by more than 10 % at 4096 slots (0 of 40 at 16384). 64, DESIGN.md's
  /// first figure, gives 12 % rms. Costs members * virtual_nodes * 10 bytes and
  /// one sort per membership change (10k points at 10 nodes). Default: 1024
  uint32_t virtual_nodes = 1024;

  /// Owners per slot, R: the primary plus R-1 replicas. R = 1 keeps no replica;
  /// R above the live node count gives every live node. Must be >= 1.
  /// Default: 2
  uint32_t replicas = 2;
};

/// Checks `opts` against the rules above: bad_slot_count, bad_virtual_nodes,
/// zero_replicas.
[[nodiscard]] expected<void> check(const ring_options& opts);

// -- member set --------------------------------------------------------------------------

/// A member's position in its member_set: its rank among the sorted ids.
using node_index = uint16_t;
/// No node (max_members is far below it).
inline constexpr node_index no_node = 0xffff;

/// The cluster's configured nodes: distinct, non-empty ids, kept sorted so that
/// every node numbers them the same way whatever order its config lists them in.
class member_set {
public:
  /// Sorts and checks `ids`. Fails with empty_member_set, empty_node_id,
  /// duplicate_node_id (naming the id) or too_many_members.
  [[nodiscard]] static expected<member_set> make(std::vector<std::string> ids);

  /// The ids, sorted ascending; index i is node_index i.
  const std::vector<std::string>& ids() const noexcept { return ids_; }
  std::size_t size() const noexcept { return ids_.size(); }
  /// REQUIRES: i < size().
  const std::string& id(node_index i) const { return ids_[i]; }
  /// The index of `id`, or nullopt if it is not a member.
  std::optional<node_index> index_of(std::string_view id) const noexcept;
  bool contains(std::string_view id) const noexcept { return index_of(id).has_value(); }

  friend bool operator==(const member_set&, const member_set&) = default;

private:
  explicit member_set(std::vector<std::string> sorted) : ids_(std::move(sorted)) {}

  std::vector<std::string> ids_;
};

// -- ring --------------------------------------------------------------------------------

class hash_ring {
public:
  /// Builds the ring of `members` (members.size() * opts.virtual_nodes points).
  /// Fails as check(opts) does.
  [[nodiscard]] static expected<hash_ring> make(member_set members, const ring_options& opts);

  const member_set& members() const noexcept { return members_; }
  const ring_options& options() const noexcept { return opts_; }
  uint32_t slot_count() const noexcept { return opts_.slot_count; }

  /// The slot's whole preference list: every member once, in the order met
  /// walking clockwise from the slot's point. REQUIRES: slot < slot_count().
  std::vector<node_index> preference(uint32_t slot) const;

  /// Appends to `out` the first `limit` members of the slot's preference list
  /// whose `live[i]` is non-zero. REQUIRES: slot < slot_count(),
  /// live.size() == members().size(), and at least `limit` members live.
  void first_live(uint32_t slot, std::span<const uint8_t> live, std::size_t limit,
                  std::vector<node_index>& out) const;

  /// Where slot `slot` sits on the ring: slot * 2^64 / slot_count.
  static constexpr uint64_t slot_point(uint32_t slot, uint32_t slot_count) noexcept {
    return slot * (~uint64_t{0} / slot_count + 1); // 2^64 / slot_count; 0 when slot_count is 1
  }

  /// Where point i of node `id` sits on the ring.
  static uint64_t vnode_point(std::string_view id, uint32_t i) noexcept;

private:
  hash_ring(member_set members, const ring_options& opts);

  /// The index of the first ring point at or after the slot's point (wrapping).
  std::size_t start_of(uint32_t slot) const noexcept;

  member_set members_;
  ring_options opts_;
  std::vector<uint64_t> points_;  // sorted ascending
  std::vector<node_index> owner_; // owner_[i] placed points_[i]
};

} // namespace lmcc::cluster
