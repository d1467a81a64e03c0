// controller_http: the controller's HTTP API as a router or dashboard uses it
// (spec 5.1, 5.3): POST /lookup, GET /controller/key-stats, GET /metrics.
//
// The key count comes from /controller/key-stats when the controller has it
// (also giving the count of the bench's own instances), else from the gauge
// lmcache:cache_controller_kv_pool_keys_count in /metrics.
//
//   controller_http api{opts.http, "auto", "bench-inst", 5000};
//   api.check_reachable();            // throws unreachable_error
//   auto count = api.keys();          // nullopt on a failed request
//
// Context: one per thread (an httplib client is not shared).
#pragma once

#include "apps/lmcc-bench/bench_options.hpp"

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace httplib {
class Client;
} // namespace httplib

namespace lmcc::bench {

struct key_count {
  uint64_t total = 0;
  std::optional<uint64_t> ours; ///< instances named "<prefix>-..." (key-stats only)
};

struct layout_entry {
  std::string instance_id;
  std::string location;
  int64_t tokens = 0;
};

/// A GET's answer: its status and body (any status).
struct http_get_result {
  int status = 0;
  std::string body;
};

/// The value of the first metric line `name{...} value` or `name value` in a
/// Prometheus text body.
std::optional<double> metric_value(std::string_view text, std::string_view name);

/// The cumulative `le` buckets of one histogram series in a Prometheus text
/// body: (upper bound, count) in the body's order, +Inf as infinity. Matches
/// `<name>_bucket{<label>="<value>",le="..."} N` (lmcc's
/// lmcc_request_duration_seconds{op=...}); empty when the series is absent.
std::vector<std::pair<double, double>> histogram_buckets(std::string_view text,
                                                         std::string_view name,
                                                         std::string_view label,
                                                         std::string_view value);

struct http_lookup_result {
  bool ok = false; ///< HTTP 200 with a parseable body
  int status = 0;
  std::string error;
  std::vector<layout_entry> layout;
};

class controller_http {
public:
  controller_http(host_port target, std::string key_source, std::string instance_prefix,
                  uint32_t timeout_ms, const bench_options::http_access_settings& access = {});
  ~controller_http();
  controller_http(const controller_http&) = delete;
  controller_http& operator=(const controller_http&) = delete;

  /// Throws unreachable_error when the API cannot be reached or has neither
  /// /controller/key-stats nor the key-count metric.
  void check_reachable();

  std::optional<key_count> keys();

  /// The value of a metric line `name{...} value` in /metrics.
  std::optional<double> metric(std::string_view name);

  /// GET `path`; nullopt when no HTTP answer came (refused, timeout).
  std::optional<http_get_result> get(const std::string& path);

  http_lookup_result lookup(std::span<const int64_t> tokens);

  /// "key-stats" or "metrics", once known.
  const std::string& key_source() const { return key_source_; }

  const host_port& target() const { return target_; }

private:
  std::optional<key_count> keys_from_stats();
  std::optional<key_count> keys_from_metrics();

  host_port target_;
  std::string key_source_;
  std::string prefix_;
  std::unique_ptr<httplib::Client> client_;
};

} // namespace lmcc::bench
