// anti_entropy: the actor that, every interval, compares the digests of the
// slots this node shares with each reachable peer, and takes the peer's copy
// of a slot that stays different, or that this node's copy is uncertain of
// (anti_entropy_logic.hpp says which). The local shard installs a copy holder
// by holder, only where it is newer (coverage.hpp), so both sides may copy
// from each other and converge whatever the order. A holder whose copies
// disagree at the same position, or that stays uncertain on every owner, is
// asked of its worker (a full sync through the directory). The shard stays
// the index's only writer, and the slot's next snapshot makes a copy durable.
//
// Rounds are spaced by the greetings: each greeting carries a summary of the
// sender's digests of the slots it shares with the greeted node, and a round
// skips a peer whose last greeting's summary equals this node's own (while
// this node's copy is certain of every slot). An idle cluster then compares
// nothing; a divergence shows in the next greeting and the next round
// compares that peer as before.
//
//   auto ae = sys.spawn(anti_entropy_main, anti_entropy_config{...});
//
// Context: a CAF actor; one per cluster node.
#pragma once

#include "actors/cluster/cluster_service.hpp"
#include "actors/cluster/cluster_table.hpp"
#include "actors/kv_shard.hpp"
#include "cluster/anti_entropy_logic.hpp"
#include "index/kv_index.hpp"

#include <array>
#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <set>

namespace lmcc::actors {

/// What /cluster/status shows (any thread).
struct anti_entropy_counters {
  std::atomic<uint64_t> rounds{0};
  /// Peers a round did not compare: their last greeting's summary equalled ours.
  std::atomic<uint64_t> comparisons_skipped{0};
  std::atomic<uint64_t> slots_compared{0};
  std::atomic<uint64_t> slots_differing{0}; ///< now
  std::atomic<uint64_t> slots_repaired{0};  ///< copies that changed something here
  std::atomic<uint64_t> copies_taken{0};
  std::atomic<uint64_t> conflicts{0};    ///< holders whose copies disagreed at one position
  std::atomic<uint64_t> holders_lost{0}; ///< (slot, holder) uncertain on every owner
  /// Slots blank on every owner, handed to every worker's full sync.
  std::atomic<uint64_t> slots_blank_everywhere{0};
};

/// What the greetings told of each peer (by node_index): when a greeting
/// last carried a summary of the shared slots equal to this node's own, in
/// steady milliseconds (clock/clock.hpp); 0: the last one differed, or none
/// came. Written by the cluster node, read by the rounds (any thread).
struct greeting_agreement {
  std::array<std::atomic<uint64_t>, 64> agreed_at_ms{}; ///< a ring has at most 64 nodes
};

/// A summary of this node's digests of the slots it shares with `peer` under
/// `table`'s placement: equal on both nodes when their copies of those slots
/// are (whatever the order of the sums). Never 0.
uint64_t shared_slots_summary(const cluster_table& table, node_index peer, const kv_index& index);

struct anti_entropy_config {
  std::shared_ptr<cluster_board> board;
  std::shared_ptr<const kv_index> index;
  kv_shard_actor shard; ///< this node's own shard
  /// Where a worker that must full-sync is reported (resync_atom).
  directory_actor directory;
  std::chrono::milliseconds interval{5000};
  /// How often the slots this node's copy is uncertain of are asked of the
  /// peers between rounds (a node back empty, a copy that missed sub-batches:
  /// it answers lookups short, or makes another node read its slots, until
  /// then). Zero: only at rounds.
  std::chrono::milliseconds uncertain_interval{500};
  std::chrono::milliseconds timeout{10000};
  /// Slots copied per round and peer at most (each copy is one slot's entries).
  uint32_t max_repairs_per_round = 512;
  /// Rounds a (slot, holder) may stay uncertain after copies from every
  /// other owner before its worker is asked for a full sync.
  uint32_t rounds_for_loss = 4;
  std::shared_ptr<anti_entropy_counters> counters;
  /// What the greetings told; null: every round compares every peer.
  std::shared_ptr<const greeting_agreement> agreement;
  /// How long a greeting's agreement vouches for its peer (at least one
  /// interval): two quiet greeting intervals, so that one late greeting
  /// does not make a round compare. A greeting that disagrees ends it at once.
  std::chrono::milliseconds agreement_ttl{0};
  /// The worker uid the directory knows a holder by (0: none): who is asked
  /// to full-sync a holder the shard never tied to a worker. Empty: nobody.
  std::function<uint64_t(uint64_t holder)> worker_of;
};

using anti_entropy_actor = caf::typed_actor<caf::reacts_to<tick_atom>,
                                            // Between rounds: the uncertain slots only.
                                            caf::reacts_to<tick_atom, bool>>;

struct anti_entropy_state {
  static inline const char* name = "lmcc.anti_entropy";
  anti_entropy_config cfg;
  divergence_tracker tracker;
  uncertainty_ledger ledger;
  uint64_t round = 0;
  /// Uncertain slots asked of a peer and not answered yet (not asked twice).
  std::set<std::pair<node_index, uint32_t>> asking;
  /// The between-rounds tick is armed (only while some slot is uncertain:
  /// an idle node wakes for nothing).
  bool uncertain_tick_armed = false;
  /// Workers asked for a full sync lately, by uid, with the round: a
  /// disagreement seen again before the sync replaced the entries is the
  /// same one.
  std::map<uint64_t, uint64_t> asked;
  /// Slots still blank here after copies of other owners blank too.
  blank_slot_ledger blank_everywhere;
  /// Where the next fetch of uncertain slots starts among the shared ones:
  /// more uncertain slots than one round may ask for are asked in turn.
  size_t fetch_cursor = 0;
};

anti_entropy_actor::behavior_type
anti_entropy_main(anti_entropy_actor::stateful_pointer<anti_entropy_state> self,
                  anti_entropy_config cfg);

} // namespace lmcc::actors
