// report: what a scenario measured and verified, printed as a table on stdout
// and written as JSON (--json FILE).
//
//   report r{"ingest"};
//   r.add("ops_sent", "ops sent", 123456, "ops");
//   r.check("key count equals ground truth", count == truth, "12 = 12");
//   r.print(std::cout);
//   bool ok = r.passed();
//
// JSON layout: {"scenario", "date_utc", "config", "metrics": {id: value},
// "units": {id: unit}, "checks": [{"name","pass","detail"}], "result"}.
//
// Context: single-threaded.
#pragma once

#include <nlohmann/json.hpp>

#include <ostream>
#include <string>
#include <vector>

namespace lmcc::bench {

class report {
public:
  explicit report(std::string scenario);

  /// A measured figure; `id` is its JSON key, `label` its table text.
  void add(const std::string& id, const std::string& label, double value, const std::string& unit);

  /// A textual fact (e.g. the full-sync reason).
  void note(const std::string& id, const std::string& label, const std::string& value);

  /// A verification: the run passes only if every check does.
  void check(const std::string& name, bool pass, const std::string& detail);

  /// Extra structured data kept only in the JSON (e.g. per-step series).
  nlohmann::json& extra() { return json_["extra"]; }

  void set_config(nlohmann::json config) { json_["config"] = std::move(config); }

  bool passed() const;
  void print(std::ostream& out) const;

  /// Writes the JSON; throws std::runtime_error if the file cannot be written.
  void write_json(const std::string& path) const;

  const nlohmann::json& json() const { return json_; }

private:
  struct row {
    std::string label;
    std::string value;
    std::string unit;
  };
  struct check_row {
    std::string name;
    bool pass = false;
    std::string detail;
  };

  std::string scenario_;
  std::vector<row> rows_;
  std::vector<row> notes_;
  std::vector<check_row> checks_;
  nlohmann::json json_;
};

/// A number as a table shows it: integers without decimals, others with 3
/// significant decimals.
std::string format_value(double value);

} // namespace lmcc::bench
