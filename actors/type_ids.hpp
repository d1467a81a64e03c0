// type_ids: every atom and message type the node's actors exchange, in one
// place: the one CAF type-id block of lmcc.
//
// Types that cross nodes are in the block, each with an `inspect`
// (actors/inspect.hpp), and are registered once with
// `cfg.add_message_types<caf::id_block::lmcc>()` (register_message_types()).
// CAF 0.17's block registers T but not std::vector<T>: the vectors actors
// exchange are listed as entries of their own. Types that never leave a
// process (callbacks, shared pointers to immutable views, statistics) are
// declared local-only below with CAF_ALLOW_UNSAFE_MESSAGE_TYPE; sending one
// to a remote actor fails loudly.
//
// Context: included by every actor header; declares no state.
#pragma once

#include "actors/cluster/peer_handles.hpp"
#include "actors/inspect.hpp"
#include "index/kv_shard_core.hpp"
#include "index/sub_batch.hpp"
#include "messages/expected.hpp"
#include "messages/lmcache_msgs.hpp"
#include "registry/control_plan.hpp"
#include "registry/registry.hpp"
#include "registry/worker_logic.hpp"

#include <caf/all.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

CAF_BEGIN_TYPE_ID_BLOCK(lmcc, caf::first_custom_type_id)

  // -- atoms: gateway -> actors -------------------------------------------------
  CAF_ADD_ATOM(lmcc, lmcc::actors, push_atom, "push")       // S1 messages
  CAF_ADD_ATOM(lmcc, lmcc::actors, request_atom, "request") // a request with one reply
  CAF_ADD_ATOM(lmcc, lmcc::actors, stats_atom, "stats")     // a statistics snapshot
  CAF_ADD_ATOM(lmcc, lmcc::actors, heard_atom, "heard")     // a heartbeat answered where it arrived

  // -- atoms: directory <-> worker and session actors --------------------------------
  CAF_ADD_ATOM(lmcc, lmcc::actors, sync_start_atom, "syncstart")
  CAF_ADD_ATOM(lmcc, lmcc::actors, sync_status_atom, "syncstat")
  CAF_ADD_ATOM(lmcc, lmcc::actors, sync_state_atom, "syncstate")
  CAF_ADD_ATOM(lmcc, lmcc::actors, session_done_atom, "sessdone")
  CAF_ADD_ATOM(lmcc, lmcc::actors, go_atom, "go")
  CAF_ADD_ATOM(lmcc, lmcc::actors, seq_gap_atom, "seqgap")
  CAF_ADD_ATOM(lmcc, lmcc::actors, seq_start_atom, "seqstart") // a seq went back to 0
  CAF_ADD_ATOM(lmcc, lmcc::actors, location_atom, "location")
  CAF_ADD_ATOM(lmcc, lmcc::actors, reset_atom, "reset")
  CAF_ADD_ATOM(lmcc, lmcc::actors, retire_atom, "retire")
  CAF_ADD_ATOM(lmcc, lmcc::actors, tick_atom, "tick")
  CAF_ADD_ATOM(lmcc, lmcc::actors, resync_atom, "resync") // a worker must full-sync

  // -- atoms: senders <-> KV shards ----------------------------------------------------
  CAF_ADD_ATOM(lmcc, lmcc::actors, apply_atom, "apply")       // a kv_sub_batch
  CAF_ADD_ATOM(lmcc, lmcc::actors, ack_atom, "ack")           // (stream, number) is durable
  CAF_ADD_ATOM(lmcc, lmcc::actors, flush_atom, "flush")       // commit what is pending
  CAF_ADD_ATOM(lmcc, lmcc::actors, background_atom, "bg")     // one step of background work
  CAF_ADD_ATOM(lmcc, lmcc::actors, snapshot_atom, "snapshot") // a snapshot round now
  CAF_ADD_ATOM(lmcc, lmcc::actors, drain_atom, "drain")       // everything sent so far is durable

  // -- atoms: directory -> row writer ---------------------------------------------------
  CAF_ADD_ATOM(lmcc, lmcc::actors, row_put_atom, "rowput")
  CAF_ADD_ATOM(lmcc, lmcc::actors, row_delete_atom, "rowdel")

  // -- atoms: directory -> control actors ------------------------------------------------
  CAF_ADD_ATOM(lmcc, lmcc::actors, fanout_atom, "fanout")
  CAF_ADD_ATOM(lmcc, lmcc::actors, control_result_atom, "ctlresult")

  // -- atoms: between the nodes of a cluster ------------------------------------------------
  CAF_ADD_ATOM(lmcc, lmcc::actors, hello_atom, "hello")     // handshake step 1: nonces
  CAF_ADD_ATOM(lmcc, lmcc::actors, join_atom, "join")       // handshake step 2: MACs and handles
  CAF_ADD_ATOM(lmcc, lmcc::actors, greet_atom, "greet")     // a node is alive (failure detector)
  CAF_ADD_ATOM(lmcc, lmcc::actors, peer_atom, "peer")       // a peer's handles changed
  CAF_ADD_ATOM(lmcc, lmcc::actors, ring_atom, "ring")       // liveness changed: homes may move
  CAF_ADD_ATOM(lmcc, lmcc::actors, handoff_atom, "handoff") // a worker entity changes node
  CAF_ADD_ATOM(lmcc, lmcc::actors, marks_atom, "marks")     // a worker's watermarks in a shard
  CAF_ADD_ATOM(lmcc, lmcc::actors, forward_atom, "forward") // frames for another node
  CAF_ADD_ATOM(lmcc, lmcc::actors, leave_atom, "leave")     // a clean stop hands off first
  CAF_ADD_ATOM(lmcc, lmcc::actors, digest_atom, "digest")   // slot digests (anti-entropy)
  CAF_ADD_ATOM(lmcc, lmcc::actors, repair_atom, "repair")   // a slot's content, to copy
  CAF_ADD_ATOM(lmcc, lmcc::actors, copy_atom, "copy")       // a slot's copy with its labels
  CAF_ADD_ATOM(lmcc, lmcc::actors, install_atom, "install") // take what is newer of a copy
  CAF_ADD_ATOM(lmcc, lmcc::actors, members_atom, "members") // the member set (membership_record)
  CAF_ADD_ATOM(lmcc, lmcc::actors, propose_atom, "propose") // an operator's new member set
  CAF_ADD_ATOM(lmcc, lmcc::actors, rows_applied_atom, "rowsdone") // rows sent before it applied
  CAF_ADD_ATOM(lmcc, lmcc::actors, refill_atom, "refill")   // back empty, peers hold the index
  CAF_ADD_ATOM(lmcc, lmcc::actors, settled_atom, "settled") // a refill settled (or was not needed)

  // -- types that cross nodes (sorted) -----------------------------------------------------
  CAF_ADD_TYPE_ID(lmcc, (lmcc::actors::copy_outcome))
  CAF_ADD_TYPE_ID(lmcc, (lmcc::actors::directory_listing))
  CAF_ADD_TYPE_ID(lmcc, (lmcc::actors::kv_sub_batch))
  CAF_ADD_TYPE_ID(lmcc, (lmcc::actors::peer_handles))
  CAF_ADD_TYPE_ID(lmcc, (lmcc::actors::pushed_msg))
  CAF_ADD_TYPE_ID(lmcc, (lmcc::actors::session_params))
  CAF_ADD_TYPE_ID(lmcc, (lmcc::actors::slot_copy))
  CAF_ADD_TYPE_ID(lmcc, (lmcc::actors::location_mark))
  CAF_ADD_TYPE_ID(lmcc, (lmcc::actors::worker_handoff))
  CAF_ADD_TYPE_ID(lmcc, (lmcc::actors::worker_tombstone))
  CAF_ADD_TYPE_ID(lmcc, (std::vector<lmcc::actors::location_mark>))
  CAF_ADD_TYPE_ID(lmcc, (lmcc::actors::sync_phase))
  CAF_ADD_TYPE_ID(lmcc, (lmcc::cluster::greeting))
  CAF_ADD_TYPE_ID(lmcc, (lmcc::cluster::slot_digests))
  CAF_ADD_TYPE_ID(lmcc, (std::vector<lmcc::cluster::holder_count>))
  CAF_ADD_TYPE_ID(lmcc, (std::vector<lmcc::cluster::registration_ref>))
  CAF_ADD_TYPE_ID(lmcc, (std::vector<lmcc::cluster::stream_ack>))
  CAF_ADD_TYPE_ID(lmcc, (lmcc::msg::Msg))
  CAF_ADD_TYPE_ID(lmcc, (lmcc::msg::wire_int))
  CAF_ADD_TYPE_ID(lmcc, (lmcc::persistence::kv_op))
  CAF_ADD_TYPE_ID(lmcc, (lmcc::persistence::seq_mark))
  CAF_ADD_TYPE_ID(lmcc, (lmcc::persistence::stream_pos))
  CAF_ADD_TYPE_ID(lmcc, (lmcc::persistence::worker_row))
  CAF_ADD_TYPE_ID(lmcc, (std::vector<lmcc::actors::kv_sub_batch>))
  CAF_ADD_TYPE_ID(lmcc, (std::vector<lmcc::actors::pushed_msg>))
  CAF_ADD_TYPE_ID(lmcc, (std::vector<lmcc::actors::worker_tombstone>))
  CAF_ADD_TYPE_ID(lmcc, (std::vector<lmcc::persistence::kv_op>))
  CAF_ADD_TYPE_ID(lmcc, (std::vector<lmcc::persistence::worker_row>))
  CAF_ADD_TYPE_ID(lmcc, (std::vector<uint64_t>))

