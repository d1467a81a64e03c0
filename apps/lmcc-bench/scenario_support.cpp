#include "apps/lmcc-bench/scenario_support.hpp"

#include "apps/lmcc-bench/report.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <thread>

namespace lmcc::bench {

using namespace std::chrono_literals;

steady::duration seconds_to_duration(double s) {
  return std::chrono::duration_cast<steady::duration>(std::chrono::duration<double>(s));
}

key_tracker::key_tracker(controller_http& api) : api_(&api) {
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
  auto k = api_->keys();
  if (!k)
    return std::nullopt;
  last_total_ = k->total;
  if (per_instance_ && k->ours)
    return *k->ours;
  return k->total >= baseline_total_ ? k->total - baseline_total_ : 0;
}

std::string key_tracker::source() const {
  return per_instance_ ? "GET /controller/key-stats (sum over the bench's instances)"
                       : "/metrics kv_pool_keys_count minus the count after registration";
}

convergence wait_for_truth(key_tracker& keys, const cluster& c, double timeout_s,
                           steady::time_point t0) {
  convergence conv;
  const auto deadline = steady::now() + seconds_to_duration(timeout_s);
  std::optional<double> first_equal;
  progress_clock progress;
  while (true) {
    conv.truth = c.truth_total();
    auto count = keys.count();
    if (count) {
      conv.count = *count;
      if (*count == conv.truth) {
        if (first_equal) {
          conv.reached = true;
          conv.seconds = *first_equal;
          return conv;
        }
        first_equal = seconds_since(t0);
      } else {
        first_equal.reset();
      }
    }
    if (steady::now() >= deadline)
      return conv;
    if (progress.due())
      spdlog::info("settling: controller={} truth={} ({} behind)", conv.count, conv.truth,
                   static_cast<int64_t>(conv.truth) - static_cast<int64_t>(conv.count));
    std::this_thread::sleep_for(20ms);
  }
}

void check_key_count(report& r, const convergence& conv, const key_tracker& keys) {
  r.add("final_key_count", "controller key count (bench instances)",
        static_cast<double>(conv.count), "keys");
  r.add("final_truth", "ground truth (sum of worker sets)", static_cast<double>(conv.truth),
        "keys");
  r.add("controller_total_key_count", "controller total_key_count",
        static_cast<double>(keys.last_total()), "keys");
  r.note("key_count_source", "key count source", keys.source());
  r.check("controller key count equals the ground truth", conv.reached,
          fmt::format("controller {} vs truth {}", conv.count, conv.truth));
}

bool progress_clock::due() {
  const auto now = steady::now();
  if (now < next_)
    return false;
  next_ = now + 2s;
  return true;
}

nlohmann::json config_json(const bench_options& o) {
  nlohmann::json j;
  j["pull"] = o.pull.str();
  j["reply"] = o.reply.str();
  j["http"] = o.http.str();
  j["workers"] = o.workers;
  j["tp"] = o.tp;
  j["instance_prefix"] = o.instance_prefix;
  j["location"] = o.location;
  j["batch_ops"] = o.batch_ops;
  j["msgs_per_multipart"] = o.msgs_per_multipart;
  j["evict_ratio"] = o.evict_ratio;
  j["rate"] = o.rate;
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
  return j;
}

} // namespace lmcc::bench
