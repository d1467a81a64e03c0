// memory: the controller's resident memory per index entry. The controller
// must run on this host (--pid, read from /proc/<pid>/status VmRSS, summed
// over several pids). The workers admit unique random keys (no evictions)
// until the sum of their sets reaches each --entries step; once the
// controller's key count equals it, the RSS is read and compared with the RSS
// right after registration, and the controller's CPU per entry loaded is
// reported. An entry is one (worker, key) pair: with --tp N each key is held
// by N workers. With --nodes (the pids found through GET /threads, or --pid
// one per node), each step also gives every node's RSS, primary entries and
// held keys (R copies' worth over the nodes) and their ratios.
#include "apps/lmcc-bench/cluster.hpp"
#include "apps/lmcc-bench/controller_nodes.hpp"
#include "apps/lmcc-bench/proc_stats.hpp"
#include "apps/lmcc-bench/scenario_support.hpp"
#include "apps/lmcc-bench/scenarios.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <thread>

namespace lmcc::bench {
namespace {

using namespace std::chrono_literals;

/// Lets the controller's allocator and background threads settle first.
constexpr auto rss_settle = 500ms;

/// The controller's RSS; a process that has gone ends the scenario.
uint64_t rss_now(const process_set& node) {
  auto kib = node.rss_kib();
  if (!kib)
    throw std::runtime_error("the controller process is gone (cannot read /proc/<pid>/status)");
  return *kib;
}

} // namespace

report run_memory(scenario_env& env) {
  if (env.opts.pids.empty())
    throw std::invalid_argument("memory needs --pid <controller pid> (the controller must run "
                                "on this host)");
  // Admits only: an entry count is only reached exactly without evictions.
  bench_options o = env.opts;
  o.evict_ratio = 0;
  const process_set node{o.pids};
  report r{"memory"};
  r.set_config(config_json(o));
  controller_http api{o.http, o.key_source, o.instance_prefix, o.request_timeout_ms, o.http_access};
  api.check_reachable();
  check_other_nodes_reachable(o);
  controller_nodes nodes{o};
  cluster c{env.ctx, o};
  c.register_all();
  key_tracker keys{api, o};
  std::this_thread::sleep_for(rss_settle);
  const uint64_t rss0 = rss_now(node);
  r.add("rss_start_mib", "controller RSS after registration", kib_to_mib(rss0), "MiB");
  const auto nodes0 = nodes.read();

  std::vector<uint64_t> steps = o.entries;
  std::sort(steps.begin(), steps.end());
  nlohmann::json series = nlohmann::json::array();
  const double per_worker_rate = o.rate > 0 ? o.rate / static_cast<double>(c.size()) : 0;
  for (uint64_t target : steps) {
    const uint64_t have = c.truth_total();
    if (target <= have)
      continue;
    const uint64_t need = target - have;
    const auto t0 = steady::now();
    const auto deadline = t0 + seconds_to_duration(o.duration_s);
    std::vector<uint64_t> quota(c.size(), need / c.size());
    for (size_t i = 0; i < need % c.size(); ++i)
      ++quota[i];
    const auto cpu0 = node.cpu_seconds();
    auto loaders = c.start_all([&](simulated_worker& w, std::stop_token stop) {
      const size_t i = c.index_of(w);
      (void)w.push_random(push_limits{.deadline = deadline,
                                      .ops_per_s = per_worker_rate,
                                      .max_ops = quota[i],
                                      .stop = std::move(stop)});
    });
    progress_clock progress;
    while (c.truth_total() < target && steady::now() < deadline) {
      std::this_thread::sleep_for(50ms);
      if (progress.due())
        spdlog::info("memory: loading {} of {} entries ({:.0f} ops/s)", c.truth_total(), target,
                     static_cast<double>(c.truth_total() - have) / seconds_since(t0));
    }
    loaders.stop();
    const double push_s = seconds_since(t0);
    const convergence conv = wait_for_truth(keys, c, o.settle_timeout_s, t0);
    const auto cpu1 = node.cpu_seconds();
    std::this_thread::sleep_for(rss_settle);
    const uint64_t rss = rss_now(node);
    const double per_entry = (static_cast<double>(rss) - static_cast<double>(rss0)) * 1024.0 /
                             static_cast<double>(conv.truth);
    const std::string id = fmt::format("e{}", target);
    r.add(id + "_entries", fmt::format("{} entries: entries loaded", target),
          static_cast<double>(conv.truth), "entries");
    r.add(id + "_load_ops_per_s", fmt::format("{} entries: load rate", target),
          static_cast<double>(need) / std::max(push_s, conv.seconds), "ops/s");
    r.add(id + "_rss_mib", fmt::format("{} entries: controller RSS", target), kib_to_mib(rss),
          "MiB");
    r.add(id + "_bytes_per_entry", fmt::format("{} entries: RSS growth per entry", target),
          per_entry, "B");
    if (cpu0 && cpu1 && conv.reached)
      r.add(id + "_cpu_us_per_entry",
            fmt::format("{} entries: controller CPU per entry loaded", target),
            (*cpu1 - *cpu0) * 1e6 / static_cast<double>(need), "us");
    r.check(fmt::format("{} entries loaded and counted by the controller", target),
            conv.reached && conv.truth == target,
            fmt::format("truth {} controller {} (push bound: --duration {:g} s)", conv.truth,
                        conv.count, o.duration_s));
    nodes.add_to(r, id, fmt::format("{} entries", target), nodes.read(), &nodes0, conv.truth);
    series.push_back({{"entries", conv.truth}, {"rss_kib", rss}, {"bytes_per_entry", per_entry}});
    spdlog::info("memory: {} entries, RSS {:.1f} MiB, {:.1f} B/entry", conv.truth, kib_to_mib(rss),
                 per_entry);
    if (!conv.reached)
      break;
  }
  r.extra()["steps"] = std::move(series);
  c.deregister_all();
  // Deregistration frees the entries; show how much the controller gives back.
  const auto drop_deadline = steady::now() + seconds_to_duration(o.settle_timeout_s);
  while (steady::now() < drop_deadline) {
    auto count = keys.count();
    if (count && *count == 0)
      break;
    std::this_thread::sleep_for(50ms);
  }
  std::this_thread::sleep_for(rss_settle);
  r.add("rss_after_deregister_mib", "controller RSS after DeRegisterMsg", kib_to_mib(rss_now(node)),
        "MiB");
  return r;
}

} // namespace lmcc::bench
