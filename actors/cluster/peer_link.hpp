// peer_link: the local stand-in for another node's KV shard, so that worker
// and session actors send sub-batches to a remote owner exactly as to their
// own shard (sub_batch.hpp's protocol, unchanged).
//
// It forwards sub-batches to the peer's shard -- those that queued in its
// mailbox meanwhile as one message, and while a message is unacknowledged
// those that come meanwhile wait and go together with its ack, so a busy link
// costs one network write and one wake-up per ack round rather than per
// worker batch (the peer's shard holds its acks to at most one message per
// replication_ack_delay) -- and keeps each until the
// peer's cumulative ack (stream, number) comes back, which it passes on to the
// sub-batch's sender. When the peer is lost it keeps queueing (up to
// peer_buffer_ops ops; beyond that the oldest are dropped and counted, and
// anti-entropy must repair the peer), and when the peer comes back (a new
// shard handle: a restarted node, or a reconnect) it re-sends everything
// unacknowledged in order per stream: replaying a suffix of admit/evict ops
// in order converges to the same state, so a duplicate is harmless. What the
// link drops (beyond the bound, or with this node's death) the peer finds
// out from the next sub-batch's `prev` (coverage.hpp) and copies.
//
// A sub-batch not acknowledged within replication_timeout is acknowledged to
// its sender anyway (counted): the other owners hold it, and ingest must not
// stop because one replica is away. It stays queued for the peer.
//
//   auto link = sys.spawn(peer_link_main, peer_link_config{...});
//   anon_send(link, peer_atom::value, remote_shard);  // on every (re)join
//   // workers get actor_cast<kv_shard_actor>(link) as a destination
//
// Context: a CAF actor; one per peer per node.
#pragma once

#include "actors/kv_shard.hpp"
#include "faults/fault_injection.hpp"

#include <atomic>
#include <chrono>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>

namespace lmcc::actors {

using peer_link_actor = kv_shard_actor::extend<
    // The peer's shard after a (re)join; null when the peer was lost.
    caf::reacts_to<peer_atom, caf::actor>,
    // The peer's cumulative ack of a stream.
    caf::reacts_to<ack_atom, uint64_t, uint64_t>,
    // The peer's acks of one commit.
    caf::reacts_to<ack_atom, std::vector<cluster::stream_ack>>>;

/// Counters /cluster/status and /metrics read (any thread).
struct peer_link_counters {
  std::atomic<uint64_t> queued_sub_batches{0}; ///< unacknowledged by the peer now
  std::atomic<uint64_t> queued_ops{0};
  std::atomic<uint64_t> sent_sub_batches{0};
  std::atomic<uint64_t> sent_messages{0};  ///< sub-batches per message = the coalescing
  std::atomic<uint64_t> sent_mark_only{0}; ///< sub-batches without ops (watermarks)
  std::atomic<uint64_t> resent_sub_batches{0};
  std::atomic<uint64_t> timeouts{0};    ///< acknowledged to the sender on timeout
  std::atomic<uint64_t> dropped_ops{0}; ///< beyond peer_buffer_ops
};

struct peer_link_config {
  std::string peer_id;
  std::chrono::milliseconds replication_timeout{5000};
  uint64_t buffer_ops = uint64_t{1} << 22;
  std::shared_ptr<peer_link_counters> counters;
  /// The planted bug of a test build (fault_injection.hpp; empty in a
  /// release build): skip_replica acknowledges every Nth sub-batch with ops
  /// to its sender and never sends it. Default: none
  [[no_unique_address]] faults::planted_bugs planted;
};

struct peer_link_state {
  static inline const char* name = "lmcc.peer_link";

  struct pending {
    kv_sub_batch sb;
    caf::strong_actor_ptr sender;
    std::chrono::steady_clock::time_point sent_at;
    bool released = false; ///< acked to the sender on timeout already
    /// In the outbox, or in a message the peer has not acknowledged.
    bool in_flight = false;
  };

  peer_link_config cfg;
  caf::actor remote;
  std::map<uint64_t, std::deque<pending>> streams; ///< by stream id, in number order
  uint64_t queued_ops = 0;
  /// Received but not yet sent (the next flush sends them as one message).
  std::vector<kv_sub_batch> outbox;
  bool flush_scheduled = false;
  /// Sub-batches in the outbox or sent and not acknowledged yet. While more
  /// than the outbox holds are (a sent one waits for its ack), the outbox
  /// waits for that ack and then goes whole: the acks pace the messages, so a
  /// busy link sends one per ack round instead of one per worker batch, and a
  /// link used seldom sends at once (no timer).
  uint64_t in_flight = 0;
  /// When the last message went (a link whose acks stall sends anyway after
  /// in_flight_patience).
  std::chrono::steady_clock::time_point last_flush{};
  /// A timeout check is due (armed only while a sub-batch waits for its ack).
  bool timeout_check_armed = false;
  /// The cluster node found the peer down (lost, or its connect failed);
  /// false before the first word about it: a peer not connected yet is
  /// waited for (the replication timeout), one found down is not.
  bool peer_down = false;
};

peer_link_actor::behavior_type
peer_link_main(peer_link_actor::stateful_pointer<peer_link_state> self, peer_link_config cfg);

} // namespace lmcc::actors
