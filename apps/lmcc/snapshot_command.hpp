// snapshot_command: `lmcc snapshot --node HOST:PORT --out DIR` asks a running
// node (POST /admin/snapshot) to write a consistent checkpoint of its store
// plus a verified manifest into DIR, a path on the node's host that must not
// exist yet; `lmcc node --restore-from DIR` boots from it.
//
//   lmcc snapshot --node 127.0.0.1:9000 --out /backups/n1-2026-11-30
//   -> snapshot-written dir=/backups/n1-2026-11-30 entries=1000000 workers=8 ...
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

} // namespace lmcc::apps
