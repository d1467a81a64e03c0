// soak: the load of a soak run (tests/soak), for as long as a harness keeps
// it going. The workers (one per instance, TP = 1, spread over --nodes)
// admit their prompts (pinned), then push random admits at --rate ops/s in
// total until they hold --live-keys random keys, and from then on one evict
// of the oldest key per admit, so the index stays at that size. They
// heartbeat and run every full sync the cluster asks for, as LMCache workers
// do. A worker's ground truth is the range of its live keys, key(i) for lo
// <= i < hi (key_space.hpp), plus its prompts: millions of keys cost nothing
// to track, and the truth is exact whatever the faults.
//
// The harness injects worker faults over stdin (soak_control.hpp) and reads
// a JSON status line every --status-interval seconds on stdout; the prompts
// go to --corpus for its lookups. On `stop` (or the end of stdin, or
// --duration) the pushes stop and the cluster gets --settle-timeout seconds
// to equal the truth, checked exactly on every node (soak_verify.hpp) again
// and again: the time the check that found it equal began (a check of
// millions of keys takes seconds of its own), the verdict and the per-node
// figures are the last JSON line.
#include "apps/lmcc-bench/cluster.hpp"
#include "apps/lmcc-bench/controller_nodes.hpp"
#include "apps/lmcc-bench/scenario_support.hpp"
#include "apps/lmcc-bench/scenarios.hpp"
#include "apps/lmcc-bench/soak_control.hpp"
#include "apps/lmcc-bench/soak_verify.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include <fstream>
#include <thread>
#include <unistd.h>

