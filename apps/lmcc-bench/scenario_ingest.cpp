// ingest: how fast the controller applies KV events, and (with --pid) what
// each applied op costs it in CPU. The load is ingest_load's: exactly --ops
// ops (equal work) or --duration seconds of pushing, at --rate or as fast as
// the controller takes them; the headline is ops sent / time until the
// controller's key count equals the ground truth. The exact equality is the
// PASS/FAIL check; a seq discontinuity reported by the controller's metric
// would mean the generator numbered ops wrongly. With --nodes, per-node
// figures and the time until every replica applied the load (ingest_load).
#include "apps/lmcc-bench/cluster.hpp"
#include "apps/lmcc-bench/ingest_load.hpp"
#include "apps/lmcc-bench/scenario_support.hpp"
#include "apps/lmcc-bench/scenarios.hpp"

#include <fmt/format.h>

namespace lmcc::bench {
namespace {

constexpr std::string_view seq_metric = "lmcache:cache_controller_kv_op_seq_discontinuity_count";

} // namespace

report run_ingest(scenario_env& env) {
  const auto& o = env.opts;
  report r{"ingest"};
  r.set_config(config_json(o));
  if (o.with_floor) {
    const floor_result f = measure_floor(env, o.duration_s);
    r.add("floor_generator_ops_per_s", "floor: generator -> sink ops/s", f.sent_ops_per_s, "ops/s");
    r.check("floor run clean (all ops decoded, no seq gaps)",
            f.ops_received == f.ops_sent && f.decode_errors == 0 && f.seq_gaps == 0,
            fmt::format("{}/{} ops, {} errors, {} gaps", f.ops_received, f.ops_sent,
                        f.decode_errors, f.seq_gaps));
  }
  const process_set node{o.pids};
  controller_http api{o.http, o.key_source, o.instance_prefix, o.request_timeout_ms, o.http_access};
  api.check_reachable();
  check_other_nodes_reachable(o);
  controller_nodes nodes{o};
  cluster c{env.ctx, o};
  c.register_all();
  key_tracker keys{api, o};
  const auto seq0 = api.metric(seq_metric);

  ingest_load load{c, keys, node, o, &nodes};
  load.push();
  load.converge();
  load.post_window();
  const auto seq1 = api.metric(seq_metric);
  load.add_to(r);
  if (seq0 && seq1)
    r.check("no seq_num discontinuity reported by the controller", *seq1 == *seq0,
            fmt::format("{} -> {}", *seq0, *seq1));
  return r;
}

} // namespace lmcc::bench
