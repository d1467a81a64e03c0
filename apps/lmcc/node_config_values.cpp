#include "apps/lmcc/node_config_values.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <cmath>

namespace lmcc::apps::config {

// -- text helpers ------------------------------------------------------------

std::string_view trim(std::string_view text) {
  auto is_space = [](char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; };
  while (!text.empty() && is_space(text.front()))
    text.remove_prefix(1);
  while (!text.empty() && is_space(text.back()))
    text.remove_suffix(1);
  return text;
}

std::string in_quotes(std::string_view text) {
  // Appended piecewise: GCC 12 warns falsely (-Wrestrict) on "'" + std::string(text).
  std::string out;
  out.reserve(text.size() + 2);
  out += '\'';
  out += text;
  out += '\'';
  return out;
}

std::string lower_case(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

std::string value_in_quotes(const json& value) {
  return in_quotes(value.is_string() ? value.get_ref<const std::string&>() : value.dump());
}

std::string describe(const json& value) {
  if (value.is_null())
    return "null";
  if (value.is_object())
    return "a mapping";
  if (value.is_array())
    return "a list";
  return in_quotes(value.dump());
}

refusal scalar_text(const json& value, std::string_view expected, std::string& out) {
  if (value.is_string()) {
    out = value.get<std::string>();
    return std::nullopt;
  }
  // JSON numbers and booleans (inside JSON text such as monitor ports).
  if (value.is_number() || value.is_boolean()) {
    out = value.dump();
    return std::nullopt;
  }
  return "expected " + std::string(expected) + ", got " + describe(value);
}

std::string range_phrase(int64_t min, int64_t max) {
  if (max != std::numeric_limits<int64_t>::max())
    return "in " + std::to_string(min) + ".." + std::to_string(max);
  if (min != std::numeric_limits<int64_t>::min())
    return ">= " + std::to_string(min);
  return "";
}

std::string with_range(std::string_view noun, int64_t min, int64_t max) {
  std::string phrase = range_phrase(min, max);
  return phrase.empty() ? std::string(noun) : std::string(noun) + " " + phrase;
}

/// Python's int() and float() accept a leading '+'; from_chars does not.
std::string_view without_plus(std::string_view text) {
  if (text.size() > 1 && text.front() == '+' && text[1] != '-')
    text.remove_prefix(1);
  return text;
}

refusal parse_integer(const json& value, int64_t min, int64_t max, int64_t& out) {
  std::string expected = with_range("an integer", min, max);
  std::string raw;
  if (auto why = scalar_text(value, expected, raw))
    return why;
  std::string_view text = without_plus(trim(raw));
  int64_t parsed = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), parsed);
  if (text.empty() || ec != std::errc{} || end != text.data() + text.size() || parsed < min ||
      parsed > max)
    return "expected " + expected + ", got " + in_quotes(raw);
  out = parsed;
  return std::nullopt;
}

refusal parse_number(const json& value, std::string_view expected, double& out) {
  std::string raw;
  if (auto why = scalar_text(value, expected, raw))
    return why;
  std::string_view text = without_plus(trim(raw));
  double parsed = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), parsed);
  if (text.empty() || ec != std::errc{} || end != text.data() + text.size() ||
      !std::isfinite(parsed))
    return "expected " + std::string(expected) + ", got " + in_quotes(raw);
  out = parsed;
  return std::nullopt;
}

std::string number_text(double value) {
  std::array<char, 64> buffer{};
  auto [end, ec] = std::to_chars(buffer.data(), buffer.data() + buffer.size(), value);
  if (ec != std::errc{})
    return std::to_string(value);
  return std::string(buffer.data(), end);
}

namespace {

/// number_text for messages: 1e+09 reads as 1e9.
std::string short_number_text(double value) {
  std::string text = number_text(value);
  if (auto e = text.find("e+"); e != std::string::npos) {
    size_t digits = e + 2;
    while (digits + 1 < text.size() && text[digits] == '0')
      ++digits;
    text = text.substr(0, e + 1) + text.substr(digits);
  }
  return text;
}

std::string seconds_text(std::chrono::milliseconds duration) {
  if (duration.count() % 1000 == 0)
    return std::to_string(duration.count() / 1000);
  return number_text(static_cast<double>(duration.count()) / 1000.0);
}

} // namespace

json yaml_to_json(const YAML::Node& node) {
  switch (node.Type()) {
  case YAML::NodeType::Scalar:
    return node.Scalar();
  case YAML::NodeType::Sequence: {
    json out = json::array();
    for (const auto& item : node)
      out.push_back(yaml_to_json(item));
    return out;
  }
  case YAML::NodeType::Map: {
    json out = json::object();
    for (const auto& item : node)
      out[item.first.Scalar()] = yaml_to_json(item.second);
    return out;
  }
  default:
    return nullptr;
  }
}

refusal json_from_text(const json& in, std::string_view expected, json& out) {
  if (!in.is_string()) {
    out = in;
    return std::nullopt;
  }
  std::string_view text = trim(in.get_ref<const std::string&>());
  out = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (out.is_discarded())
    return "expected " + std::string(expected) + ", got " + in_quotes(text);
  return std::nullopt;
}

// -- scalar kinds ----------------------------------------------------------------

