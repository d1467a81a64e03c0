// node_cluster: the part of a node that makes it a member of a cluster, beside
// the single-node runtime (node_runtime.cpp), which owns one when
// lmcc_cluster_members is set.
//
// It resolves the cluster secret and the first cluster table, gives the
// directory its destinations (this node's shard plus one peer_link per other
// member, with the slots' owner masks), spawns the cluster's actors and
// publishes the gate on the cluster port, and answers what the runtime asks
// of the cluster: the holders of a lookup's keys (this node's index plus the
// other owners over gateway/peer_read), the cluster-wide counts per holder,
// /cluster/status, the lmcc_cluster_* gauges, and frames to forward to a
// worker's home node. docs/cluster.md is the overview.
//
//   node_cluster cluster{options, deps};           // throws on a bad config or secret
//   cluster.add_destinations(directory_config, shard);
//   cluster.start(shard, directory, http_port);    // after the directory exists
//   ... cluster.holders(keys), cluster.status_json() ...
//   cluster.stop();                                // before the actor system ends
//
// Context: owned by the node runtime; holders(), counts(), status_json() and
// gauges() may be called from any thread.
#pragma once

#include "actors/cluster/anti_entropy.hpp"
#include "actors/cluster/cluster_node.hpp"
#include "actors/cluster/cluster_service.hpp"
#include "actors/cluster/frame_forwarder.hpp"
#include "actors/cluster/slot_mover.hpp"
#include "actors/cluster/tls_transport.hpp"
#include "actors/directory.hpp"
#include "apps/lmcc/node_options.hpp"
#include "clock/clock.hpp"
#include "cluster/peer_clock_offsets.hpp"
#include "gateway/metrics.hpp"
#include "gateway/peer_read.hpp"

