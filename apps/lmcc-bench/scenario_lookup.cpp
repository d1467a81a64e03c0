// lookup and p2p: latency percentiles of the two lookup paths, with every
// answer checked against the ground truth.
//
// Setup: each instance admits --prompts prompts of --prompt-chunks full
// chunks (all its ranks), and the run waits until the controller's key count
// equals the ground truth. Then each phase sends queries from --clients
// clients: a random prompt's first 0..C chunks plus a fresh tail, so
// that the expected answer is known. Phase "idle" has no other traffic and
// sends --requests queries (bounded by --duration); phase "loaded" runs for
// the whole --duration, as many queries as the clients manage, while the
// workers ingest --ingest-fraction x --peak-ops random ops/s, so that every
// query of it is measured under load and the load is not cut short.
// With --nodes, client i asks node pick_node(lookup or p2p, i) (i mod N by
// default), the percentiles are also given per node (through which node the
// query went), and each node's RSS and entries after the setup and at the end.
// --clients below the node count leaves nodes without queries (a warning).
#include "apps/lmcc-bench/cluster.hpp"
#include "apps/lmcc-bench/controller_nodes.hpp"
#include "apps/lmcc-bench/lookup_clients.hpp"
#include "apps/lmcc-bench/scenario_support.hpp"
#include "apps/lmcc-bench/scenarios.hpp"
#include "apps/lmcc-bench/stats.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <limits>
#include <mutex>
#include <thread>

