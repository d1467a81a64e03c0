// stats: latency percentiles and medians for the report.
//
// Percentiles are nearest-rank on the sorted samples (p99.9 of 2000 samples is
// the 1998th smallest), so every figure is a latency that really occurred.
//
// Context: pure functions.
#pragma once

#include <cstddef>
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

} // namespace lmcc::bench
