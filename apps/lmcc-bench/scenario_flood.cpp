// flood: what a flood of KV events does to everything else the controller
// serves. Setup as in lookup (prompts admitted, count == truth). Then an
// unthrottled ingest (ingest_load: --ops or --duration, --rate if given) runs
// while flood_probes send /lookup, BatchedP2PLookupMsg and HeartbeatMsg at a
// modest fixed rate, each on its own connection with --probe-timeout-ms; the
// probes keep going until the controller has applied the whole load (its
// backlog included). With --pid, the RSS is sampled every 0.5 s. After the
// post window every worker deregisters (--keep-registered does not apply:
// the RSS after deregistration is part of the measurement); the run waits
// (--settle-timeout) for the controller's count of the bench's keys to reach
// 0 and reports the RSS then and --rss-settle seconds later. The target it
// checks: the RSS falls back to at most 2 x the idle RSS + 64 MiB. Against one
// node, each RSS sample also reads lmcc_index_memory_bytes (the index's tables)
// and the report gives the largest RSS beyond it from the push's start until
// the load is applied (meant to stay within the index + 256 MiB), a figure
// and not a check, as the probes' latencies are.
#include "apps/lmcc-bench/cluster.hpp"
#include "apps/lmcc-bench/controller_http.hpp"
#include "apps/lmcc-bench/flood_probes.hpp"
#include "apps/lmcc-bench/ingest_load.hpp"
#include "apps/lmcc-bench/scenario_support.hpp"
#include "apps/lmcc-bench/scenarios.hpp"
#include "apps/lmcc-bench/stats.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <array>
#include <memory>
#include <thread>

namespace lmcc::bench {
namespace {

using namespace std::chrono_literals;

constexpr auto rss_interval = 500ms;
constexpr uint64_t rss_allowance_kib = 64 * 1024;
constexpr double rss_over_index_target_mib = 256;

/// Reads lmcc_index_memory_bytes on the RSS monitor's thread, through a client
/// of its own (the scenario's clients belong to the scenario's thread).
rss_monitor::index_reader index_memory_reader(const bench_options& o) {
  auto api = std::make_shared<controller_http>(o.http, o.key_source, o.instance_prefix,
                                               o.request_timeout_ms);
  return [api] { return api->metric("lmcc_index_memory_bytes"); };
}

/// Waits until the controller counts none of the bench's keys; the seconds
/// it took, or nullopt if not within `timeout_s`.
std::optional<double> wait_for_zero_keys(key_tracker& keys, double timeout_s) {
  const auto t0 = steady::now();
  const auto deadline = t0 + seconds_to_duration(timeout_s);
  while (steady::now() < deadline) {
    auto count = keys.count();
    if (count && *count == 0)
      return seconds_since(t0);
    std::this_thread::sleep_for(50ms);
  }
  return std::nullopt;
}

/// The node's own request timings (lmcc_request_duration_seconds, one
/// series per probed operation), read before and after the probes, so the
/// report can tell what the node spent from what the probe saw (the rest is
/// the sockets and the threads of a box the generator shares).
struct node_request_timings {
  static constexpr std::array<std::pair<const char*, const char*>, 3> series = {{
      {"lookup", "http /lookup"},
      {"p2p", "BatchedP2PLookupMsg"},
      {"heartbeat", "HeartbeatMsg"},
  }};
  using buckets = std::vector<std::pair<double, double>>;
  std::array<buckets, series.size()> before, after;

  static void read(controller_http& api, std::array<buckets, series.size()>& into) {
    auto body = api.get("/metrics");
    if (!body || body->status != 200)
      return;
    for (size_t i = 0; i < series.size(); ++i)
      into[i] =
          histogram_buckets(body->body, "lmcc_request_duration_seconds", "op", series[i].second);
  }

