#include "gateway/metrics.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <mutex>

namespace lmcc::gateway {
namespace {

/// Where observations of names beyond max_series_per_family go.
constexpr std::string_view overflow_series = "other";

// -- text helpers ----------------------------------------------------------------

/// Prometheus label values escape backslash, double quote and newline.
void append_label_value(std::string& out, std::string_view value) {
  for (char c : value) {
    switch (c) {
    case '\\':
      out += "\\\\";
      break;
    case '"':
      out += "\\\"";
      break;
    case '\n':
      out += "\\n";
      break;
    default:
      out += c;
    }
  }
}

/// Metric names allow [a-zA-Z_:][a-zA-Z0-9_:]*; anything else becomes '_'.
std::string sanitize_metric_name(std::string_view name) {
  std::string out;
  out.reserve(name.size() + 1);
  for (char c : name) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == ':';
    out += ok ? c : '_';
  }
  if (out.empty() || (out[0] >= '0' && out[0] <= '9'))
    out.insert(out.begin(), '_');
  return out;
}

void append_header(std::string& out, std::string_view name, std::string_view help,
                   std::string_view type) {
  out.append("# HELP ").append(name).append(" ").append(help).append("\n");
  out.append("# TYPE ").append(name).append(" ").append(type).append("\n");
}

void append_uint(std::string& out, uint64_t v) {
  char buf[24];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), v);
  out.append(buf, end);
}

// -- the LMCache gauges (spec 5.3) -------------------------------------------------

struct lmcache_gauge {
  std::string_view name;
  std::string_view help;
  double value;
};

void append_lmcache_gauge(std::string& out, const lmcache_gauge& g) {
  append_header(out, g.name, g.help, "gauge");
  out.append(g.name).append("{role=\"controller\"} ");
  out.append(format_prometheus_float(g.value)).append("\n");
}

} // namespace

// -- format_prometheus_float -------------------------------------------------------

std::string format_prometheus_float(double value) {
  if (std::isnan(value))
    return "NaN";
  if (std::isinf(value))
    return value > 0 ? "+Inf" : "-Inf";
  // Shortest round-trip digits in scientific form ("-1.234e+03"), then laid out the
  // way Python's repr() does: fixed notation for exponents in [-4, 16), else
  // scientific with at least two exponent digits. prometheus_client prints this.
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), value, std::chars_format::scientific);
  std::string_view sci(buf, static_cast<size_t>(end - buf));
  std::string out;
  if (!sci.empty() && sci.front() == '-') {
    out += '-';
    sci.remove_prefix(1);
  }
  size_t e_pos = sci.find('e');
  std::string digits;
  for (char c : sci.substr(0, e_pos))
    if (c != '.')
      digits += c;
  int exponent = std::atoi(std::string(sci.substr(e_pos + 1)).c_str());
  if (exponent >= -4 && exponent < 16) {
    if (exponent < 0) {
      out += "0.";
      out.append(static_cast<size_t>(-exponent - 1), '0');
      out += digits;
    } else {
      size_t int_len = static_cast<size_t>(exponent) + 1;
      if (digits.size() <= int_len) {
        out += digits;
        out.append(int_len - digits.size(), '0');
        out += ".0";
      } else {
        out.append(digits, 0, int_len);
        out += '.';
        out.append(digits, int_len);
      }
    }
    return out;
  }
  out += digits[0];
  if (digits.size() > 1) {
    out += '.';
    out.append(digits, 1);
  }
  out += exponent < 0 ? "e-" : "e+";
  int abs_exp = std::abs(exponent);
  if (abs_exp < 10)
    out += '0';
  out += std::to_string(abs_exp);
  return out;
}

// -- node_metrics::series_map ---------------------------------------------------------

