#include "apps/lmcc/node_config.hpp"

#include "messages/chunk_hash.hpp"

#include <nlohmann/json.hpp>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>
#include <string_view>
#include <unistd.h>

extern char** environ; // NOLINT: POSIX, not declared by <unistd.h> without _GNU_SOURCE

namespace lmcc::apps {
namespace {

using json = nlohmann::json;

constexpr std::string_view env_prefix = "LMCACHE_CONTROLLER_";
constexpr std::string_view config_file_env = "LMCACHE_CONTROLLER_CONFIG_FILE";

/// LMCache's default pull port when controller_monitor_ports is null.
constexpr uint16_t legacy_default_monitor_port = 9001;

/// Longest duration accepted in seconds: large enough for "never", small
/// enough that milliseconds fit an int64 with room to spare.
constexpr double max_seconds = 1e9;

/// The sources of a value, lowest precedence first.
enum class layer { yaml = 1, env = 2, cli = 3, extra = 4 };

/// What the layers build up; `options` starts at node_options' defaults, so
/// those stay the single place defaults are written down.
struct resolve_state {
  node_options options;

  /// controller_monitor_ports resolved to null: LMCache's legacy mode.
  bool monitor_ports_null = false;

  // Both set the initial chain hash; the higher layer wins (see fold_hashing).
  struct hash_setting {
    int64_t none_hash = 0;
    layer from = layer::yaml;
    std::string label;
  };
  std::optional<hash_setting> none_hash;
  std::optional<hash_setting> python_hash_seed;

  /// Where the value being applied comes from.
  layer current = layer::yaml;
  std::string current_label;

  std::vector<std::string> warnings;
  std::vector<std::string> errors;
};

/// nullopt = fine; otherwise why the value was refused (the caller prefixes
/// the key and source).
using refusal = std::optional<std::string>;

// -- reading one value -------------------------------------------------------

std::string_view trim(std::string_view text) {
  auto is_space = [](char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; };
  while (!text.empty() && is_space(text.front()))
    text.remove_prefix(1);
  while (!text.empty() && is_space(text.back()))
    text.remove_suffix(1);
  return text;
}

std::string in_quotes(std::string_view text) {
  return "'" + std::string(text) + "'";
}

/// A value as the user wrote it, for messages.
std::string value_in_quotes(const nlohmann::json& value) {
  return in_quotes(value.is_string() ? value.get_ref<const std::string&>() : value.dump());
}

/// How a non-text value reads in a message.
std::string describe(const json& value) {
  if (value.is_null())
    return "null";
  if (value.is_object())
    return "a mapping";
  if (value.is_array())
    return "a list";
  return in_quotes(value.dump());
}

/// The text of a scalar; YAML scalars, environment values and flags all
/// arrive as strings, JSON numbers (inside monitor ports) as numbers.
refusal scalar_text(const json& value, std::string_view expected, std::string& out) {
  if (value.is_string()) {
    out = value.get<std::string>();
    return std::nullopt;
  }
  if (value.is_number() || value.is_boolean()) {
    out = value.dump();
    return std::nullopt;
  }
  return "expected " + std::string(expected) + ", got " + describe(value);
}

refusal parse_integer(const json& value, int64_t min, int64_t max, int64_t& out) {
  std::string expected = "an integer";
  if (max == std::numeric_limits<int64_t>::max()) {
    if (min != std::numeric_limits<int64_t>::min())
      expected += " >= " + std::to_string(min);
  } else {
    expected += " in " + std::to_string(min) + ".." + std::to_string(max);
  }
  std::string raw;
  if (auto why = scalar_text(value, expected, raw))
    return why;
  std::string_view text = trim(raw);
  // Python's int() accepts a leading '+'; from_chars does not.
  if (text.size() > 1 && text.front() == '+' && text[1] != '-')
    text.remove_prefix(1);
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
  std::string_view text = trim(raw);
  if (text.size() > 1 && text.front() == '+' && text[1] != '-')
    text.remove_prefix(1);
  double parsed = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), parsed);
  if (text.empty() || ec != std::errc{} || end != text.data() + text.size() ||
      !std::isfinite(parsed))
    return "expected " + std::string(expected) + ", got " + in_quotes(raw);
  out = parsed;
  return std::nullopt;
}

refusal parse_seconds(const json& value, std::chrono::milliseconds& out) {
  constexpr std::string_view expected = "a number of seconds > 0";
  double seconds = 0;
  if (auto why = parse_number(value, expected, seconds))
    return why;
  // Range first: llround of an out-of-range double has no meaningful result.
  if (seconds <= 0 || seconds > max_seconds || std::llround(seconds * 1000.0) < 1)
    return "expected " + std::string(expected) + " (at most 1e9), got " + value_in_quotes(value);
  out = std::chrono::milliseconds{std::llround(seconds * 1000.0)};
  return std::nullopt;
}

