// node_metrics and render_prometheus: exact LMCache gauge names and values,
// cumulative histogram buckets, counters, gauges, escaping and concurrency.
#include "gateway/metrics.hpp"

#include <gtest/gtest.h>

#include <limits>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace lmcc::gateway {
namespace {

/// Sample lines "name{labels} value" of an exposition, keyed by "name{labels}".
std::map<std::string, std::string> samples(const std::string& text) {
  std::map<std::string, std::string> out;
  std::istringstream in{text};
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#')
      continue;
    auto space = line.rfind(' ');
    EXPECT_NE(space, std::string::npos) << line;
    EXPECT_TRUE(out.emplace(line.substr(0, space), line.substr(space + 1)).second)
        << "duplicate series " << line;
  }
  return out;
}

/// prefix + decimal i; built by appending because GCC 12's -Wrestrict misfires on
/// `"literal" + std::to_string(i)` at -O3 (GCC PR 105651).
std::string numbered(const char* prefix, size_t i) {
  std::string out = prefix;
  out += std::to_string(i);
  return out;
}

size_t count_of(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (auto pos = text.find(needle); pos != std::string::npos; pos = text.find(needle, pos + 1))
    ++n;
  return n;
}

std::string render(const node_metrics& m, const controller_gauges& g = {},
                   const frontend_counters* f = nullptr) {
  static const frontend_counters zero;
  return render_prometheus(g, f ? *f : zero, m);
}

TEST(render_prometheus, shows_the_13_lmcache_gauges_once_each_with_float_values) {
  controller_gauges g{.kv_pool_keys_count = 1234,
                      .registered_workers_count = 3,
                      .kv_op_seq_discontinuity_count = 2,
                      .full_sync_workers_syncing = 1,
                      .full_sync_workers_completed = 4,
                      .full_sync_global_progress = 0.75,
                      .full_sync_missing_batches_total = 5};
  frontend_counters f;
  f.pull_frames = 100;
  f.reply_requests = 50;
  f.pull_has_pending = 1;
  f.reply_has_pending = 0;
  f.pull_active = 2;
  f.reply_active = 3;
  f.bad_frames = 6;
  f.error_replies = 7;
  node_metrics m;
  auto text = render(m, g, &f);
  auto s = samples(text);

  const std::map<std::string, std::string> expected = {
      {"kv_pool_keys_count", "1234.0"},           {"registered_workers_count", "3.0"},
      {"pull_socket_message_count", "100.0"},     {"reply_socket_message_count", "50.0"},
      {"pull_socket_has_pending", "1.0"},         {"reply_socket_has_pending", "0.0"},
      {"pull_socket_active_requests", "2.0"},     {"reply_socket_active_requests", "3.0"},
      {"kv_op_seq_discontinuity_count", "2.0"},   {"full_sync_workers_syncing", "1.0"},
      {"full_sync_workers_completed", "4.0"},     {"full_sync_global_progress", "0.75"},
      {"full_sync_missing_batches_total", "5.0"},
  };
  ASSERT_EQ(expected.size(), 13u);
  for (const auto& [suffix, value] : expected) {
    std::string name = "lmcache:cache_controller_" + suffix;
    SCOPED_TRACE(name);
    EXPECT_EQ(s[name + "{role=\"controller\"}"], value);
    EXPECT_EQ(count_of(text, "\n" + name + "{"), 1u);
    EXPECT_EQ(count_of(text, "# TYPE " + name + " gauge\n"), 1u);
    EXPECT_EQ(count_of(text, "# HELP " + name + " "), 1u);
  }
  EXPECT_EQ(count_of(text, "lmcache:"), 13u * 3); // HELP, TYPE, sample; nothing else
  EXPECT_EQ(s["lmcc_frontend_bad_frames_total"], "6");
  EXPECT_EQ(s["lmcc_frontend_error_replies_total"], "7");
  EXPECT_EQ(count_of(text, "# TYPE lmcc_frontend_bad_frames_total counter\n"), 1u);
  EXPECT_EQ(count_of(text, "# TYPE lmcc_frontend_error_replies_total counter\n"), 1u);
  // The very first line is a HELP line and the text ends with a newline.
  EXPECT_TRUE(text.starts_with("# HELP lmcache:cache_controller_kv_pool_keys_count "));
  EXPECT_TRUE(text.ends_with("\n"));
}

