// node_config: where `lmcc node` gets its node_options from.
//
// lmcc is a drop-in for LMCache's `lmcache_controller`, so it takes the same
// flags, the same YAML file and the same LMCACHE_CONTROLLER_* environment
// variables (spec section 6.1), and layers lmcc's own lmcc_* options on the
// same mechanism. Precedence, lowest first:
//
//   defaults  <  YAML file  <  environment  <  CLI flags  <  extra --key=value
//
// The YAML file is --config FILE, else $LMCACHE_CONTROLLER_CONFIG_FILE. Every
// option is declared once, in node_option_table() (node_config_table.cpp):
// its key is a top-level YAML key, the environment variable
// LMCACHE_CONTROLLER_<KEY UPPERCASE> and an extra `--<key>=<value>` argument;
// most also have a flag. The options table of docs/configuration.md is generated from it
// (`lmcc node --print-options-markdown`).
//
// controller_monitor_ports is a JSON object with `pull` and `reply` (both
// required) and an optional `heartbeat`. lmcc opens the heartbeat socket by
// default, unlike LMCache, because without it a restarted controller can never
// ask workers to resync; but ports given explicitly are taken literally, so a
// value without `heartbeat` (or with heartbeat null or 0, LMCache's falsy
// test) has no heartbeat socket. A null value (or an empty environment
// variable) falls back to LMCache's legacy mode: pull on --monitor-port, no
// reply and no heartbeat socket.
//
// lmcc_none_hash and lmcc_python_hash_seed both set the chunk chain's initial
// hash (vLLM's NONE_HASH, the seed derives it as vLLM does); the one from the
// higher-precedence source wins and both in one source is an error.
//
// Values are converted by their option's kind wherever they come from (YAML
// scalars, environment text, flag text, extra arguments), which is what
// LMCache's per-key converters end up doing after its auto-typing. Environment
// values may be wrapped in matching quotes, which are stripped as LMCache does.
//
// Where lmcc deliberately differs from LMCache:
//  * CLI flags override only when given. LMCache's argparse defaults always
//    override, so there LMCACHE_CONTROLLER_CONTROLLER_PORT and the YAML file
//    are silently ignored for the keys that have flags.
//  * A bad value is an error naming the key and its source, not a warning
//    followed by a fallback value.
//  * Unknown keys (YAML, LMCACHE_CONTROLLER_* variables, extra --key=value) are
//    warnings, as in LMCache; a leftover argument that is not --key=value is an
//    error (most likely a mistyped flag, which LMCache silently ignores).
//
// Typical use (main.cpp):
//
//   node_config_inputs inputs;
//   auto* node_cmd = app.add_subcommand("node", "a controller node");
//   add_node_flags(*node_cmd, inputs);
//   CLI11_PARSE(app, argc, argv);
//   inputs.extra_args = node_cmd->remaining();
//   auto config = resolve_node_options(inputs, process_environment());
//   if (!config) { std::cerr << config.error().message << '\n'; return 2; }
//   for (auto& w : config->warnings) log_warning(w);
//   if (inputs.dump_config) { std::cout << dump_config(config->options); return 0; }
//
// Context: called once from main(); not thread-safe (reads the process
// environment through process_environment()).
#pragma once

#include "apps/lmcc/node_options.hpp"
#include "messages/expected.hpp"

#include <CLI/CLI.hpp>

#include <functional>
#include <map>
#include <string>
#include <vector>

namespace lmcc::apps {

/// The `node` subcommand's command line as typed. Flag values stay text so
/// that one parser per option checks flags, YAML and environment alike, and a
/// bad value names its flag.
struct node_config_inputs {
  /// The flags given, by option key (by flag for flag-only options such as
  /// --monitor-port): {"controller_port": "9100"}.
  std::map<std::string, std::string, std::less<>> flags;

  /// --dump-config: print dump_config() of the result and exit 0.
  bool dump_config = false;

  /// --print-options-markdown: print options_markdown() and exit 0.
  bool print_options_markdown = false;

  /// What CLI11 left over (node_cmd->remaining()): LMCache's extra
  /// `--key=value` overrides.
  std::vector<std::string> extra_args;
};

/// The resolved options plus what the user should hear about but that does not
/// stop the node (unknown keys, ignored flags).
struct node_config_result {
  node_options options;
  std::vector<std::string> warnings;
};

/// Registers every option's flag (and --dump-config, --print-options-markdown)
/// on `node_cmd` and lets it keep unknown arguments for the extra --key=value
/// overrides. `inputs` must outlive parsing.
void add_node_flags(CLI::App& node_cmd, node_config_inputs& inputs);

/// Layers defaults, YAML, `environment`, flags and extra arguments into
/// node_options. Errors name the key and its source, e.g.
/// "LMCACHE_CONTROLLER_CONTROLLER_PORT: expected an integer in 1..65535, got
/// 'abc'"; all errors found are reported, one per line.
msg::expected<node_config_result>
resolve_node_options(const node_config_inputs& inputs,
                     const std::map<std::string, std::string>& environment);

/// The effective configuration as YAML, one key per dumped option; fed back as
/// a --config file it gives the same options.
std::string dump_config(const node_options& options);

/// The options table as Markdown, as docs/configuration.md shows it.
std::string options_markdown();

/// This process's environment variables.
std::map<std::string, std::string> process_environment();

} // namespace lmcc::apps
