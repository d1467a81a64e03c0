// cluster_command: `lmcc cluster up`, a launcher for a cluster of `lmcc node`
// processes on one machine (development, demos, tests).
//
//   lmcc cluster up --nodes 3 --data-dir ./lmcc-cluster --host 127.0.0.1
//   -> node-ready node=n1 pid=4242 http=127.0.0.1:9000 pull=127.0.0.1:9001 ... config=...
//   -> ... (one line per node, in the order they become ready)
//   -> cluster-ready nodes=3 ring=9f3a...
//
// It lays out DIR (DIR/cluster.secret, DIR/nI/lmcc.yaml, DIR/nI/data,
// DIR/nI/node.log), starts `lmcc node --config DIR/nI/lmcc.yaml` per node,
// reports each node once it serves and the cluster once every node sees every
// member live on the same ring. SIGINT/SIGTERM stops the nodes. The configs
// are plain `lmcc node` configs, so a node can be restarted on its own with
// `lmcc node --config DIR/nI/lmcc.yaml`, and a second `cluster up` on the same
// DIR restarts the same cluster from its data.
//
// A rolling restart (`lmcc cluster restart --rolling --data-dir DIR`, or
// SIGUSR1 to the launcher) restarts the nodes one at a time: it waits until
// every node is live on one ring with no replication backlog, stops the next
// node with SIGTERM (a clean stop hands its workers to their next homes),
// starts it again from its config, and waits until the cluster is whole again.
// The launcher writes its pid to DIR/launcher.pid and every protocol line it
// prints to DIR/launcher-events.log, which the restart command follows.
//
// The pure parts (port plan, config text, the check of a kept config, the
// node-ready line, the judgement of /cluster/status replies) are free
// functions here so tests drive them without processes; run_cluster_up() is
// the process side.
//
// Context: called from main() only; run_cluster_up() blocks SIGINT, SIGTERM
// and SIGCHLD in the calling thread, which must be the process's only one.
#pragma once

#include "messages/expected.hpp"

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

namespace CLI {
class App;
}

