// restore_plan: what a restarting node makes of the Directory rows and seq
// watermarks it loaded from its store. Actor-free and pure, so every rule
// below is unit-tested without a node.
//
// Per restored worker and location, over the current shards 0..N-1 (a shard
// with no watermark counts as "nothing of this location is durable here"):
// - any shard says watermark_syncing: the full sync that was running is lost
//   with the restart (its entries are partial) -> this worker is asked for a
//   full sync ("restart_during_full_sync");
// - every shard says watermark_resynced: a full sync ended and nothing came
//   since; the next op re-initialises the tracker, as LMCache does after a sync;
// - resynced on some shards only: ops after the sync reached some shards'
//   disks and not others' -> full sync ("watermarks_diverged");
// - otherwise the watermark is the minimum seq over the shards (none -> -1):
//   every op up to it is on disk, and the worker's next op must carry
//   watermark + 1. A location the worker reports first after the restart must
//   start at seq 0. A mismatch is found by the worker's actor when that op
//   arrives ("seq_gap_after_restart").
// Rows with reset_pending finish their reset: no entries, no watermarks, every
// location expects seq 0. Watermarks of unknown workers, of shards >= N and of
// unknown locations are stale and deleted; so are entries of unknown workers.
//
//   auto plan = plan_restore(loaded.workers, loaded.watermarks, shard_count, now);
//   for (auto& w : plan.workers) registry.restore_worker(w.record); ...
//
// Context: pure functions; thread-safe.
#pragma once

#include "actors/kv_index.hpp"
#include "actors/registry.hpp"
#include "persistence/schema.hpp"

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace lmcc::actors {

/// One worker as a restarted node takes it back.
struct restored_worker {
  worker_record record; ///< last_heartbeat_time = the restart (a grace period)
  /// The seq tracker per location index to start from (the agreed watermark).
  std::map<uint32_t, uint64_t> last_seq;
  /// Per location index of the row: the seq the next op must carry, or nullopt
  /// for "no check" (resynced). Locations not listed must start at 0.
  std::map<uint32_t, std::optional<uint64_t>> expected_next;
  /// Non-empty: ask this worker for a full sync at its next heartbeat.
  std::string resync_reason;
  /// The row had reset_pending: its entries and watermarks are dropped.
  bool reset_finished = false;
};

struct restore_plan {
  std::vector<restored_worker> workers; ///< worker_num (= registration) order
  /// Workers whose entries must not be loaded and are deleted from the store:
  /// rows with reset_pending, and numbers with entries but no row (orphans of
  /// a deregistration cut short).
  std::set<uint32_t> dropped_workers;
  /// Watermarks each shard starts with, by shard index.
  std::vector<std::map<holder_id, uint64_t>> shard_watermarks;
  /// Watermarks to delete from the store.
  std::vector<persistence::watermark> stale_watermarks;
};

/// REQUIRES: shard_count > 0; rows sorted by worker_num (as store::load gives them).
restore_plan plan_restore(const std::vector<persistence::worker_row>& rows,
                          const std::vector<persistence::watermark>& watermarks,
                          uint32_t shard_count, double now);

/// The store row of a registry record.
persistence::worker_row to_row(const worker_record& rec, bool reset_pending);

} // namespace lmcc::actors
