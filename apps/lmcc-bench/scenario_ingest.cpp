// ingest: how fast the controller applies KV events. The workers push random
// admits (and --evict-ratio evicts) for --duration s, at --rate ops/s or as
// fast as the controller's PULL socket takes them; the controller's key count
// is sampled all along, and after the push the run waits until the count
// equals the ground truth. The headline figure is
//   applied ops/s = ops sent / (time from the first push until the controller's
//                   key count equals the ground truth),
// which counts everything the controller still had queued. The exact equality
// is the PASS/FAIL check; a seq discontinuity reported by the controller's
// metric would mean the generator numbered ops wrongly.
#include "apps/lmcc-bench/cluster.hpp"
#include "apps/lmcc-bench/scenario_support.hpp"
#include "apps/lmcc-bench/scenarios.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <thread>

namespace lmcc::bench {
namespace {

using namespace std::chrono_literals;

constexpr std::string_view seq_metric = "lmcache:cache_controller_kv_op_seq_discontinuity_count";

struct sample {
  double t = 0;
  uint64_t sent = 0;
  uint64_t truth = 0;
  uint64_t count = 0;
};

/// Net key growth per second over the samples after the first 20% of the run
/// (the warm-up), for the controller's count and for the ground truth.
std::pair<double, double> steady_growth(const std::vector<sample>& samples, double duration) {
  const sample* first = nullptr;
  for (const auto& s : samples)
    if (first == nullptr && s.t >= 0.2 * duration)
      first = &s;
  if (first == nullptr || samples.back().t <= first->t)
    return {0, 0};
  const auto& last = samples.back();
  const double dt = last.t - first->t;
  return {(static_cast<double>(last.count) - static_cast<double>(first->count)) / dt,
          (static_cast<double>(last.truth) - static_cast<double>(first->truth)) / dt};
}

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
  controller_http api{o.http, o.key_source, o.instance_prefix, o.request_timeout_ms};
  api.check_reachable();
  cluster c{env.ctx, o, o.pull.tcp(), true};
  c.register_all();
  key_tracker keys{api, o};
  const auto seq0 = api.metric(seq_metric);

  const double per_worker_rate = o.rate > 0 ? o.rate / static_cast<double>(c.size()) : 0;
  const auto t0 = steady::now();
  const auto deadline = t0 + seconds_to_duration(o.duration_s);
  auto drivers = c.start_all([&](simulated_worker& w, std::stop_token stop) {
    (void)w.push_random(
        push_limits{.deadline = deadline, .ops_per_s = per_worker_rate, .stop = std::move(stop)});
  });
  std::vector<sample> samples;
  uint64_t max_lag = 0;
  progress_clock progress;
  while (steady::now() < deadline) {
    std::this_thread::sleep_until(std::min(deadline, steady::now() + 200ms));
    sample s{seconds_since(t0), c.sum(&worker_counters::ops_sent), c.truth_total(), 0};
    auto count = keys.count();
    if (!count)
      continue; // a miss (counted by the tracker): no figure to keep
    s.count = *count;
    max_lag = std::max(max_lag, s.truth > s.count ? s.truth - s.count : 0);
    samples.push_back(s);
    if (progress.due())
      spdlog::info("ingest t={:.1f}s sent={} ops ({:.0f} ops/s) controller={} truth={} lag={}", s.t,
                   s.sent, static_cast<double>(s.sent) / s.t, s.count, s.truth,
                   static_cast<int64_t>(s.truth) - static_cast<int64_t>(s.count));
  }
  drivers.stop();
  const double push_s = seconds_since(t0);
  const uint64_t sent = c.sum(&worker_counters::ops_sent);
  const uint64_t lag_at_end =
      samples.empty() ? 0
                      : samples.back().truth - std::min(samples.back().truth, samples.back().count);
  const convergence conv = wait_for_truth(keys, c, o.settle_timeout_s, t0);
  const auto seq1 = api.metric(seq_metric);

  r.add("workers", "simulated workers (instances x tp)", static_cast<double>(c.size()), "workers");
  r.add("push_seconds", "push duration", push_s, "s");
  r.add("ops_sent", "ops sent", static_cast<double>(sent), "ops");
  r.add("admits", "  admits", static_cast<double>(c.sum(&worker_counters::admits)), "ops");
  r.add("evicts", "  evicts", static_cast<double>(c.sum(&worker_counters::evicts)), "ops");
  r.add("batches", "BatchedKVOperationMsg sent",
        static_cast<double>(c.sum(&worker_counters::batches)), "msgs");
  r.add("multiparts", "PUSH multiparts sent",
        static_cast<double>(c.sum(&worker_counters::multiparts)), "msgs");
  r.add("send_stalls", "PUSH stalls (200 ms backpressure)",
        static_cast<double>(c.sum(&worker_counters::send_stalls)), "stalls");
  r.add("sent_ops_per_s", "generator ops/s (sent)", static_cast<double>(sent) / push_s, "ops/s");
  if (conv.reached) {
    r.add("converge_seconds", "time until key count == truth", conv.seconds, "s");
    r.add("applied_ops_per_s", "applied ops/s (sent / time to converge)",
          static_cast<double>(sent) / conv.seconds, "ops/s");
  }
  const auto [count_growth, truth_growth] = steady_growth(samples, o.duration_s);
  r.add("controller_keys_per_s", "controller key growth while pushing (after warm-up)",
        count_growth, "keys/s");
  r.add("truth_keys_per_s", "ground-truth key growth (after warm-up)", truth_growth, "keys/s");
  if (conv.reached && conv.seconds > push_s + 0.1 && lag_at_end > 0)
    // The backlog the controller still had when the push stopped, applied with
    // the generator idle: the controller's rate with the whole machine.
    r.add("drain_keys_per_s", "controller key growth draining the backlog",
          static_cast<double>(lag_at_end) / (conv.seconds - samples.back().t), "keys/s");
  r.add("lag_at_push_end", "controller lag when the push ended", static_cast<double>(lag_at_end),
        "keys");
  r.add("max_lag", "max controller lag while pushing", static_cast<double>(max_lag), "keys");
  check_key_count(r, conv, keys);
  if (seq0 && seq1)
    r.check("no seq_num discontinuity reported by the controller", *seq1 == *seq0,
            fmt::format("{} -> {}", *seq0, *seq1));
  nlohmann::json series = nlohmann::json::array();
  for (const auto& s : samples)
    series.push_back({s.t, s.sent, s.truth, s.count});
  r.extra()["samples_t_sent_truth_count"] = std::move(series);
  return r;
}

} // namespace lmcc::bench