namespace lmcc::apps {

/// `lmcc cluster up`'s command line.
struct cluster_up_options {
  uint32_t nodes = 0;
  /// Extra nodes started as standby (ids after the members'): known to every
  /// node, owning nothing until POST /cluster/members adds them.
  uint32_t standby = 0;
  std::string data_dir;
  std::string host = "127.0.0.1";
  /// Node i (0-based) takes base_port + 10*i .. base_port + 10*i + 4.
  uint16_t base_port = 9000;
  /// Unset: 2, or the node count when there are fewer nodes (a node refuses
  /// more owners per slot than members).
  std::optional<uint32_t> replicas;
  uint32_t slots = 4096;
  /// A folder holding one snapshot folder per node id; empty: none.
  std::string restore_from;
  std::string log_level = "info";
  /// Overwrite existing DIR/nI/lmcc.yaml files instead of keeping them.
  bool rewrite_config = false;
  std::chrono::seconds ready_timeout{60};
  std::chrono::seconds stop_timeout{30};
};

/// Registers `up`'s flags on `up_cmd`, writing into `options`.
void add_cluster_up_flags(CLI::App& up_cmd, cluster_up_options& options);

/// One node of the plan: its id, ports and files (paths absolute).
struct planned_node {
  std::string id;
  uint16_t http_port = 0;
  uint16_t pull_port = 0;
  uint16_t reply_port = 0;
  uint16_t heartbeat_port = 0;
  uint16_t cluster_port = 0;
  std::filesystem::path dir;          // DIR/nI
  std::filesystem::path config_path;  // DIR/nI/lmcc.yaml
  std::filesystem::path data_dir;     // DIR/nI/data
  std::filesystem::path log_path;     // DIR/nI/node.log
  std::filesystem::path restore_from; // SNAPDIR/nI; empty: none
  bool standby = false;               // configured standby: true
};

/// The whole cluster as `cluster up` lays it out.
struct cluster_plan {
  std::filesystem::path dir;
  std::filesystem::path secret_file;
  std::string host;
  uint32_t replicas = 0;
  uint32_t slots = 0;
  std::string log_level;
  std::vector<planned_node> nodes;
};

/// Ids, ports and paths for `options` (relative paths against the current
/// directory); an error when the ports do not fit below 65536 or a value is
/// out of range. Touches no file.
msg::expected<cluster_plan> plan_cluster(const cluster_up_options& options);

/// The `lmcc node` YAML config of `node` (every member listed, this node's
/// id, ports and paths).
std::string node_config_yaml(const cluster_plan& plan, const planned_node& node);

/// Why an existing config (its YAML text) does not belong to this plan, e.g.
/// "controller_port is 9110, this command line gives 9010"; nullopt when its
/// node id, host, ports, data dir, secret file and member list all match.
/// Other keys (log level, tuning) may differ: users edit them.
std::optional<std::string> config_mismatch(const std::string& yaml_text, const cluster_plan& plan,
                                           const planned_node& node);

/// True when `line` (one line of the node's log) is node `id`'s node-ready line.
bool is_node_ready_line(std::string_view line, std::string_view id);

/// "HOST:PORT", brackets around an IPv6 host.
std::string host_port(std::string_view host, uint16_t port);

/// The line printed once node `node` is ready (no newline).
std::string node_ready_line(const cluster_plan& plan, const planned_node& node, long pid);

/// "exit:N" or "signal:SIGNAME" for a waitpid() status.
std::string describe_wait_status(int status);

/// What one node answered to GET /cluster/status: the parsed JSON, or why
/// there is none (unreachable, HTTP error, not JSON).
struct node_status {
  std::string id;
  std::optional<nlohmann::json> status;
  std::string error;
};

/// Whether the cluster is ready, and on which ring; `reason` says what is
/// missing when it is not.
struct cluster_verdict {
  bool ready = false;
  std::string ring_version;
  std::string reason;
};

/// GET /cluster/status from `node`'s HTTP API (a wildcard --host is reached
/// on loopback); short timeouts, the launcher polls it every 100 ms.
node_status fetch_node_status(const cluster_plan& plan, const planned_node& node);

/// Ready when every planned node answered as itself, lists exactly the
/// planned members, every one of them live, and all report the same
/// ring_version.
cluster_verdict judge_cluster_status(const cluster_plan& plan,
                                     const std::vector<node_status>& statuses);

/// Why the cluster is not ready for the next step of a rolling restart
/// (some node still has sub-batches queued for a peer: stopping one now
/// could leave the only copy of an op on the stopping node's queue); nullopt
/// when every node reports replication_lag_sub_batches 0.
std::optional<std::string> replication_backlog(const std::vector<node_status>& statuses);

/// DIR/launcher.pid and DIR/launcher-events.log of a `cluster up` on DIR.
std::filesystem::path launcher_pid_path(const std::filesystem::path& dir);
std::filesystem::path launcher_events_path(const std::filesystem::path& dir);

/// Runs `lmcc cluster up` until SIGINT/SIGTERM (0), or until a node fails to
/// become ready or every node has exited (1); 2 for a bad command line or
/// data dir. Protocol lines go to `out`, errors to `err`.
int run_cluster_up(const cluster_up_options& options, std::ostream& out, std::ostream& err);

/// `lmcc cluster restart --rolling --data-dir DIR`: asks the launcher running
/// on DIR for a rolling restart and prints its progress lines until
/// rolling-restart-done (0) or rolling-restart-aborted, a refusal, the
/// launcher's exit or `timeout` (1); 2 when no launcher runs on DIR.
int run_cluster_restart(const std::filesystem::path& data_dir, std::chrono::seconds timeout,
                        std::ostream& out, std::ostream& err);

} // namespace lmcc::apps
