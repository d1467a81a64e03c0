// scenario_support: the pieces several scenarios share — following the
// controller's key count against the ground truth, progress lines, and the
// run's configuration for the JSON report.
//
// Context: single-threaded helpers, used from a scenario's main thread.
#pragma once

#include "apps/lmcc-bench/bench_options.hpp"
#include "apps/lmcc-bench/cluster.hpp"
#include "apps/lmcc-bench/controller_http.hpp"
#include "apps/lmcc-bench/report.hpp"
#include "apps/lmcc-bench/zmq_io.hpp"

#include <nlohmann/json.hpp>

#include <optional>
#include <string>

namespace lmcc::bench {

/// The controller's count of the bench's own keys: the sum over its instances
/// from /controller/key-stats, or (with /metrics only) the total minus the
/// total seen right after registration.
class key_tracker {
public:
  /// Call after register_all(): re-registration clears an instance's old keys.
  explicit key_tracker(controller_http& api);

  std::optional<uint64_t> count();

  /// The controller's total (all instances) at the last successful count().
  uint64_t last_total() const { return last_total_; }

  /// Keys of the bench's instances the controller already had at the start
  /// (non-zero: a previous run's keys were not cleared on re-registration).
  uint64_t stale_at_start() const { return stale_; }

  std::string source() const;

private:
  controller_http* api_;
  uint64_t baseline_total_ = 0;
  uint64_t stale_ = 0;
  uint64_t last_total_ = 0;
  bool per_instance_ = false;
};

struct convergence {
  bool reached = false;
  double seconds = 0; ///< from t0 to the first of two equal polls
  uint64_t count = 0; ///< the controller's count at the end
  uint64_t truth = 0; ///< the ground truth at the end
};

/// Polls (20 ms) until the controller's count equals the cluster's ground
/// truth on two polls in a row, or `timeout_s` passes.
convergence wait_for_truth(key_tracker& keys, const cluster& c, double timeout_s,
                           steady::time_point t0);

/// Adds the equality check (and its figures) to a report.
void check_key_count(report& r, const convergence& conv, const key_tracker& keys);

/// Says every ~2 s that a line should be printed.
class progress_clock {
public:
  bool due();

private:
  steady::time_point next_ = steady::now() + std::chrono::seconds(2);
};

/// The run's options, as JSON.
nlohmann::json config_json(const bench_options& o);

steady::duration seconds_to_duration(double s);

} // namespace lmcc::bench
