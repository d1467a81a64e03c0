// fullsync: keys/s of full syncs (spec 4.8-4.9). Every worker holds
// --keys K keys the controller has never seen, then resends them all:
// FullSyncStartMsg (DEALER), K/2000 FullSyncBatchMsgs + FullSyncEndMsg (PUSH),
// FullSyncStatusMsg polls every --poll-ms until this sync is complete and
// can_exit_freeze. The time per worker runs from FullSyncStartMsg to that
// point; the aggregate rate is all keys over the span from the first start to
// the last finish. With heartbeats on and --full-sync-on-request, each worker
// waits (up to --duration) for the controller to ask, as after a controller
// restart; otherwise, or if the controller never asks, it starts by itself.
// Afterwards the controller's key count must equal the ground truth.
#include "apps/lmcc-bench/cluster.hpp"
#include "apps/lmcc-bench/scenario_support.hpp"
#include "apps/lmcc-bench/scenarios.hpp"
#include "apps/lmcc-bench/stats.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <map>
#include <thread>

namespace lmcc::bench {
namespace {

using namespace std::chrono_literals;

struct timed_sync {
  full_sync_result result;
  steady::time_point start;
  steady::time_point end;
};

} // namespace

report run_fullsync(scenario_env& env) {
  const auto& o = env.opts;
  report r{"fullsync"};
  r.set_config(config_json(o));
  const process_set node{o.pids};
  controller_http api{o.http, o.key_source, o.instance_prefix, o.request_timeout_ms, o.http_access};
  api.check_reachable();
  check_other_nodes_reachable(o);
  cluster c{env.ctx, o};
  c.register_all();
  key_tracker keys{api, o};
  for (size_t i = 0; i < c.size(); ++i)
    c[i].preload(o.full_sync_keys);

  const bool wait_for_request =
      o.full_sync_on_request && o.heartbeat_interval_s > 0 && c[0].heartbeat_url().has_value();
  if (o.full_sync_on_request && !wait_for_request)
    spdlog::warn("fullsync: no heartbeats (--heartbeat-interval, or no heartbeat_url handed "
                 "out), so the workers start their syncs themselves");
  std::vector<timed_sync> syncs(c.size());
  const auto t0 = steady::now();
  const auto ask_deadline = t0 + seconds_to_duration(o.duration_s);
  auto index = [&](const simulated_worker& w) {
    for (size_t i = 0; i < c.size(); ++i)
      if (&c[i] == &w)
        return i;
    return size_t{0};
  };
  std::atomic<size_t> finished{0};
  cpu_marks cpu;
  cpu.start = node.cpu_seconds();
  auto syncing = c.start_all([&](simulated_worker& w, std::stop_token stop) {
    const finish_mark mark{finished}; // counts this worker as done even if it throws
    std::string reason = "bench (self-started)";
    if (wait_for_request) {
      std::optional<std::string> asked;
      while (!asked && !stop.stop_requested() && steady::now() < ask_deadline) {
        asked = w.take_full_sync_request();
        if (!asked)
          std::this_thread::sleep_for(5ms);
      }
      if (asked)
        reason = "controller: " + *asked;
      else
        reason = "bench (self-started: the controller did not ask)";
    }
    timed_sync& slot = syncs[index(w)];
    slot.start = steady::now();
    slot.result = w.full_sync(reason);
    slot.end = steady::now();
  });
  // Each sync is bounded by its own timeouts; this loop only reports progress.
  progress_clock progress;
  while (finished.load() < c.size()) {
    std::this_thread::sleep_for(20ms);
    if (progress.due())
      spdlog::info("fullsync: t={:.1f}s {} of {} workers done", seconds_since(t0), finished.load(),
                   c.size());
  }
  syncing.stop();
  cpu.push_end = node.cpu_seconds();
  const double syncs_wall_s = seconds_since(t0);

  std::vector<double> elapsed;
  std::vector<double> exit_freeze;
  std::map<std::string, int> reasons;
  uint64_t total_keys = 0;
  uint32_t resends = 0;
  uint32_t polls = 0;
  size_t accepted = 0;
  size_t complete = 0;
  std::string first_error;
  auto first_start = steady::time_point::max();
  auto last_end = steady::time_point::min();
  for (const auto& s : syncs) {
    ++reasons[s.result.reason];
    total_keys += s.result.keys;
    resends += s.result.resends;
    polls += s.result.polls;
    accepted += s.result.accepted ? 1 : 0;
    complete += s.result.complete ? 1 : 0;
    if (first_error.empty() && !s.result.error.empty())
      first_error = s.result.error;
    if (s.result.complete) {
      elapsed.push_back(s.result.elapsed_s);
      exit_freeze.push_back(s.result.exit_freeze_s);
    }
    first_start = std::min(first_start, s.start);
    last_end = std::max(last_end, s.end);
  }
  const double span = std::chrono::duration<double>(last_end - first_start).count();
  // The key count is the independent check: a controller could say "complete"
  // before it has applied every batch.
  key_sampler sampler{keys, c, node, first_start};
  const convergence conv = wait_for_truth(sampler, o.settle_timeout_s);
  if (conv.reached) {
    cpu.converged = conv.cpu_s;
    cpu.post = cpu_after_post_window(node, o.post_seconds);
  }
  r.add("workers", "syncing workers (instances x tp)", static_cast<double>(c.size()), "workers");
  r.add("keys_per_worker", "keys per worker", static_cast<double>(o.full_sync_keys), "keys");
  r.add("batches_per_worker", "FullSyncBatchMsg per worker",
        syncs.empty() ? 0 : static_cast<double>(syncs[0].result.batches), "msgs");
  r.add("total_keys", "keys resent", static_cast<double>(total_keys), "keys");
  r.add("span_seconds", "first start -> last can_exit_freeze", span, "s");
  if (complete == syncs.size() && span > 0)
    r.add("aggregate_keys_per_s", "aggregate keys/s", static_cast<double>(total_keys) / span,
          "keys/s");
  if (conv.reached && conv.seconds > 0)
    r.add("keys_per_s_by_key_count",
          "aggregate keys/s by key count (first start -> count == truth)",
          static_cast<double>(total_keys) / conv.seconds, "keys/s");
  if (!elapsed.empty()) {
    const double med = median(elapsed);
    r.add("median_sync_seconds", "per sync: start -> complete & can_exit_freeze (median)", med,
          "s");
    r.add("max_sync_seconds", "per sync: same, slowest",
          *std::max_element(elapsed.begin(), elapsed.end()), "s");
    r.add("median_exit_freeze_seconds", "per sync: start -> first can_exit_freeze (median)",
          median(exit_freeze), "s");
    r.add("per_worker_keys_per_s", "per sync keys/s (median)",
          static_cast<double>(o.full_sync_keys) / med, "keys/s");
  }
  report_cpu(r, cpu, conv.reached ? total_keys : 0, syncs_wall_s, o.post_seconds, "key");
  r.add("status_polls", "FullSyncStatusMsg polls", static_cast<double>(polls), "msgs");
  r.add("resends", "missing-batch resends", static_cast<double>(resends), "resends");
  std::string reason_text;
  for (const auto& [reason, n] : reasons)
    reason_text += fmt::format("{}{} x{}", reason_text.empty() ? "" : ", ", reason, n);
  r.note("reasons", "why the syncs ran", reason_text);
  r.check("every FullSyncStartMsg accepted", accepted == syncs.size(),
          fmt::format("{} of {}{}", accepted, syncs.size(),
                      first_error.empty() ? "" : ": " + first_error));
  r.check("every sync complete with can_exit_freeze", complete == syncs.size(),
          fmt::format("{} of {}{}", complete, syncs.size(),
                      first_error.empty() ? "" : ": " + first_error));
  check_key_count(r, conv, keys);
  return r;
}

} // namespace lmcc::bench
