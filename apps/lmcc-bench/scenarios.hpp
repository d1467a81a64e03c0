// scenarios: the measurements lmcc-bench can run, selected by name. Each one
// returns a report (table + JSON) whose checks decide the exit status.
//
//   ingest    applied ops/s (--ops N: equal work), CPU us/op; key count == truth
//   lookup    HTTP /lookup latency percentiles, idle and under ingest; hits checked
//   p2p       BatchedP2PLookupMsg latency, idle and under ingest; answers checked
//   fullsync  keys/s of full syncs (FullSyncStartMsg -> can_exit_freeze)
//   memory    controller RSS per entry at given entry counts (--pid)
//   restart   time from --restart-cmd until lookups answer fully again
//   flood     lookup/P2P/heartbeat latency and misses next to an unthrottled
//             ingest; RSS over time and after every worker deregistered
//   floor     generator -> built-in decoding sink: the generator's own ceiling;
//             a bare ROUTER echo: the request round-trip floor
//   heartbeats controller CPU per heartbeat of a fleet
//   soak      a steady load for hours, driven over stdin by a harness that
//             injects faults (tests/soak); at the end, every node checked
//             exactly against the workers' ground truth
//   idle      controller CPU and context switches per second while nothing is
//             sent, by thread name (--pid)
//
// Context: a scenario runs on the calling thread and starts its own threads.
#pragma once

#include "apps/lmcc-bench/bench_options.hpp"
#include "apps/lmcc-bench/report.hpp"
#include "messages/chunk_hash.hpp"

#include <zmq.hpp>

#include <string>
#include <vector>

namespace lmcc::bench {

struct scenario_env {
  const bench_options& opts;
  zmq::context_t& ctx;
  msg::chunk_hasher hasher;
};

/// The scenario names, in the order --help lists them.
const std::vector<std::string>& scenario_names();

/// Runs the named scenario; throws unreachable_error if the target is down.
report run_scenario(scenario_env& env);

report run_ingest(scenario_env& env);
report run_lookup(scenario_env& env);
report run_p2p(scenario_env& env);
report run_fullsync(scenario_env& env);
report run_memory(scenario_env& env);
report run_restart(scenario_env& env);
report run_flood(scenario_env& env);
report run_floor(scenario_env& env);
report run_heartbeats(scenario_env& env);
report run_soak(scenario_env& env);
report run_idle(scenario_env& env);

/// What the generator achieved against the built-in sink.
struct floor_result {
  double seconds = 0;
  uint64_t ops_sent = 0;
  uint64_t ops_received = 0;
  uint64_t frames = 0;
  uint64_t bytes = 0;
  uint64_t decode_errors = 0;
  uint64_t seq_gaps = 0;
  double sent_ops_per_s = 0;
  double received_ops_per_s = 0;
};

floor_result measure_floor(scenario_env& env, double duration_s);

} // namespace lmcc::bench