TEST(node_metrics, counts_events_by_name) {
  node_metrics m;
  m.count_event("worker_registered");
  m.count_event("worker_registered", 4);
  m.count_event("seq_gap");
  EXPECT_EQ(m.event_count("worker_registered"), 5u);
  EXPECT_EQ(m.event_count("seq_gap"), 1u);
  EXPECT_EQ(m.event_count("never"), 0u);
  auto text = render(m);
  auto s = samples(text);
  EXPECT_EQ(s["lmcc_events_total{event=\"worker_registered\"}"], "5");
  EXPECT_EQ(s["lmcc_events_total{event=\"seq_gap\"}"], "1");
  EXPECT_EQ(count_of(text, "# TYPE lmcc_events_total counter\n"), 1u);
}

TEST(node_metrics, histogram_buckets_are_cumulative_and_count_equals_observations) {
  node_metrics m;
  const std::vector<double> observations = {0.00001, 0.00005, 0.0003, 0.001, 0.001,
                                            0.7,     3.0,     11.0,   -1.0};
  double sum = 0;
  for (double v : observations) {
    m.observe_request("RegisterMsg", v);
    sum += v < 0 ? 0 : v;
  }
  m.observe_request("HeartbeatMsg", 0.002);
  EXPECT_EQ(m.request_count("RegisterMsg"), observations.size());
  EXPECT_EQ(m.request_count("HeartbeatMsg"), 1u);

  auto text = render(m);
  auto s = samples(text);
  auto bucket = [&](const std::string& le) {
    auto key = "lmcc_request_duration_seconds_bucket{op=\"RegisterMsg\",le=\"" + le + "\"}";
    EXPECT_TRUE(s.contains(key)) << key;
    return std::stoull(s[key]);
  };
  // le is inclusive: 0.00005 falls into le="5e-05", 0.001 into le="0.001".
  EXPECT_EQ(bucket("5e-05"), 3u); // 1e-5, 5e-5 and the negative one (counted as 0)
  EXPECT_EQ(bucket("0.0001"), 3u);
  EXPECT_EQ(bucket("0.00025"), 3u);
  EXPECT_EQ(bucket("0.0005"), 4u);
  EXPECT_EQ(bucket("0.001"), 6u);
  EXPECT_EQ(bucket("0.5"), 6u);
  EXPECT_EQ(bucket("1.0"), 7u);
  EXPECT_EQ(bucket("5.0"), 8u);
  EXPECT_EQ(bucket("10.0"), 8u);
  EXPECT_EQ(bucket("+Inf"), observations.size());

  // Every bucket line, in order, is non-decreasing and ends at _count.
  uint64_t previous = 0;
  size_t lines = 0;
  for (double bound : node_metrics::bucket_bounds) {
    auto v = bucket(format_prometheus_float(bound));
    EXPECT_GE(v, previous);
    previous = v;
    ++lines;
  }
  EXPECT_EQ(lines, 17u);
  EXPECT_EQ(s["lmcc_request_duration_seconds_count{op=\"RegisterMsg\"}"],
            std::to_string(observations.size()));
  EXPECT_NEAR(std::stod(s["lmcc_request_duration_seconds_sum{op=\"RegisterMsg\"}"]), sum, 1e-9);
  EXPECT_EQ(s["lmcc_request_duration_seconds_count{op=\"HeartbeatMsg\"}"], "1");
  EXPECT_EQ(count_of(text, "# TYPE lmcc_request_duration_seconds histogram\n"), 1u);
  EXPECT_EQ(count_of(text, "lmcc_request_duration_seconds_bucket{op=\"RegisterMsg\""), 18u);
}

