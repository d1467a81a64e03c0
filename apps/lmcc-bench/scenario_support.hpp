// scenario_support: the pieces several scenarios share — following the
// controller's key count against the ground truth (with a short per-sample
// timeout, so a controller busy with a backlog costs counted misses, never a
// stalled run), the controller's CPU cost per op, progress lines, and the
// run's configuration for the JSON report.
//
// Context: single-threaded helpers, used from a scenario's main thread.
#pragma once

#include "apps/lmcc-bench/bench_options.hpp"
#include "apps/lmcc-bench/cluster.hpp"
#include "apps/lmcc-bench/controller_http.hpp"
#include "apps/lmcc-bench/proc_stats.hpp"
#include "apps/lmcc-bench/report.hpp"
#include "apps/lmcc-bench/zmq_io.hpp"

#include <nlohmann/json.hpp>

#include <atomic>
#include <optional>
#include <string>

namespace lmcc::bench {

/// The controller's count of the bench's own keys: the sum over its instances
/// from /controller/key-stats, or (with /metrics only) the total minus the
/// total seen right after registration. Counts are read on a connection of
/// the tracker's own with --sample-timeout-ms; a failed read is a miss.
class key_tracker {
public:
  /// Call after register_all(): re-registration clears an instance's old keys.
  /// The baseline is read through `api` (its longer timeout).
  key_tracker(controller_http& api, const bench_options& o);

  std::optional<uint64_t> count();

  /// The controller's total (all instances) at the last successful count().
  uint64_t last_total() const { return last_total_; }

  /// Keys of the bench's instances the controller already had at the start
  /// (non-zero: a previous run's keys were not cleared on re-registration).
  uint64_t stale_at_start() const { return stale_; }

  /// Reads that failed (timeout, error) out of all count() calls.
  uint64_t misses() const { return misses_; }
  uint64_t reads() const { return reads_; }

  std::string source() const;

private:
  controller_http sampler_;
  uint64_t baseline_total_ = 0;
  uint64_t stale_ = 0;
  uint64_t last_total_ = 0;
  uint64_t misses_ = 0;
  uint64_t reads_ = 0;
  bool per_instance_ = false;
};

/// One observation of a run: what was sent, the truth, the controller's count
/// (nullopt: the read missed) and the controller's CPU seconds.
struct key_sample {
  double t = 0;
  uint64_t sent = 0;
  uint64_t truth = 0;
  std::optional<uint64_t> count;
  double read_ms = 0; ///< how long the count took (or the timeout, on a miss)
  std::optional<double> cpu_s;
};

/// Takes samples and keeps them all, for the report's series.
class key_sampler {
public:
  key_sampler(key_tracker& keys, const cluster& c, const process_set& node, steady::time_point t0);

  const key_sample& take();

  key_tracker& keys() { return *keys_; }
  const key_tracker& keys() const { return *keys_; }
  const cluster& workers() const { return *cluster_; }
  steady::time_point t0() const { return t0_; }
  const std::vector<key_sample>& series() const { return series_; }

  /// {"columns": [...], "rows": [[...], ...]}, null where a read missed.
  nlohmann::json series_json() const;

private:
  key_tracker* keys_;
  const cluster* cluster_;
  const process_set* node_;
  steady::time_point t0_;
  std::vector<key_sample> series_;
};

struct convergence {
  bool reached = false;
  double seconds = 0;          ///< from t0 to the first of two equal polls
  uint64_t count = 0;          ///< the controller's count at the end
  uint64_t truth = 0;          ///< the ground truth at the end
  std::optional<double> cpu_s; ///< the controller's CPU at that first equal poll
  uint64_t total = 0;          ///< the controller's total_key_count at the end
  uint64_t reads = 0;          ///< key-count reads of the run so far
  uint64_t misses = 0;         ///< of which missed
};

/// Polls (20 ms apart) until the controller's count equals the cluster's
/// ground truth on two reads in a row, or `timeout_s` passes.
convergence wait_for_truth(key_sampler& sampler, double timeout_s);

/// The same, without keeping the series or reading CPU.
convergence wait_for_truth(key_tracker& keys, const cluster& c, double timeout_s,
                           steady::time_point t0);

/// Adds the equality check (and its figures, as of the convergence) to a report.
void check_key_count(report& r, const convergence& conv, const key_tracker& keys);

/// The controller's CPU seconds at the marks of a load (nullopt: not read).
struct cpu_marks {
  std::optional<double> start;     ///< the first push
  std::optional<double> push_end;  ///< the last push returned
  std::optional<double> converged; ///< the key count reached the truth
  std::optional<double> post;      ///< --post-seconds later
};

/// Adds CPU us per applied op (to convergence, and with the post window) and
/// the controller's CPU share during the push, in cores.
void report_cpu(report& r, const cpu_marks& cpu, uint64_t ops, double push_s, double post_s,
                const std::string& unit_name = "op");

/// Waits --post-seconds and reads the CPU: what the controller still spends
/// on the load (flushes, compactions) once it has applied it.
std::optional<double> cpu_after_post_window(const process_set& node, double post_s);

/// Increments a counter when it goes out of scope (also when unwinding).
struct finish_mark {
  explicit finish_mark(std::atomic<size_t>& c) : count(c) {}
  finish_mark(const finish_mark&) = delete;
  finish_mark& operator=(const finish_mark&) = delete;
  ~finish_mark() { ++count; }

  std::atomic<size_t>& count;
};

/// Says every ~2 s that a line should be printed.
class progress_clock {
public:
  bool due();

private:
  steady::time_point next_ = steady::now() + std::chrono::seconds(2);
};

/// Checks that the HTTP API of every --nodes node after the first (which the
/// scenario's own client checks) answers; throws unreachable_error.
void check_other_nodes_reachable(const bench_options& o);
/// The same for every node, --http's included (a scenario that reads no key counts).
void check_controllers_reachable(const bench_options& o);

/// The run's options, as JSON.
nlohmann::json config_json(const bench_options& o);

steady::duration seconds_to_duration(double s);

} // namespace lmcc::bench