#include <caf/all.hpp>
#include <zmq.hpp>

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace lmcc::apps {

class node_cluster {
public:
  /// What the cluster part uses of the node (all outlive it).
  struct node_parts {
    caf::actor_system& system;
    zmq::context_t& context;
    gateway::node_metrics& metrics;
    std::shared_ptr<actors::kv_index> index;
    std::shared_ptr<actors::credit_gate> gate;
    std::shared_ptr<actors::route_board> routes;
    std::shared_ptr<const node_clock> clock;
  };

  /// Resolves the secret (file or environment), reads the TLS files if any
  /// and checks the membership; marks this node's primary slots as the
  /// index's share. Throws std::runtime_error with a message for the operator.
  node_cluster(const node_options& options, node_parts parts);
  ~node_cluster();
  node_cluster(const node_cluster&) = delete;
  node_cluster& operator=(const node_cluster&) = delete;

  const std::shared_ptr<actors::cluster_board>& board() const noexcept { return board_; }

  /// Spawns a peer_link per other member and makes them, with `shard` at this
  /// node's index, the destinations worker actors split batches over.
  void add_destinations(actors::directory_config& dc, const actors::kv_shard_actor& shard);

  /// How anti-entropy finds the worker of a holder its shard never tied to
  /// one (the directory's view: lookup_reader::worker_of). Before start().
  void set_holder_workers(std::function<uint64_t(uint64_t holder)> worker_of) {
    holder_workers_ = std::move(worker_of);
  }

  /// Spawns the service, forwarder, node and gate actors and publishes the
  /// gate on this node's cluster port (throws when it cannot listen).
  /// `started_empty`: the store was created at this start (nothing restored):
  /// the node copies its slots from its peers before it reads them
  /// (cluster/refill_gate.hpp).
  void start(const actors::kv_shard_actor& shard, const actors::directory_actor& directory,
             uint16_t http_port, bool started_empty);

  /// A clean stop's first step: leaves the live set, so that every worker
  /// homed here moves to the next owner of its slot, and waits (at most the
  /// failure timeout) until the directory handed them all over and their new
  /// homes took their marks. Workers keep reporting meanwhile; what this
  /// node's sockets still read goes on to the new homes.
  void leave(const actors::directory_actor& directory);

  /// Waits until every member this node presumes live has joined or been
  /// found down (at most the connect plus failure timeouts): until then a
  /// lookup could not read the slots only peers hold and would answer with a
  /// shorter prefix. Returns how many peers are still presumed (0: settled).
  size_t await_joined();

  /// Waits (bounded) until every frame forwarded to another node was taken:
  /// a clean stop calls it after the front end handed over its last frames.
  void drain_forwards();

  /// Asks the cluster's actors to exit.
  void stop();

  /// Closes the key-read server and client. Only once every actor is done:
  /// a lookup actor inside a P2P lookup reads peers through the client until
  /// its handler returns, exit message or not.
  void close_reads();

  /// The port the gate listens on (0 before start()).
  uint16_t port() const noexcept { return port_; }

  /// The holders of `keys`: this node's index for the slots it holds, one
  /// read per other owner, all in flight at once, hedged to the next owner
  /// after lmcc_read_hedge_ms and moved off an owner found down
  /// (gateway/owner_reads.hpp; a lookup_reader source).
  actors::holder_reads holders(const std::vector<uint64_t>& keys);

  /// `s` with the cluster's entry counts (each node counts its primary slots).
  actors::node_stats cluster_wide(actors::node_stats s);

  /// This node's share of the entries (lmcache kv_pool_keys_count) after
  /// setting the lmcc_cluster_* gauges.
  uint64_t update_gauges();

  /// GET /cluster/status.
  std::string status_json() const;
  /// The id of the node worker `uid`'s entity lives on, as this node's
  /// liveness places it ("" while no member is live).
  std::string home_of(uint64_t worker_uid) const;
  /// A member of the cluster's first member set (no stored change, not a
  /// standby): an empty one of these is an empty cluster's first start.
  bool founding_member() const;
  /// POST /cluster/members (the cluster node decides; see cluster_node.hpp).
  gateway::members_outcome change_members(const std::vector<std::string>& ids);

  /// Sends frames of workers homed on member `node` there (credits held).
  void forward(uint16_t node, actors::pushed_msgs msgs);
  /// The slots this node owns under `t`: one word per slot, the placement
  /// epoch since which it owns it, or actors::not_owned (coverage.hpp).
  static std::vector<uint64_t> ownership_words(const actors::cluster_table& t);
  /// The same under the current table (what the shard starts with).
  std::vector<uint64_t> ownership() const { return ownership_words(*board_->current()); }

  /// The stored member set, as the file a snapshot carries beside the store
  /// (name -> content; empty before any membership change was stored).
  std::map<std::string, std::string> snapshot_files() const;

  /// The member-set file in a data dir and in a snapshot.
  static constexpr const char* record_file = "lmcc-membership.json";
  /// Present while a refill (cluster/refill_gate.hpp) has not ended: a node
  /// restarted mid-copy holds part of its slots and copies them again.
  static constexpr const char* refill_marker_file = "lmcc-refill-pending";
  /// A refill of an earlier start was cut short (its marker is in the data dir).
  bool refill_pending() const;

private:
  /// Where refill_marker_file lives; empty without persistence (nothing to resume).
  std::string refill_marker_path() const;
  actors::holder_counts counts();

  node_options options_;
  node_parts parts_;
  /// lookup-read-provisional is logged at most once a second (lookups run on
  /// every HTTP thread; a refill can make many of them provisional): when it
  /// was last logged (steady ms), and the keys since.
  std::atomic<int64_t> provisional_logged_ms_{0};
  std::atomic<uint64_t> provisional_since_log_{0};
  std::shared_ptr<actors::cluster_board> board_ = std::make_shared<actors::cluster_board>();
  /// Each peer's clock offset, measured by cluster_node, read by the directory.
  std::shared_ptr<cluster::peer_clock_offsets> peer_clocks_ =
      std::make_shared<cluster::peer_clock_offsets>();
  std::shared_ptr<actors::cluster_counters> counters_ =
      std::make_shared<actors::cluster_counters>();
  std::vector<actors::peer_link_actor> links_; ///< by node_index; null at self
  std::vector<std::shared_ptr<actors::peer_link_counters>> link_counters_;
  actors::cluster_service_actor service_;
  actors::cluster_node_actor node_;
  actors::cluster_gate_actor gate_;
  actors::frame_forwarder_actor forwarder_;
  actors::anti_entropy_actor anti_entropy_;
  std::function<uint64_t(uint64_t holder)> holder_workers_;
  actors::slot_mover_actor mover_;
  actors::slot_refill_actor refill_; ///< only when this node started empty
  std::shared_ptr<actors::slot_move_counters> move_counters_ =
      std::make_shared<actors::slot_move_counters>();
  /// The write placement the worker actors split by; swapped on a membership change.
  actors::placement_table placement_;
  /// Where the member set is stored (empty without persistence) and what it held at start.
  std::string record_path_;
  std::optional<cluster::membership_record> record_;
  /// The greetings' word to anti-entropy (actors/cluster/anti_entropy.hpp).
  std::shared_ptr<actors::greeting_agreement> greeting_agreement_ =
      std::make_shared<actors::greeting_agreement>();
  std::shared_ptr<actors::anti_entropy_counters> ae_counters_ =
      std::make_shared<actors::anti_entropy_counters>();
  /// This node's slot copies that give way in repairs (made in the constructor).
  /// This node's shard (start()): told of every change of the member set.
  actors::kv_shard_actor shard_;
  /// When this node started: anti-entropy's seniority (anti_entropy_logic.hpp).
  std::chrono::steady_clock::time_point started_ = steady_now();
  uint16_t port_ = 0;
  std::unique_ptr<gateway::peer_read_server> read_server_;
  std::unique_ptr<gateway::peer_read_client> read_client_;
  /// TLS between nodes (lmcc_cluster_tls_*; null: plain TCP): the cluster
  /// port goes through the transport, the peer reads through node_tls too.
  std::shared_ptr<const gateway::node_tls> tls_;
  std::unique_ptr<actors::tls_transport> transport_;
};

} // namespace lmcc::apps