namespace lmcc::bench {
namespace {

using namespace std::chrono_literals;

/// Between two checks of a cluster that does not equal the truth yet.
constexpr auto recheck_pause = 1s;

/// A worker that could not send for longer than this (a full sync, a node
/// down) lets those ops go rather than sending them in one burst.
constexpr double max_backlog_s = 1.0;

void write_corpus(const std::string& path, const prompt_corpus& corpus, const cluster& c,
                  const bench_options& o) {
  nlohmann::json j{{"chunk_size", o.chunk_size},
                   {"location", o.location},
                   {"instances", nlohmann::json::array()}};
  for (size_t i = 0; i < c.size(); ++i) {
    const auto& id = c[i].identity();
    nlohmann::json prompts = nlohmann::json::array();
    for (const auto& p : corpus.of_instance(id.instance_index))
      prompts.push_back({{"tokens", p.tokens}, {"keys", p.keys}});
    j["instances"].push_back({{"instance_id", id.instance_id},
                              {"worker_id", id.worker_id},
                              {"worker", i},
                              {"prompts", std::move(prompts)}});
  }
  std::ofstream out{path};
  out << j.dump() << '\n';
  if (!out)
    throw std::runtime_error("cannot write --corpus " + path);
}

nlohmann::json status_json(const cluster& c, steady::time_point t0, uint64_t cap) {
  nlohmann::json live = nlohmann::json::array();
  // The index reached its size once every worker has reached its cap (its
  // first evict); a worker that restarts later grows back to it.
  bool holding = cap > 0;
  for (size_t i = 0; i < c.size(); ++i) {
    const auto& truth = c[i].truth();
    live.push_back(truth.hi() - truth.lo());
    holding = holding && c[i].counters().evicts.load(std::memory_order_relaxed) > 0;
  }
  return {{"event", "status"},
          {"t", seconds_since(t0)},
          {"ops_sent", c.sum(&worker_counters::ops_sent)},
          {"admits", c.sum(&worker_counters::admits)},
          {"evicts", c.sum(&worker_counters::evicts)},
          {"skipped_ops", c.sum(&worker_counters::skipped_ops)},
          {"truth_keys", c.truth_total()},
          {"live_keys", live},
          {"holding", holding},
          {"full_sync_requests", c.sum(&worker_counters::full_sync_requests)},
          {"full_syncs", c.sum(&worker_counters::full_syncs)},
          {"restarts", c.sum(&worker_counters::restarts)},
          {"stream_faults", c.sum(&worker_counters::stream_faults)},
          {"send_stalls", c.sum(&worker_counters::send_stalls)},
          {"heartbeat_failures", c.sum(&worker_counters::heartbeat_failures)}};
}

/// The full syncs the workers finished since the last call, one JSON line
/// each: a harness excuses lookups of a syncing instance (FullSyncStartMsg
/// clears its location until the sync completes).
void emit_new_syncs(const cluster& c, std::vector<size_t>& seen) {
  seen.resize(c.size(), 0);
  for (size_t i = 0; i < c.size(); ++i) {
    const auto results = c[i].full_sync_results();
    for (size_t k = seen[i]; k < results.size(); ++k) {
      const auto& s = results[k];
      emit_json_line(nlohmann::json{
          {"event", "sync"},
          {"worker", i},
          {"start", s.started_s},
          {"end", s.started_s + s.elapsed_s},
          {"complete", s.complete},
          {"reason", s.reason},
          {"keys", s.keys},
          {"error",
           s.error}}.dump());
    }
    seen[i] = results.size();
  }
}

/// Hands one command to its worker; false when it names no worker.
bool dispatch(const soak_command& cmd, cluster& c) {
  if (cmd.worker >= c.size())
    return false;
  switch (cmd.what) {
  case soak_command::kind::restart:
    c[cmd.worker].request_restart();
    return true;
  case soak_command::kind::dup:
    c[cmd.worker].inject(
        stream_fault{.what = stream_fault::kind::duplicate, .multiparts = cmd.count, .order = {}});
    return true;
  case soak_command::kind::reorder:
    c[cmd.worker].inject(
        stream_fault{.what = stream_fault::kind::reorder, .multiparts = 0, .order = cmd.order});
    return true;
  default:
    return false;
  }
}

} // namespace

report run_soak(scenario_env& env) {
  bench_options o = env.opts;
  if (o.nodes.empty())
    throw std::invalid_argument("soak needs the cluster's --nodes");
  if (o.tp != 1) // soak_verify counts keys as entries: one holder per key
    throw std::invalid_argument("soak runs TP = 1 workers (--tp 1)");
  if (o.heartbeat_interval_s <= 0)
    o.heartbeat_interval_s = 1; // the cluster asks for full syncs in heartbeat replies
  o.full_sync_on_request = true;
  // A sync that never completes must not freeze its worker for the rest of
  // an hours-long run (nor hold the drivers' stop at the end).
  if (o.full_sync_timeout_s <= 0)
    o.full_sync_timeout_s = o.settle_timeout_s;
  o.keep_registered = true; // the harness stops the cluster; no 10^6-key drop at the end
  report r{"soak"};
  r.set_config(config_json(o));
  controller_http api{o.http, o.key_source, o.instance_prefix, o.request_timeout_ms, o.http_access};
  api.check_reachable();
  check_other_nodes_reachable(o);
  controller_nodes nodes{o};
  cluster c{env.ctx, o};
  c.register_all();
  const prompt_corpus corpus{o.seed, o.workers, o.prompts, o.prompt_chunks, env.hasher};
  c.admit_prompts(corpus, steady::now() + seconds_to_duration(o.settle_timeout_s));
  if (!o.corpus_path.empty())
    write_corpus(o.corpus_path, corpus, c, o);
  soak_control control{STDIN_FILENO};

  const uint64_t cap = o.live_keys == 0 ? 0 : (o.live_keys + c.size() - 1) / c.size();
  const double per_worker = o.rate / static_cast<double>(c.size());
  const auto t0 = steady::now();
  const auto deadline = t0 + seconds_to_duration(o.duration_s);
  emit_json_line(nlohmann::json{
      {"event", "ready"},
      {"workers", c.size()},
      {"copies", nodes.copies()},
      {"live_keys_per_worker",
       cap}}.dump());
  auto drivers = c.start_all([&](simulated_worker& w, std::stop_token stop) {
    (void)w.push_random(push_limits{.deadline = deadline,
                                    .ops_per_s = per_worker,
                                    .max_ops = 0,
                                    .stop = std::move(stop),
                                    .live_cap = cap,
                                    .max_backlog_s = max_backlog_s});
  });
  const auto interval = seconds_to_duration(o.status_interval_s);
  auto next_status = t0;
  bool stopping = false;
  std::vector<size_t> syncs_seen;
  while (!stopping && steady::now() < deadline) {
    if (steady::now() >= next_status) {
      emit_new_syncs(c, syncs_seen);
      emit_json_line(status_json(c, t0, cap).dump());
      next_status += interval;
    }
    const auto cmd = control.next(50ms);
    if (!cmd)
      continue;
    if (cmd->what == soak_command::kind::stop) {
      stopping = true;
    } else if (cmd->what == soak_command::kind::status) {
      emit_json_line(status_json(c, t0, cap).dump());
    } else {
      const bool ok = dispatch(*cmd, c);
      emit_json_line(nlohmann::json{{"event", "ack"}, {"worker", cmd->worker}, {"ok", ok}}.dump());
    }
  }
  drivers.stop(); // rethrows what a worker's driver threw
  emit_new_syncs(c, syncs_seen);
  auto stopped = status_json(c, t0, cap);
  stopped["event"] = "stopped";
  emit_json_line(stopped.dump());

  // The cluster now gets --settle-timeout to equal the truth; the workers keep
  // heartbeating and run the full syncs it asks for meanwhile.
  const auto check_start = steady::now();
  auto serving = c.start_all([&](simulated_worker& w, std::stop_token stop) {
    w.serve_full_sync_requests(
        push_limits{.deadline = check_start + seconds_to_duration(o.settle_timeout_s) + 60s,
                    .stop = std::move(stop)});
  });
  soak_verifier verifier{env.ctx, o, c, nodes.copies()};
  soak_verdict v;
  std::optional<double> converged_s; // the start of the check that found it equal
  double check_s = 0;                // how long that check took
  while (true) {
    const double begun = seconds_since(check_start);
    v = verifier.check(false);
    if (v.exact) {
      converged_s = begun;
      check_s = seconds_since(check_start) - begun;
      break;
    }
    if (seconds_since(check_start) > o.settle_timeout_s)
      break;
    emit_json_line(nlohmann::json{
        {"event", "converging"}, {"t", seconds_since(check_start)}, {"detail", v.detail}}
                       .dump());
    std::this_thread::sleep_for(recheck_pause);
  }
  if (!v.exact)
    v = verifier.check(true); // count every key that is missing, on every node
  serving.stop();
  emit_new_syncs(c, syncs_seen);

  auto end = status_json(c, t0, cap);
  end["event"] = "verdict";
  end["verdict"] = v.to_json();
  end["converged_s"] = converged_s ? nlohmann::json(*converged_s) : nlohmann::json(nullptr);
  end["check_s"] = check_s;
  emit_json_line(end.dump());

  r.add("soak_seconds", "load pushed for", seconds_since(t0) - seconds_since(check_start), "s");
  r.add("ops_sent", "ops sent", static_cast<double>(c.sum(&worker_counters::ops_sent)), "ops");
  r.add("truth_keys", "keys the workers hold at the end", static_cast<double>(v.truth_keys),
        "keys");
  r.add("full_syncs", "full syncs run", static_cast<double>(c.sum(&worker_counters::full_syncs)),
        "syncs");
  if (converged_s) {
    r.add("converged_s", "every node found equal to the truth by a check begun after", *converged_s,
          "s");
    r.add("check_s", "that check took", check_s, "s");
  }
  r.check(fmt::format("every node's copies equal the workers' ground truth within {:g} s",
                      o.settle_timeout_s),
          v.exact, v.exact ? fmt::format("{} keys, x{} copies", v.truth_keys, v.copies) : v.detail);
  r.extra()["verdict"] = v.to_json();
  return r;
}

} // namespace lmcc::bench
