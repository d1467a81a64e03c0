// status_command: `lmcc status`, the cluster at a glance, as `etcdctl
// endpoint status --cluster` or `redis-cli --cluster check` give it.
//
//   lmcc status [--endpoints HOST:PORT[,...]] [--output table|json] [--timeout S]
//   -> NODE  HTTP            LIVE  RING      PRIMARY  REPLICA  LAG  ...
//      n1    127.0.0.1:9000  3/3   5f0c1d2e     1365     1366    0  ...
//      ...
//      cluster healthy: 3/3 members live, ring 5f0c1d2e..., 4096 slots with 2 live copies each
//
// It asks the endpoints in order for GET /cluster/status until one answers,
// learns the members' HTTP addresses from that answer, asks every other
// member itself (all at once), and judges the cluster from what each said
// (status_view.hpp). Exit codes (endpoints.hpp, docs/client.md): 0 healthy,
// 1 degraded, 2 no endpoint answered, 3 an endpoint answered but is no
// cluster node, 4 bad --endpoints.
//
// Context: called from main() only.
#pragma once

#include "apps/lmcc/client/endpoints.hpp"

#include <ostream>

namespace lmcc::apps::client {

int run_status(const client_options& options, std::ostream& out, std::ostream& err);

} // namespace lmcc::apps::client
