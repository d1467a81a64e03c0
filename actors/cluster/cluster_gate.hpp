// cluster_gate: the only actor a node publishes on its cluster port. A peer
// that connects can do nothing but the secret handshake (handshake.hpp):
// hello (nonces), then join (MACs); a join with a wrong MAC is refused, logged
// and counted, and only a successful join hands out the handles of this
// node's actors (cluster_node, shard, directory, service).
//
//   auto gate = sys.spawn(cluster_gate_main, gate_config{...});
//   sys.middleman().publish(gate, port, host, true);
//
// Context: a CAF actor; one per node.
#pragma once

#include "actors/cluster/peer_handles.hpp"
#include "actors/type_ids.hpp"
#include "cluster/handshake.hpp"

#include <atomic>
#include <map>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace lmcc::actors {

/// What every gate of every protocol version answers: the first step, which
/// never changes (handshake.hpp), so that any two versions can tell.
using cluster_hello_actor = caf::typed_actor<
    // (client id, client nonce, client's cluster protocol version)
    //   -> (server nonce, server's version)
    caf::replies_to<hello_atom, std::string, uint64_t, uint32_t>::with<uint64_t, uint32_t>>;

using cluster_gate_actor = caf::typed_actor<
    caf::replies_to<hello_atom, std::string, uint64_t, uint32_t>::with<uint64_t, uint32_t>,
    // (client id, client nonce, join MAC) -> (accept MAC, this node's handles)
    caf::replies_to<join_atom, std::string, uint64_t, std::string>::with<std::string, peer_handles>,
    // The same, with the client's own handles: its node takes the client as
    // joined without dialling it back (with TLS, one connection per pair:
    // cluster_node_main). Only nodes with TLS send it.
    caf::replies_to<join_atom, std::string, uint64_t, std::string,
                    peer_handles>::with<std::string, peer_handles>>;

/// Counts /cluster/status and /metrics show (any thread).
struct cluster_counters {
  std::atomic<uint64_t> joins_refused{0}; ///< inbound joins with a wrong secret
  std::atomic<uint64_t> joins_failed{0};  ///< our joins a peer refused or that failed
  std::atomic<uint64_t> peers_lost{0};    ///< live -> down transitions
  std::atomic<uint64_t> connect_attempts{0};
  std::atomic<uint64_t> records_refused{0}; ///< membership records that could not be adopted
  /// TLS between nodes: connections this node refused (a certificate not of
  /// the cluster's CA, none, no TLS), and ones a peer refused (ours).
  std::atomic<uint64_t> tls_refused{0};
  std::atomic<uint64_t> tls_refused_by_peer{0};
};

struct gate_config {
  std::string self_id;
  std::string secret;
  /// This node's actors, where its HTTP API answers (for tools that reach
  /// every node from one: lmcc snapshot --cluster) and where peers read its
  /// index for lookups (gateway/peer_read.hpp).
  peer_handles handles;
  std::shared_ptr<cluster_counters> counters;
  /// cluster::cluster_protocol_version; a test may pretend to be another.
  uint32_t protocol_version = cluster::cluster_protocol_version;
  /// Tell this node's node actor (handles.node) of every peer that joined, with
  /// its handles: with TLS between nodes only one node of a pair dials.
  bool tell_node = false;
};

struct gate_state {
  static inline const char* name = "lmcc.cluster_gate";
  gate_config cfg;
  /// Per client id: (client nonce, server nonce) of its open handshake.
  std::map<std::string, std::pair<uint64_t, uint64_t>> open;
  std::mt19937_64 rng{std::random_device{}()};
};

cluster_gate_actor::behavior_type
cluster_gate_main(cluster_gate_actor::stateful_pointer<gate_state> self, gate_config cfg);

} // namespace lmcc::actors
