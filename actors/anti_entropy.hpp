// anti_entropy: the actor that, every interval, compares the digests of the
// slots this node shares with each reachable peer and copies a slot that
// stays different from the more senior owner (anti_entropy_logic.hpp has the
// rules). A repair is a kv_shard message: the shard stays the index's only
// writer, and the slot's next snapshot makes the repair durable.
//
//   auto ae = sys.spawn(anti_entropy_main, anti_entropy_config{...});
//
// Context: a CAF actor; one per cluster node.
#pragma once

#include "actors/anti_entropy_logic.hpp"
#include "actors/cluster_service.hpp"
#include "actors/cluster_table.hpp"
#include "actors/kv_index.hpp"
#include "actors/kv_shard.hpp"

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>

namespace lmcc::actors {

/// What /cluster/status shows (any thread).
struct anti_entropy_counters {
  std::atomic<uint64_t> rounds{0};
  std::atomic<uint64_t> slots_compared{0};
  std::atomic<uint64_t> slots_differing{0}; ///< now
  std::atomic<uint64_t> slots_repaired{0};
};

struct anti_entropy_config {
  std::shared_ptr<cluster_board> board;
  std::shared_ptr<const kv_index> index;
  kv_shard_actor shard; ///< this node's own shard
  std::chrono::milliseconds interval{5000};
  std::chrono::milliseconds timeout{10000};
  /// Slots copied per round at most (each copy is one slot's entries).
  uint32_t max_repairs_per_round = 512;
  std::function<uint64_t()> uptime_ms;
  std::shared_ptr<anti_entropy_counters> counters;
  /// This node's suspect slot copies: they give way to a peer's that is not,
  /// and stop being suspect once equal to another owner's. Null: none.
  std::shared_ptr<slot_suspects> suspects;
  /// Peers' copies a home hinted to lack writes this node holds: they give
  /// way to this node's (both ways: the digest answers carry them). Null: none.
  std::shared_ptr<peer_lag_hints> hints;
};

using anti_entropy_actor = caf::typed_actor<caf::reacts_to<tick_atom>>;

struct anti_entropy_state {
  static inline const char* name = "lmcc.anti_entropy";
  anti_entropy_config cfg;
  divergence_tracker tracker;
};

anti_entropy_actor::behavior_type
anti_entropy_main(anti_entropy_actor::stateful_pointer<anti_entropy_state> self,
                  anti_entropy_config cfg);

} // namespace lmcc::actors
