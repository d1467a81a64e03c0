// node_config_values: the kinds of value an `lmcc node` option can take.
//
// Each kind has one parser, used for every source of a value (YAML file,
// environment, command-line flag, extra --key=value), one YAML emitter, used
// by --dump-config and the generated docs, and a description of what it
// accepts. A kind is a small const object of this shape:
//
//   struct some_kind {
//     using value_type = ...;                                 // what the options struct holds
//     refusal parse(const json& in, value_type& out) const;   // nullopt = accepted
//     void emit(YAML::Emitter& out, const value_type& v) const;
//     std::string accepts() const;                            // "1..65535", "on or off", ...
//     std::string show(const value_type& v) const;            // optional: docs text of a value
//   };
//
// Values arrive as JSON: YAML scalars, environment values and flag text are
// strings, so each kind converts text itself (as LMCache's per-key converters
// do after its auto-typing); YAML sequences and mappings arrive as arrays and
// objects, and list and record kinds also take them as JSON text, so that
// the environment and the command line can carry them too.
//
//   integer_kind<uint16_t> port{1, 65535};
//   uint16_t p = 0;
//   if (auto why = port.parse(json("8300"), p)) error(*why);  // "expected an integer in ..."
//
// Context: pure functions of their arguments; thread-safe.
#pragma once

#include <nlohmann/json.hpp>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace lmcc::apps::config {

using json = nlohmann::json;

/// nullopt = accepted; otherwise why the value was refused, without the key
/// or the source (the caller prefixes those).
using refusal = std::optional<std::string>;

// -- text helpers ------------------------------------------------------------

std::string_view trim(std::string_view text);
std::string in_quotes(std::string_view text);
std::string lower_case(std::string_view text);

/// A value as the user wrote it, for messages: 'abc'.
std::string value_in_quotes(const json& value);

/// How a value that is not text reads in a message: null, a mapping, ...
std::string describe(const json& value);

/// The text of a scalar, or why `value` is not one ("expected <expected>, got a list").
refusal scalar_text(const json& value, std::string_view expected, std::string& out);

/// An integer in [min, max] (Python's int(): surrounding blanks and a leading
/// '+' allowed).
refusal parse_integer(const json& value, int64_t min, int64_t max, int64_t& out);

/// A finite number; `expected` words the message.
refusal parse_number(const json& value, std::string_view expected, double& out);

/// Shortest text that reads back as the same double; 300.0 prints as 300.
std::string number_text(double value);

/// "in 1..65535", ">= 1", or "" for the whole int64 range.
std::string range_phrase(int64_t min, int64_t max);

/// `noun` followed by its range phrase: "an integer in 1..65535", "an integer".
std::string with_range(std::string_view noun, int64_t min, int64_t max);

/// A YAML node as JSON, scalars kept as strings (as the parsers expect).
json yaml_to_json(const YAML::Node& node);

/// The YAML text `kind` emits for `value` alone: 9000, "0.0.0.0", [a, b].
template <class Kind>
std::string emit_text(const Kind& kind, const typename Kind::value_type& value) {
  YAML::Emitter out;
  kind.emit(out, value);
  return out.c_str();
}

/// How the docs show `value`: the kind's show() if it has one, else its YAML.
template <class Kind>
std::string show_text(const Kind& kind, const typename Kind::value_type& value) {
  if constexpr (requires { kind.show(value); })
    return kind.show(value);
  else
    return emit_text(kind, value);
}

// -- scalar kinds ----------------------------------------------------------------

/// A whole number in [min, max], optionally a power of two.
template <class T>
struct integer_kind {
  using value_type = T;
  int64_t min = std::numeric_limits<int64_t>::min();
  int64_t max = std::numeric_limits<int64_t>::max();
  bool power_of_two = false;

  refusal parse(const json& in, T& out) const {
    int64_t value = 0;
    if (auto why = parse_integer(in, min, max, value))
      return why;
    if (power_of_two && (value & (value - 1)) != 0)
      return "expected a power of two, got " + std::to_string(value);
    out = static_cast<T>(value);
    return std::nullopt;
  }
  void emit(YAML::Emitter& out, const T& value) const { out << std::to_string(value); }
  std::string accepts() const {
    std::string text = with_range("an integer", min, max);
    return power_of_two ? text + ", a power of two" : text;
  }
};

