// sync_session: the FullSyncSession actor of one worker
// (sync_session_logic.hpp is the logic; this file adapts it to CAF).
//
// Spawned by its WorkerActor on the worker's first FullSyncStartMsg and linked
// to it; later syncs of the same worker reuse it, so that every sync of a
// worker leaves in one stream (CAF orders messages per sender, and a new
// sync's drop must land after the last one's keys). It reports the sync's
// state to the Directory (global progress) and its end to the WorkerActor.
//
// Context: a CAF actor, a child of a worker actor.
#pragma once

#include "actors/kv_shard.hpp"
#include "actors/type_ids.hpp"
#include "registry/credit_gate.hpp"
#include "registry/sync_session_logic.hpp"

#include <memory>
#include <vector>

namespace lmcc::actors {

/// The part of the directory that worker and session actors report to.
using directory_feedback_actor =
    caf::typed_actor<caf::reacts_to<sync_state_atom, uint64_t, sync_phase, uint64_t>,
                     caf::reacts_to<seq_gap_atom, uint64_t, uint64_t>,
                     // (uid, incarnation): a batch went back to seq 0
                     // (restart_race.hpp).
                     caf::reacts_to<seq_start_atom, uint64_t, uint64_t>,
                     caf::reacts_to<resync_atom, uint64_t, std::string>,
                     caf::reacts_to<location_atom, uint64_t, std::string>>;

/// The part of a worker actor a session reports to.
using session_owner_actor =
    caf::typed_actor<caf::reacts_to<session_done_atom, std::string, bool, std::vector<uint64_t>>>;

using sync_session_actor = caf::typed_actor<
    caf::reacts_to<sync_start_atom, session_params>, caf::reacts_to<go_atom>,
    caf::reacts_to<push_atom, pushed_msg>, caf::reacts_to<ack_atom, uint64_t, uint64_t>,
    caf::replies_to<sync_status_atom, msg::Msg>::with<msg::Msg>, caf::reacts_to<tick_atom>,
    // Answers once everything it sent is acknowledged.
    caf::replies_to<drain_atom>::with<bool>>;

struct session_env {
  uint64_t worker_uid = 0;
  std::vector<kv_shard_actor> shards;
  std::shared_ptr<credit_gate> gate;
  directory_feedback_actor directory;
  session_owner_actor owner;
};

class session_effects;

struct sync_session_state {
  static inline const char* name = "lmcc.sync_session";

  session_env env;
  std::unique_ptr<session_effects> effects;
  std::unique_ptr<sync_session_logic> logic;
  bool ticking = false;
  std::vector<caf::typed_response_promise<bool>> drains;

  sync_session_state();
  ~sync_session_state();
};

sync_session_actor::behavior_type
sync_session_main(sync_session_actor::stateful_pointer<sync_session_state> self, session_env env,
                  session_config cfg);

} // namespace lmcc::actors