CAF_END_TYPE_ID_BLOCK(lmcc)

namespace lmcc::actors {

/// Registers the block with an actor system config (call once, before the system exists).
inline void register_message_types(caf::actor_system_config& cfg) {
  cfg.add_message_types<caf::id_block::lmcc>();
}

// -- local-only message types ---------------------------------------------------

/// A shard's numbers for /metrics (read through the shard's monitor).
struct shard_stats {
  shard_counters counters;
  uint64_t next_position = 0;
  uint64_t log_bytes_since_round = 0;
  bool snapshot_running = false;
};

/// One worker in a statistics snapshot.
struct worker_stats {
  msg::WorkerInfo info;
  uint64_t key_count = 0;
  /// Its (worker, location) holder ids (a cluster sums their counts over nodes).
  std::vector<holder_id> holders;
};

/// Everything /controller/*, /metrics and the gauges need, taken at one moment.
struct node_stats {
  std::vector<worker_stats> workers; ///< registration order
  uint64_t total_entries = 0;
  uint64_t total_keys = 0;
  uint64_t index_memory_bytes = 0;
  uint64_t seq_discontinuities = 0;
  uint64_t workers_syncing = 0;
  uint64_t workers_completed = 0;
  double global_progress = 0;
  uint64_t missing_batches_total = 0;
  shard_stats shard;
};

/// One commit's acknowledgements to senders on this node, sent by the shard
/// to one actor that hands them out (kv_shard.hpp says why).
struct local_ack {
  caf::strong_actor_ptr sender;
  uint64_t stream = 0;
  uint64_t number = 0;
};
using local_acks = std::vector<local_ack>;

using control_reply = msg::expected<msg::Msg>;
/// Called exactly once with a request's reply, on any thread.
using reply_callback = std::function<void(msg::Msg)>;
using stats_callback = std::function<void(std::optional<node_stats>)>;

} // namespace lmcc::actors

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(lmcc::actors::node_stats)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(lmcc::actors::local_acks)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(lmcc::actors::control_plan)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(lmcc::actors::control_reply)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(lmcc::actors::reply_callback)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(lmcc::actors::stats_callback)
