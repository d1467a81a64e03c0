// anti_entropy_logic: which slots a node asks a peer's copy of, and when a
// holder's entries are known to be nowhere, without the actor
// (anti_entropy.hpp runs it on a timer).
//
// Copies are compared holder by holder (coverage.hpp): a copy of a slot
// carries, per holder, the stream position its entries reflect, and the
// receiving shard takes each holder's part only where it is newer than its
// own. So there is no rule about which *node* is right; a node only decides
// which slots are worth a copy:
// - a slot whose digest differs from the peer's *the same way* (same local
//   and remote digest) in two rounds in a row: under ingest digests move and
//   differ for a moment, and that is not drift (divergence_tracker);
// - a slot this node's copy of is uncertain (some holder pending: it missed
//   a sub-batch, came back empty, or gained the slot), every round, until a
//   copy that covers what it may lack comes.
// A holder whose entries in a slot stay uncertain round after round while
// every other owner of the slot answers, and none can cover them, has lost
// ops on every copy: only its worker can give them back (a full sync),
// which uncertainty_ledger decides.
//
//   divergence_tracker t;
//   auto repair = t.compare(peer, slots, local_digests, remote_digests);
//   uncertainty_ledger ledger;
//   ledger.unresolved(round, slot, uid, holder);      // after each copy
//   auto lost = ledger.close_round(round, 4, owners_answer);
//
// Context: owned by one actor; not thread-safe. CAF-free.
#pragma once

#include "cluster/ring.hpp"

#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <utility>
#include <vector>

namespace lmcc::actors {

using cluster::node_index;

class divergence_tracker {
public:
  /// One round's comparison with `peer` of `slots` (local and remote digests,
  /// same order). Returns the slots that differed the same way last round.
  /// REQUIRES: the three spans have the same size.
  std::vector<uint32_t> compare(node_index peer, std::span<const uint32_t> slots,
                                std::span<const uint64_t> local, std::span<const uint64_t> remote);

  /// Forgets `peer` (it is down, or this node copies nothing from it).
  void forget(node_index peer);

  /// Slots that differ now, over every peer.
  size_t differing() const noexcept { return seen_.size(); }

private:
  std::map<std::pair<node_index, uint32_t>, std::pair<uint64_t, uint64_t>> seen_;
};

/// (slot, holder) pairs still uncertain here after copies from other owners.
/// A round asks for at most max_repairs_per_round slots, so a slot may go a
/// few rounds unasked: that neither resolves its pairs nor starts their count
/// again; a copy that covers a pair, or the slot no longer uncertain, does.
class uncertainty_ledger {
public:
  struct lost_pair {
    uint32_t slot = 0;
    uint64_t worker_uid = 0;
    uint64_t holder = 0;
    uint64_t rounds = 0;
  };
  /// (worker uid, holder) of a slot, as a copy's outcome lists them.
  using holder_pair = std::pair<uint64_t, uint64_t>;

  /// A copy of `slot` taken in `round` left exactly these pairs uncertain:
  /// the slot's other pairs here are resolved.
  void after_copy(uint64_t round, uint32_t slot, const std::vector<holder_pair>& unresolved);

  /// Ends a round: pairs of slots no longer uncertain (`still_uncertain`) are
  /// settled; pairs left uncertain by copies over `rounds_for_loss` rounds
  /// or more, of a slot whose other owners all answer (`owners_answer`), are
  /// returned once -- lost everywhere.
  std::vector<lost_pair> close_round(uint64_t rounds_for_loss,
                                     const std::function<bool(uint32_t slot)>& owners_answer,
                                     const std::function<bool(uint32_t slot)>& still_uncertain);

  size_t size() const noexcept { return pairs_.size(); }

private:
  struct entry {
    uint64_t first = 0;
    uint64_t last = 0;
    uint64_t worker_uid = 0;
  };
  std::map<std::pair<uint32_t, uint64_t>, entry> pairs_;
};

/// The pairs lost everywhere, grouped by the worker whose full sync gives them
/// back: one ask per worker. A holder this node's shard never tied to a
/// worker (its entries came with copies of owners that lost their disks too)
/// is asked of the worker the directory knows it by (`worker_of`: holder ->
/// worker uid, 0 when none); pairs that have no worker either way are under 0.
std::map<uint64_t, std::vector<uncertainty_ledger::lost_pair>>
lost_by_worker(const std::vector<uncertainty_ledger::lost_pair>& lost,
               const std::function<uint64_t(uint64_t holder)>& worker_of);

/// Slots still blank here after copies of other owners that were blank too.
/// Blank after a copy of every other owner, over rounds_for_loss rounds or
/// more, while all of them answer: no owner knows every holder of the slot.
/// As for uncertainty_ledger, a round that did not ask for a slot changes
/// nothing; a whole copy taken, or the slot no longer uncertain, settles it.
class blank_slot_ledger {
public:
  /// A copy of `owner` taken in `round` left `slot` blank (`still_blank`), or
  /// made it whole.
  void after_copy(uint64_t round, uint32_t slot, node_index owner, bool still_blank);

  /// The slots blank everywhere (each returned once); `other_owners(slot)` is
  /// the bit mask of the slot's owners but this node.
  std::vector<uint32_t> close_round(uint64_t rounds_for_loss,
                                    const std::function<uint64_t(uint32_t slot)>& other_owners,
                                    const std::function<bool(uint32_t slot)>& owners_answer,
                                    const std::function<bool(uint32_t slot)>& still_uncertain);

  size_t size() const noexcept { return slots_.size(); }

private:
  struct sighting {
    uint64_t first = 0;
    uint64_t last = 0;
    uint64_t owners = 0; ///< bit n: owner n's copy was blank too
  };
  std::map<uint32_t, sighting> slots_;
};

} // namespace lmcc::actors
