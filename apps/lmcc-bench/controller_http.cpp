#include "apps/lmcc-bench/controller_http.hpp"

#include "apps/lmcc-bench/zmq_io.hpp"

#include <fmt/format.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include <charconv>
#include <cstdlib>
#include <limits>

namespace lmcc::bench {
namespace {

constexpr std::string_view keys_metric = "lmcache:cache_controller_kv_pool_keys_count";

std::string lookup_body(std::span<const int64_t> tokens) {
  std::string body = R"({"tokens":[)";
  body.reserve(body.size() + tokens.size() * 7 + 2);
  char digits[24];
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (i > 0)
      body += ',';
    auto [end, ec] = std::to_chars(digits, digits + sizeof digits, tokens[i]);
    body.append(digits, end);
  }
  body += "]}";
  return body;
}

} // namespace

controller_http::controller_http(host_port target, std::string key_source,
                                 std::string instance_prefix, uint32_t timeout_ms,
                                 const bench_options::http_access_settings& access)
  : target_(std::move(target)), key_source_(std::move(key_source)),
    prefix_(std::move(instance_prefix) + "-"),
    client_(std::make_unique<httplib::Client>((access.ca_file.empty() ? "http://" : "https://") +
                                              target_.str())) {
  if (!access.ca_file.empty()) {
    client_->enable_server_certificate_verification(true);
    client_->set_ca_cert_path(access.ca_file.c_str());
  }
  if (!access.token.empty())
    client_->set_bearer_token_auth(access.token.c_str());
  const time_t sec = timeout_ms / 1000;
  const time_t usec = static_cast<time_t>(timeout_ms % 1000) * 1000;
  client_->set_connection_timeout(sec, usec);
  client_->set_read_timeout(sec, usec);
  client_->set_write_timeout(sec, usec);
  // Routers keep their connection to the controller open; so do we, so that
  // lookup latency is the controller's, not TCP set-up.
  client_->set_keep_alive(true);
  // httplib writes a request's header and body separately; with Nagle on, the
  // body then waits for the server's delayed ACK (~40 ms on Linux).
  client_->set_tcp_nodelay(true);
}

controller_http::~controller_http() = default;

void controller_http::check_reachable() {
  const std::string path = key_source_ == "metrics" ? "/metrics" : "/controller/key-stats";
  auto res = client_->Get(path.c_str());
  if (!res)
    throw unreachable_error(fmt::format(
        "cannot reach the controller's HTTP API at http://{} ({}) — is a controller running?",
        target_.str(),
        res.error() == httplib::Error::Connection ? "connection refused"
                                                  : httplib::to_string(res.error())));
  if (key_source_ == "auto")
    key_source_ = res->status == 200 ? "key-stats" : "metrics";
  if (!keys())
    throw unreachable_error(
        fmt::format("http://{} answers but gives no key count (GET /controller/key-stats: HTTP {}; "
                    "no {} in /metrics) — is it an LMCache controller?",
                    target_.str(), res->status, keys_metric));
}

std::optional<key_count> controller_http::keys() {
  return key_source_ == "metrics" ? keys_from_metrics() : keys_from_stats();
}

std::optional<key_count> controller_http::keys_from_stats() {
  auto res = client_->Get("/controller/key-stats");
  if (!res || res->status != 200)
    return std::nullopt;
  auto body = nlohmann::json::parse(res->body, nullptr, false);
  if (body.is_discarded() || !body.contains("total_key_count"))
    return std::nullopt;
  key_count count;
  count.total = body["total_key_count"].get<uint64_t>();
  uint64_t ours = 0;
  if (body.contains("instances") && body["instances"].is_array()) {
    for (const auto& instance : body["instances"]) {
      const auto id = instance.value("instance_id", std::string{});
      if (id.starts_with(prefix_))
        ours += instance.value("key_count", uint64_t{0});
    }
    count.ours = ours;
  }
  return count;
}