refusal parse_text(const json& value, bool allow_empty, std::string& out) {
  std::string raw;
  if (auto why = scalar_text(value, allow_empty ? "a string" : "a non-empty string", raw))
    return why;
  if (!allow_empty && trim(raw).empty())
    return std::string("expected a non-empty string, got ''");
  out = std::move(raw);
  return std::nullopt;
}

template <class T>
refusal parse_unsigned(const json& value, int64_t min, int64_t max, T& out) {
  int64_t parsed = 0;
  if (auto why = parse_integer(value, min, max, parsed))
    return why;
  out = static_cast<T>(parsed);
  return std::nullopt;
}

refusal parse_port(const json& value, uint16_t& out) {
  return parse_unsigned(value, 1, 65535, out);
}

// -- the keys ------------------------------------------------------------------

refusal apply_host(const json& v, resolve_state& s) {
  std::string host;
  if (auto why = parse_text(v, false, host))
    return why;
  // LMCache binds HTTP and every ZMQ socket on controller_host.
  s.options.http.host = host;
  s.options.zmq.host = std::move(host);
  return std::nullopt;
}

refusal apply_port(const json& v, resolve_state& s) {
  return parse_port(v, s.options.http.port);
}

refusal apply_monitor_ports(const json& v, resolve_state& s) {
  constexpr std::string_view expected =
      R"(a JSON object like {"pull": 8300, "reply": 8400, "heartbeat": 8082})";
  json ports = v;
  if (v.is_string()) {
    std::string_view text = trim(v.get_ref<const std::string&>());
    // LMCache's converter: `json.loads(x) if x else None`.
    if (text.empty()) {
      ports = nullptr;
    } else {
      ports = json::parse(text, nullptr, /*allow_exceptions=*/false);
      if (ports.is_discarded())
        return "expected " + std::string(expected) + ", got " + in_quotes(text);
    }
  }
  if (ports.is_null()) {
    s.monitor_ports_null = true;
    return std::nullopt;
  }
  if (!ports.is_object())
    return "expected " + std::string(expected) + ", got " + describe(ports);

  // LMCache indexes ports['pull'] and ports['reply'] unconditionally.
  for (const char* required : {"pull", "reply"})
    if (!ports.contains(required))
      return std::string("\"") + required + "\" is missing (pull and reply are both required)";
  uint16_t pull = 0;
  uint16_t reply = 0;
  if (auto why = parse_port(ports["pull"], pull))
    return "\"pull\": " + *why;
  if (auto why = parse_port(ports["reply"], reply))
    return "\"reply\": " + *why;
  // LMCache opens S3 only when ports.get("heartbeat") is truthy, so an absent,
  // null or 0 heartbeat means no heartbeat socket.
  std::optional<uint16_t> heartbeat;
  if (ports.contains("heartbeat")) {
    const json& hb = ports["heartbeat"];
    bool off = hb.is_null() || (hb.is_number_integer() && hb.get<int64_t>() == 0) ||
               (hb.is_string() && trim(hb.get_ref<const std::string&>()) == "0");
    if (!off) {
      uint16_t port = 0;
      if (auto why = parse_port(hb, port))
        return "\"heartbeat\": " + *why + " (null or 0 turns the heartbeat socket off)";
      heartbeat = port;
    }
  }
  for (const auto& [name, ignored] : ports.items())
    if (name != "pull" && name != "reply" && name != "heartbeat")
      s.warnings.push_back(s.current_label + ": unknown monitor port \"" + name + "\" ignored");
  s.monitor_ports_null = false;
  s.options.zmq.pull_port = pull;
  s.options.zmq.reply_port = reply;
  s.options.zmq.heartbeat_port = heartbeat;
  return std::nullopt;
}

refusal apply_health_check_interval(const json& v, resolve_state& s) {
  double seconds = 0;
  if (auto why = parse_number(v, "-1 or a number of seconds >= 1", seconds))
    return why;
  // LMCache's validate(): anything but -1 below 1 is refused.
  if ((seconds != -1 && seconds < 1) || seconds > max_seconds)
    return "must be -1 (disabled) or a number of seconds >= 1, got " + value_in_quotes(v);
  s.options.controller.health_check_interval_s = seconds;
  return std::nullopt;
}

refusal apply_worker_timeout(const json& v, resolve_state& s) {
  return parse_seconds(v, s.options.controller.lmcache_worker_timeout);
}

refusal apply_advertise_host(const json& v, resolve_state& s) {
  // LMCache's default is "", so null reads as "not set" here.
  if (v.is_null()) {
    s.options.zmq.advertise_host.clear();
    return std::nullopt;
  }
  std::string host;
  if (auto why = parse_text(v, true, host))
    return why;
  s.options.zmq.advertise_host = std::string(trim(host));
  return std::nullopt;
}

