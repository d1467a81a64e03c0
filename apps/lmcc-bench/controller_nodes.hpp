// controller_nodes: the nodes of a cluster given with --nodes, one by one —
// each node's own counters from its /metrics, its process's CPU and RSS from
// /proc (--pid, or found through GET /threads), and the cluster's replica
// count from GET /cluster/status — so that a scenario can say what every node
// did and held, not only what the cluster did. Without --nodes it is empty and
// adds nothing: the single-node reports stay as they were.
//
// What a node's figures mean in a cluster of R replicas (lmcc's /metrics):
//
//  * lmcc_shard_ops: ops the node's shard applied, as primary or as replica;
//    every op is applied R times, so the sum over the nodes / R is the ops
//    applied (exactly R x the ops sent once every copy is in).
//  * lmcache:cache_controller_kv_pool_keys_count: the entries of the slots the
//    node is primary of, so that the sum over the nodes is the cluster's
//    count ("primary entries"). A node alone: all its entries.
//  * lmcc_index_keys / lmcc_index_memory_bytes: everything the node's index
//    holds, primary and replica copies ("held keys"; summed over the nodes,
//    R copies of the cluster's keys).
//
// A node that is not part of a cluster (an `lmcc node`, or LMCache's
// controller) answers 404 to /cluster/status: R = 1.
//
//   controller_nodes nodes{opts};            // reads /cluster/status
//   auto before = nodes.read();  ...;  auto after = nodes.read();
//   nodes.add_to(r, "end", "at the end", after, &before, ops_sent);
//
// Context: used from one scenario thread (its HTTP clients are not shared).
#pragma once

#include "apps/lmcc-bench/bench_options.hpp"
#include "apps/lmcc-bench/controller_http.hpp"
#include "apps/lmcc-bench/proc_stats.hpp"
#include "apps/lmcc-bench/report.hpp"

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace lmcc::bench {

/// One node at one moment; a figure is nullopt when it could not be read.
struct node_figures {
  std::optional<double> shard_ops;            ///< lmcc_shard_ops
  std::optional<double> primary_entries;      ///< kv_pool_keys_count
  std::optional<double> index_keys;           ///< lmcc_index_keys
  std::optional<double> index_bytes;          ///< lmcc_index_memory_bytes
  std::optional<double> replication_timeouts; ///< lmcc_cluster_replication_timeouts
  std::optional<double> replication_lag;      ///< lmcc_cluster_replication_lag_sub_batches
  std::optional<double> peers_lost;           ///< lmcc_cluster_peers_lost
  std::optional<double> cpu_s;                ///< the node process's utime + stime
  std::optional<uint64_t> rss_kib;            ///< its VmRSS
};

class controller_nodes {
public:
  /// Reads every node's GET /cluster/status (the replica count, the node ids);
  /// with no --nodes, an empty set.
  explicit controller_nodes(const bench_options& o);
  ~controller_nodes();
  controller_nodes(const controller_nodes&) = delete;
  controller_nodes& operator=(const controller_nodes&) = delete;

  bool empty() const { return nodes_.empty(); }
  size_t size() const { return nodes_.size(); }

  /// Copies of every entry: min(replicas, live members) from /cluster/status;
  /// 1 for a node that is not in a cluster.
  uint32_t copies() const { return copies_; }

  /// The node's id from /cluster/status ("n1"), else "node<i+1>".
  const std::string& name(size_t i) const { return nodes_[i].name; }

  /// Every node's figures now (one GET /metrics each, then /proc).
  std::vector<node_figures> read();

  /// Sum over the nodes of the growth of lmcc_shard_ops from `start` to `now`;
  /// nullopt when a node's counter is missing in either.
  static std::optional<double> shard_ops_delta(const std::vector<node_figures>& start,
                                               const std::vector<node_figures>& now);

  /// Per node (ids "<id>_<node>_..."): RSS, primary entries, held keys, RSS
  /// per primary entry and per held key, and with `start`: the growth of RSS
  /// per held key added, the shard ops applied, the node's CPU per op (of
  /// `ops`, the ops the cluster was sent), replication timeouts. Then the
  /// cluster's sums. Nothing when empty().
  void add_to(report& r, const std::string& id, const std::string& label,
              const std::vector<node_figures>& now, const std::vector<node_figures>* start,
              uint64_t ops) const;

  /// The processes measured, e.g. "545 (n1), 546 (n2)", for a report note.
  std::string processes_text() const;

private:
  struct node {
    host_port http;
    std::string name;
    std::optional<process_set> process;
    std::unique_ptr<controller_http> api;
  };
  std::vector<node> nodes_;
  uint32_t copies_ = 1;
};

/// The pid of the node process behind `http`, from its GET /threads: every
/// thread it lists that exists on this host must be a task of one process
/// (Tgid in /proc/<tid>/status) with the name the node gave (comm), and most
/// must exist; nullopt otherwise (another host, another pid namespace, no
/// /threads). `answered` (if given) says whether the node answered HTTP at all.
std::optional<int> discover_node_pid(const host_port& http, uint32_t timeout_ms,
                                     bool* answered = nullptr,
                                     const bench_options::http_access_settings& access = {});

} // namespace lmcc::bench
