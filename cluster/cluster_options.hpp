// cluster_options: how a node finds and trusts the other nodes of its cluster.
//
// The same member list goes into every node's config (YAML key
// lmcc_cluster_members); each node knows its own id (lmcc_node_id) and finds
// its cluster port in the list. An empty list is a single node, exactly the
// LMCache drop-in of before. The secret never appears in the config itself:
// it is read from a file (lmcc_cluster_secret_file) or an environment
// variable (LMCC_CLUSTER_SECRET by default), because configs get copied into
// tickets and repositories and secrets must not.
//
// Context: a plain options struct, filled once by the node's config.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace lmcc::cluster {

/// One configured node: its id and where its cluster endpoint listens.
struct member_address {
  std::string id;
  std::string host;
  uint16_t port = 0;
  /// Known (peers connect to it) but owning nothing until a membership
  /// change adds it (membership_record.hpp): how a node joins a running cluster.
  bool standby = false;

  friend bool operator==(const member_address&, const member_address&) = default;
};

struct cluster_options {
  /// Every node of the cluster, this one included. Empty: a single node.
  /// Default: empty
  std::vector<member_address> members;

  /// Owners per slot (the primary plus R-1 replicas); R = 1 keeps no replica.
  /// At most the member count. Default: 2
  uint32_t replicas = 2;

  /// Points each member places on the ring (ring.hpp says why 1024).
  /// Default: 1024
  uint32_t virtual_nodes = 1024;

  /// A file whose contents (trailing whitespace trimmed) are the cluster
  /// secret. Empty: read the variable named by secret_env. Default: ""
  std::string secret_file;

  /// The environment variable holding the secret when no file is given.
  /// Default: "LMCC_CLUSTER_SECRET"
  std::string secret_env = "LMCC_CLUSTER_SECRET";

  /// The secret itself, resolved at start from the two above (never dumped).
  std::string secret;

  /// Mutual TLS between nodes on every channel (gateway/node_tls.hpp): the
  /// PEM CA every peer's certificate must chain to, this node's certificate
  /// (chain) and its private key. All three or none; the secret's handshake
  /// runs on top. Default: "" (plain TCP)
  std::string tls_ca_file;
  std::string tls_cert_file;
  std::string tls_key_file;

  bool tls() const noexcept { return !tls_cert_file.empty(); }

  /// How often a node greets each peer while the cluster is changing: a
  /// peer not connected, or the member set, a refill or a peer's readiness
  /// not agreed yet. Default: 250 ms
  std::chrono::milliseconds heartbeat_interval{250};

  /// How often it greets each peer once every peer is connected and agrees.
  /// An idle cluster's greetings are nearly all it does, and each one wakes
  /// threads on both nodes; what changes is still greeted at once. Must be
  /// below failure_timeout, whose difference is the slack a late greeting
  /// has before its peer is taken as down. Default: 1000 ms
  std::chrono::milliseconds quiet_heartbeat_interval{1000};

  /// A peer silent this long is taken as down. CAF's middleman heartbeat
  /// runs at this interval, and its connection timeout is twice it: only a
  /// backstop, since greetings keep every connection busier. Default: 2000 ms
  std::chrono::milliseconds failure_timeout{2000};

  /// One connect attempt's bound; failed attempts back off up to 8x this.
  /// Default: 1000 ms
  std::chrono::milliseconds connect_timeout{1000};

  /// A sub-batch sent to another owner counts as held once this long has
  /// passed without its ack (counted in lmcc_cluster_replication_timeouts);
  /// it stays queued for re-sending when the owner comes back. Default: 5000 ms
  std::chrono::milliseconds replication_timeout{5000};

  /// How long a shard may hold its acks to another node's link so that they
  /// go as one message: at most one ack message per peer per this delay.
  /// Every message between nodes costs the middleman thread wake-ups on both
  /// sides, and acks were half of them (CPU per applied op at 100 k ops/s:
  /// 4.27 -> 2.79 us with 20 ms, 2.27 us with 50 ms). What it delays: the
  /// senders' credits and durable watermarks, never the data. 0 sends each
  /// commit's acks at once. Default: 20 ms
  std::chrono::milliseconds replication_ack_delay{20};

  /// CAF's BASP worker threads, which deserialize messages from other nodes
  /// (CAF's `middleman.workers`). 0 has the middleman's own thread do it: one
  /// wake-up fewer per inter-node message (-5 % CPU per op, -8 % switches at
  /// 100 k ops/s on 2 cores), at the price of one thread for reading and
  /// decoding; raise it on nodes with many cores and peers. Default: 0
  uint32_t middleman_workers = 0;

  /// How long a lookup waits for another owner's read before it asks the
  /// next owner of those slots too (gateway/owner_reads.hpp): a frozen or
  /// cut-off owner then delays lookups by about this, not by the failure
  /// timeout, and never leaves them partial. Reads take ~0.1 ms idle and a
  /// few ms under load, so hedges are rare. 0: never hedge. Default: 250 ms
  std::chrono::milliseconds read_hedge_delay{250};

  /// Ops kept for re-sending per unreachable peer; beyond it the oldest are
  /// dropped and counted, and anti-entropy repairs the peer. Default: 4194304
  uint64_t peer_buffer_ops = uint64_t{1} << 22;

  /// How often each node compares the digests of the slots it shares with
  /// every other owner (actors/cluster/anti_entropy.hpp); a slot that differs the
  /// same way two rounds in a row is copied from the owner that has been up
  /// longest, unless that copy is suspect (its node stood still meanwhile;
  /// anti_entropy_logic.hpp). 0 turns anti-entropy off. Default: 5000 ms
  std::chrono::milliseconds anti_entropy_interval{5000};

  /// How long a node remembers a worker's deregistration (a tombstone) to
  /// refuse the row a node that was down meanwhile restored; past it such a
  /// row lives until the reaper's lmcache_worker_timeout. Default: 3600000 ms
  std::chrono::milliseconds tombstone_ttl{3'600'000};

  /// How long after a worker's last batch became durable (acknowledged by
  /// every owner) its owners are told so, if it sends nothing meanwhile. A
  /// worker that keeps sending carries the durable seq in its next batch; a
  /// quiet one gets one mark-only sub-batch per owner, at most once per this
  /// long. A takeover within it finds an older durable seq, which is safe: at
  /// worst the worker is asked for a full sync. Default: 50 ms
  std::chrono::milliseconds durable_flush_delay{50};

  /// How long a worker's home gathers its workers' heartbeat times before it
  /// sends them to every peer, one message per peer. The peers keep the times
  /// for the reaper in case they take a worker over, and a row per heartbeat
  /// cost every node a message per heartbeat of every worker. A peer's copy
  /// lags by up to this; the reaper's timeout (lmcache_worker_timeout) is
  /// minutes. The same delay gathers the heartbeats a node answered for
  /// workers homed elsewhere before it tells their homes (never more than a
  /// quarter of that timeout). 0 sends each at once. Default: 1000 ms
  std::chrono::milliseconds heartbeat_replication_delay{1000};

  bool enabled() const noexcept { return !members.empty(); }
};

} // namespace lmcc::cluster