refusal apply_extra_config(const json& v, resolve_state& s) {
  // Free-form in LMCache and read by nothing in its controller; accepted so
  // existing configuration files keep working.
  bool empty = v.is_null() || (v.is_string() && trim(v.get_ref<const std::string&>()).empty());
  if (!empty)
    s.warnings.push_back(s.current_label + ": extra_config is accepted but not used by lmcc");
  return std::nullopt;
}

refusal apply_node_id(const json& v, resolve_state& s) {
  return parse_text(v, false, s.options.controller.node_id);
}

refusal apply_shards(const json& v, resolve_state& s) {
  return parse_unsigned(v, 1, 65536, s.options.controller.shard_count);
}

refusal apply_slots(const json& v, resolve_state& s) {
  int64_t slots = 0;
  if (auto why = parse_integer(v, 1, int64_t{1} << 31, slots))
    return why;
  // slot = mix64(key) mod slot_count must stay a mask for handoff arithmetic.
  if ((slots & (slots - 1)) != 0)
    return "expected a power of two, got " + std::to_string(slots);
  s.options.controller.slot_count = static_cast<uint32_t>(slots);
  return std::nullopt;
}

refusal apply_data_dir(const json& v, resolve_state& s) {
  return parse_text(v, false, s.options.data_dir);
}

refusal parse_switch(const json& v, bool& out) {
  std::string raw;
  if (auto why = scalar_text(v, "on or off", raw))
    return why;
  std::string text{trim(raw)};
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (text == "on" || text == "true" || text == "1" || text == "yes") {
    out = true;
    return std::nullopt;
  }
  if (text == "off" || text == "false" || text == "0" || text == "no") {
    out = false;
    return std::nullopt;
  }
  return "expected on or off, got " + in_quotes(raw);
}

refusal apply_persistence(const json& v, resolve_state& s) {
  return parse_switch(v, s.options.persistence);
}

refusal apply_persist_sync(const json& v, resolve_state& s) {
  return parse_switch(v, s.options.store.sync);
}

/// A size in MiB (1..max_mib) into bytes.
refusal parse_mib(const json& v, int64_t max_mib, size_t& bytes) {
  uint64_t mib = 0;
  if (auto why = parse_unsigned(v, 1, max_mib, mib))
    return why;
  bytes = static_cast<size_t>(mib) << 20;
  return std::nullopt;
}

refusal apply_rocksdb_block_cache(const json& v, resolve_state& s) {
  return parse_mib(v, int64_t{1} << 20, s.options.store.block_cache_bytes);
}

refusal apply_rocksdb_write_buffer(const json& v, resolve_state& s) {
  return parse_mib(v, int64_t{1} << 16, s.options.store.write_buffer_bytes);
}

refusal apply_restore_from(const json& v, resolve_state& s) {
  return parse_text(v, true, s.options.restore_from);
}

