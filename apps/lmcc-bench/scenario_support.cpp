#include "apps/lmcc-bench/scenario_support.hpp"

#include "apps/lmcc-bench/report.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <cmath>
#include <thread>

namespace lmcc::bench {

using namespace std::chrono_literals;

steady::duration seconds_to_duration(double s) {
  return std::chrono::duration_cast<steady::duration>(std::chrono::duration<double>(s));
}

key_tracker::key_tracker(controller_http& api, const bench_options& o)
  : sampler_(api.target(), api.key_source(), o.instance_prefix, o.sample_timeout_ms,
             o.http_access) {
  auto first = api.keys();
  if (!first)
    throw unreachable_error(
        "the controller stopped answering GET " +
        std::string{api.key_source() == "metrics" ? "/metrics" : "/controller/key-stats"});
  baseline_total_ = first->total;
  last_total_ = first->total;
  per_instance_ = first->ours.has_value();
  stale_ = first->ours.value_or(0);
  if (stale_ != 0)
    spdlog::warn("the controller already holds {} keys of the bench's instances after "
                 "registration (left over by an earlier run?)",
                 stale_);
}

std::optional<uint64_t> key_tracker::count() {
  ++reads_;
  auto k = sampler_.keys();
  if (!k) {
    ++misses_;
    return std::nullopt;
  }
  last_total_ = k->total;
  if (per_instance_ && k->ours)
    return *k->ours;
  return k->total >= baseline_total_ ? k->total - baseline_total_ : 0;
}

std::string key_tracker::source() const {
  return per_instance_ ? "GET /controller/key-stats (sum over the bench's instances)"
                       : "/metrics kv_pool_keys_count minus the count after registration";
}

key_sampler::key_sampler(key_tracker& keys, const cluster& c, const process_set& node,
                         steady::time_point t0)
  : keys_(&keys), cluster_(&c), node_(&node), t0_(t0) {}

const key_sample& key_sampler::take() {
  key_sample s;
  // The truth is read before the count; once the push has ended (the only
  // time convergence is judged) it no longer moves.
  s.sent = cluster_->sum(&worker_counters::ops_sent);
  s.truth = cluster_->truth_total();
  const auto read_start = steady::now();
  s.count = keys_->count();
  s.read_ms = seconds_since(read_start) * 1000;
  // t and the CPU reading are taken when the count has come: a convergence
  // found by this sample is charged everything the controller did until then.
  s.t = seconds_since(t0_);
  s.cpu_s = node_->cpu_seconds();
  series_.push_back(s);
  return series_.back();
}

nlohmann::json key_sampler::series_json() const {
  nlohmann::json rows = nlohmann::json::array();
  auto rounded = [](double v, double scale) { return std::round(v * scale) / scale; };
  for (const auto& s : series_)
    rows.push_back({rounded(s.t, 1000), s.sent, s.truth,
                    s.count ? nlohmann::json(*s.count) : nlohmann::json(), rounded(s.read_ms, 10),
                    s.cpu_s ? nlohmann::json(rounded(*s.cpu_s, 100)) : nlohmann::json()});
  return {{"columns", {"t_s", "sent", "truth", "count", "read_ms", "controller_cpu_s"}},
          {"rows", std::move(rows)}};
}

convergence wait_for_truth(key_sampler& sampler, double timeout_s) {
  convergence conv;
  const auto deadline = steady::now() + seconds_to_duration(timeout_s);
  std::optional<key_sample> first_equal;
  progress_clock progress;
  while (true) {
    const key_sample& s = sampler.take();
    conv.truth = s.truth;
    conv.total = sampler.keys().last_total();
    conv.reads = sampler.keys().reads();
    conv.misses = sampler.keys().misses();
    if (s.count) {
      conv.count = *s.count;
      if (*s.count == s.truth) {
        if (first_equal) {
          conv.reached = true;
          conv.seconds = first_equal->t;
          conv.cpu_s = first_equal->cpu_s;
          return conv;
        }
        first_equal = s;
      } else {
        first_equal.reset();
      }
    } // a miss neither confirms nor breaks a pair of equal reads
    if (steady::now() >= deadline)
      return conv;
    if (progress.due())
      spdlog::info("settling: controller={} truth={} ({} behind, {} of {} reads missed)",
                   conv.count, conv.truth,
                   static_cast<int64_t>(conv.truth) - static_cast<int64_t>(conv.count),
                   sampler.keys().misses(), sampler.keys().reads());
    std::this_thread::sleep_for(20ms);
  }
}

convergence wait_for_truth(key_tracker& keys, const cluster& c, double timeout_s,
                           steady::time_point t0) {
  const process_set none{{}};
  key_sampler sampler{keys, c, none, t0};
  return wait_for_truth(sampler, timeout_s);
}

void check_key_count(report& r, const convergence& conv, const key_tracker& keys) {
  r.add("final_key_count", "controller key count (bench instances)",
        static_cast<double>(conv.count), "keys");
  r.add("final_truth", "ground truth (sum of worker sets)", static_cast<double>(conv.truth),
        "keys");
  r.add("controller_total_key_count", "controller total_key_count", static_cast<double>(conv.total),
        "keys");
  r.add("key_count_misses", "key-count reads missed (timeout or error)",
        static_cast<double>(conv.misses), "reads");
  r.add("key_count_reads", "key-count reads", static_cast<double>(conv.reads), "reads");
  r.note("key_count_source", "key count source", keys.source());
  r.check("controller key count equals the ground truth", conv.reached,
          fmt::format("controller {} vs truth {}", conv.count, conv.truth));
}

void report_cpu(report& r, const cpu_marks& cpu, uint64_t ops, double push_s, double post_s,
                const std::string& unit_name) {
  if (!cpu.start || ops == 0)
    return;
  const double n = static_cast<double>(ops);
  const std::string unit = "us/" + unit_name;
  if (cpu.converged)
    r.add("cpu_us_per_op",
          fmt::format("controller CPU per applied {} (push start -> converged)", unit_name),
          (*cpu.converged - *cpu.start) * 1e6 / n, unit);
  if (cpu.post)
    r.add("cpu_us_per_op_with_post",
          fmt::format("controller CPU per applied {} (+ {:g} s after convergence)", unit_name,
                      post_s),
          (*cpu.post - *cpu.start) * 1e6 / n, unit);
  if (cpu.push_end && push_s > 0)
    r.add("cpu_cores_during_push", "controller CPU share during the push",
          (*cpu.push_end - *cpu.start) / push_s, "cores");
}

std::optional<double> cpu_after_post_window(const process_set& node, double post_s) {
  if (node.empty())
    return std::nullopt;
  spdlog::info("post window: {:g} s of controller CPU after convergence", post_s);
  std::this_thread::sleep_for(seconds_to_duration(post_s));
  return node.cpu_seconds();
}

bool progress_clock::due() {
  const auto now = steady::now();
  if (now < next_)
    return false;
  next_ = now + 2s;
  return true;
}

void check_other_nodes_reachable(const bench_options& o) {
  for (size_t i = 1; i < o.nodes.size(); ++i) {
    controller_http api{o.nodes[i].http, o.key_source, o.instance_prefix, o.request_timeout_ms,
                        o.http_access};
    api.check_reachable();
  }
}

void check_controllers_reachable(const bench_options& o) {
  controller_http first{o.http, o.key_source, o.instance_prefix, o.request_timeout_ms,
                        o.http_access};
  first.check_reachable();
  check_other_nodes_reachable(o);
}

nlohmann::json config_json(const bench_options& o) {
  nlohmann::json j;
  j["pull"] = o.pull.str();
  j["reply"] = o.reply.str();
  j["http"] = o.http.str();
  nlohmann::json nodes = nlohmann::json::array();
  for (const auto& n : o.nodes)
    nodes.push_back({{"pull", n.pull.str()}, {"reply", n.reply.str()}, {"http", n.http.str()}});
  j["nodes"] = std::move(nodes);
  j["node_spread"] = o.node_spread;
  j["node_pids"] = o.node_pids;
  j["workers"] = o.workers;
  j["tp"] = o.tp;
  j["instance_prefix"] = o.instance_prefix;
  j["location"] = o.location;
  j["batch_ops"] = o.batch_ops;
  j["msgs_per_multipart"] = o.msgs_per_multipart;
  j["evict_ratio"] = o.evict_ratio;
  j["rate"] = o.rate;
  j["ops"] = o.ops;
  j["heartbeat_interval_s"] = o.heartbeat_interval_s;
  j["full_sync_on_request"] = o.full_sync_on_request;
  j["none_hash"] = o.none_hash ? nlohmann::json(*o.none_hash) : nlohmann::json();
  j["python_hash_seed"] =
      o.python_hash_seed ? nlohmann::json(*o.python_hash_seed) : nlohmann::json();
  j["chunk_size"] = o.chunk_size;
  j["duration_s"] = o.duration_s;
  j["seed"] = o.seed;
  j["prompts"] = o.prompts;
  j["prompt_chunks"] = o.prompt_chunks;
  j["requests"] = o.requests;
  j["clients"] = o.clients;
  j["ingest_fraction"] = o.ingest_fraction;
  j["peak_ops"] = o.peak_ops;
  j["full_sync_keys"] = o.full_sync_keys;
  j["entries"] = o.entries;
  j["restart_cmd"] = o.restart_cmd;
  j["pids"] = o.pids;
  j["post_seconds"] = o.post_seconds;
  j["sample_timeout_ms"] = o.sample_timeout_ms;
  j["request_timeout_ms"] = o.request_timeout_ms;
  j["flood"] = {{"lookup_rate", o.flood_lookup_rate},
                {"p2p_rate", o.flood_p2p_rate},
                {"heartbeat_rate", o.flood_heartbeat_rate},
                {"timeout_ms", o.flood_timeout_ms},
                {"rss_settle_s", o.rss_settle_s}};
  return j;
}

} // namespace lmcc::bench
