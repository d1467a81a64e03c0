// node_restore: how a starting node gets its store and what it had: opens the
// store (or restores it from a snapshot first), streams the index into one
// kv_index per shard, plans the workers' restore (actors/restore_plan.hpp),
// deletes what the plan drops, and hands the actors their starting state.
//
//   auto loaded = load_node_state(options);   // throws std::runtime_error with the reason
//   spawn shards from loaded.shards, the directory with loaded.workers ...
//
// Context: runs once on the main thread before any actor exists; logs progress.
#pragma once

#include "actors/kv_shard.hpp"
#include "actors/restore_plan.hpp"
#include "apps/lmcc/node_options.hpp"
#include "persistence/store.hpp"

#include <memory>
#include <vector>

namespace lmcc::apps {

struct node_state {
  /// Null when persistence is off.
  std::shared_ptr<persistence::store> store;
  /// One per shard, ready to spawn with.
  std::vector<std::shared_ptr<actors::shard_init>> shards;
  std::vector<actors::restored_worker> workers;
  bool need_full_sync_all = true;
  uint64_t entries = 0;
  double seconds = 0;
};

/// Opens or restores the store and loads it; throws std::runtime_error naming
/// what is wrong (bad snapshot, another node's data dir, changed --slots, ...).
node_state load_node_state(const node_options& options);

} // namespace lmcc::apps
