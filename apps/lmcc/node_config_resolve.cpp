// The layers of `lmcc node`'s configuration: YAML file, environment, flags,
// extra --key=value arguments, each applied through node_option_table().
#include "apps/lmcc/node_config.hpp"
#include "apps/lmcc/node_config_table.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <unistd.h>

extern char** environ; // NOLINT: POSIX, not declared by <unistd.h> without _GNU_SOURCE

namespace lmcc::apps {
namespace {

using namespace config;

void apply(resolve_state& s, const option_spec& spec, const json& value, layer from,
           std::string label) {
  s.current = from;
  s.current_label = std::move(label);
  if (auto why = spec.apply(value, s))
    s.errors.push_back(s.current_label + ": " + *why);
}

/// The row for `key` if `source` may set it, else nullptr.
const option_spec* option_from(std::string_view key, option_sources source) {
  const option_spec* spec = find_option(key);
  return spec != nullptr && spec->takes(source) && spec->apply ? spec : nullptr;
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
    if (const option_spec* spec = option_from(key, from_yaml))
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
  for (const auto& spec : node_option_table()) {
    if (spec.key.empty() || !spec.takes(from_env) || !spec.apply)
      continue;
    std::string name = env_name(spec.key);
    if (auto it = environment.find(name); it != environment.end())
      apply(s, spec, json(unquote_env(it->second)), layer::env, name);
  }
  for (const auto& [name, value] : environment) {
    if (!name.starts_with(env_prefix))
      continue;
    const option_spec* spec = find_option(lower_case(name.substr(env_prefix.size())));
    if (spec == nullptr || !spec->takes(from_env))
      s.warnings.push_back(name + ": unknown controller setting ignored");
  }
}

void apply_cli_flags(resolve_state& s, const node_config_inputs& inputs) {
  for (const auto& spec : node_option_table()) {
    auto it = inputs.flags.find(spec.id());
    if (it == inputs.flags.end() || !spec.apply)
      continue;
    std::string label(spec.flag);
    if (!spec.key.empty())
      label += " (" + std::string(spec.key) + ")";
    apply(s, spec, json(it->second), layer::cli, std::move(label));
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
    if (const option_spec* spec = option_from(key, from_extra))
      apply(s, *spec, json(arg.substr(eq + 1)), layer::extra, std::move(label));
    else
      s.warnings.push_back(label + ": unknown controller setting ignored");
  }
}

/// --config, else $LMCACHE_CONTROLLER_CONFIG_FILE when set and not empty.
void apply_config_file(resolve_state& s, const node_config_inputs& inputs,
                       const std::map<std::string, std::string>& environment) {
  const option_spec* spec = find_option("config_file");
  if (auto it = inputs.flags.find(spec->id()); it != inputs.flags.end()) {
    apply_yaml_file(s, it->second, std::string(spec->flag));
    return;
  }
  std::string variable = env_name(spec->key);
  if (auto it = environment.find(variable); it != environment.end() && !it->second.empty())
    apply_yaml_file(s, it->second, variable);
}

} // namespace

msg::expected<node_config_result>
resolve_node_options(const node_config_inputs& inputs,
                     const std::map<std::string, std::string>& environment) {
  resolve_state s;
  apply_config_file(s, inputs, environment);
  apply_environment(s, environment);
  apply_cli_flags(s, inputs);
  apply_extra_args(s, inputs.extra_args);
  apply_cross_option_rules(s);

  if (!s.errors.empty()) {
    std::string message;
    for (const auto& error : s.errors)
      message += (message.empty() ? "" : "\n") + error;
    return msg::codec_error{std::move(message)};
  }
  return node_config_result{std::move(s.options), std::move(s.warnings)};
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
