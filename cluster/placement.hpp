// placement: who owns each slot, given the ring and which members are live.
//
// A slot's owners are the first R live members of its preference list
// (ring.hpp): the first is the primary, the next R-1 its replicas, in that
// order. R above the live count gives every live member; no live member gives
// no owner. Liveness only skips entries of the lists, it never reorders them:
// a dead member's slots go to the next live member of each list, and return to
// it, the same slots, when it is live again.
//
// Two nodes agree on ownership iff they hold the same member set, liveness and
// options; fingerprint() hashes exactly those (ids sorted), so they can compare
// one number (the "ring version" of /cluster/status and cluster-ready).
// changed_slots(before, after) lists the slots whose owner list differs: what a
// membership or liveness change makes move.
//
//   expected<placement> p = placement::compute({"n1", "n2", "n3"}, {"n1", "n3"}, {});
//   std::optional<std::string_view> who = p->primary(slot_of(key, p->slot_count()));
//   std::vector<std::string_view> all = p->owners(17);   // primary first
//   slot_roles mine = p->slots_of("n1");                  // .primary, .replica
//   auto moved = changed_slots(old_placement, *p);        // expected<vector<uint32_t>>
//
// Building a placement costs one walk per slot (a few ring steps each); the
// ring can be shared between placements that differ only in liveness.
//
// Context: immutable after compute(); thread-safe to share. Pure, CAF-free.
#pragma once

#include "cluster/ring.hpp"

#include <memory>

namespace lmcc::cluster {

/// The slots a member holds, each list ascending.
struct slot_roles {
  std::vector<uint32_t> primary;
  std::vector<uint32_t> replica;
};

class placement {
public:
  // -- construction --------------------------------------------------------------------

  /// The placement of `ring` with the members named in `live` live (order and
  /// repeats in `live` do not matter). Fails with unknown_node if `live` names
  /// a non-member. REQUIRES: ring is not null.
  [[nodiscard]] static expected<placement> compute(std::shared_ptr<const hash_ring> ring,
                                                   const std::vector<std::string>& live);

  /// Builds the ring of `members` with `opts`, then as above. Fails as
  /// member_set::make, hash_ring::make and the above do.
  [[nodiscard]] static expected<placement> compute(std::vector<std::string> members,
                                                   const std::vector<std::string>& live,
                                                   const ring_options& opts);

  // -- properties ----------------------------------------------------------------------

  const hash_ring& ring() const noexcept { return *ring_; }
  const std::shared_ptr<const hash_ring>& shared_ring() const noexcept { return ring_; }
  const member_set& members() const noexcept { return ring_->members(); }
  uint32_t slot_count() const noexcept { return ring_->slot_count(); }

  /// Owners every slot has: min(R, live members).
  uint32_t owners_per_slot() const noexcept { return per_slot_; }

  /// Whether member `id` is live (false for a non-member).
  bool is_live(std::string_view id) const noexcept;

  /// The live members, sorted.
  std::vector<std::string_view> live_members() const;

  /// Hash of (sorted member ids, each one's liveness, slot_count, virtual_nodes,
  /// replicas, algorithm version): equal on two nodes iff they place alike.
  uint64_t fingerprint() const noexcept { return fingerprint_; }

  // -- queries -------------------------------------------------------------------------

  /// The slot's owners as member indices, primary first. REQUIRES: slot < slot_count().
  std::span<const node_index> owner_indices(uint32_t slot) const noexcept {
    return {owners_.data() + std::size_t{slot} * per_slot_, per_slot_};
  }

  /// The slot's owners' ids, primary first. REQUIRES: slot < slot_count().
  std::vector<std::string_view> owners(uint32_t slot) const;

  /// The slot's primary, or nullopt when no member is live.
  /// REQUIRES: slot < slot_count().
  std::optional<std::string_view> primary(uint32_t slot) const;

  /// The slots member `id` holds as primary and as replica (both empty for a
  /// dead member or a non-member).
  slot_roles slots_of(std::string_view id) const;

private:
  placement(std::shared_ptr<const hash_ring> ring, std::vector<uint8_t> live);

  std::shared_ptr<const hash_ring> ring_;
  std::vector<uint8_t> live_; // by node_index
  uint32_t per_slot_ = 0;
  std::vector<node_index> owners_; // slot_count * per_slot_, slot-major
  uint64_t fingerprint_ = 0;
};

/// The slots whose owner list (ids, in order) differs between `before` and
/// `after`, ascending: a new primary or a changed replica, i.e. what has to
/// move. The member sets may differ. Fails with slot_count_mismatch if the
/// slot counts do (a cluster's slot count is fixed).
[[nodiscard]] expected<std::vector<uint32_t>> changed_slots(const placement& before,
                                                            const placement& after);

} // namespace lmcc::cluster
