// node_config: where `lmcc node` gets its node_options from.
//
// lmcc is a drop-in for LMCache's `lmcache_controller`, so it takes the same
// flags, the same YAML file and the same LMCACHE_CONTROLLER_* environment
// variables (spec section 6.1), and layers lmcc's own options on the same
// mechanism. Precedence, lowest first:
//
//   defaults  <  YAML file  <  environment  <  CLI flags  <  extra --key=value
//
// The YAML file is --config FILE, else $LMCACHE_CONTROLLER_CONFIG_FILE. Every
// key below is a top-level YAML key, the environment variable
// LMCACHE_CONTROLLER_<KEY UPPERCASE>, and an extra `--<key>=<value>` argument.
//
//   key                                 CLI flag                         default
//   controller_host                     --host                           0.0.0.0 (HTTP + ZMQ)
//   controller_port                     --port                           9000 (HTTP)
//   controller_monitor_ports            --monitor-ports '<json>'         8300/8400/hb 8082
//   (LMCache legacy, no key)            --monitor-port N                 9001, if the above is null
//   health_check_interval               --health-check-interval          -1 (off); -1 or >= 1 s
//   lmcache_worker_timeout              --lmcache-worker-timeout         300 s (> 0)
//   controller_advertise_host           --advertise-host                 "" (outbound IP)
//   extra_config                                                         accepted, ignored
//   lmcc_node_id                        --node-id                        n1
//   lmcc_shards                         --shards                         8 (1..65536)
//   lmcc_slots                          --slots                          4096 (a power of two)
//   lmcc_data_dir                       --data-dir                       ./lmcc-data
//   lmcc_persistence                    --persistence                    on (on/off)
//   lmcc_persist_sync                   --persist-sync                   off (on/off)
//   lmcc_rocksdb_block_cache_mb         --rocksdb-block-cache-mb         32 (1..1048576)
//   lmcc_rocksdb_write_buffer_mb        --rocksdb-write-buffer-mb        32 (1..65536)
//   lmcc_restore_from                   --restore-from                   "" (none)
//   lmcc_log_level                      --log-level                      info (trace..off)
//   lmcc_full_sync_timeout_s            --full-sync-timeout              300 s (> 0)
//   lmcc_full_sync_completion_threshold --full-sync-completion-threshold 0.8 (0..1)
//   lmcc_control_timeout_ms             --control-timeout-ms             30000 (>= 1)
//   lmcc_max_frame_bytes                --max-frame-bytes                64 MiB (>= 1)
//   lmcc_max_body_bytes                 --max-body-bytes                 64 MiB (>= 1)
//   lmcc_max_tokens                     --max-tokens                     1048576 (>= 1)
//   lmcc_http_threads                   --http-threads                   8 (1..1024)
//   lmcc_scheduler_threads              --scheduler-threads              0 = cores (0..1024)
//   lmcc_none_hash                      --none-hash                      0 (an int64)
//   lmcc_python_hash_seed               --python-hash-seed               unset (0..4294967295)
//   lmcc_chunk_size                     --chunk-size                     256 (1..1048576)
//
// controller_monitor_ports is a JSON object (a JSON string in the environment
// and on the command line, a mapping or a JSON string in YAML) with `pull` and
// `reply` (both required) and an optional `heartbeat`. lmcc opens the
// heartbeat socket by default, unlike LMCache, because without it a restarted
// controller can never ask workers to resync; but ports given explicitly are
// taken literally, so a value without `heartbeat` (or with heartbeat null or 0,
// LMCache's falsy test) has no heartbeat socket. A null value (or an empty
// environment variable) falls back to LMCache's legacy mode: pull on
// --monitor-port, no reply and no heartbeat socket.
//
// lmcc_none_hash and lmcc_python_hash_seed both set the chunk chain's initial
// hash (vLLM's NONE_HASH, the seed derives it as vLLM does); the one from the
// higher-precedence source wins and both in one source is an error.
//
// Values are converted by their key's type wherever they come from (YAML
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

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace lmcc::apps {

/// The `node` subcommand's flags as typed: every value is kept as text so that
/// one converter per key checks flags, YAML and environment alike, and a bad
/// value names its flag. nullopt = the flag was not given.
struct node_config_inputs {
  // -- LMCache's flags
  std::optional<std::string> host;
  std::optional<std::string> port;
  std::optional<std::string> monitor_ports;
  std::optional<std::string> monitor_port;
  std::optional<std::string> health_check_interval;
  std::optional<std::string> lmcache_worker_timeout;
  std::optional<std::string> advertise_host;
  std::optional<std::string> config_file;

  // -- lmcc's flags
  std::optional<std::string> node_id;
  std::optional<std::string> shards;
  std::optional<std::string> slots;
  std::optional<std::string> data_dir;
  std::optional<std::string> persistence;
  std::optional<std::string> persist_sync;
  std::optional<std::string> rocksdb_block_cache_mb;
  std::optional<std::string> rocksdb_write_buffer_mb;
  std::optional<std::string> restore_from;
  std::optional<std::string> log_level;
  std::optional<std::string> full_sync_timeout;
  std::optional<std::string> full_sync_completion_threshold;
  std::optional<std::string> control_timeout_ms;
  std::optional<std::string> max_frame_bytes;
  std::optional<std::string> max_body_bytes;
  std::optional<std::string> max_tokens;
  std::optional<std::string> http_threads;
  std::optional<std::string> scheduler_threads;
  std::optional<std::string> none_hash;
  std::optional<std::string> python_hash_seed;
  std::optional<std::string> chunk_size;

  /// --dump-config: print dump_config() of the result and exit 0.
  bool dump_config = false;

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

/// Registers LMCache's and lmcc's flags (and --dump-config) on `node_cmd` and
/// lets it keep unknown arguments for the extra --key=value overrides.
/// `inputs` must outlive parsing.
void add_node_flags(CLI::App& node_cmd, node_config_inputs& inputs);

/// Layers defaults, YAML, `environment`, flags and extra arguments into
/// node_options. Errors name the key and its source, e.g.
/// "LMCACHE_CONTROLLER_CONTROLLER_PORT: expected an integer, got 'abc'"; all
/// errors found are reported, one per line.
msg::expected<node_config_result>
resolve_node_options(const node_config_inputs& inputs,
                     const std::map<std::string, std::string>& environment);

/// The effective configuration as YAML with the keys above; fed back as a
/// --config file it gives the same options.
std::string dump_config(const node_options& options);

/// This process's environment variables.
std::map<std::string, std::string> process_environment();

} // namespace lmcc::apps
