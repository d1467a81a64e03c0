// workers_command: `lmcc workers`, every registered worker of the cluster:
// instance, worker id (its tensor-parallel rank), address, locations, keys
// (cluster-wide), last heartbeat, home node (where its entity lives) and
// full-sync state.
//
//   lmcc workers [--endpoints HOST:PORT[,...]] [--output table|json] [--timeout S]
//
// The directory is replicated to every node, so the first endpoint that
// answers GET /cluster/workers lists them all; only the full-sync state is
// each worker's home's to say, so the homes are asked for it (all at once).
// Exit codes (docs/client.md): 0
// listed, 2 no endpoint answered, 3 an endpoint answered but could not list
// (not an lmcc node, still loading), 4 bad --endpoints.
//
// Context: called from main() only.
#pragma once

#include "apps/lmcc/client/endpoints.hpp"

#include <ostream>

namespace lmcc::apps::client {

int run_workers(const client_options& options, std::ostream& out, std::ostream& err);

} // namespace lmcc::apps::client
