// stats: latency percentiles and medians for the report.
//
// Percentiles are nearest-rank on the sorted samples (p99.9 of 2000 samples is
// the 1998th smallest), so every figure is a latency that really occurred.
//
// Context: pure functions.
#pragma once

#include <cstddef>
#include <optional>
#include <utility>
#include <vector>

namespace lmcc::bench {

struct latency_summary {
  size_t count = 0;
  double mean = 0;
  double p50 = 0;
  double p90 = 0;
  double p99 = 0;
  double p999 = 0;
  double max = 0;
};

/// Nearest-rank percentile `q` in [0, 100] of ascending `sorted` (0 if empty).
double percentile(const std::vector<double>& sorted, double q);

/// Summary of `samples` (any order; taken by value to sort).
latency_summary summarize(std::vector<double> samples);

/// The median of `values` (mean of the middle two for an even count).
double median(std::vector<double> values);

/// Quantile `q` in (0, 1] of what a cumulative histogram counted between two
/// readings `before` and `after` of it ((upper bound, count) pairs, the same
/// bounds in the same order): the upper bound of the first bucket that holds
/// it, so the true value is at most that. nullopt when nothing was counted or
/// the readings do not match (a restarted node); an empty `before` counts
/// as zeros (the series did not exist yet).
std::optional<double> bucket_quantile(const std::vector<std::pair<double, double>>& before,
                                      const std::vector<std::pair<double, double>>& after,
                                      double q);

} // namespace lmcc::bench