template <class Entry>
Entry* node_metrics::series_map<Entry>::find_or_create(std::string_view name) {
  {
    // Hot path: the series exists; a shared lock and then atomics only.
    std::shared_lock lock{mutex_};
    if (auto it = entries_.find(name); it != entries_.end())
      return it->second.get();
  }
  std::unique_lock lock{mutex_};
  if (auto it = entries_.find(name); it != entries_.end())
    return it->second.get();
  // The last slot is kept for the overflow series "other", so that it always exists.
  if (entries_.size() + 1 >= max_series_per_family && name != overflow_series)
    return nullptr;
  if (entries_.size() >= max_series_per_family)
    return nullptr;
  auto [it, inserted] = entries_.emplace(std::string(name), std::make_unique<Entry>());
  return it->second.get();
}

template <class Entry>
const Entry* node_metrics::series_map<Entry>::find(std::string_view name) const {
  std::shared_lock lock{mutex_};
  auto it = entries_.find(name);
  return it == entries_.end() ? nullptr : it->second.get();
}

template <class Entry>
void node_metrics::series_map<Entry>::for_each(
    const std::function<void(const std::string&, const Entry&)>& f) const {
  std::shared_lock lock{mutex_};
  for (const auto& [name, entry] : entries_)
    f(name, *entry);
}

// -- node_metrics ---------------------------------------------------------------------

node_metrics::node_metrics() = default;
node_metrics::~node_metrics() = default;

void node_metrics::count_event(std::string_view name, uint64_t n) {
  auto* entry = events_.find_or_create(name);
  if (entry == nullptr)
    entry = events_.find_or_create(overflow_series);
  if (entry != nullptr)
    entry->value.fetch_add(n, std::memory_order_relaxed);
}

void node_metrics::observe_request(std::string_view op, double seconds) {
  auto* entry = requests_.find_or_create(op);
  if (entry == nullptr)
    entry = requests_.find_or_create(overflow_series);
  if (entry == nullptr)
    return;
  if (!(seconds >= 0)) // also catches NaN
    seconds = 0;
  // Prometheus buckets are "less than or equal": the first bound >= seconds.
  auto it = std::lower_bound(bucket_bounds.begin(), bucket_bounds.end(), seconds);
  auto index = static_cast<size_t>(it - bucket_bounds.begin());
  entry->buckets[index].fetch_add(1, std::memory_order_relaxed);
  entry->sum.fetch_add(seconds, std::memory_order_relaxed);
}

void node_metrics::set_gauge(std::string_view name, double value) {
  if (auto* entry = gauges_.find_or_create(name))
    entry->value.store(value, std::memory_order_relaxed);
}

uint64_t node_metrics::event_count(std::string_view name) const {
  const auto* entry = events_.find(name);
  return entry == nullptr ? 0 : entry->value.load(std::memory_order_relaxed);
}

uint64_t node_metrics::request_count(std::string_view op) const {
  const auto* entry = requests_.find(op);
  if (entry == nullptr)
    return 0;
  uint64_t total = 0;
  for (const auto& b : entry->buckets)
    total += b.load(std::memory_order_relaxed);
  return total;
}

void node_metrics::append_prometheus(std::string& out) const {
  append_header(out, "lmcc_events_total", "Events counted by the lmcc node, by kind.", "counter");
  events_.for_each([&out](const std::string& name, const counter_entry& e) {
    out += "lmcc_events_total{event=\"";
    append_label_value(out, name);
    out += "\"} ";
    append_uint(out, e.value.load(std::memory_order_relaxed));
    out += '\n';
  });

  append_header(out, "lmcc_request_duration_seconds",
                "Time to handle one request, by operation (message type or HTTP route).",
                "histogram");
  requests_.for_each([&out](const std::string& name, const histogram_entry& e) {
    // One snapshot of the buckets so that they are cumulative and +Inf == _count
    // even while other threads keep observing.
    uint64_t cumulative = 0;
    for (size_t i = 0; i < e.buckets.size(); ++i) {
      cumulative += e.buckets[i].load(std::memory_order_relaxed);
      out += "lmcc_request_duration_seconds_bucket{op=\"";
      append_label_value(out, name);
      out += "\",le=\"";
      out += i < bucket_bounds.size() ? format_prometheus_float(bucket_bounds[i]) : "+Inf";
      out += "\"} ";
      append_uint(out, cumulative);
      out += '\n';
    }
    out += "lmcc_request_duration_seconds_sum{op=\"";
    append_label_value(out, name);
    out += "\"} ";
    out += format_prometheus_float(e.sum.load(std::memory_order_relaxed));
    out += "\nlmcc_request_duration_seconds_count{op=\"";
    append_label_value(out, name);
    out += "\"} ";
    append_uint(out, cumulative);
    out += '\n';
  });

  gauges_.for_each([&out](const std::string& name, const gauge_entry& e) {
    std::string metric = "lmcc_" + sanitize_metric_name(name);
    append_header(out, metric, "Gauge set by the lmcc node.", "gauge");
    out.append(metric).append(" ");
    out.append(format_prometheus_float(e.value.load(std::memory_order_relaxed))).append("\n");
  });
}

