// metrics: lmcc's own counters and latency histograms, and the Prometheus text
// exposition of everything GET /metrics shows.
//
// LMCache's 13 gauges keep their exact names (`lmcache:cache_controller_*`, label
// role="controller"); lmcc's own series are `lmcc_*` in Prometheus conventions
// (`_total` counters, `_seconds` histograms with cumulative `le` buckets).
//
//   node_metrics m;
//   m.observe_request("RegisterMsg", 0.00042);
//   m.count_event("worker_registered");
//   std::string text = render_prometheus(gauges, frontend_counters, m);
//
// Thread-safety: observe/count from any thread (atomics, lock-free on the hot
// path after a series first appears); render from any thread.
#pragma once

#include "gateway/controller_api.hpp"
#include "gateway/zmq_frontend.hpp"

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <shared_mutex>
#include <string>
#include <string_view>

namespace lmcc::gateway {

/// The node's own series: event counters, per-operation latency histograms and
/// a few gauges the node sets.
///
///   count_event("worker_registered")  -> lmcc_events_total{event="worker_registered"}
///   observe_request("RegisterMsg", s) -> lmcc_request_duration_seconds{op="RegisterMsg"}
///   set_gauge("index_shards", 4)      -> lmcc_index_shards
///
/// Series are created on first use and never removed. Names come from code (message
/// tags, route paths), but a family holds at most `max_series_per_family` series,
/// the last slot kept for "other": later new event and op names are folded into
/// "other" and later new gauges are dropped, so that no input can make the
/// exposition grow without bound.
class node_metrics {
public:
  // -- constants ---------------------------------------------------------------

  /// Upper bounds (seconds) of the latency buckets; +Inf is implicit.
  static constexpr std::array<double, 17> bucket_bounds = {
      50e-6, 100e-6, 250e-6, 500e-6, 1e-3, 2.5e-3, 5e-3, 10e-3, 25e-3,
      50e-3, 100e-3, 250e-3, 500e-3, 1.0,  2.5,    5.0,  10.0};

  /// Most distinct series per family (events, request ops, gauges).
  static constexpr size_t max_series_per_family = 1024;

  // -- construction ------------------------------------------------------------

  node_metrics();
  ~node_metrics();
  node_metrics(const node_metrics&) = delete;
  node_metrics& operator=(const node_metrics&) = delete;

  // -- recording (any thread) --------------------------------------------------

  /// Adds `n` to lmcc_events_total{event="<name>"}.
  void count_event(std::string_view name, uint64_t n = 1);

  /// Records one operation that took `seconds` (negative or NaN counts as 0).
  void observe_request(std::string_view op, double seconds);

  /// Sets the gauge lmcc_<name> (characters outside [a-zA-Z0-9_:] become '_').
  void set_gauge(std::string_view name, double value);

  // -- reading (any thread) ----------------------------------------------------

  /// Current value of an event counter; 0 if it never appeared.
  uint64_t event_count(std::string_view name) const;

  /// Observations of `op` so far; 0 if it never appeared.
  uint64_t request_count(std::string_view op) const;

  /// Appends the lmcc_events_total, lmcc_request_duration_seconds and lmcc_<gauge>
  /// families (each with # HELP / # TYPE) in Prometheus text format 0.0.4.
  void append_prometheus(std::string& out) const;

private:
  // -- member types ------------------------------------------------------------

  struct counter_entry {
    std::atomic<uint64_t> value{0};
  };

  struct histogram_entry {
    /// Non-cumulative counts per bucket, the last one is +Inf; rendering sums them.
    std::array<std::atomic<uint64_t>, bucket_bounds.size() + 1> buckets{};
    std::atomic<double> sum{0.0};
  };

  struct gauge_entry {
    std::atomic<double> value{0.0};
  };

  /// name -> entry; entries have stable addresses and are never removed, so a
  /// reference stays valid after the lock is released.
  template <class Entry>
  class series_map {
  public:
    /// The entry for `name`, created on first use; nullptr when the family is
    /// full and `name` is new.
    Entry* find_or_create(std::string_view name);

    /// The entry for `name` or nullptr, never creating one.
    const Entry* find(std::string_view name) const;

    /// Calls f(name, entry) in name order under a shared lock.
    void for_each(const std::function<void(const std::string&, const Entry&)>& f) const;

  private:
    mutable std::shared_mutex mutex_;
    std::map<std::string, std::unique_ptr<Entry>, std::less<>> entries_;
  };

  // -- member variables --------------------------------------------------------

  series_map<counter_entry> events_;
  series_map<histogram_entry> requests_;
  series_map<gauge_entry> gauges_;
};

/// Prometheus text format 0.0.4 of all series.
std::string render_prometheus(const controller_gauges& gauges, const frontend_counters& frontend,
                              const node_metrics& metrics);

/// A float as Python's repr() prints it ("1234.0", "0.0001", "5e-05", "1e+16"),
/// with Prometheus' "+Inf", "-Inf" and "NaN"; the LMCache gauges use this form.
std::string format_prometheus_float(double value);

} // namespace lmcc::gateway
