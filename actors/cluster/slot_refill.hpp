// slot_refill: the actor that copies every slot this node owns from another
// owner, for a node that came back with an empty store while its peers hold
// the index (refill_gate.hpp says when). Each slot is copied from an owner
// that is reachable, greeted this node and is not refilling itself, a few at
// a time, and merged into this node's shard like the slot mover's copies:
// writes that reach the node meanwhile stay. An owner that is up but has not
// joined or greeted this node yet is waited for; a slot whose other owners
// are all down (or refilling too) is skipped and left over (below). The
// answer comes once every slot is copied or skipped and a snapshot round
// made the copies durable (asked for, and run in the shard's bounded
// background steps as the periodic rounds are, so ingest on this node goes
// on meanwhile).
//
// Skipped slots are kept (refill_leftovers.hpp) until an owner from then
// comes back with its copy, which is copied then, or comes back empty too, or
// stops owning the slot: then no copy is left anywhere, and on_lost asks
// every worker for a full sync. The refill is settled (on_settled: a
// restart need not copy again) once no slot is left.
//
//   auto refill = sys.spawn(slot_refill_main, slot_refill_config{board, shard, "n1"});
//   self->request(refill, caf::infinite, repair_atom::value)  // -> slots copied
//
// Context: a CAF actor; one per cluster node.
#pragma once

#include "actors/cluster/cluster_service.hpp"
#include "actors/cluster/cluster_table.hpp"
#include "actors/kv_shard.hpp"
#include "cluster/refill_leftovers.hpp"

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <vector>

namespace lmcc::actors {

struct slot_refill_config {
  std::shared_ptr<cluster_board> board;
  kv_shard_actor shard; ///< this node's own shard
  std::string self_id;
  /// One copy's bound; a failed copy is tried again (from another owner if
  /// any) at most `attempts` times.
  std::chrono::milliseconds timeout{10000};
  std::chrono::milliseconds retry_delay{500};
  uint32_t attempts = 3;
  /// Slots copied at once.
  uint32_t in_flight = 16;
  /// How often slots left by the copy are looked at again.
  std::chrono::milliseconds leftover_recheck{1000};
  /// Slots no owner holds any more (every other owner came back empty):
  /// only the workers' full syncs can give their entries back.
  std::function<void(const std::vector<uint32_t>& lost_slots)> on_lost;
  /// Every owned slot is copied, or known lost, and durable.
  std::function<void()> on_settled;
};

using slot_refill_actor = caf::typed_actor<
    // start (once) -> slots copied, once every owned slot is copied or skipped
    caf::replies_to<repair_atom>::with<uint64_t>,
    // internal: retry
    caf::reacts_to<tick_atom>>;

struct slot_refill_state {
  static inline const char* name = "lmcc.slot_refill";
  slot_refill_config cfg;
  struct pending {
    uint32_t slot;
    uint32_t failures;
  };
  std::deque<pending> queue;
  uint32_t in_flight = 0;
  bool started = false;
  bool finishing = false; ///< every slot copied or skipped; waiting for the shard
  bool done = false;
  bool retry_armed = false;
  uint64_t total = 0, copied = 0, entries = 0, skipped = 0, lost = 0;
  refill_leftovers leftovers{0};
  bool leftover_copied = false; ///< since the last snapshot round
  bool settled = false;
  std::chrono::steady_clock::time_point began;
  std::vector<caf::typed_response_promise<uint64_t>> waiting;
};

slot_refill_actor::behavior_type
slot_refill_main(slot_refill_actor::stateful_pointer<slot_refill_state> self,
                 slot_refill_config cfg);

} // namespace lmcc::actors
