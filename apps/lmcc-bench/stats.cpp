#include "apps/lmcc-bench/stats.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace lmcc::bench {

double percentile(const std::vector<double>& sorted, double q) {
  if (sorted.empty())
    return 0;
  const auto n = static_cast<double>(sorted.size());
  auto rank = static_cast<size_t>(std::ceil(q / 100.0 * n));
  rank = std::clamp<size_t>(rank, 1, sorted.size());
  return sorted[rank - 1];
}

latency_summary summarize(std::vector<double> samples) {
  latency_summary s;
  if (samples.empty())
    return s;
  std::sort(samples.begin(), samples.end());
  s.count = samples.size();
  s.mean = std::accumulate(samples.begin(), samples.end(), 0.0) / static_cast<double>(s.count);
  s.p50 = percentile(samples, 50);
  s.p90 = percentile(samples, 90);
  s.p99 = percentile(samples, 99);
  s.p999 = percentile(samples, 99.9);
  s.max = samples.back();
  return s;
}

double median(std::vector<double> values) {
  if (values.empty())
    return 0;
  std::sort(values.begin(), values.end());
  const size_t mid = values.size() / 2;
  return values.size() % 2 == 1 ? values[mid] : (values[mid - 1] + values[mid]) / 2;
}

std::optional<double> bucket_quantile(const std::vector<std::pair<double, double>>& before,
                                      const std::vector<std::pair<double, double>>& after,
                                      double q) {
  // A series first counted after `before` was read starts from zero.
  if (after.empty() || (!before.empty() && before.size() != after.size()))
    return std::nullopt;
  std::vector<double> gained(after.size());
  for (size_t i = 0; i < after.size(); ++i) {
    if (!before.empty() && before[i].first != after[i].first)
      return std::nullopt;
    gained[i] = after[i].second - (before.empty() ? 0.0 : before[i].second);
  }
  const double total = gained.back(); // the +Inf bucket counts everything
  if (total <= 0)
    return std::nullopt;
  for (size_t i = 0; i < after.size(); ++i)
    if (gained[i] >= q * total)
      return after[i].first;
  return after.back().first;
}

} // namespace lmcc::bench
