// slot_mover: the actor that moves slot content when the member set changes
// (cluster/membership_record.hpp).
//
// While a change is joint, every sub-batch already reaches the slots' new
// owners as well as their previous ones; what a new owner lacks is the
// content from before. The mover copies each slot this node gained from an
// owner that held it (a live one under both placements first), a few slots at
// a time, into this node's shard (merged: what the node already got under the
// joint placement stays, so a write that raced the copy is not undone), and
// answers the cluster node once every gained slot is in (the node then greets
// as ready; once every live new member is, the change commits). A write that
// races a copy is put right by anti-entropy, where a node that gained a slot
// is always the junior owner. After the commit it empties the slots this node
// no longer owns, after a grace period for readers on nodes that have not
// committed yet.
//
//   auto mover = sys.spawn(slot_mover_main, slot_mover_config{board, shard, ...});
//   self->request(mover, caf::infinite, members_atom::value, epoch, identity);  // -> true
//   self->send(mover, retire_atom::value, epoch, identity);
//
// Context: a CAF actor; one per cluster node.
#pragma once

#include "actors/cluster/cluster_service.hpp"
#include "actors/cluster/cluster_table.hpp"
#include "actors/kv_shard.hpp"

#include <atomic>
#include <chrono>
#include <deque>
#include <memory>
#include <optional>

namespace lmcc::actors {

/// What /cluster/status shows of the last change (any thread).
struct slot_move_counters {
  std::atomic<uint64_t> epoch{0};
  std::atomic<uint64_t> slots_to_copy{0}; ///< gained in the current change
  std::atomic<uint64_t> slots_copied{0};
  std::atomic<uint64_t> entries_copied{0};
  std::atomic<uint64_t> copy_failures{0};
  std::atomic<uint64_t> slots_dropped{0}; ///< no longer owned, emptied after the commit
};

struct slot_mover_config {
  std::shared_ptr<cluster_board> board;
  kv_shard_actor shard; ///< this node's own shard
  std::string self_id;
  /// One copy's bound; a failed copy is retried (from another owner if any).
  std::chrono::milliseconds timeout{10000};
  std::chrono::milliseconds retry_delay{500};
  /// Slots copied at once.
  uint32_t in_flight = 16;
  /// How long after the commit a node keeps the slots it no longer owns.
  std::chrono::milliseconds drop_grace{5000};
  std::shared_ptr<slot_move_counters> counters;
};

using slot_mover_actor = caf::typed_actor<
    // (epoch, record identity) -> true once every slot gained is copied
    caf::replies_to<members_atom, uint64_t, uint64_t>::with<bool>,
    // the change (epoch, identity) committed: drop the slots no longer owned
    caf::reacts_to<retire_atom, uint64_t, uint64_t>,
    // internal: copy more / retry
    caf::reacts_to<tick_atom>>;

struct slot_mover_state {
  static inline const char* name = "lmcc.slot_mover";
  slot_mover_config cfg;
  uint64_t epoch = 0;
  uint64_t identity = 0;
  std::deque<uint32_t> queue; ///< gained slots still to copy
  uint32_t in_flight = 0;
  bool retry_armed = false;
  bool done = true;
  std::vector<caf::typed_response_promise<bool>> waiting;
  /// A commit's (epoch, identity) whose slots no longer owned are dropped
  /// on the next tick after the grace period.
  struct retirement {
    uint64_t epoch = 0;
    uint64_t identity = 0;
    std::chrono::steady_clock::time_point at;
  };
  std::optional<retirement> retire_pending;
};

slot_mover_actor::behavior_type
slot_mover_main(slot_mover_actor::stateful_pointer<slot_mover_state> self, slot_mover_config cfg);

} // namespace lmcc::actors