// -- render_prometheus ------------------------------------------------------------------

std::string render_prometheus(const controller_gauges& gauges, const frontend_counters& frontend,
                              const node_metrics& metrics) {
  auto d = [](auto v) { return static_cast<double>(v); };
  auto load = [](const auto& a) { return static_cast<double>(a.load(std::memory_order_relaxed)); };
  // Names, order and meaning of spec 5.3 (LMCache observability.py).
  const lmcache_gauge lmcache_gauges[] = {
      {"lmcache:cache_controller_kv_pool_keys_count", "Total chunk keys in the KV index.",
       d(gauges.kv_pool_keys_count)},
      {"lmcache:cache_controller_registered_workers_count", "Number of registered workers.",
       d(gauges.registered_workers_count)},
      {"lmcache:cache_controller_pull_socket_message_count",
       "Cumulative frames received on the PULL socket.", load(frontend.pull_frames)},
      {"lmcache:cache_controller_reply_socket_message_count",
       "Cumulative requests received on the reply and heartbeat ROUTER sockets.",
       load(frontend.reply_requests)},
      {"lmcache:cache_controller_pull_socket_has_pending",
       "1 if the PULL socket had more input pending.", load(frontend.pull_has_pending)},
      {"lmcache:cache_controller_reply_socket_has_pending",
       "1 if the reply ROUTER socket had more input pending.", load(frontend.reply_has_pending)},
      {"lmcache:cache_controller_pull_socket_active_requests",
       "Frames from the PULL socket being processed now.", load(frontend.pull_active)},
      {"lmcache:cache_controller_reply_socket_active_requests",
       "Requests from the ROUTER sockets being processed now.", load(frontend.reply_active)},
      {"lmcache:cache_controller_kv_op_seq_discontinuity_count",
       "KV operation sequence-number gaps seen across all workers.",
       d(gauges.kv_op_seq_discontinuity_count)},
      {"lmcache:cache_controller_full_sync_workers_syncing", "Workers in a full sync now.",
       d(gauges.full_sync_workers_syncing)},
      {"lmcache:cache_controller_full_sync_workers_completed", "Workers whose full sync completed.",
       d(gauges.full_sync_workers_completed)},
      {"lmcache:cache_controller_full_sync_global_progress", "Progress of all full syncs, 0 to 1.",
       gauges.full_sync_global_progress},
      {"lmcache:cache_controller_full_sync_missing_batches_total",
       "Missing batches summed over syncing workers.", d(gauges.full_sync_missing_batches_total)},
  };

  std::string out;
  out.reserve(8192);
  for (const auto& g : lmcache_gauges)
    append_lmcache_gauge(out, g);

  append_header(out, "lmcc_frontend_bad_frames_total",
                "Frames the ZMQ front end could not decode or that came on the wrong socket.",
                "counter");
  out += "lmcc_frontend_bad_frames_total ";
  append_uint(out, frontend.bad_frames.load(std::memory_order_relaxed));
  out += '\n';
  append_header(out, "lmcc_frontend_error_replies_total",
                "ErrorMsg replies sent by the ZMQ front end.", "counter");
  out += "lmcc_frontend_error_replies_total ";
  append_uint(out, frontend.error_replies.load(std::memory_order_relaxed));
  out += '\n';

  metrics.append_prometheus(out);
  return out;
}

} // namespace lmcc::gateway