std::string byte_size_kind::show(const size_t& bytes) const {
  std::string text = std::to_string(bytes);
  if (bytes != 0 && bytes % (size_t{1} << 20) == 0)
    return text + " (" + std::to_string(bytes >> 20) + " MiB)";
  if (bytes != 0 && bytes % (size_t{1} << 10) == 0)
    return text + " (" + std::to_string(bytes >> 10) + " KiB)";
  return text;
}

refusal mebibytes_kind::parse(const json& in, size_t& bytes) const {
  int64_t mib = 0;
  if (auto why = parse_integer(in, min_mib, max_mib, mib))
    return why;
  bytes = static_cast<size_t>(mib) << 20;
  return std::nullopt;
}

void mebibytes_kind::emit(YAML::Emitter& out, const size_t& bytes) const {
  out << std::to_string(bytes >> 20);
}

refusal seconds_kind::parse(const json& in, std::chrono::milliseconds& out) const {
  constexpr std::string_view expected = "a number of seconds > 0";
  double seconds = 0;
  if (auto why = parse_number(in, expected, seconds))
    return why;
  // Range first: llround of an out-of-range double has no meaningful result.
  if (seconds <= 0 || seconds > max_seconds || std::llround(seconds * 1000.0) < 1)
    return "expected " + accepts() + ", got " + value_in_quotes(in);
  out = std::chrono::milliseconds{std::llround(seconds * 1000.0)};
  return std::nullopt;
}

void seconds_kind::emit(YAML::Emitter& out, const std::chrono::milliseconds& value) const {
  out << seconds_text(value);
}

std::string seconds_kind::accepts() const {
  return "a number of seconds > 0 (at most " + short_number_text(max_seconds) + ")";
}

refusal milliseconds_kind::parse(const json& in, std::chrono::milliseconds& out) const {
  int64_t ms = 0;
  if (auto why = parse_integer(in, min, max, ms))
    return why;
  out = std::chrono::milliseconds{ms};
  return std::nullopt;
}

void milliseconds_kind::emit(YAML::Emitter& out, const std::chrono::milliseconds& value) const {
  out << std::to_string(value.count());
}

refusal seconds_or_off_kind::parse(const json& in, double& out) const {
  double seconds = 0;
  if (auto why = parse_number(in, accepts(), seconds))
    return why;
  // LMCache's validate(): anything but the off value below the minimum is refused.
  if ((seconds != off && seconds < min) || seconds > max)
    return "must be " + number_text(off) +
           " (disabled) or a number of seconds >= " + number_text(min) + ", got " +
           value_in_quotes(in);
  out = seconds;
  return std::nullopt;
}

std::string seconds_or_off_kind::accepts() const {
  return number_text(off) + " or a number of seconds >= " + number_text(min);
}

refusal number_kind::parse(const json& in, double& out) const {
  double value = 0;
  if (auto why = parse_number(in, accepts(), value))
    return why;
  if (value < min || value > max)
    return "expected " + accepts() + ", got " + value_in_quotes(in);
  out = value;
  return std::nullopt;
}

std::string number_kind::accepts() const {
  return "a number in [" + number_text(min) + ", " + number_text(max) + "]";
}

refusal switch_kind::parse(const json& in, bool& out) const {
  std::string raw;
  if (auto why = scalar_text(in, accepts(), raw))
    return why;
  std::string text = lower_case(trim(raw));
  if (text == "on" || text == "true" || text == "1" || text == "yes") {
    out = true;
    return std::nullopt;
  }
  if (text == "off" || text == "false" || text == "0" || text == "no") {
    out = false;
    return std::nullopt;
  }
  return "expected " + accepts() + ", got " + in_quotes(raw);
}

refusal text_kind::parse(const json& in, std::string& out) const {
  // LMCache's default for such keys is "", so null reads as "not set".
  if (null_is_empty && in.is_null()) {
    out.clear();
    return std::nullopt;
  }
  std::string raw;
  if (auto why = scalar_text(in, accepts(), raw))
    return why;
  if (non_empty && trim(raw).empty())
    return "expected " + accepts() + ", got ''";
  out = trim_blanks ? std::string(trim(raw)) : std::move(raw);
  return std::nullopt;
}

void text_kind::emit(YAML::Emitter& out, const std::string& value) const {
  out << YAML::DoubleQuoted << value;
}

refusal choice_kind::parse(const json& in, std::string& out) const {
  std::string raw;
  if (auto why = text_kind{.non_empty = true}.parse(in, raw))
    return why;
  std::string word = lower_case(trim(raw));
  for (const auto& [alias, meaning] : aliases)
    if (word == alias)
      word = meaning;
  if (std::find(choices.begin(), choices.end(), word) == choices.end())
    return "expected " + accepts() + ", got " + value_in_quotes(in);
  out = std::move(word);
  return std::nullopt;
}

void choice_kind::emit(YAML::Emitter& out, const std::string& value) const {
  out << YAML::DoubleQuoted << value;
}

std::string choice_kind::accepts() const {
  std::string text = "one of ";
  for (size_t i = 0; i < choices.size(); ++i)
    text += (i == 0 ? "" : ", ") + std::string(choices[i]);
  return text;
}

} // namespace lmcc::apps::config