  void add_to(report& r) const {
    for (size_t i = 0; i < series.size(); ++i) {
      const std::string n = series[i].first;
      const auto p50 = bucket_quantile(before[i], after[i], 0.50);
      const auto p99 = bucket_quantile(before[i], after[i], 0.99);
      if (!p50 || !p99)
        continue; // not lmcc, or nothing counted
      r.add(n + "_node_p50_le_ms", n + ": node's own time, p50 at most", *p50 * 1e3, "ms");
      r.add(n + "_node_p99_le_ms", n + ": node's own time, p99 at most", *p99 * 1e3, "ms");
    }
  }
};

} // namespace

report run_flood(scenario_env& env) {
  const auto& o = env.opts;
  report r{"flood"};
  r.set_config(config_json(o));
  const process_set node{o.pids};
  controller_http api{o.http, o.key_source, o.instance_prefix, o.request_timeout_ms, o.http_access};
  api.check_reachable();
  check_other_nodes_reachable(o);
  controller_nodes nodes{o};
  cluster c{env.ctx, o};
  c.register_all();
  key_tracker keys{api, o};
  const prompt_corpus corpus{o.seed, o.workers, o.prompts, o.prompt_chunks, env.hasher};
  const auto setup_t0 = steady::now();
  c.admit_prompts(corpus, setup_t0 + seconds_to_duration(o.settle_timeout_s));
  const convergence setup = wait_for_truth(keys, c, o.settle_timeout_s, setup_t0);
  r.check("setup: controller key count equals the ground truth", setup.reached,
          fmt::format("controller {} vs truth {}", setup.count, setup.truth));
  if (!setup.reached)
    return r;

  std::optional<rss_monitor> rss;
  nlohmann::json marks; // seconds on the RSS series' clock
  auto mark = [&](const char* name) {
    if (rss)
      marks[name] = std::round(rss->now() * 1000) / 1000;
  };
  const auto idle_rss = node.rss_kib();
  // A cluster's nodes each have their own index: the bound is one node's.
  if (!node.empty())
    rss.emplace(node, rss_interval,
                nodes.empty() ? index_memory_reader(o) : rss_monitor::index_reader{});

  ingest_load load{c, keys, node, o, &nodes};
  flood_probes probes{env, corpus, c.instance_infos(), c[0]};
  // One node only: a cluster's probes reach several nodes' series.
  node_request_timings timings;
  if (nodes.empty())
    node_request_timings::read(api, timings.before);
  const double push_start_s = rss ? rss->now() : 0;
  mark("push_start");
  load.push();
  mark("push_end");
  const auto rss_push_end = node.rss_kib();
  load.converge();
  mark("converged");
  const double converged_s = rss ? rss->now() : 0;
  const auto rss_converged = node.rss_kib();
  probes.stop();
  if (nodes.empty())
    node_request_timings::read(api, timings.after);
  load.post_window();

  spdlog::info("flood: every worker deregisters");
  mark("deregister");
  c.deregister_all();
  const auto zero_after = wait_for_zero_keys(keys, o.settle_timeout_s);
  mark("zero_keys");
  const auto rss_deregistered = node.rss_kib();
  if (rss && o.rss_settle_s > 0) {
    spdlog::info("flood: {:g} s for the RSS to settle", o.rss_settle_s);
    std::this_thread::sleep_for(seconds_to_duration(o.rss_settle_s));
  }
  const auto rss_settled = node.rss_kib();
  mark("end");
  if (rss)
    rss->stop();

  load.add_to(r);
  probes.add_to(r);
  timings.add_to(r);
  r.check("every worker's keys gone after DeRegisterMsg", zero_after.has_value(),
          zero_after ? fmt::format("count 0 after {:.2f} s", *zero_after)
                     : fmt::format("count not 0 within {:g} s", o.settle_timeout_s));
  if (rss && idle_rss && rss_settled) {
    const uint64_t peak = std::max({rss->peak_kib(), rss_push_end.value_or(0),
                                    rss_converged.value_or(0), rss_deregistered.value_or(0)});
    r.add("rss_idle_mib", "controller RSS before the flood", kib_to_mib(*idle_rss), "MiB");
    r.add("rss_peak_mib", "controller RSS peak", kib_to_mib(peak), "MiB");
    if (rss_push_end)
      r.add("rss_push_end_mib", "controller RSS when the push ended", kib_to_mib(*rss_push_end),
            "MiB");
    if (rss_converged)
      r.add("rss_converged_mib", "controller RSS after convergence", kib_to_mib(*rss_converged),
            "MiB");
    if (rss_deregistered)
      r.add("rss_deregistered_mib", "controller RSS once the keys were gone",
            kib_to_mib(*rss_deregistered), "MiB");
    r.add("rss_settled_mib", fmt::format("controller RSS {:g} s later", o.rss_settle_s),
          kib_to_mib(*rss_settled), "MiB");
    if (auto over = rss->peak_over_index_kib(push_start_s, converged_s)) {
      r.add("rss_over_index_peak_mib",
            "largest RSS beyond lmcc_index_memory_bytes, push start to applied", kib_to_mib(*over),
            "MiB");
      spdlog::info("flood: RSS beyond the index peaked at {:.1f} MiB (target <= {:g} MiB)",
                   kib_to_mib(*over), rss_over_index_target_mib);
    }
    const uint64_t limit = 2 * *idle_rss + rss_allowance_kib;
    r.check(
        "RSS falls back to <= 2 x idle + 64 MiB after deregistration", *rss_settled <= limit,
        fmt::format("{:.1f} MiB vs limit {:.1f} MiB", kib_to_mib(*rss_settled), kib_to_mib(limit)));
    r.extra()["rss"] = {{"columns", rss->series_columns()},
                        {"rows", rss->series_json()},
                        {"marks", std::move(marks)}};
  }
  return r;
}

} // namespace lmcc::bench
