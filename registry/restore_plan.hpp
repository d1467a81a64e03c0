// restore_plan: what a restarting node makes of the Directory rows it loaded
// and the holder states its shard rebuilt (shard_restore.hpp). Actor-free and
// pure, so every rule below is unit-tested without a node.
//
// Per restored worker, for each holder (location) of its current incarnation,
// by the holder's durable seq mark:
// - tracking N: every op up to N is durable; the worker's next op there must
//   carry N + 1 (a mismatch, found by the worker's actor when that op
//   arrives, asks this worker alone for a full sync: "seq_gap_after_restart");
// - resynced: a full sync ended and nothing came since; the next op
//   re-initialises the tracker, as LMCache does after a sync;
// - none: nothing is durable (the holder was dropped); the next op starts at 0;
// - syncing: the full sync that was running is lost with the restart (its
//   entries are partial): full sync ("restart_during_full_sync");
// - gap: ops never reached the disk (a given-up commit): full sync
//   ("store_commit_failed").
// A location the worker reports first after the restart must start at seq 0.
// A holder the shard reported damaged (its slot or state unreadable) makes its
// worker resync ("snapshot_damaged"); damage that names no holder makes every
// worker resync. Holders of an older incarnation than the row (a
// re-registration whose drop never reached the log) and holders whose worker
// has no row (a deregistration cut short) are dropped: the node logs their
// drops before it serves.
//
//   auto plan = plan_restore(dir.workers, start.holders, report, now);
//   for (auto& w : plan.workers) registry.restore_worker(w.record); ...
//
// Context: pure functions; thread-safe.
#pragma once

#include "index/kv_shard_core.hpp"
#include "index/shard_restore.hpp"
#include "persistence/schema.hpp"
#include "registry/registry.hpp"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace lmcc::actors {

/// One worker as a restarted node takes it back.
struct restored_worker {
  worker_record record; ///< last_heartbeat_time = the restart (a grace period)
  /// Per location: the seq tracker to start from (the durable watermark).
  std::map<std::string, uint64_t> last_seq;
  /// Per location: the seq the next op must carry, or nullopt for "no check".
  /// Locations not listed must start at 0.
  std::map<std::string, std::optional<uint64_t>> expected_next;
  /// Non-empty: ask this worker for a full sync at its next heartbeat.
  std::string resync_reason;
  /// Per location: where its stream stands (the worker's entity continues
  /// from there: coverage.hpp).
  std::map<std::string, stream_pos> start_pos;
};

struct restore_plan {
  std::vector<restored_worker> workers; ///< registration order
  /// Holders whose entries must go (stale incarnation or no worker row), with
  /// the incarnation their drop carries (so nothing older comes back).
  std::vector<std::pair<holder_id, uint64_t>> drop_holders;
};

restore_plan plan_restore(const std::vector<persistence::worker_row>& rows,
                          const holder_metas& holders, const shard_restore_report& report,
                          double now);

/// The store row of a registry record.
persistence::worker_row to_row(const worker_record& rec);

/// The record of a stored (or replicated) row; its silence counts from `now`.
worker_record to_record(const persistence::worker_row& row, double now);

} // namespace lmcc::actors
