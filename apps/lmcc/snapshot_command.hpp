// snapshot_command: `lmcc snapshot --node HOST:PORT --out DIR` asks a running
// node (POST /admin/snapshot) to write a consistent checkpoint of its store
// plus a verified manifest into DIR, a path on the node's host that must not
// exist yet; `lmcc node --restore-from DIR` boots from it.
//
//   lmcc snapshot --node 127.0.0.1:9000 --out /backups/n1-2026-11-30
//   -> snapshot-written dir=/backups/n1-2026-11-30 entries=1000000 workers=8 ...
//
//   lmcc snapshot --cluster 127.0.0.1:9000 --out /backups/c1   # every node, DIR/<id>
//
// Context: called from main() only.
#pragma once

#include <chrono>
#include <ostream>
#include <string>

namespace lmcc::apps {

/// 0 on success (one summary line on `out`), 1 when the node refused or
/// failed (its reason on `err`), 2 when it could not be reached.
int run_snapshot(const std::string& node, const std::string& out_dir, std::chrono::seconds timeout,
                 std::ostream& out, std::ostream& err);

/// `lmcc snapshot --cluster HOST:PORT --out DIR`: asks `node` for the members
/// (GET /cluster/status; every one must be live) and snapshots each into
/// DIR/<node id> (`lmcc cluster up --restore-from DIR` boots from it). Each
/// node's checkpoint is consistent on its own; they are taken one after the
/// other, so a replica may miss what its primary applied in between (the
/// copies even out when the workers' next ops or a resync reach them).
/// Returns as run_snapshot does (the first failure stops it).
int run_cluster_snapshot(const std::string& node, const std::string& out_dir,
                         std::chrono::seconds timeout, std::ostream& out, std::ostream& err);

} // namespace lmcc::apps
