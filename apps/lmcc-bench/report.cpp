#include "apps/lmcc-bench/report.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <fstream>
#include <stdexcept>

namespace lmcc::bench {
namespace {

std::string utc_now() {
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&now, &tm);
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}Z", tm.tm_year + 1900, tm.tm_mon + 1,
                     tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
}

} // namespace

std::string format_value(double value) {
  if (std::isfinite(value) && std::fabs(value) < 1e15 && value == std::floor(value))
    return fmt::format("{}", static_cast<int64_t>(value));
  if (std::fabs(value) >= 1000)
    return fmt::format("{:.1f}", value);
  return fmt::format("{:.3f}", value);
}

report::report(std::string scenario) : scenario_(std::move(scenario)) {
  json_["scenario"] = scenario_;
  json_["date_utc"] = utc_now();
  json_["metrics"] = nlohmann::json::object();
  json_["units"] = nlohmann::json::object();
  json_["checks"] = nlohmann::json::array();
}

void report::add(const std::string& id, const std::string& label, double value,
                 const std::string& unit) {
  rows_.push_back(row{label, format_value(value), unit});
  json_["metrics"][id] = value;
  json_["units"][id] = unit;
}

void report::note(const std::string& id, const std::string& label, const std::string& value) {
  notes_.push_back(row{label, value, ""});
  json_["metrics"][id] = value;
}

void report::check(const std::string& name, bool pass, const std::string& detail) {
  checks_.push_back(check_row{name, pass, detail});
  json_["checks"].push_back({{"name", name}, {"pass", pass}, {"detail", detail}});
  json_["result"] = passed() ? "PASS" : "FAIL";
}

bool report::passed() const {
  return std::all_of(checks_.begin(), checks_.end(), [](const auto& c) { return c.pass; });
}

void report::print(std::ostream& out) const {
  size_t label_width = 6;
  size_t value_width = 5;
  for (const auto& r : rows_) {
    label_width = std::max(label_width, r.label.size());
    value_width = std::max(value_width, r.value.size());
  }
  out << fmt::format("== lmcc-bench {} ==\n", scenario_);
  out << fmt::format("{:<{}}  {:>{}}  {}\n", "metric", label_width, "value", value_width, "unit");
  out << std::string(label_width + value_width + 10, '-') << '\n';
  for (const auto& r : rows_)
    out << fmt::format("{:<{}}  {:>{}}  {}\n", r.label, label_width, r.value, value_width, r.unit);
  for (const auto& n : notes_)
    out << fmt::format("{}: {}\n", n.label, n.value);
  if (!checks_.empty()) {
    out << "checks:\n";
    for (const auto& c : checks_)
      out << fmt::format("  {:<4}  {}  ({})\n", c.pass ? "PASS" : "FAIL", c.name, c.detail);
  }
  out << fmt::format("RESULT: {}\n", passed() ? "PASS" : "FAIL");
  out.flush();
}

void report::write_json(const std::string& path) const {
  std::ofstream file{path};
  if (!file)
    throw std::runtime_error("cannot write " + path);
  nlohmann::json out = json_;
  out["result"] = passed() ? "PASS" : "FAIL";
  file << out.dump(2) << '\n';
  if (!file)
    throw std::runtime_error("cannot write " + path);
}

} // namespace lmcc::bench
