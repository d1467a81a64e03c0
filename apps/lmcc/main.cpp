// lmcc: the LMCache cache controller and its tools.
//
//   lmcc node [flags]              a controller node (LMCache's CLI flags)
//   lmcc msg decode|encode         hex msgpack <-> msgspec JSON, one per line
//   lmcc chunk-hashes [...]        token lists -> CPython-compatible chunk hashes
//   lmcc snapshot --node H:P --out DIR   a node writes a checkpoint of its store
//   lmcc cluster up --nodes N --data-dir DIR   a cluster of nodes on this machine
//   lmcc status [--endpoints H:P,...]    the cluster's nodes and its verdict
//   lmcc workers [--endpoints H:P,...]   every registered worker
//   lmcc lookup [FILE]                   a prompt's layout, as a router gets it
//   lmcc members add|remove NODE_ID...   a membership change, until committed
//   lmcc drain NODE_ID                   a node out of the member set before maintenance
#include "apps/lmcc/client/lookup_command.hpp"
#include "apps/lmcc/client/members_command.hpp"
#include "apps/lmcc/client/status_command.hpp"
#include "apps/lmcc/client/workers_command.hpp"
#include "apps/lmcc/launcher/cluster_command.hpp"
#include "apps/lmcc/node_config.hpp"
#include "apps/lmcc/node_runtime.hpp"
#include "apps/lmcc/snapshot_command.hpp"
#include "apps/lmcc/tool_commands.hpp"
#include "faults/fault_injection.hpp"

#include <CLI/CLI.hpp>
#include <spdlog/spdlog.h>

#include <csignal>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

