// worker_actor: one registered LMCache worker (instance_id, worker_id).
//
// It sees that worker's whole stream: it checks seq_num continuity per
// location (spec 4.3.2; a gap is counted and logged, once per batch), splits
// each BatchedKVOperationMsg by shard, and owns the worker's full sync (spec
// 4.8): while a session is SYNCING every increment is discarded, the session's
// keys are admitted with no seq check, and an idle session fails after
// full_sync_timeout. Because this actor sends every write for its worker, each
// shard applies that worker's writes in order (CAF orders per sender).
//
//   auto w = sys.spawn(worker_main, worker_config{...});
//   anon_send(w, batch_atom::value, location_index, batched_msg);
//
// Context: a CAF actor spawned and retired by the directory.
#pragma once

#include "actors/kv_shard.hpp"
#include "actors/type_ids.hpp"

#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>

namespace lmcc::actors {

/// The part of the directory a worker actor reports to.
using directory_feedback_actor =
    caf::typed_actor<caf::reacts_to<sync_state_atom, uint32_t, sync_phase, uint64_t>,
                     caf::reacts_to<seq_gap_atom, uint32_t, uint64_t>,
                     caf::reacts_to<resync_atom, uint32_t, std::string>,
                     caf::reacts_to<reset_done_atom, uint32_t, uint64_t>>;

using worker_actor = caf::typed_actor<
    caf::reacts_to<batch_atom, uint32_t, msg::BatchedKVOperationMsg>,
    caf::replies_to<sync_start_atom, uint32_t, msg::FullSyncStartMsg>::with<msg::Msg>,
    caf::reacts_to<sync_batch_atom, uint32_t, msg::FullSyncBatchMsg>,
    caf::reacts_to<sync_end_atom, msg::FullSyncEndMsg>,
    caf::replies_to<sync_status_atom, msg::FullSyncStatusMsg>::with<msg::Msg>,
    caf::reacts_to<reset_atom>, caf::reacts_to<retire_atom>, caf::reacts_to<tick_atom>,
    // Answers once every shard has committed what this worker sent before.
    caf::replies_to<drain_atom>::with<bool>>;

struct worker_config {
  uint32_t worker_num = 0;
  std::string instance_id;
  msg::wire_int worker_id;
  std::vector<kv_shard_actor> shards;
  uint32_t slot_count = 4096;
  double full_sync_timeout_s = 300;
  directory_feedback_actor directory;
  /// The shards persist: every incremental batch carries its last seq_num to
  /// every shard (the watermark), not only to those it has ops for.
  bool durable = false;
  /// Restored from the store after a restart: the first op of each location
  /// must continue what the store holds (restore_plan.hpp).
  bool restored = false;
  std::map<uint32_t, uint64_t> initial_last_seq;
  std::map<uint32_t, std::optional<uint64_t>> expected_next;
};

/// What check_seq found in one batch: LMCache records the first gap only.
struct seq_gap {
  uint64_t expected = 0;
  uint64_t got = 0;
};

struct worker_actor_state {
  static inline const char* name = "lmcc.worker";

  worker_config cfg;
  std::map<uint32_t, uint64_t> last_seq; ///< per location index (seq bit patterns)
  std::optional<full_sync_session> session;
  uint32_t sync_location_index = 0; ///< the location the session rebuilds
  uint64_t discarded_batches = 0;
  /// Locations whose first op after a restore has been checked.
  std::set<uint32_t> checked_after_restore;

  /// After a restore: the seq the first op of `location_index` must carry, or
  /// nullopt when it need not be checked (already checked, resynced, or not restored).
  std::optional<uint64_t> restore_expectation(uint32_t location_index);

  /// spec 4.3.2: updates the trackers from `ops` in order; the first gap, if any.
  std::optional<seq_gap> check_seq(uint32_t location_index, const std::vector<msg::KVOpEvent>& ops);

  /// The ops for each shard (index = shard), order kept.
  std::vector<kv_op_list> split_by_shard(const std::vector<msg::KVOpEvent>& ops) const;
  std::vector<kv_op_list> split_keys_by_shard(const std::vector<msg::wire_int>& keys) const;

  bool syncing() const { return session && session->phase() == sync_phase::syncing; }
};

worker_actor::behavior_type worker_main(worker_actor::stateful_pointer<worker_actor_state> self,
                                        worker_config cfg);

} // namespace lmcc::actors
