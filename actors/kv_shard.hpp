// kv_shard: the actor that owns a node's index writes and its op log
// (kv_shard_core.hpp is the logic; this file adapts it to CAF).
//
// It takes kv_sub_batches from worker and session actors (and, in a cluster,
// from other nodes), applies and logs them, and once a commit has made them
// durable acknowledges each sender stream with the highest number it covers:
// (ack_atom, stream, number) to the actor that sent them. The commit runs when
// the mailbox has drained: the first sub-batch after a commit sends the shard a
// flush message, which lands behind everything already queued, so one commit
// covers whatever queued meanwhile. Background work (drop cleaning, snapshot
// rounds) runs in bounded steps, each a message of its own behind queued
// ingest. A failing commit is retried with backoff; its acks wait.
//
// The shard answers no requests of routers or workers: lookups read the index
// under its read lock (kv_index.hpp), so they never queue behind ingest.
//
//   auto shard = sys.spawn(kv_shard, shard_init{...});
//   self->send(shard, apply_atom::value, sub_batch);   // later: ack to self
//
// Context: a CAF actor; one per node.
#pragma once

#include "actors/ack_batcher.hpp"
#include "actors/sooner_tick.hpp"
#include "actors/type_ids.hpp"
#include "index/memory_release.hpp"

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>

namespace lmcc::actors {

/// What a sender must accept: the shard's acknowledgements.
using ack_receiver_actor = caf::typed_actor<caf::reacts_to<ack_atom, uint64_t, uint64_t>>;

/// Hands one commit's acks to local senders out from inside the scheduler
/// (the ingest router does). The shard runs on a thread of its own: each
/// message it sends to an idle actor wakes a scheduler thread, and a commit
/// acknowledges every worker that sent since the last one; relayed, a
/// commit wakes the scheduler once.
using ack_relay_actor = caf::typed_actor<caf::reacts_to<ack_atom, local_acks>>;

/// A sender on another node (a peer_link) also takes one commit's acks at once.
using batch_ack_receiver_actor =
    caf::typed_actor<caf::reacts_to<ack_atom, std::vector<cluster::stream_ack>>>;

using kv_shard_actor = caf::typed_actor<
    caf::reacts_to<apply_atom, kv_sub_batch>,
    // Several at once, in order (a peer_link's coalesced sends).
    caf::reacts_to<apply_atom, std::vector<kv_sub_batch>>, caf::reacts_to<flush_atom>,
    caf::reacts_to<background_atom>, caf::reacts_to<tick_atom>,
    // Sends the acks held for senders on other nodes (a peer_link ignores it).
    caf::reacts_to<ack_atom>,
    // Commits everything received so far; true when it is durable (a clean stop).
    caf::replies_to<drain_atom>::with<bool>,
    // Runs a whole snapshot round now; true when it completed (admin, tests).
    caf::replies_to<snapshot_atom>::with<bool>,
    // Asks for a round run in bounded background steps, as the
    // periodic ones are; true once a round that began after the
    // request is durable (a refill's copies: ingest goes on).
    caf::replies_to<snapshot_atom, bool>::with<bool>,
    // The watermarks this shard keeps of a worker (handoff.hpp);
    // a peer_link answers with none.
    caf::replies_to<marks_atom, uint64_t>::with<std::vector<location_mark>>,
    // Empties a slot this node no longer owns; a peer_link ignores it.
    caf::reacts_to<repair_atom, uint64_t>,
    // This node's copy of a slot, every holder labeled
    // (slot_copy.hpp); a peer_link answers with an error.
    caf::replies_to<copy_atom, uint64_t>::with<slot_copy>,
    // Takes from another owner's copy what is newer, holder by
    // holder (coverage.hpp); a copy check_slot_copy refuses changes
    // nothing and answers an empty outcome.
    caf::replies_to<install_atom, slot_copy>::with<copy_outcome>,
    // The slots this node owns: one word per slot, the epoch
    // since which it owns it or not_owned (coverage.hpp).
    caf::reacts_to<members_atom, std::vector<uint64_t>>,
    // A node back empty: these blank slots are lost on every owner, or
    // (settled_atom) none of its slots has a copy to wait for any more
    // (coverage_book::settle).
    caf::reacts_to<refill_atom, std::vector<uint64_t>>, caf::reacts_to<settled_atom>,
    // The registrations this node's directory knows: drops holders
    // of older ones (kv_shard_core::retire_older); a peer_link ignores it.
    caf::reacts_to<retire_atom, std::vector<cluster::registration_ref>>,
    // Who is told (resync_atom, uid, reason) of a worker whose ops a sender
    // behind its stream's era made this node drop: the node's directory,
    // set once it is spawned; a peer_link ignores it.
    caf::reacts_to<resync_atom, caf::actor>>;

/// The shard's latest numbers, readable from any thread (/metrics, stats).
class shard_monitor {
public:
  void publish(const shard_stats& s) {
    std::lock_guard lock{mutex_};
    stats_ = s;
  }
  shard_stats read() const {
    std::lock_guard lock{mutex_};
    return stats_;
  }

private:
  mutable std::mutex mutex_;
  shard_stats stats_;
};

struct shard_init {
  shard_options options;
  std::shared_ptr<kv_index> index;
  std::shared_ptr<persistence::store> store;
  shard_start_state start;
  std::shared_ptr<shard_monitor> monitor;
  /// Holders to drop before serving (what a restart's plan found stale),
  /// with the incarnation each drop carries.
  std::vector<std::pair<holder_id, uint64_t>> drop_at_start;
  /// When to give freed memory back, and how (called on the shard's thread;
  /// must not block). Empty: never.
  memory_release_options release;
  std::function<void()> release_memory;
  /// Called first on the shard's own thread (may set its scheduling). Empty: nothing.
  std::function<void()> on_thread_start;
  /// How long acks to senders on other nodes may be held (kv_shard_state).
  std::chrono::milliseconds remote_ack_delay{0};
  /// Relays acks to local senders; none: the shard sends each itself.
  ack_relay_actor ack_relay;
};

struct kv_shard_state {
  static inline const char* name = "lmcc.kv_shard";

  std::unique_ptr<kv_shard_core> core;
  std::shared_ptr<shard_monitor> monitor;
  /// Who to ack, per stream with acks owed.
  absl::flat_hash_map<uint64_t, caf::strong_actor_ptr> senders;
  /// The node's directory: told of workers that owe a full sync.
  caf::actor resync_to;
  bool flush_scheduled = false;
  bool background_scheduled = false;
  /// The tick, armed only while the shard has work of its own.
  sooner_tick tick;
  /// Acks owed to senders on other nodes (peer_links), at most one message
  /// per sender per shard_init::remote_ack_delay (ack_batcher.hpp).
  std::unique_ptr<ack_batcher<caf::strong_actor_ptr>> remote_acks;
  bool remote_ack_scheduled = false;
  /// Retry delay after a failed commit (doubles up to a second).
  std::chrono::milliseconds retry_delay{0};
  std::shared_ptr<kv_index> index;
  ack_relay_actor ack_relay;
  memory_release_policy release_policy;
  std::function<void()> release_memory;
  /// Background round requests: answered once the shard's completed rounds
  /// reach the number (kv_shard_core's counters().snapshot_rounds).
  std::vector<std::pair<uint64_t, caf::typed_response_promise<bool>>> round_waiters;
};

kv_shard_actor::behavior_type kv_shard(kv_shard_actor::stateful_pointer<kv_shard_state> self,
                                       std::shared_ptr<shard_init> init);

} // namespace lmcc::actors
