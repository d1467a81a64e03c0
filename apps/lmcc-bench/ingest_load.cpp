#include "apps/lmcc-bench/ingest_load.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <thread>

namespace lmcc::bench {
namespace {

using namespace std::chrono_literals;

constexpr auto sample_interval = 200ms;

/// The worker counters a load reports, as of its start: a scenario may have
/// sent other ops before (flood's prompts), which are not the load's.
constexpr std::array<const std::atomic<uint64_t> worker_counters::*, 6> counted{
    &worker_counters::ops_sent, &worker_counters::admits,     &worker_counters::evicts,
    &worker_counters::batches,  &worker_counters::multiparts, &worker_counters::send_stalls};

/// Net key growth per second over the answered samples after the first 20% of
/// the push (the warm-up), for the controller's count and for the ground truth;
/// nullopt when fewer than two samples were answered then.
std::optional<std::pair<double, double>> steady_growth(const std::vector<key_sample>& samples,
                                                       double push_s) {
  const key_sample* first = nullptr;
  const key_sample* last = nullptr;
  for (const auto& s : samples) {
    if (!s.count || s.t > push_s)
      continue;
    if (first == nullptr && s.t >= 0.2 * push_s)
      first = &s;
    last = &s;
  }
  if (first == nullptr || last == nullptr || last->t <= first->t)
    return std::nullopt;
  const double dt = last->t - first->t;
  return std::pair{(static_cast<double>(*last->count) - static_cast<double>(*first->count)) / dt,
                   (static_cast<double>(last->truth) - static_cast<double>(first->truth)) / dt};
}

} // namespace

ingest_load::ingest_load(cluster& c, key_tracker& keys, const process_set& node,
                         const bench_options& o, controller_nodes* nodes)
  : cluster_(&c), opts_(&o), node_(&node), keys_(&keys),
    nodes_(nodes != nullptr && !nodes->empty() ? nodes : nullptr) {}

void ingest_load::push() {
  const auto& o = *opts_;
  cluster& c = *cluster_;
  const bool by_count = o.ops > 0;
  const double per_worker_rate = o.rate > 0 ? o.rate / static_cast<double>(c.size()) : 0;
  std::vector<uint64_t> quota(c.size(), 0);
  if (by_count)
    for (size_t i = 0; i < c.size(); ++i)
      quota[i] = o.ops / c.size() + (i < o.ops % c.size() ? 1 : 0);
  std::vector<double> finished_at(c.size(), 0);
  std::atomic<size_t> finished{0};

  for (size_t k = 0; k < counted.size(); ++k)
    at_start_[k] = c.sum(counted[k]);
  if (nodes_)
    nodes_start_ = nodes_->read();
  cpu_.start = node_->cpu_seconds();
  threads_start_ = node_->threads_by_name();
  t0_ = steady::now();
  sampler_.emplace(*keys_, c, *node_, t0_);
  const auto deadline = t0_ + seconds_to_duration(by_count ? o.push_timeout_s : o.duration_s);
  auto drivers = c.start_all([&](simulated_worker& w, std::stop_token stop) {
    const finish_mark mark{finished};
    const size_t i = c.index_of(w);
    (void)w.push_random(push_limits{.deadline = deadline,
                                    .ops_per_s = per_worker_rate,
                                    .max_ops = quota[i],
                                    .stop = std::move(stop)});
    finished_at[i] = seconds_since(t0_);
  });
  progress_clock progress;
  auto next_sample = t0_ + sample_interval;
  while (finished.load() < c.size() && steady::now() < deadline) {
    // Short steps: the end of an --ops push is noticed within ~20 ms.
    std::this_thread::sleep_for(20ms);
    if (steady::now() < next_sample)
      continue;
    next_sample = steady::now() + sample_interval;
    const key_sample& s = sampler_->take();
    if (s.count)
      max_lag_ = std::max(max_lag_, s.truth > *s.count ? s.truth - *s.count : 0);
    if (progress.due())
      spdlog::info(
          "ingest t={:.1f}s sent={} ops ({:.0f} ops/s) controller={} truth={} lag={}{}", s.t,
          s.sent, static_cast<double>(s.sent) / s.t, s.count ? fmt::to_string(*s.count) : "(miss)",
          s.truth,
          s.count ? fmt::to_string(static_cast<int64_t>(s.truth) - static_cast<int64_t>(*s.count))
                  : "?",
          keys_->misses() > 0 ? fmt::format(" ({} key-count misses)", keys_->misses()) : "");
  }
  drivers.stop();
  push_end_read_s_ = seconds_since(t0_);
  cpu_.push_end = node_->cpu_seconds();
  push_s_ = *std::max_element(finished_at.begin(), finished_at.end());
  if (push_s_ <= 0)
    push_s_ = push_end_read_s_; // a driver threw: stop() would have rethrown
  sent_ = pushed(c, 0);
  for (auto it = sampler_->series().rbegin(); it != sampler_->series().rend(); ++it)
    if (it->count) {
      lag_at_end_ = it->truth - std::min(it->truth, *it->count);
      last_push_sample_t_ = it->t;
      count_at_last_push_sample_ = *it->count;
      break;
    }
  spdlog::info("push done: {} ops in {:.2f} s; waiting until the controller's key count equals "
               "the ground truth",
               sent_, push_s_);
}

void ingest_load::converge() {
  conv_ = wait_for_truth(*sampler_, opts_->settle_timeout_s);
  cpu_.converged = conv_.reached ? conv_.cpu_s : std::nullopt;
  threads_converged_ = node_->threads_by_name();
  if (!nodes_)
    return;
  // The key count (of the primaries) is in; the replicas may still be
  // applying. Every copy is in once the shards' op counters have grown by
  // copies x the ops sent (a re-sent sub-batch counts again: at least that).
  const double want = static_cast<double>(nodes_->copies()) * static_cast<double>(sent_);
  const auto deadline = steady::now() + seconds_to_duration(opts_->settle_timeout_s);
  progress_clock progress;
  while (true) {
    nodes_end_ = nodes_->read();
    const auto applied = controller_nodes::shard_ops_delta(nodes_start_, nodes_end_);
    if (applied && *applied >= want) {
      all_copies_s_ = seconds_since(t0_);
      return;
    }
    if (!conv_.reached || steady::now() >= deadline)
      return;
    if (progress.due())
      spdlog::info("settling: the nodes' shards applied {} of {} op copies",
                   applied ? fmt::to_string(static_cast<uint64_t>(*applied)) : "?",
                   static_cast<uint64_t>(want));
    std::this_thread::sleep_for(50ms);
  }
}

void ingest_load::add_thread_use(report& r) const {
  // Thread wake-ups are what a message costs on a VM where a switch costs
  // tens of microseconds: their total per applied op is the figure to drive
  // down. Live threads only; threads that started after the push began count
  // from zero.
  uint64_t switches = 0;
  for (const auto& [name, end] : threads_converged_) {
    const auto it = threads_start_.find(name);
    const uint64_t before = it != threads_start_.end() ? it->second.switches : 0;
    switches += end.switches - std::min(end.switches, before);
  }
  if (sent_ > 0 && !threads_converged_.empty())
    r.add("switches_per_1000_ops",
          "controller context switches per 1000 applied ops (voluntary + involuntary, every "
          "thread of every node process, push start -> converged)",
          static_cast<double>(switches) * 1000.0 / static_cast<double>(sent_), "switches");
  for (const auto& [name, end] : threads_converged_) {
    const auto it = threads_start_.find(name);
    const thread_use start = it != threads_start_.end() ? it->second : thread_use{};
    const double cpu_s = std::max(0.0, end.cpu_s - start.cpu_s);
    if (cpu_s <= 0)
      continue;
    std::string key = "thread_us_per_op_";
    for (char ch : name)
      key += std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
    r.add(key,
          fmt::format("  thread {} (x{}): CPU per applied op, {} context switches", name,
                      end.threads, end.switches - std::min(end.switches, start.switches)),
          cpu_s * 1e6 / static_cast<double>(sent_), "us/op");
  }
}

uint64_t ingest_load::pushed(const cluster& c, size_t counter) const {
  return c.sum(counted[counter]) - at_start_[counter];
}

void ingest_load::post_window() {
  if (conv_.reached)
    cpu_.post = cpu_after_post_window(*node_, opts_->post_seconds);
}

void ingest_load::add_to(report& r) const {
  const auto& o = *opts_;
  const cluster& c = *cluster_;
  r.add("workers", "simulated workers (instances x tp)", static_cast<double>(c.size()), "workers");
  r.add("push_seconds", "push duration", push_s_, "s");
  r.add("ops_sent", "ops sent", static_cast<double>(sent_), "ops");
  r.add("admits", "  admits", static_cast<double>(pushed(c, 1)), "ops");
  r.add("evicts", "  evicts", static_cast<double>(pushed(c, 2)), "ops");
  r.add("batches", "BatchedKVOperationMsg sent", static_cast<double>(pushed(c, 3)), "msgs");
  r.add("multiparts", "PUSH multiparts sent", static_cast<double>(pushed(c, 4)), "msgs");
  r.add("send_stalls", "PUSH stalls (200 ms backpressure)", static_cast<double>(pushed(c, 5)),
        "stalls");
  r.add("sent_ops_per_s", "generator ops/s (sent)", static_cast<double>(sent_) / push_s_, "ops/s");
  if (conv_.reached) {
    r.add("converge_seconds", "time until key count == truth", conv_.seconds, "s");
    r.add("applied_ops_per_s", "applied ops/s (sent / time to converge)",
          static_cast<double>(sent_) / conv_.seconds, "ops/s");
  }
  if (const auto growth = steady_growth(sampler_->series(), push_s_)) {
    r.add("controller_keys_per_s", "controller key growth while pushing (after warm-up)",
          growth->first, "keys/s");
    r.add("truth_keys_per_s", "ground-truth key growth (after warm-up)", growth->second, "keys/s");
  } // else too few key-count reads answered during the push to say

  if (last_push_sample_t_ > 0) {
    if (conv_.reached && conv_.seconds > push_s_ + 0.1 && conv_.seconds > last_push_sample_t_)
      // From the push's last answered sample to convergence: mostly the
      // backlog the controller still had when the push stopped, applied with
      // the generator idle (the controller's rate with the whole machine).
      r.add("drain_keys_per_s", "controller key growth from the last push sample to convergence",
            static_cast<double>(conv_.truth - std::min(conv_.truth, count_at_last_push_sample_)) /
                (conv_.seconds - last_push_sample_t_),
            "keys/s");
    r.add("last_push_sample_s", "last answered key-count sample of the push, at",
          last_push_sample_t_, "s");
    r.add("lag_at_push_end", "controller lag at that sample", static_cast<double>(lag_at_end_),
          "keys");
  }
  r.add("max_lag", "max controller lag while pushing", static_cast<double>(max_lag_), "keys");
  report_cpu(r, cpu_, conv_.reached ? sent_ : 0, push_end_read_s_, o.post_seconds);
  if (conv_.reached && sent_ > 0)
    add_thread_use(r);
  if (nodes_) {
    const uint32_t copies = nodes_->copies();
    const auto applied = controller_nodes::shard_ops_delta(nodes_start_, nodes_end_);
    if (all_copies_s_ && applied) {
      r.add("all_copies_seconds", "time until every copy is applied (shard ops sum == R x sent)",
            *all_copies_s_, "s");
      r.add("applied_ops_per_s_all_copies",
            fmt::format("applied ops/s, every copy ((sum of shard ops / {}) / that time)", copies),
            *applied / copies / *all_copies_s_, "ops/s");
    }
    r.check(fmt::format("every op applied R = {} times (sum of lmcc_shard_ops >= {} x sent)",
                        copies, copies),
            applied && *applied >= static_cast<double>(copies) * static_cast<double>(sent_),
            fmt::format("{} of {}", applied ? fmt::to_string(static_cast<uint64_t>(*applied)) : "?",
                        static_cast<uint64_t>(copies) * sent_));
    r.note("controller_processes", "controller processes (CPU, RSS summed over)",
           nodes_->processes_text());
    nodes_->add_to(r, "load", "load", nodes_end_, &nodes_start_, sent_);
  }
  if (o.ops > 0)
    r.check("every one of --ops ops sent", sent_ == o.ops,
            fmt::format("{} of {} (push bound: --push-timeout {:g} s)", sent_, o.ops,
                        o.push_timeout_s));
  check_key_count(r, conv_, *keys_);
  r.extra()["key_samples"] = sampler_->series_json();
}

} // namespace lmcc::bench