namespace lmcc::bench {
namespace {

enum class lookup_kind { http, p2p };

struct phase_result {
  std::string name;
  std::vector<double> latencies_us;
  uint64_t requests = 0;
  uint64_t answered = 0;
  uint64_t correct = 0;
  uint64_t during_sync = 0;       ///< overlapped a full sync of the owner: not checked
  uint64_t during_sync_wrong = 0; ///< of those, answers that missed keys
  uint64_t tp_exact = 0;
  uint64_t expected_hits = 0; ///< queries with held_chunks > 0
  double seconds = 0;
  double background_ops_per_s = 0;
  std::vector<std::string> problems; ///< the first few wrong answers or errors
  /// With --nodes: the latencies of the queries sent through each node.
  std::vector<std::vector<double>> node_latencies_us;
};

struct phase_setup {
  scenario_env* env;
  lookup_kind kind;
  cluster* c;
  const prompt_corpus* corpus;
  std::vector<instance_info> infos;
};

/// What the clients of one phase share.
struct phase_shared {
  std::mutex mutex; // guards result
  phase_result result;
  std::atomic<uint64_t> requests_done{0};
  std::atomic<uint32_t> clients_done{0};
};

void run_client(const phase_setup& s, uint32_t client, uint64_t requests,
                steady::time_point deadline, uint64_t stream, phase_shared& shared) {
  const auto& o = s.env->opts;
  auto rng = make_rng(o.seed, stream);
  std::uniform_int_distribution<int64_t> rank{0, static_cast<int64_t>(o.tp) - 1};
  std::optional<controller_http> api;
  std::optional<p2p_client> p2p;
  const node_role role = s.kind == lookup_kind::http ? node_role::lookup : node_role::p2p;
  const size_t node = pick_node_index(o, role, client);
  if (s.kind == lookup_kind::http)
    api.emplace(pick_node(o, role, client).http, o.key_source, o.instance_prefix,
                o.request_timeout_ms, o.http_access);
  else
    p2p.emplace(s.env->ctx, pick_node(o, role, client).reply.tcp(), o.request_timeout_ms,
                fmt::format("bench-p2p-client-{}", client));
  phase_result local;
  for (uint64_t i = 0; i < requests && steady::now() < deadline; ++i) {
    const lookup_query q = make_query(*s.corpus, rng, o.chunk_size, s.env->hasher);
    const auto& owner = s.infos[q.instance];
    const uint64_t epoch = s.c->sync_epoch(q.instance);
    const bool syncing_before = s.c->syncing(q.instance);
    lookup_verdict v = api ? http_lookup(*api, q, owner, o.location)
                           : p2p->lookup(q, rank(rng), owner, o.location);
    const bool overlapped = v.answered && (syncing_before || s.c->sync_epoch(q.instance) != epoch);
    if (overlapped) {
      ++local.during_sync;
      local.during_sync_wrong += v.correct ? 0 : 1;
      v.correct = true; // the controller may rightly have cleared the location
    }
    ++local.requests;
    local.expected_hits += q.held_chunks > 0 ? 1 : 0;
    local.latencies_us.push_back(v.latency_us);
    local.answered += v.answered ? 1 : 0;
    local.correct += v.correct ? 1 : 0;
    local.tp_exact += !overlapped && v.correct && v.tp_exact && q.held_chunks > 0 ? 1 : 0;
    if ((!v.answered || !v.correct) && local.problems.size() < 5)
      local.problems.push_back(v.detail);
    ++shared.requests_done;
  }
  std::lock_guard lock{shared.mutex};
  auto& out = shared.result;
  out.requests += local.requests;
  out.answered += local.answered;
  out.correct += local.correct;
  out.during_sync += local.during_sync;
  out.during_sync_wrong += local.during_sync_wrong;
  out.tp_exact += local.tp_exact;
  out.expected_hits += local.expected_hits;
  out.latencies_us.insert(out.latencies_us.end(), local.latencies_us.begin(),
                          local.latencies_us.end());
  if (node < out.node_latencies_us.size())
    out.node_latencies_us[node].insert(out.node_latencies_us[node].end(),
                                       local.latencies_us.begin(), local.latencies_us.end());
  for (auto& p : local.problems)
    if (out.problems.size() < 5)
      out.problems.push_back(std::move(p));
  ++shared.clients_done;
}

phase_result run_phase(const phase_setup& s, const std::string& name, uint64_t stream_base,
                       double background_ops_per_s) {
  const auto& o = s.env->opts;
  const auto t0 = steady::now();
  const auto deadline = t0 + seconds_to_duration(o.duration_s);
  cluster::running background;
  const uint64_t ops_before = s.c->sum(&worker_counters::ops_sent);
  if (background_ops_per_s > 0) {
    const double per_worker = background_ops_per_s / static_cast<double>(s.c->size());
    background = s.c->start_all([deadline, per_worker](simulated_worker& w, std::stop_token stop) {
      (void)w.push_random(
          push_limits{.deadline = deadline, .ops_per_s = per_worker, .stop = std::move(stop)});
    });
  } else {
    // Idle workers still run the full syncs their heartbeats may ask for.
    background = s.c->start_all([deadline](simulated_worker& w, std::stop_token stop) {
      w.serve_full_sync_requests(push_limits{.deadline = deadline, .stop = std::move(stop)});
    });
  }
  phase_shared shared;
  shared.result.node_latencies_us.resize(o.nodes.size());
  {
    std::vector<std::jthread> clients;
    const uint32_t n = std::max<uint32_t>(1, o.clients);
    const bool loaded = background_ops_per_s > 0;
    for (uint32_t i = 0; i < n; ++i) {
      // Under load: until the deadline, whatever the count.
      const uint64_t share = loaded ? std::numeric_limits<uint64_t>::max()
                                    : o.requests / n + (i < o.requests % n ? 1 : 0);
      clients.emplace_back([&, i, share] {
        try {
          run_client(s, i, share, deadline, stream_base + i, shared);
        } catch (const std::exception& e) {
          std::lock_guard lock{shared.mutex};
          shared.result.problems.push_back(fmt::format("client {} failed: {}", i, e.what()));
          ++shared.clients_done;
        }
      });
    }
    progress_clock progress;
    // Clients end by themselves (count, deadline, request timeouts); the bound
    // here only keeps this loop finite if one of them cannot.
    const auto give_up = deadline + std::chrono::milliseconds(2 * o.request_timeout_ms);
    while (shared.clients_done.load() < n && steady::now() < give_up) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      if (progress.due())
        spdlog::info("{} {}: t={:.1f}s {} requests done{}",
                     s.kind == lookup_kind::http ? "lookup" : "p2p", name, seconds_since(t0),
                     shared.requests_done.load(),
                     loaded ? fmt::format(" (until {:g} s)", o.duration_s)
                            : fmt::format(" of {}", o.requests));
    }
  } // every client is bounded by its count, the deadline and its request timeouts
  phase_result result = std::move(shared.result);
  result.name = name;
  result.seconds = seconds_since(t0);
  background.stop();
  if (background_ops_per_s > 0)
    result.background_ops_per_s =
        static_cast<double>(s.c->sum(&worker_counters::ops_sent) - ops_before) / result.seconds;
  return result;
}

void report_phase(report& r, const phase_result& p, lookup_kind kind,
                  const controller_nodes& nodes) {
  const auto lat = summarize(p.latencies_us);
  const std::string& n = p.name;
  r.add(n + "_requests", n + ": requests", static_cast<double>(p.requests), "req");
  r.add(n + "_req_per_s", n + ": throughput", static_cast<double>(p.requests) / p.seconds, "req/s");
  if (p.background_ops_per_s > 0)
    r.add(n + "_background_ops_per_s", n + ": background ingest", p.background_ops_per_s, "ops/s");
  r.add(n + "_p50_us", n + ": p50", lat.p50, "us");
  r.add(n + "_p90_us", n + ": p90", lat.p90, "us");
  r.add(n + "_p99_us", n + ": p99", lat.p99, "us");
  r.add(n + "_p999_us", n + ": p99.9", lat.p999, "us");
  r.add(n + "_max_us", n + ": max", lat.max, "us");
  r.add(n + "_mean_us", n + ": mean", lat.mean, "us");
  r.add(n + "_correct", n + ": answers matching the ground truth", static_cast<double>(p.correct),
        "req");
  r.add(n + "_expected_hits", n + ": queries expecting a hit (>= 1 chunk held)",
        static_cast<double>(p.expected_hits), "req");
  if (p.during_sync > 0) {
    r.add(n + "_during_sync", n + ": answers overlapping a full sync of the owner (unchecked)",
          static_cast<double>(p.during_sync), "req");
    r.add(n + "_during_sync_short", n + ":   of which missed keys (location being resent)",
          static_cast<double>(p.during_sync_wrong), "req");
  }
  if (kind == lookup_kind::p2p)
    r.add(n + "_tp_exact", n + ": hits naming the asker's own rank",
          static_cast<double>(p.tp_exact), "req");
  for (size_t i = 0; i < p.node_latencies_us.size() && i < nodes.size(); ++i) {
    const auto& lat_i = p.node_latencies_us[i];
    const std::string id = n + "_" + nodes.name(i);
    const std::string label = n + " via " + nodes.name(i);
    r.add(id + "_requests", label + ": requests", static_cast<double>(lat_i.size()), "req");
    if (lat_i.empty())
      continue;
    const auto sum_i = summarize(lat_i);
    r.add(id + "_p50_us", label + ": p50", sum_i.p50, "us");
    r.add(id + "_p99_us", label + ": p99", sum_i.p99, "us");
  }
  std::string problems;
  for (const auto& s : p.problems)
    problems += (problems.empty() ? "" : "; ") + s;
  r.check(fmt::format("{}: every request answered", n), p.answered == p.requests && p.requests > 0,
          fmt::format("{} of {}{}", p.answered, p.requests,
                      p.answered == p.requests ? "" : ": " + problems));
  r.check(fmt::format("{}: every answer matches the ground truth", n), p.correct == p.answered,
          fmt::format("{} of {}{}", p.correct, p.answered,
                      p.correct == p.answered ? "" : ": " + problems));
}

report run_lookup_kind(scenario_env& env, lookup_kind kind) {
  const auto& o = env.opts;
  report r{kind == lookup_kind::http ? "lookup" : "p2p"};
  r.set_config(config_json(o));
  controller_http api{o.http, o.key_source, o.instance_prefix, o.request_timeout_ms, o.http_access};
  api.check_reachable();
  check_other_nodes_reachable(o);
  controller_nodes nodes{o};
  if (!nodes.empty() && o.clients < nodes.size())
    spdlog::warn("--clients {} < {} --nodes: some nodes get no queries", o.clients, nodes.size());
  cluster c{env.ctx, o};
  c.register_all();
  key_tracker keys{api, o};
  const auto nodes_registered = nodes.read();
  const prompt_corpus corpus{o.seed, o.workers, o.prompts, o.prompt_chunks, env.hasher};
  const auto t0 = steady::now();
  c.admit_prompts(corpus, t0 + seconds_to_duration(o.settle_timeout_s));
  const convergence setup = wait_for_truth(keys, c, o.settle_timeout_s, t0);
  r.add("prompt_keys", "prompt chunk keys admitted (all ranks)", static_cast<double>(setup.truth),
        "keys");
  r.add("setup_seconds", "time until the controller held them", setup.seconds, "s");
  r.check("setup: controller key count equals the ground truth", setup.reached,
          fmt::format("controller {} vs truth {}", setup.count, setup.truth));
  if (!setup.reached)
    return r;
  const auto nodes_setup = nodes.read();
  if (!nodes.empty())
    r.note("controller_processes", "controller processes", nodes.processes_text());
  nodes.add_to(r, "setup", "after setup", nodes_setup, &nodes_registered, 0);

  const phase_setup s{&env, kind, &c, &corpus, c.instance_infos()};
  report_phase(r, run_phase(s, "idle", 1000, 0), kind, nodes);
  const double background = o.ingest_fraction * o.peak_ops;
  if (background > 0) {
    report_phase(r, run_phase(s, "loaded", 2000, background), kind, nodes);
    const convergence after = wait_for_truth(keys, c, o.settle_timeout_s, steady::now());
    check_key_count(r, after, keys);
    nodes.add_to(r, "end", "after the phases", nodes.read(), &nodes_setup, 0);
  }
  return r;
}

} // namespace

report run_lookup(scenario_env& env) {
  return run_lookup_kind(env, lookup_kind::http);
}

report run_p2p(scenario_env& env) {
  return run_lookup_kind(env, lookup_kind::p2p);
}

} // namespace lmcc::bench
