// type_ids: every atom and message type the node's actors exchange, in one place.
//
// CAF 0.17.6's type-id block (CAF_BEGIN_TYPE_ID_BLOCK) registers types for
// serialization and requires an `inspect` overload for each. The single-node
// actors exchange messages only inside one process, so lmcc declares them here
// as local-only types (CAF_ALLOW_UNSAFE_MESSAGE_TYPE: never serialized; a send
// to a remote actor would fail loudly). The cluster work replaces the entries
// that cross nodes with inspectable types in a type-id block in this file.
//
// Context: included by every actor header; declares no state.
#pragma once

#include "actors/control_plan.hpp"
#include "actors/full_sync_session.hpp"
#include "actors/kv_index.hpp"
#include "actors/registry.hpp"
#include "messages/expected.hpp"
#include "messages/lmcache_msgs.hpp"

#include <caf/all.hpp>

#include <cstdint>
#include <memory>
#include <vector>

namespace lmcc::actors {

// -- atoms: gateway -> actors ---------------------------------------------------
using push_atom = caf::atom_constant<caf::atom("push")>; ///< fire-and-forget WorkerMsg/OrchMsg
using request_atom = caf::atom_constant<caf::atom("request")>; ///< request with one reply Msg
using stats_atom = caf::atom_constant<caf::atom("stats")>;     ///< statistics snapshot

// -- atoms: directory <-> worker actors -----------------------------------------
using batch_atom = caf::atom_constant<caf::atom("batch")>;
using sync_start_atom = caf::atom_constant<caf::atom("syncstart")>;
using sync_batch_atom = caf::atom_constant<caf::atom("syncbatch")>;
using sync_end_atom = caf::atom_constant<caf::atom("syncend")>;
using sync_status_atom = caf::atom_constant<caf::atom("syncstat")>;
using sync_state_atom = caf::atom_constant<caf::atom("syncstate")>;
using seq_gap_atom = caf::atom_constant<caf::atom("seqgap")>;
using reset_atom = caf::atom_constant<caf::atom("reset")>;
using retire_atom = caf::atom_constant<caf::atom("retire")>;
using tick_atom = caf::atom_constant<caf::atom("tick")>;
using resync_atom = caf::atom_constant<caf::atom("resync")>;        ///< worker must full-sync
using reset_done_atom = caf::atom_constant<caf::atom("resetdone")>; ///< reset durable everywhere

// -- atoms: worker actors / lookups -> KV shards -----------------------------------
using apply_atom = caf::atom_constant<caf::atom("apply")>;
using erase_atom = caf::atom_constant<caf::atom("erase")>;
using find_atom = caf::atom_constant<caf::atom("find")>;
using mark_atom = caf::atom_constant<caf::atom("mark")>;   ///< set a seq watermark mark
using flush_atom = caf::atom_constant<caf::atom("flush")>; ///< commit what is pending
using drain_atom = caf::atom_constant<caf::atom("drain")>; ///< everything sent so far is committed

// -- atoms: directory -> lookup and control actors ----------------------------------
using view_atom = caf::atom_constant<caf::atom("view")>;
using fanout_atom = caf::atom_constant<caf::atom("fanout")>;
using control_result_atom = caf::atom_constant<caf::atom("ctlresult")>;

/// Entries per holder of one shard, plus its totals.
struct shard_stats {
  uint64_t entries = 0;
  uint64_t keys = 0;
  uint64_t memory_bytes = 0;
  uint64_t commits = 0;         ///< store writes this shard made
  uint64_t commit_failures = 0; ///< of which failed (kept and retried)
  std::vector<std::pair<holder_id, uint64_t>> by_holder;
};

/// One worker in a statistics snapshot.
struct worker_stats {
  msg::WorkerInfo info;
  uint64_t key_count = 0;
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
  uint64_t store_commits = 0;
  uint64_t store_commit_failures = 0;
};

using holder_lists = std::vector<kv_index::holder_list>;
using key_list = std::vector<uint64_t>;
using kv_op_list = std::vector<kv_op>;
using view_ptr = std::shared_ptr<const directory_view>;
using control_reply = msg::expected<msg::Msg>;

} // namespace lmcc::actors

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(lmcc::msg::Msg)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(lmcc::msg::BatchedKVOperationMsg)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(lmcc::msg::FullSyncStartMsg)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(lmcc::msg::FullSyncBatchMsg)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(lmcc::msg::FullSyncEndMsg)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(lmcc::msg::FullSyncStatusMsg)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(lmcc::actors::kv_op_list)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(lmcc::actors::holder_lists)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(lmcc::actors::shard_stats)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(lmcc::actors::node_stats)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(lmcc::actors::view_ptr)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(lmcc::actors::control_plan)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(lmcc::actors::control_reply)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(lmcc::actors::sync_phase)