namespace {

/// Runs one node until SIGINT or SIGTERM. The signals are blocked in every
/// thread (they are blocked before any thread starts) and taken here with
/// sigwait, so shutdown runs on the main thread in a defined order.
int run_node(const lmcc::apps::node_options& options) {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  spdlog::set_level(spdlog::level::from_str(options.log_level));
  try {
    lmcc::apps::node_runtime node{options};
    node.start();
    int sig = 0;
    sigwait(&signals, &sig);
    spdlog::info("node-signal signal={}", sig == SIGINT ? "SIGINT" : "SIGTERM");
    node.stop();
  } catch (const std::exception& e) {
    spdlog::critical("node-start-failed error={}", e.what());
    return 1;
  }
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  // A peer that closes its connection mid-write must cost an error on that
  // connection, not the process: OpenSSL writes HTTPS with write(2), which
  // raises SIGPIPE (libzmq and plain httplib pass MSG_NOSIGNAL themselves).
  std::signal(SIGPIPE, SIG_IGN);
  CLI::App app{"lmcc: a clustered, durable cache controller for LMCache"};
  app.require_subcommand(1);
  // The version, and whether this build has fault injection (a release build has not).
  app.set_version_flag("--version", std::string(LMCC_VERSION) + "; " + lmcc::faults::build_summary);

  auto* node_cmd = app.add_subcommand(
      "node", "run a controller node (accepts lmcache_controller's flags, YAML and env)");
  lmcc::apps::node_config_inputs node_inputs;
  lmcc::apps::add_node_flags(*node_cmd, node_inputs);

  auto* msg_cmd = app.add_subcommand("msg", "encode/decode LMCache wire messages");
  msg_cmd->require_subcommand(1);
  auto* decode_cmd = msg_cmd->add_subcommand(
      "decode", "stdin: one hex msgpack frame per line; stdout: msgspec JSON or {\"error\":...}");
  auto* encode_cmd = msg_cmd->add_subcommand(
      "encode", "stdin: one msgspec JSON message per line; stdout: hex msgpack or {\"error\":...}");

  auto* hash_cmd = app.add_subcommand(
      "chunk-hashes", "stdin: JSON array of token ids per line; stdout: [[start,end,hash],...]");
  // Defaults are chunk_hash_options' initializers, as for `lmcc node`.
  lmcc::msg::chunk_hash_options hashing;
  std::optional<int64_t> none_hash;
  std::optional<uint32_t> python_hash_seed;
  auto* none_opt = hash_cmd->add_option("--none-hash", none_hash,
                                        "initial chain hash (default " +
                                            std::to_string(hashing.none_hash) + ")");
  hash_cmd
      ->add_option("--python-hash-seed", python_hash_seed,
                   "derive the initial hash from PYTHONHASHSEED as vLLM does")
      ->excludes(none_opt);
  hash_cmd->add_option("--chunk-size", hashing.chunk_size, "tokens per chunk")
      ->check(CLI::Range(1U, 1U << 20))
      ->capture_default_str();

  auto* snapshot_cmd = app.add_subcommand(
      "snapshot", "ask a running node to write a checkpoint of its store (for --restore-from)");
  std::string snapshot_node;
  std::string snapshot_out;
  int snapshot_timeout_s = 600;
  std::string snapshot_cluster;
  auto* snapshot_node_opt =
      snapshot_cmd->add_option("--node", snapshot_node, "the node's HTTP address")
          ->type_name("HOST:PORT");
  auto* snapshot_cluster_opt =
      snapshot_cmd
          ->add_option("--cluster", snapshot_cluster,
                       "any node of a cluster: snapshot every node, one folder per node id")
          ->type_name("HOST:PORT");
  snapshot_node_opt->excludes(snapshot_cluster_opt);
  snapshot_cmd
      ->add_option("--out", snapshot_out, "directory to create on the node's host (must not exist)")
      ->required()
      ->type_name("DIR");
  snapshot_cmd->add_option("--timeout", snapshot_timeout_s, "seconds to wait (default 600)")
      ->check(CLI::Range(1, 86400));

  auto* cluster_cmd = app.add_subcommand("cluster", "run a cluster of nodes on this machine");
  cluster_cmd->require_subcommand(1);
  auto* cluster_up_cmd = cluster_cmd->add_subcommand(
      "up", "start N nodes (configs, data and logs under --data-dir) until SIGINT/SIGTERM");
  lmcc::apps::cluster_up_options cluster_up;
  lmcc::apps::add_cluster_up_flags(*cluster_up_cmd, cluster_up);
  auto* cluster_restart_cmd = cluster_cmd->add_subcommand(
      "restart", "restart the nodes of a running `lmcc cluster up` one at a time, each handing "
                 "its workers over first");
  bool restart_rolling = false;
  std::string restart_data_dir;
  int64_t restart_timeout_s = 600;
  cluster_restart_cmd
      ->add_flag("--rolling", restart_rolling, "one node at a time (the only mode; required)")
      ->required();
  cluster_restart_cmd
      ->add_option("--data-dir", restart_data_dir, "the DIR the cluster was started with")
      ->required()
      ->type_name("DIR");
  cluster_restart_cmd
      ->add_option("--timeout", restart_timeout_s, "seconds to wait for the end (default 600)")
      ->check(CLI::Range(1, 86400));

  // The operator's client (docs/client.md): any node of a cluster answers.
  auto* status_cmd = app.add_subcommand(
      "status", "the cluster's nodes and its verdict: exit 0 healthy, 1 degraded, 2 unreachable");
  lmcc::apps::client::client_options status_options;
  lmcc::apps::client::add_client_flags(*status_cmd, status_options);
  auto* workers_cmd = app.add_subcommand(
      "workers", "every registered worker: ranks, keys, last heartbeat, home node, full sync");
  lmcc::apps::client::client_options workers_options;
  lmcc::apps::client::add_client_flags(*workers_cmd, workers_options);
  auto* lookup_cmd = app.add_subcommand(
      "lookup", "a prompt's layout as a router gets it (POST /lookup): exit 0 found, 1 nothing "
                "cached, 2 unreachable");
  lmcc::apps::client::client_options lookup_options;
  lmcc::apps::client::add_client_flags(*lookup_cmd, lookup_options);
  std::string lookup_source;
  lookup_cmd
      ->add_option("FILE", lookup_source,
                   "token ids: a JSON array or blank-separated integers (default: stdin)")
      ->type_name("FILE|-");
  // Membership changes wait for the commit: --timeout bounds the whole wait.
  const std::string change_timeout_help =
      "seconds to wait for the change to commit everywhere (each request: 5 at most)";
  auto* members_cmd =
      app.add_subcommand("members", "change the cluster's member set, with progress until done");
  members_cmd->require_subcommand(1);
  lmcc::apps::client::client_options members_options;
  members_options.timeout_s = 300;
  std::vector<std::string> members_ids;
  bool members_no_wait = false;
  std::string members_verb;
  for (const char* verb : {"add", "remove"}) {
    auto* cmd = members_cmd->add_subcommand(
        verb, std::string(verb) +
                  " nodes (POST /cluster/members) and wait until every node has "
                  "committed: exit 0 committed, 1 refused, 2 unreachable, 3 timed out");
    lmcc::apps::client::add_client_flags(*cmd, members_options, change_timeout_help);
    cmd->add_option("NODE_ID", members_ids, "node ids")->required();
    cmd->add_flag("--no-wait", members_no_wait, "return once a node has accepted the change");
    cmd->callback([&members_verb, verb] { members_verb = verb; });
  }
  auto* drain_cmd = app.add_subcommand(
      "drain", "before maintenance: remove NODE_ID from the member set (its primaries, replicas "
               "and worker homes move); add it back with `lmcc members add` afterwards");
  lmcc::apps::client::client_options drain_options;
  drain_options.timeout_s = 300;
  lmcc::apps::client::add_client_flags(*drain_cmd, drain_options, change_timeout_help);
  std::string drain_node;
  bool drain_no_wait = false;
  drain_cmd->add_option("NODE_ID", drain_node, "the node to drain")->required();
  drain_cmd->add_flag("--no-wait", drain_no_wait, "return once a node has accepted the change");

  CLI11_PARSE(app, argc, argv);
  std::ios::sync_with_stdio(false);

  if (*node_cmd) {
    if (node_inputs.print_options_markdown) {
      std::cout << lmcc::apps::options_markdown();
      return 0;
    }
    node_inputs.extra_args = node_cmd->remaining();
    auto config = lmcc::apps::resolve_node_options(node_inputs, lmcc::apps::process_environment());
    if (!config) {
      std::cerr << "lmcc node: " << config.error().message << "\n";
      return 2;
    }
    for (const auto& w : config->warnings)
      spdlog::warn("config-warning {}", w);
    if (node_inputs.dump_config) {
      std::cout << lmcc::apps::dump_config(config->options);
      return 0;
    }
    return run_node(config->options);
  }
  if (*status_cmd)
    return lmcc::apps::client::run_status(status_options, std::cout, std::cerr);
  if (*workers_cmd)
    return lmcc::apps::client::run_workers(workers_options, std::cout, std::cerr);
  if (*lookup_cmd)
    return lmcc::apps::client::run_lookup(lookup_options, lookup_source, std::cin, std::cout,
                                          std::cerr);
  if (*members_cmd)
    return lmcc::apps::client::run_members(members_options, members_verb, members_ids,
                                           members_no_wait, std::cout, std::cerr);
  if (*drain_cmd)
    return lmcc::apps::client::run_drain(drain_options, drain_node, drain_no_wait, std::cout,
                                         std::cerr);
  if (*cluster_up_cmd)
    return lmcc::apps::run_cluster_up(cluster_up, std::cout, std::cerr);
  if (*cluster_restart_cmd)
    return lmcc::apps::run_cluster_restart(
        restart_data_dir, std::chrono::seconds(restart_timeout_s), std::cout, std::cerr);
  if (*snapshot_cmd && snapshot_node.empty() && snapshot_cluster.empty()) {
    std::cerr << "lmcc snapshot: give --node HOST:PORT (one node) or --cluster HOST:PORT (every "
                 "node of its cluster)\n";
    return 2;
  }
  if (*snapshot_cmd && !snapshot_cluster.empty())
    return lmcc::apps::run_cluster_snapshot(snapshot_cluster, snapshot_out,
                                            std::chrono::seconds(snapshot_timeout_s), std::cout,
                                            std::cerr);
  if (*snapshot_cmd)
    return lmcc::apps::run_snapshot(snapshot_node, snapshot_out,
                                    std::chrono::seconds(snapshot_timeout_s), std::cout, std::cerr);
  if (*decode_cmd)
    return lmcc::apps::run_msg_decode(std::cin, std::cout);
  if (*encode_cmd)
    return lmcc::apps::run_msg_encode(std::cin, std::cout);
  if (*hash_cmd) {
    if (none_hash)
      hashing.none_hash = *none_hash;
    if (python_hash_seed)
      hashing.none_hash = lmcc::msg::none_hash_from_python_hash_seed(*python_hash_seed);
    return lmcc::apps::run_chunk_hashes(hashing, std::cin, std::cout);
  }
  return 0;
}
