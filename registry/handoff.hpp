// handoff: what moves with a worker's entity (its WorkerActor) when its home
// node changes (cluster_table::home_of follows liveness), and how the new
// home rebuilds the actor from it.
//
// A worker's entity carries one thing that is not in the replicated Directory
// rows: its seq trackers, per location. When the home moves away from a live
// node, that node's actor drains (everything it sent is acknowledged by every
// owner) and hands its trackers over as location marks; the new home asks
// every live peer for them (a pull, so that it does not matter who noticed
// the change first) and, when nobody hosted the worker (its old home died),
// falls back on the marks its own shard keeps: every owner of the worker's
// uid slot receives each batch's watermark (worker_config::mark_mask), so
// the next owner in the preference list knows how far the dead home got.
// Either way the marks go through plan_restore(), the rules of a restart: a
// tracked location's next op must continue its seq, a location caught in a
// full sync is re-synced, and only a proven gap asks a worker to resync.
//
//   auto marks = takeover_marks({answer_from_n2.marks}, local_shard_marks);
//   restored_worker w = takeover_plan(row, marks, now);
//
// Context: value types (they cross nodes; inspect in actors/inspect.hpp) and
// pure functions. CAF-free.
#pragma once

#include "index/handoff_marks.hpp"
#include "registry/restore_plan.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace lmcc::actors {

/// The freshest mark per location over several sources: the newer
/// incarnation first; then a mark that needs a resync (syncing, gap) over any
/// other; then the highest tracked seq; then resynced over none.
std::vector<location_mark> merge_marks(const std::vector<std::vector<location_mark>>& sources);

/// The marks a takeover continues from: the peers' drained marks
/// (merge_marks) when any peer had them, else this node's shard's (`own`);
/// either way each position is raised to where `own` says the holder's stream
/// stands when that is further in the same registration. A peer's marks can
/// predate an era a later home started: a node that handed the worker off,
/// and takes it over again after the next home died, finds its own old marks.
/// Continuing an era every copy has left behind would label the worker's new
/// ops below what the copies applied, and every copy would drop them as stale.
std::vector<location_mark> takeover_marks(const std::vector<std::vector<location_mark>>& found,
                                          const std::vector<location_mark>& own);

/// The worker as its new home takes it over: `row` from the replicated
/// Directory, trackers from `marks` (the restart rules of restore_plan.hpp).
restored_worker takeover_plan(const persistence::worker_row& row,
                              const std::vector<location_mark>& marks, double now);

} // namespace lmcc::actors
