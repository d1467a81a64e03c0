// What node_option_table() generates besides the layering: the command-line
// flags and their help, --dump-config and the options table of docs/configuration.md.
#include "apps/lmcc/node_config.hpp"
#include "apps/lmcc/node_config_table.hpp"
#include "faults/fault_injection.hpp"

#include <cctype>
#include <map>

namespace lmcc::apps {
namespace {

using namespace config;

/// "HTTP port (an integer in 1..65535; default 9000) [controller_port, LMCACHE_...]".
std::string flag_help(const option_spec& spec) {
  std::string help = std::string(spec.help) + " (" + spec.accepts;
  if (!spec.default_yaml.empty())
    help += "; default " + spec.default_shown;
  help += ")";
  std::vector<std::string> also;
  if (!spec.key.empty() && (spec.takes(from_yaml) || spec.takes(from_extra)))
    also.emplace_back(spec.key);
  if (!spec.key.empty() && spec.takes(from_env))
    also.push_back(env_name(spec.key));
  for (size_t i = 0; i < also.size(); ++i)
    help += (i == 0 ? " [" : ", ") + also[i] + (i + 1 == also.size() ? "]" : "");
  return help;
}

/// A Markdown table cell: pipes escaped, nothing else needs it here.
std::string cell(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c == '|')
      out += '\\';
    out += c;
  }
  return out;
}

std::string code(std::string_view text) {
  return text.empty() ? "" : "`" + cell(text) + "`";
}

/// Where a row's value may come from, when it is not everywhere.
std::string sources_note(const option_spec& spec) {
  // A row without a flag is "everywhere" when every other source takes it.
  unsigned everywhere = spec.flag.empty() ? from_anywhere & ~from_flag : from_anywhere;
  if ((spec.sources & everywhere) == everywhere)
    return "";
  std::vector<std::string> from;
  if (spec.takes(from_flag) && !spec.flag.empty())
    from.push_back("the flag");
  if (spec.takes(from_yaml))
    from.push_back("the YAML file");
  if (spec.takes(from_env))
    from.push_back("`" + env_name(spec.key) + "`");
  if (spec.takes(from_extra))
    from.push_back("an extra `--key=value`");
  std::string note = " Only from ";
  for (size_t i = 0; i < from.size(); ++i)
    note += (i == 0 ? "" : i + 1 == from.size() ? " or " : ", ") + from[i];
  return note + ".";
}

} // namespace

void add_node_flags(CLI::App& node_cmd, node_config_inputs& inputs) {
  // LMCache's leftover `--key=value` arguments are config overrides.
  node_cmd.allow_extras();
  std::map<std::string_view, CLI::Option*> by_flag;
  for (const auto& spec : node_option_table()) {
    if (spec.flag.empty() || !spec.takes(from_flag))
      continue;
    std::string id(spec.id());
    auto* option = node_cmd.add_option_function<std::string>(
        std::string(spec.flag),
        [&inputs, id](const std::string& value) { inputs.flags[id] = value; }, flag_help(spec));
    option->type_name(std::string(spec.value_name));
    by_flag[spec.flag] = option;
  }
  for (const auto& spec : node_option_table())
    if (!spec.excludes.empty() && by_flag.contains(spec.flag))
      by_flag.at(spec.flag)->excludes(by_flag.at(spec.excludes));
  node_cmd.add_flag("--dump-config", inputs.dump_config,
                    "print the effective configuration as YAML and exit");
  node_cmd.add_flag("--print-options-markdown", inputs.print_options_markdown,
                    "print the table of options as Markdown (docs/configuration.md's) and exit");
}

std::string dump_config(const node_options& options) {
  YAML::Emitter out;
  out << YAML::BeginMap;
  for (const auto& spec : node_option_table()) {
    if (!spec.emit)
      continue;
    out << YAML::Key << std::string(spec.key) << YAML::Value;
    spec.emit(out, options);
  }
  out << YAML::EndMap;

  std::string header =
      "# lmcc node: effective configuration (usable as --config FILE).\n"
      "# lmcc_none_hash is the effective initial chunk hash, also when it was derived\n"
      "# from lmcc_python_hash_seed; extra_config is accepted but not used.\n"
      "# " +
      std::string(faults::build_summary) + ".\n";
  const auto& zmq = options.zmq;
  if (!zmq.reply_port)
    header += "# controller_monitor_ports is null: LMCache legacy mode, PULL only on port " +
              std::to_string(zmq.pull_port) + " (pass --monitor-port " +
              std::to_string(zmq.pull_port) + ").\n";
  return header + out.c_str() + "\n";
}

std::string options_markdown() {
  std::string md = "| key | flag | default | accepts | what it does |\n"
                   "|---|---|---|---|---|\n";
  for (const auto& spec : node_option_table()) {
    std::string what = cell(spec.help) + "." + sources_note(spec);
    what[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(what[0])));
    if (spec.origin == option_origin::lmcache)
      what += " (LMCache)";
    std::string shown = spec.default_yaml.empty() ? spec.default_shown : code(spec.default_shown);
    md += "| " + code(spec.key) + " | " + code(spec.flag) + " | " + shown + " | " +
          cell(spec.accepts) + " | " + what + " |\n";
  }
  return md;
}

} // namespace lmcc::apps