/// A size in bytes, written as a plain integer; the docs add MiB or KiB.
struct byte_size_kind : integer_kind<size_t> {
  std::string show(const size_t& bytes) const;
  std::string accepts() const { return with_range("bytes", min, max); }
};

/// A size written in whole MiB, held in bytes.
struct mebibytes_kind {
  using value_type = size_t;
  int64_t min_mib = 1;
  int64_t max_mib = int64_t{1} << 20;

  refusal parse(const json& in, size_t& bytes) const;
  void emit(YAML::Emitter& out, const size_t& bytes) const;
  std::string accepts() const { return with_range("MiB", min_mib, max_mib); }
};

/// A duration written in (fractional) seconds > 0, held in milliseconds.
struct seconds_kind {
  using value_type = std::chrono::milliseconds;
  /// Large enough for "never", small enough that milliseconds fit an int64.
  double max_seconds = 1e9;

  refusal parse(const json& in, std::chrono::milliseconds& out) const;
  void emit(YAML::Emitter& out, const std::chrono::milliseconds& value) const;
  std::string accepts() const;
};

/// A duration written in whole milliseconds.
struct milliseconds_kind {
  using value_type = std::chrono::milliseconds;
  int64_t min = 1;
  int64_t max = int64_t{1'000'000'000} * 1000;

  refusal parse(const json& in, std::chrono::milliseconds& out) const;
  void emit(YAML::Emitter& out, const std::chrono::milliseconds& value) const;
  std::string accepts() const { return with_range("milliseconds", min, max); }
};

/// A period in seconds >= min, or `off` (LMCache's -1) to disable it.
struct seconds_or_off_kind {
  using value_type = double;
  double off = -1;
  double min = 1;
  double max = 1e9;

  refusal parse(const json& in, double& out) const;
  void emit(YAML::Emitter& out, const double& value) const { out << number_text(value); }
  std::string accepts() const;
};

/// A number in [min, max].
struct number_kind {
  using value_type = double;
  double min = 0;
  double max = 1;

  refusal parse(const json& in, double& out) const;
  void emit(YAML::Emitter& out, const double& value) const { out << number_text(value); }
  std::string accepts() const;
};

/// on/off (also true/false, yes/no, 1/0, any case).
struct switch_kind {
  using value_type = bool;

  refusal parse(const json& in, bool& out) const;
  void emit(YAML::Emitter& out, const bool& value) const { out << (value ? "on" : "off"); }
  std::string accepts() const { return "on or off"; }
};

/// A string, emitted double-quoted so that "null" or "" stay strings.
struct text_kind {
  using value_type = std::string;
  bool non_empty = false;     ///< refuse "" (and blanks only)
  bool trim_blanks = false;   ///< drop surrounding blanks
  bool null_is_empty = false; ///< YAML null reads as ""

  refusal parse(const json& in, std::string& out) const;
  void emit(YAML::Emitter& out, const std::string& value) const;
  std::string accepts() const { return non_empty ? "a non-empty string" : "a string"; }
};

/// One of a fixed set of words, any case; `aliases` map other words to them.
struct choice_kind {
  using value_type = std::string;
  std::span<const std::string_view> choices;
  std::span<const std::pair<std::string_view, std::string_view>> aliases;

  refusal parse(const json& in, std::string& out) const;
  void emit(YAML::Emitter& out, const std::string& value) const;
  std::string accepts() const;
};

// -- structured kinds ------------------------------------------------------------

/// JSON text (from the environment or a flag) as a value; other values as they are.
refusal json_from_text(const json& in, std::string_view expected, json& out);

/// A list of `Element`s: a YAML sequence, a JSON array, or comma-separated text.
template <class Element>
struct list_kind {
  using value_type = std::vector<typename Element::value_type>;
  Element element;
  size_t max_items = 1 << 16;