TEST(node_metrics, gauges_are_set_and_named_lmcc_prefixed) {
  node_metrics m;
  m.set_gauge("index_shards", 4);
  m.set_gauge("index_shards", 8);
  m.set_gauge("bad name-1", 0.5);
  auto text = render(m);
  auto s = samples(text);
  EXPECT_EQ(s["lmcc_index_shards"], "8.0");
  EXPECT_EQ(s["lmcc_bad_name_1"], "0.5");
  EXPECT_EQ(count_of(text, "# TYPE lmcc_index_shards gauge\n"), 1u);
}

TEST(node_metrics, label_values_are_escaped) {
  node_metrics m;
  m.count_event("a\"b\\c\nd");
  auto text = render(m);
  EXPECT_NE(text.find(R"(lmcc_events_total{event="a\"b\\c\nd"} 1)"), std::string::npos) << text;
}

TEST(node_metrics, new_series_beyond_the_cap_fold_into_other) {
  node_metrics m;
  constexpr size_t cap = node_metrics::max_series_per_family;
  for (size_t i = 0; i < cap + 10; ++i)
    m.count_event(numbered("e", i));
  // cap - 1 named series, the last slot is "other" and takes the 11 latecomers.
  EXPECT_EQ(m.event_count("e0"), 1u);
  EXPECT_EQ(m.event_count(numbered("e", cap - 2)), 1u);
  EXPECT_EQ(m.event_count(numbered("e", cap - 1)), 0u);
  EXPECT_EQ(m.event_count("other"), 11u);
  auto s = samples(render(m));
  size_t series = 0;
  for (const auto& [key, value] : s)
    series += key.starts_with("lmcc_events_total{");
  EXPECT_EQ(series, cap);
}

TEST(node_metrics, concurrent_observations_are_all_counted) {
  node_metrics m;
  constexpr int threads = 4;
  constexpr int per_thread = 20000;
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t)
    workers.emplace_back([&m, t] {
      for (int i = 0; i < per_thread; ++i) {
        m.observe_request(i % 2 ? "A" : "B", 0.001 * (i % 7));
        m.count_event("tick");
        if (i % 1000 == 0)
          m.count_event(numbered("thread", static_cast<size_t>(t)));
      }
    });
  std::string text;
  for (int i = 0; i < 20; ++i)
    text = render(m); // rendering while others write must be safe
  for (auto& w : workers)
    w.join();
  EXPECT_EQ(m.request_count("A") + m.request_count("B"), uint64_t{threads} * per_thread);
  EXPECT_EQ(m.event_count("tick"), uint64_t{threads} * per_thread);
  auto s = samples(render(m));
  EXPECT_EQ(s["lmcc_request_duration_seconds_count{op=\"A\"}"],
            std::to_string(threads * per_thread / 2));
}

TEST(format_prometheus_float, prints_like_python_repr) {
  EXPECT_EQ(format_prometheus_float(1234), "1234.0");
  EXPECT_EQ(format_prometheus_float(0), "0.0");
  EXPECT_EQ(format_prometheus_float(-3), "-3.0");
  EXPECT_EQ(format_prometheus_float(0.75), "0.75");
  EXPECT_EQ(format_prometheus_float(0.0001), "0.0001");
  EXPECT_EQ(format_prometheus_float(0.00025), "0.00025");
  EXPECT_EQ(format_prometheus_float(5e-05), "5e-05");
  EXPECT_EQ(format_prometheus_float(2.5), "2.5");
  EXPECT_EQ(format_prometheus_float(10), "10.0");
  EXPECT_EQ(format_prometheus_float(1e15), "1000000000000000.0");
  EXPECT_EQ(format_prometheus_float(1e16), "1e+16");
  EXPECT_EQ(format_prometheus_float(1.5e-7), "1.5e-07");
  EXPECT_EQ(format_prometheus_float(123.456), "123.456");
  EXPECT_EQ(format_prometheus_float(std::numeric_limits<double>::infinity()), "+Inf");
  EXPECT_EQ(format_prometheus_float(-std::numeric_limits<double>::infinity()), "-Inf");
  EXPECT_EQ(format_prometheus_float(std::numeric_limits<double>::quiet_NaN()), "NaN");
}

} // namespace
} // namespace lmcc::gateway