refusal apply_log_level(const json& v, resolve_state& s) {
  std::string level;
  if (auto why = parse_text(v, false, level))
    return why;
  level = std::string(trim(level));
  std::transform(level.begin(), level.end(), level.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (level == "warning") // Python's name for it
    level = "warn";
  constexpr std::array<std::string_view, 7> levels = {"trace", "debug",    "info", "warn",
                                                      "error", "critical", "off"};
  if (std::find(levels.begin(), levels.end(), level) == levels.end())
    return "expected one of trace, debug, info, warn, error, critical, off, got " +
           value_in_quotes(v);
  s.options.log_level = std::move(level);
  return std::nullopt;
}

refusal apply_full_sync_timeout(const json& v, resolve_state& s) {
  return parse_seconds(v, s.options.controller.full_sync_timeout);
}

refusal apply_completion_threshold(const json& v, resolve_state& s) {
  double threshold = 0;
  constexpr std::string_view expected = "a number in [0, 1]";
  if (auto why = parse_number(v, expected, threshold))
    return why;
  if (threshold < 0 || threshold > 1)
    return "expected " + std::string(expected) + ", got " + value_in_quotes(v);
  s.options.controller.full_sync_completion_threshold = threshold;
  return std::nullopt;
}

refusal apply_control_timeout(const json& v, resolve_state& s) {
  int64_t ms = 0;
  if (auto why = parse_integer(v, 1, static_cast<int64_t>(max_seconds) * 1000, ms))
    return why;
  s.options.control.request_timeout = std::chrono::milliseconds{ms};
  return std::nullopt;
}

constexpr int64_t max_int64 = std::numeric_limits<int64_t>::max();

refusal apply_max_frame_bytes(const json& v, resolve_state& s) {
  return parse_unsigned(v, 1, max_int64, s.options.zmq.limits.max_frame_bytes);
}

refusal apply_max_body_bytes(const json& v, resolve_state& s) {
  return parse_unsigned(v, 1, max_int64, s.options.http.max_body_bytes);
}

refusal apply_max_tokens(const json& v, resolve_state& s) {
  return parse_unsigned(v, 1, max_int64, s.options.http.max_tokens);
}

refusal apply_http_threads(const json& v, resolve_state& s) {
  return parse_unsigned(v, 1, 1024, s.options.http.threads);
}

refusal apply_scheduler_threads(const json& v, resolve_state& s) {
  return parse_unsigned(v, 0, 1024, s.options.scheduler_threads);
}

refusal apply_none_hash(const json& v, resolve_state& s) {
  int64_t none_hash = 0;
  if (auto why = parse_integer(v, std::numeric_limits<int64_t>::min(), max_int64, none_hash))
    return why;
  s.none_hash = resolve_state::hash_setting{none_hash, s.current, s.current_label};
  return std::nullopt;
}

refusal apply_python_hash_seed(const json& v, resolve_state& s) {
  int64_t seed = 0;
  // CPython's accepted PYTHONHASHSEED range.
  if (auto why = parse_integer(v, 0, 4294967295, seed))
    return why;
  s.python_hash_seed =
      resolve_state::hash_setting{msg::none_hash_from_python_hash_seed(static_cast<uint32_t>(seed)),
                                  s.current, s.current_label};
  return std::nullopt;
}

refusal apply_chunk_size(const json& v, resolve_state& s) {
  return parse_unsigned(v, 1, int64_t{1} << 20, s.options.controller.chunk_hashing.chunk_size);
}

struct key_spec {
  std::string_view key;
  refusal (*apply)(const json&, resolve_state&);
};

// In the order of the header's table; dump_config follows the same order.
constexpr std::array<key_spec, 28> key_specs = {{
    {"controller_host", apply_host},
    {"controller_port", apply_port},
    {"controller_monitor_ports", apply_monitor_ports},
    {"health_check_interval", apply_health_check_interval},
    {"lmcache_worker_timeout", apply_worker_timeout},
    {"controller_advertise_host", apply_advertise_host},
    {"extra_config", apply_extra_config},
    {"lmcc_node_id", apply_node_id},
    {"lmcc_shards", apply_shards},
    {"lmcc_slots", apply_slots},
    {"lmcc_data_dir", apply_data_dir},
    {"lmcc_persistence", apply_persistence},
    {"lmcc_persist_sync", apply_persist_sync},
    {"lmcc_rocksdb_block_cache_mb", apply_rocksdb_block_cache},
    {"lmcc_rocksdb_write_buffer_mb", apply_rocksdb_write_buffer},
    {"lmcc_restore_from", apply_restore_from},
    {"lmcc_log_level", apply_log_level},
    {"lmcc_full_sync_timeout_s", apply_full_sync_timeout},
    {"lmcc_full_sync_completion_threshold", apply_completion_threshold},
    {"lmcc_control_timeout_ms", apply_control_timeout},
    {"lmcc_max_frame_bytes", apply_max_frame_bytes},
    {"lmcc_max_body_bytes", apply_max_body_bytes},
    {"lmcc_max_tokens", apply_max_tokens},
    {"lmcc_http_threads", apply_http_threads},
    {"lmcc_scheduler_threads", apply_scheduler_threads},
    {"lmcc_none_hash", apply_none_hash},
    {"lmcc_python_hash_seed", apply_python_hash_seed},
    {"lmcc_chunk_size", apply_chunk_size},
}};

const key_spec* find_key(std::string_view key) {
  for (const auto& spec : key_specs)
    if (spec.key == key)
      return &spec;
  return nullptr;
}

std::string env_name(std::string_view key) {
  std::string name(env_prefix);
  for (char c : key)
    name += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return name;
}

void apply(resolve_state& s, const key_spec& spec, const json& value, layer from,
           std::string label) {
  s.current = from;
  s.current_label = std::move(label);
  if (auto why = spec.apply(value, s))
    s.errors.push_back(s.current_label + ": " + *why);
}

// -- the layers ----------------------------------------------------------------

/// yaml-cpp keeps scalars untyped; they stay strings so that one converter per
/// key reads YAML, environment and flags alike.
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

void apply_yaml_file(resolve_state& s, const std::string& path, const std::string& via) {
  std::ifstream in(path);
  if (!in) {
    s.errors.push_back(via + " " + path + ": cannot read the file: " + std::strerror(errno));
    return;
  }
  std::ostringstream text;
  text << in.rdbuf();
  json root;
  try {
    YAML::Node node = YAML::Load(text.str());
    if (!node.IsNull() && !node.IsMap()) {
      s.errors.push_back(path + ": expected a mapping of config keys at the top level");
      return;
    }
    root = yaml_to_json(node);
  } catch (const YAML::Exception& e) {
    s.errors.push_back(path + ": invalid YAML: " + e.what());
    return;
  }
  if (root.is_null())
    return; // an empty file, as LMCache's `yaml.safe_load(f) or {}`
  for (const auto& [key, value] : root.items()) {
    if (const key_spec* spec = find_key(key))
      apply(s, *spec, value, layer::yaml, path + ": " + key);
    else
      s.warnings.push_back(path + ": unknown key '" + key + "' ignored");
  }
}

/// LMCache's _parse_quoted_string: surrounding whitespace and one pair of
/// matching quotes go.
std::string unquote_env(std::string_view raw) {
  std::string_view text = trim(raw);
  if (text.size() >= 2 && text.front() == text.back() &&
      (text.front() == '\'' || text.front() == '"'))
    text = text.substr(1, text.size() - 2);
  return std::string(text);
}

void apply_environment(resolve_state& s, const std::map<std::string, std::string>& environment) {
  for (const auto& spec : key_specs) {
    std::string name = env_name(spec.key);
    if (auto it = environment.find(name); it != environment.end())
      apply(s, spec, json(unquote_env(it->second)), layer::env, name);
  }
  for (const auto& [name, value] : environment) {
    if (!name.starts_with(env_prefix) || name == config_file_env)
      continue;
    std::string key = name.substr(env_prefix.size());
    std::transform(key.begin(), key.end(), key.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    if (!find_key(key))
      s.warnings.push_back(name + ": unknown controller setting ignored");
  }
}

struct cli_flag {
  std::string_view flag;
  std::string_view key;
  const std::optional<std::string> node_config_inputs::*value;
};

constexpr std::array<cli_flag, 27> cli_flags = {{
    {"--host", "controller_host", &node_config_inputs::host},
    {"--port", "controller_port", &node_config_inputs::port},
    {"--monitor-ports", "controller_monitor_ports", &node_config_inputs::monitor_ports},
    {"--health-check-interval", "health_check_interval",
     &node_config_inputs::health_check_interval},
    {"--lmcache-worker-timeout", "lmcache_worker_timeout",
     &node_config_inputs::lmcache_worker_timeout},
    {"--advertise-host", "controller_advertise_host", &node_config_inputs::advertise_host},
    {"--node-id", "lmcc_node_id", &node_config_inputs::node_id},
    {"--shards", "lmcc_shards", &node_config_inputs::shards},
    {"--slots", "lmcc_slots", &node_config_inputs::slots},
    {"--data-dir", "lmcc_data_dir", &node_config_inputs::data_dir},
    {"--persistence", "lmcc_persistence", &node_config_inputs::persistence},
    {"--persist-sync", "lmcc_persist_sync", &node_config_inputs::persist_sync},
    {"--rocksdb-block-cache-mb", "lmcc_rocksdb_block_cache_mb",
     &node_config_inputs::rocksdb_block_cache_mb},
    {"--rocksdb-write-buffer-mb", "lmcc_rocksdb_write_buffer_mb",
     &node_config_inputs::rocksdb_write_buffer_mb},
    {"--restore-from", "lmcc_restore_from", &node_config_inputs::restore_from},
    {"--log-level", "lmcc_log_level", &node_config_inputs::log_level},
    {"--full-sync-timeout", "lmcc_full_sync_timeout_s", &node_config_inputs::full_sync_timeout},
    {"--full-sync-completion-threshold", "lmcc_full_sync_completion_threshold",
     &node_config_inputs::full_sync_completion_threshold},
    {"--control-timeout-ms", "lmcc_control_timeout_ms", &node_config_inputs::control_timeout_ms},
    {"--max-frame-bytes", "lmcc_max_frame_bytes", &node_config_inputs::max_frame_bytes},
    {"--max-body-bytes", "lmcc_max_body_bytes", &node_config_inputs::max_body_bytes},
    {"--max-tokens", "lmcc_max_tokens", &node_config_inputs::max_tokens},
    {"--http-threads", "lmcc_http_threads", &node_config_inputs::http_threads},
    {"--scheduler-threads", "lmcc_scheduler_threads", &node_config_inputs::scheduler_threads},
    {"--none-hash", "lmcc_none_hash", &node_config_inputs::none_hash},
    {"--python-hash-seed", "lmcc_python_hash_seed", &node_config_inputs::python_hash_seed},
    {"--chunk-size", "lmcc_chunk_size", &node_config_inputs::chunk_size},
}};

void apply_cli_flags(resolve_state& s, const node_config_inputs& inputs) {
  for (const auto& flag : cli_flags) {
    const auto& value = inputs.*flag.value;
    if (!value)
      continue;
    const key_spec* spec = find_key(flag.key);
    apply(s, *spec, json(*value), layer::cli,
          std::string(flag.flag) + " (" + std::string(flag.key) + ")");
  }
}

void apply_extra_args(resolve_state& s, const std::vector<std::string>& extra_args) {
  for (const auto& arg : extra_args) {
    auto eq = arg.find('=');
    // LMCache keeps any leftover containing '=' (dashes stripped) and drops
    // the rest silently; a leftover without '=' is almost always a mistyped
    // flag, so lmcc refuses it.
    if (eq == std::string::npos) {
      s.errors.push_back(in_quotes(arg) +
                         ": unknown argument (extra overrides must look like --key=value)");
      continue;
    }
    std::string key = arg.substr(0, eq);
    key.erase(0, key.find_first_not_of('-'));
    std::replace(key.begin(), key.end(), '-', '_');
    std::string label = "--" + key + " (extra argument)";
    if (key.empty()) {
      s.errors.push_back(in_quotes(arg) + ": extra argument without a key");
      continue;
    }
    if (const key_spec* spec = find_key(key))
      apply(s, *spec, json(arg.substr(eq + 1)), layer::extra, std::move(label));
    else
      s.warnings.push_back(label + ": unknown controller setting ignored");
  }
}

void apply_legacy_monitor_port(resolve_state& s, const node_config_inputs& inputs) {
  uint16_t legacy_port = legacy_default_monitor_port;
  if (inputs.monitor_port) {
    if (auto why = parse_port(json(*inputs.monitor_port), legacy_port))
      s.errors.push_back("--monitor-port: " + *why);
  }
  if (!s.monitor_ports_null) {
    if (inputs.monitor_port)
      s.warnings.push_back("--monitor-port " + *inputs.monitor_port +
                           " ignored: it applies only when controller_monitor_ports is null");
    return;
  }
  // LMCache's legacy layout: pull only. Without a reply socket workers cannot
  // register, so say so.
  s.options.zmq.pull_port = legacy_port;
  s.options.zmq.reply_port.reset();
  s.options.zmq.heartbeat_port.reset();
  s.warnings.push_back("controller_monitor_ports is null: legacy mode, PULL on port " +
                       std::to_string(legacy_port) +
                       " only, no reply and no heartbeat socket (workers cannot register)");
}

void fold_hashing(resolve_state& s) {
  const auto& none = s.none_hash;
  const auto& seed = s.python_hash_seed;
  if (none && seed && none->from == seed->from) {
    s.errors.push_back(seed->label + ": set lmcc_none_hash or lmcc_python_hash_seed, not both (" +
                       none->label + ")");
    return;
  }
  const auto& winner =
      (none && seed) ? (none->from > seed->from ? none : seed) : (none ? none : seed);
  if (winner)
    s.options.controller.chunk_hashing.none_hash = winner->none_hash;
}

// -- dump ----------------------------------------------------------------------

/// Shortest text that reads back as the same double; integral values print
/// without a fraction so that `300` stays `300`.
std::string number_text(double value) {
  std::array<char, 64> buffer{};
  auto [end, ec] = std::to_chars(buffer.data(), buffer.data() + buffer.size(), value);
  if (ec != std::errc{})
    return std::to_string(value);
  return std::string(buffer.data(), end);
}

std::string seconds_text(std::chrono::milliseconds duration) {
  if (duration.count() % 1000 == 0)
    return std::to_string(duration.count() / 1000);
  return number_text(static_cast<double>(duration.count()) / 1000.0);
}

} // namespace

void add_node_flags(CLI::App& node_cmd, node_config_inputs& inputs) {
  // LMCache's leftover `--key=value` arguments are config overrides.
  node_cmd.allow_extras();
  auto text = [&](const char* flag, std::optional<std::string>& target, const std::string& help,
                  const char* type) {
    return node_cmd.add_option(flag, target, help)->type_name(type);
  };
  auto with_key = [](std::string_view help, std::string_view key) {
    return std::string(help) + " [" + std::string(key) + ", " + env_name(key) + "]";
  };

  // -- LMCache's flags
  text("--config", inputs.config_file, "YAML file of config keys [LMCACHE_CONTROLLER_CONFIG_FILE]",
       "FILE");
  text("--host", inputs.host,
       with_key("HTTP and ZMQ bind host (default 0.0.0.0)", "controller_host"), "HOST");
  text("--port", inputs.port, with_key("HTTP port (default 9000)", "controller_port"), "PORT");
  text("--monitor-ports", inputs.monitor_ports,
       with_key(R"(ZMQ ports as JSON, default {"pull": 8300, "reply": 8400, "heartbeat": 8082})",
                "controller_monitor_ports"),
       "JSON");
  text("--monitor-port", inputs.monitor_port,
       "legacy pull-only port, used only when controller_monitor_ports is null (default 9001)",
       "PORT");
  text("--health-check-interval", inputs.health_check_interval,
       with_key("silent-worker reaper period in s, -1 = off (default -1)", "health_check_interval"),
       "SECONDS");
  text("--lmcache-worker-timeout", inputs.lmcache_worker_timeout,
       with_key("reap a heartbeating worker after this many silent s (default 300)",
                "lmcache_worker_timeout"),
       "SECONDS");
  text("--advertise-host", inputs.advertise_host,
       with_key("host put into the heartbeat URL handed to workers", "controller_advertise_host"),
       "HOST");

  // -- lmcc's flags
  text("--node-id", inputs.node_id, with_key("this node's id (default n1)", "lmcc_node_id"), "ID");
  text("--shards", inputs.shards, with_key("KV index shards (default 8)", "lmcc_shards"), "N");
  text("--slots", inputs.slots,
       with_key("key-space slots, a power of two (default 4096)", "lmcc_slots"), "N");
  text("--data-dir", inputs.data_dir,
       with_key("directory for persistent state (default ./lmcc-data)", "lmcc_data_dir"), "DIR");
  text("--persistence", inputs.persistence,
       with_key("keep the index in RocksDB under --data-dir: on or off (default on)",
                "lmcc_persistence"),
       "on|off");
  text("--persist-sync", inputs.persist_sync,
       with_key("fsync the WAL on every commit: on or off (default off; a process crash "
                "loses nothing either way)",
                "lmcc_persist_sync"),
       "on|off");
  text("--rocksdb-block-cache-mb", inputs.rocksdb_block_cache_mb,
       with_key("RocksDB block cache in MiB (default 32)", "lmcc_rocksdb_block_cache_mb"), "MIB");
  text("--rocksdb-write-buffer-mb", inputs.rocksdb_write_buffer_mb,
       with_key("RocksDB memtable size in MiB, two are kept (default 32)",
                "lmcc_rocksdb_write_buffer_mb"),
       "MIB");
  text("--restore-from", inputs.restore_from,
       with_key("boot from this snapshot (lmcc snapshot): verified, then it replaces --data-dir",
                "lmcc_restore_from"),
       "DIR");
  text(
      "--log-level", inputs.log_level,
      with_key("trace, debug, info, warn, error, critical or off (default info)", "lmcc_log_level"),
      "LEVEL");
  text("--full-sync-timeout", inputs.full_sync_timeout,
       with_key("idle full-sync session timeout in s (default 300)", "lmcc_full_sync_timeout_s"),
       "SECONDS");
  text("--full-sync-completion-threshold", inputs.full_sync_completion_threshold,
       with_key("share of synced workers before can_exit_freeze (default 0.8)",
                "lmcc_full_sync_completion_threshold"),
       "RATIO");
  text("--control-timeout-ms", inputs.control_timeout_ms,
       with_key("per-command timeout towards workers (default 30000)", "lmcc_control_timeout_ms"),
       "MS");
  text("--max-frame-bytes", inputs.max_frame_bytes,
       with_key("largest ZMQ frame accepted (default 8 MiB)", "lmcc_max_frame_bytes"), "BYTES");
  text("--max-body-bytes", inputs.max_body_bytes,
       with_key("largest HTTP body accepted (default 64 MiB)", "lmcc_max_body_bytes"), "BYTES");
  text("--max-tokens", inputs.max_tokens,
       with_key("most tokens in one /lookup or /pin (default 1048576)", "lmcc_max_tokens"), "N");
  text("--http-threads", inputs.http_threads,
       with_key("HTTP worker threads (default 32)", "lmcc_http_threads"), "N");
  text("--scheduler-threads", inputs.scheduler_threads,
       with_key("actor scheduler threads, 0 = cores (default 0)", "lmcc_scheduler_threads"), "N");
  auto* none_hash = text(
      "--none-hash", inputs.none_hash,
      with_key("initial chunk-chain hash, vLLM's NONE_HASH (default 0)", "lmcc_none_hash"), "INT");
  text(
      "--python-hash-seed", inputs.python_hash_seed,
      with_key("derive the initial hash from PYTHONHASHSEED as vLLM does", "lmcc_python_hash_seed"),
      "SEED")
      ->excludes(none_hash);
  text("--chunk-size", inputs.chunk_size,
       with_key("tokens per chunk, must match the workers (default 256)", "lmcc_chunk_size"), "N");
  node_cmd.add_flag("--dump-config", inputs.dump_config,
                    "print the effective configuration as YAML and exit");
}

msg::expected<node_config_result>
resolve_node_options(const node_config_inputs& inputs,
                     const std::map<std::string, std::string>& environment) {
  resolve_state s;

  if (inputs.config_file) {
    apply_yaml_file(s, *inputs.config_file, "--config");
  } else if (auto it = environment.find(std::string(config_file_env));
             it != environment.end() && !it->second.empty()) {
    apply_yaml_file(s, it->second, std::string(config_file_env));
  }
  apply_environment(s, environment);
  apply_cli_flags(s, inputs);
  apply_extra_args(s, inputs.extra_args);
  apply_legacy_monitor_port(s, inputs);
  fold_hashing(s);

  if (!s.errors.empty()) {
    std::string message;
    for (const auto& error : s.errors)
      message += (message.empty() ? "" : "\n") + error;
    return msg::codec_error{std::move(message)};
  }
  return node_config_result{std::move(s.options), std::move(s.warnings)};
}

std::string dump_config(const node_options& options) {
  const auto& zmq = options.zmq;
  const auto& controller = options.controller;
  YAML::Emitter out;
  out << YAML::BeginMap;
  out << YAML::Key << "controller_host" << YAML::Value << YAML::DoubleQuoted << options.http.host;
  out << YAML::Key << "controller_port" << YAML::Value << options.http.port;
  out << YAML::Key << "controller_monitor_ports" << YAML::Value;
  if (zmq.reply_port) {
    out << YAML::BeginMap;
    out << YAML::Key << "pull" << YAML::Value << zmq.pull_port;
    out << YAML::Key << "reply" << YAML::Value << *zmq.reply_port;
    out << YAML::Key << "heartbeat" << YAML::Value;
    if (zmq.heartbeat_port)
      out << *zmq.heartbeat_port;
    else
      out << YAML::Null;
    out << YAML::EndMap;
  } else {
    out << YAML::Null;
  }
  out << YAML::Key << "health_check_interval" << YAML::Value
      << number_text(controller.health_check_interval_s);
  out << YAML::Key << "lmcache_worker_timeout" << YAML::Value
      << seconds_text(controller.lmcache_worker_timeout);
  out << YAML::Key << "controller_advertise_host" << YAML::Value << YAML::DoubleQuoted
      << zmq.advertise_host;
  out << YAML::Key << "lmcc_node_id" << YAML::Value << YAML::DoubleQuoted << controller.node_id;
  out << YAML::Key << "lmcc_shards" << YAML::Value << controller.shard_count;
  out << YAML::Key << "lmcc_slots" << YAML::Value << controller.slot_count;
  out << YAML::Key << "lmcc_data_dir" << YAML::Value << YAML::DoubleQuoted << options.data_dir;
  out << YAML::Key << "lmcc_persistence" << YAML::Value << (options.persistence ? "on" : "off");
  out << YAML::Key << "lmcc_persist_sync" << YAML::Value << (options.store.sync ? "on" : "off");
  out << YAML::Key << "lmcc_rocksdb_block_cache_mb" << YAML::Value
      << static_cast<uint64_t>(options.store.block_cache_bytes >> 20);
  out << YAML::Key << "lmcc_rocksdb_write_buffer_mb" << YAML::Value
      << static_cast<uint64_t>(options.store.write_buffer_bytes >> 20);
  out << YAML::Key << "lmcc_restore_from" << YAML::Value << YAML::DoubleQuoted
      << options.restore_from;
  out << YAML::Key << "lmcc_log_level" << YAML::Value << YAML::DoubleQuoted << options.log_level;
  out << YAML::Key << "lmcc_full_sync_timeout_s" << YAML::Value
      << seconds_text(controller.full_sync_timeout);
  out << YAML::Key << "lmcc_full_sync_completion_threshold" << YAML::Value
      << number_text(controller.full_sync_completion_threshold);
  out << YAML::Key << "lmcc_control_timeout_ms" << YAML::Value
      << static_cast<int64_t>(options.control.request_timeout.count());
  out << YAML::Key << "lmcc_max_frame_bytes" << YAML::Value
      << static_cast<uint64_t>(zmq.limits.max_frame_bytes);
  out << YAML::Key << "lmcc_max_body_bytes" << YAML::Value
      << static_cast<uint64_t>(options.http.max_body_bytes);
  out << YAML::Key << "lmcc_max_tokens" << YAML::Value
      << static_cast<uint64_t>(options.http.max_tokens);
  out << YAML::Key << "lmcc_http_threads" << YAML::Value << options.http.threads;
  out << YAML::Key << "lmcc_scheduler_threads" << YAML::Value << options.scheduler_threads;
  out << YAML::Key << "lmcc_none_hash" << YAML::Value << controller.chunk_hashing.none_hash;
  out << YAML::Key << "lmcc_chunk_size" << YAML::Value << controller.chunk_hashing.chunk_size;
  out << YAML::EndMap;

  std::string header =
      "# lmcc node: effective configuration (usable as --config FILE).\n"
      "# lmcc_none_hash is the effective initial chunk hash, also when it was derived\n"
      "# from lmcc_python_hash_seed; extra_config is accepted but not used.\n";
  if (!zmq.reply_port)
    header += "# controller_monitor_ports is null: LMCache legacy mode, PULL only on port " +
              std::to_string(zmq.pull_port) + " (pass --monitor-port " +
              std::to_string(zmq.pull_port) + ").\n";
  return header + out.c_str() + "\n";
}

std::map<std::string, std::string> process_environment() {
  std::map<std::string, std::string> environment;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    std::string_view text(*entry);
    auto eq = text.find('=');
    if (eq == std::string_view::npos)
      continue;
    environment.emplace(std::string(text.substr(0, eq)), std::string(text.substr(eq + 1)));
  }
  return environment;
}

} // namespace lmcc::apps