  refusal parse(const json& in, value_type& out) const {
    json items = in;
    if (in.is_string()) {
      std::string_view text = trim(in.get_ref<const std::string&>());
      if (text.starts_with('[')) {
        if (auto why = json_from_text(in, accepts(), items))
          return why;
      } else {
        items = json::array();
        for (size_t start = 0; !text.empty() && start <= text.size();) {
          size_t comma = std::min(text.find(',', start), text.size());
          items.push_back(std::string(trim(text.substr(start, comma - start))));
          start = comma + 1;
        }
      }
    }
    if (!items.is_array())
      return "expected " + accepts() + ", got " + describe(items);
    if (items.size() > max_items)
      return "expected at most " + std::to_string(max_items) + " items, got " +
             std::to_string(items.size());
    value_type parsed;
    for (size_t i = 0; i < items.size(); ++i) {
      typename Element::value_type item{};
      if (auto why = element.parse(items[i], item))
        return "[" + std::to_string(i) + "]: " + *why;
      parsed.push_back(std::move(item));
    }
    out = std::move(parsed);
    return std::nullopt;
  }
  void emit(YAML::Emitter& out, const value_type& value) const {
    out << YAML::Flow << YAML::BeginSeq;
    for (const auto& item : value)
      element.emit(out, item);
    out << YAML::EndSeq;
  }
  std::string accepts() const { return "a list of " + element.accepts(); }
};

/// One named field of a record_kind<T>.
template <class T>
struct record_field {
  std::string_view name;
  bool required = true;
  std::function<refusal(const json&, T&)> parse;
  std::function<void(YAML::Emitter&, const T&)> emit;
  std::string accepts;
};

/// A field of record `T` held in `member` and read by `kind`.
template <class T, class Kind, class Member>
record_field<T> field_of(std::string_view name, Member T::*member, Kind kind,
                         bool required = true) {
  record_field<T> f{name, required, {}, {}, kind.accepts()};
  f.parse = [member, kind](const json& in, T& record) { return kind.parse(in, record.*member); };
  f.emit = [member, kind](YAML::Emitter& out, const T& record) { kind.emit(out, record.*member); };
  return f;
}

/// A mapping with named fields, e.g. a cluster member {id, host, port}; also
/// as a JSON object in text. Unknown fields are refused (a typo would
/// otherwise silently drop a setting); missing optional fields keep T's
/// initializer.
template <class T>
struct record_kind {
  using value_type = T;
  std::vector<record_field<T>> fields;

  refusal parse(const json& in, T& out) const {
    json object;
    if (auto why = json_from_text(in, accepts(), object))
      return why;
    if (!object.is_object())
      return "expected " + accepts() + ", got " + describe(object);
    T parsed{};
    for (const auto& f : fields) {
      auto it = object.find(std::string(f.name));
      if (it == object.end()) {
        if (f.required) // appended, not "\"" + name: GCC 12 -O3 warns falsely (-Wrestrict)
          return std::string(1, '"').append(f.name).append("\" is missing");
        continue;
      }
      if (auto why = f.parse(*it, parsed))
        return "\"" + std::string(f.name) + "\": " + *why;
    }
    for (const auto& [name, ignored] : object.items())
      if (std::none_of(fields.begin(), fields.end(), [&](const auto& f) { return f.name == name; }))
        return "unknown field \"" + name + "\" (expected " + accepts() + ")";
    out = std::move(parsed);
    return std::nullopt;
  }
  void emit(YAML::Emitter& out, const T& value) const {
    out << YAML::Flow << YAML::BeginMap;
    for (const auto& f : fields) {
      out << YAML::Key << std::string(f.name) << YAML::Value;
      f.emit(out, value);
    }
    out << YAML::EndMap;
  }
  std::string accepts() const {
    std::string text = "{";
    for (const auto& f : fields)
      text += (text.size() > 1 ? ", " : "") + std::string(f.name) + (f.required ? "" : "?") + ": " +
              f.accepts;
    return text + "}";
  }
};

} // namespace lmcc::apps::config
