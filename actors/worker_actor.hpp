// worker_actor: the WorkerActor of one registered LMCache worker
// (worker_logic.hpp is the logic; this file adapts it to CAF).
//
// It sees the worker's whole PULL stream (the front end routes each worker's
// frames to its actor directly), checks seq_num continuity, sends one
// sub-batch per batch and destination shard, gives the ingest credits back as
// the shards acknowledge, and owns the worker's full-sync session actor
// (sync_session.hpp), spawned on the first FullSyncStartMsg and linked to it.
//
//   auto w = sys.spawn(worker_main, worker_env{...}, worker_config{...});
//   anon_send(w, push_atom::value, pushed_msgs{...});
//
// Context: a CAF actor spawned and retired by the directory.
#pragma once

#include "actors/kv_shard.hpp"
#include "actors/sync_session.hpp"
#include "actors/type_ids.hpp"
#include "registry/credit_gate.hpp"
#include "registry/worker_logic.hpp"

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace lmcc::actors {

using worker_actor =
    caf::typed_actor<caf::reacts_to<push_atom, pushed_msgs>,
                     // A FullSyncStartMsg / FullSyncStatusMsg (as Msg: the type that crosses
                     // nodes).
                     caf::replies_to<sync_start_atom, msg::Msg>::with<msg::Msg>,
                     caf::replies_to<sync_status_atom, msg::Msg>::with<msg::Msg>,
                     caf::reacts_to<ack_atom, uint64_t, uint64_t>,
                     caf::reacts_to<session_done_atom, std::string, bool, std::vector<uint64_t>>,
                     caf::reacts_to<reset_atom, uint64_t>, caf::reacts_to<retire_atom>,
                     // Answers once everything it and its session sent is acknowledged.
                     caf::replies_to<drain_atom>::with<bool>,
                     // Its home moved away: drains, answers its seq marks and
                     // from then on passes frames back to the directory.
                     caf::replies_to<handoff_atom>::with<std::vector<location_mark>>,
                     // Taken over: the marks to start from (await_takeover).
                     caf::reacts_to<handoff_atom, std::vector<location_mark>>,
                     // A peer node died: check the next batches' seq
                     // (worker_logic::check_next_batches).
                     caf::reacts_to<ring_atom>,
                     // The end of the reorder window after a takeover.
                     caf::reacts_to<tick_atom>,
                     // worker_logic::flush_durable, durable_flush_delay after it was wanted
                     caf::reacts_to<flush_atom>>;

/// Frames a worker actor that handed its worker off passes back, for the
/// directory to send to the worker's new home.
using frame_return_actor = caf::typed_actor<caf::reacts_to<forward_atom, pushed_msgs>>;

/// What a worker actor reaches outside itself.
struct worker_env {
  std::vector<kv_shard_actor> shards; ///< destinations, by index
  std::shared_ptr<credit_gate> gate;
  directory_feedback_actor directory;
  /// The directory again, for frames that arrive after a handoff (a cluster).
  frame_return_actor returns;
  double full_sync_timeout_s = 300;
  /// worker_logic::flush_durable runs this long after it is wanted.
  std::chrono::milliseconds durable_flush_delay{50};
};

class worker_effects;

struct worker_actor_state {
  static inline const char* name = "lmcc.worker";

  worker_env env;
  std::unique_ptr<worker_effects> effects;
  std::unique_ptr<worker_logic> logic;
  std::optional<sync_session_actor> session;
  session_config session_cfg;
  std::vector<caf::typed_response_promise<bool>> drains;
  /// Set while await_takeover: the config the logic starts with, and the
  /// frames that arrived meanwhile.
  std::optional<worker_config> waiting;
  pushed_msgs parked;
  /// Just after a takeover, frames of the worker may arrive by two paths (the
  /// old home passing late ones on, and straight): a batch ahead of its
  /// location's seq waits here, for the frames before it, until the window
  /// closes (takeover_reorder_window).
  pushed_msgs held;
  bool reordering = false;
  bool durable_flush_scheduled = false;
  /// Handoffs asked for (answered once drained), and whether it was answered.
  std::vector<caf::typed_response_promise<std::vector<location_mark>>> handoffs;
  bool handed_off = false;

  worker_actor_state();
  ~worker_actor_state();
};

/// How long a taken-over worker's actor waits for frames that arrive out of
/// seq order (they travelled through the old home) before it counts a gap.
inline constexpr std::chrono::milliseconds takeover_reorder_window{1000};

worker_actor::behavior_type worker_main(worker_actor::stateful_pointer<worker_actor_state> self,
                                        worker_env env, worker_config cfg);

} // namespace lmcc::actors