std::optional<key_count> controller_http::keys_from_metrics() {
  auto value = metric(keys_metric);
  if (!value)
    return std::nullopt;
  return key_count{static_cast<uint64_t>(*value), std::nullopt};
}

std::optional<double> controller_http::metric(std::string_view name) {
  auto res = client_->Get("/metrics");
  if (!res || res->status != 200)
    return std::nullopt;
  return metric_value(res->body, name);
}

std::optional<http_get_result> controller_http::get(const std::string& path) {
  auto res = client_->Get(path.c_str());
  if (!res)
    return std::nullopt;
  return http_get_result{res->status, std::move(res->body)};
}

namespace {

/// Calls `fn(line)` for each line of `text` until it returns true.
template <class Fn>
void for_each_line(std::string_view text, Fn&& fn) {
  size_t pos = 0;
  while (pos < text.size()) {
    size_t eol = text.find('\n', pos);
    if (eol == std::string_view::npos)
      eol = text.size();
    if (fn(text.substr(pos, eol - pos)))
      return;
    pos = eol + 1;
  }
}

} // namespace

std::optional<double> metric_value(std::string_view text, std::string_view name) {
  std::optional<double> found;
  for_each_line(text, [&](std::string_view line) {
    if (!line.starts_with(name) || line.size() <= name.size())
      return false;
    const char next = line[name.size()];
    if (next != '{' && next != ' ')
      return false;
    const size_t space = line.rfind(' ');
    const std::string number{line.substr(space + 1)};
    char* end = nullptr;
    const double v = std::strtod(number.c_str(), &end);
    if (end != number.c_str())
      found = v;
    return found.has_value();
  });
  return found;
}

std::vector<std::pair<double, double>> histogram_buckets(std::string_view text,
                                                         std::string_view name,
                                                         std::string_view label,
                                                         std::string_view value) {
  const std::string prefix = fmt::format("{}_bucket{{{}=\"{}\",le=\"", name, label, value);
  std::vector<std::pair<double, double>> out;
  for_each_line(text, [&](std::string_view line) {
    if (!line.starts_with(prefix))
      return false;
    line.remove_prefix(prefix.size());
    const size_t quote = line.find('"');
    const size_t space = line.rfind(' ');
    if (quote == std::string_view::npos || space == std::string_view::npos || space < quote)
      return false;
    const std::string bound{line.substr(0, quote)};
    const std::string count{line.substr(space + 1)};
    const double le = bound == "+Inf" ? std::numeric_limits<double>::infinity()
                                      : std::strtod(bound.c_str(), nullptr);
    out.emplace_back(le, std::strtod(count.c_str(), nullptr));
    return false;
  });
  return out;
}

http_lookup_result controller_http::lookup(std::span<const int64_t> tokens) {
  http_lookup_result result;
  auto res = client_->Post("/lookup", lookup_body(tokens), "application/json");
  if (!res) {
    result.error = httplib::to_string(res.error());
    return result;
  }
  result.status = res->status;
  if (res->status != 200) {
    result.error = fmt::format("HTTP {}: {}", res->status, res->body.substr(0, 200));
    return result;
  }
  auto body = nlohmann::json::parse(res->body, nullptr, false);
  if (body.is_discarded() || !body.contains("layout_info") || !body["layout_info"].is_object()) {
    result.error = "no layout_info object in: " + res->body.substr(0, 200);
    return result;
  }
  for (const auto& [instance, entry] : body["layout_info"].items()) {
    if (!entry.is_array() || entry.size() != 2 || !entry[0].is_string() ||
        !entry[1].is_number_integer()) {
      result.error = "bad layout_info entry: " + entry.dump();
      return result;
    }
    result.layout.push_back(
        layout_entry{instance, entry[0].get<std::string>(), entry[1].get<int64_t>()});
  }
  result.ok = true;
  return result;
}

} // namespace lmcc::bench
