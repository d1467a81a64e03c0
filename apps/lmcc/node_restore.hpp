// node_restore: how a starting node gets its store and what it had: opens the
// store (or restores it from a snapshot first), rebuilds the index from the
// slot snapshots and the op log (index/shard_restore.hpp), plans the workers'
// restore (registry/restore_plan.hpp), and hands the actors their starting state.
//
//   auto loaded = load_node_state(options, index);   // throws std::runtime_error
//   spawn the shard with loaded.shard, the directory with loaded.workers ...
//
// Context: runs once on the main thread before any actor exists; logs progress.
#pragma once

#include "apps/lmcc/node_options.hpp"
#include "index/kv_index.hpp"
#include "index/kv_shard_core.hpp"
#include "persistence/store.hpp"
#include "registry/restore_plan.hpp"

#include <memory>
#include <span>
#include <utility>
#include <vector>

namespace lmcc::apps {

struct node_state {
  /// Null when persistence is off.
  std::shared_ptr<persistence::store> store;
  actors::shard_start_state shard;
  std::vector<actors::restored_worker> workers;
  /// Stale holders the shard drops (and logs) before it serves.
  std::vector<std::pair<actors::holder_id, uint64_t>> drop_holders;
  bool need_full_sync_all = true;
  uint64_t entries = 0;
  double seconds = 0;
};

/// Opens or restores the store and loads it into `index` (empty); throws
/// std::runtime_error naming what is wrong (bad snapshot, another node's data
/// dir, an old format, changed --slots, ...).
/// `ownership`: the slots this node owns (one word per slot: the epoch since
/// which, or actors::not_owned; empty for a single node, which owns all).
node_state load_node_state(const node_options& options, actors::kv_index& index,
                           std::span<const uint64_t> ownership = {});

} // namespace lmcc::apps
