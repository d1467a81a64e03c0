// frame_forwarder: sends PULL-socket frames of workers homed on other nodes
// to those nodes' cluster services (cluster_service.hpp) and gives their
// ingest credits back once the service answered.
//
//   anon_send(forwarder, push_atom::value, node_index, pushed_msgs{...});
//
// Context: a CAF actor; one per node, fed by the PULL thread.
#pragma once

#include "actors/cluster/cluster_table.hpp"
#include "actors/deadline_book.hpp"
#include "actors/ingest_routes.hpp"
#include "actors/type_ids.hpp"

#include <map>
#include <memory>

namespace lmcc::actors {

class credit_gate;

/// Sends PULL-socket frames of workers homed on other nodes to those nodes'
/// services and gives their ingest credits back once the service answered
/// (when the node is down by then, to the worker's new home; frames a home
/// cannot take are dropped and counted: the worker's next batch shows a seq
/// gap and that worker alone full-syncs). While a forward to a node is
/// unanswered, frames for it wait and go together with its answer, or after
/// frame_forwarder_config::max_wait -- self-clocked batching: an idle link
/// sends at once, a busy one sends fewer, larger messages (each costs thread
/// wake-ups on both nodes).
using frame_forwarder_actor =
    caf::typed_actor<caf::reacts_to<push_atom, uint16_t, pushed_msgs>,
                     // Frames waiting for a node have waited long enough.
                     caf::reacts_to<tick_atom, uint16_t>,
                     // Time to expire forwards unanswered past the timeout.
                     caf::reacts_to<tick_atom>,
                     // Answers once every forward sent so far was answered
                     // (a clean stop: nothing in flight is lost with it).
                     caf::replies_to<drain_atom>::with<bool>>;

struct frame_forwarder_config {
  std::shared_ptr<cluster_board> board;
  std::shared_ptr<credit_gate> gate;
  /// A forward unanswered this long is given up (its frames counted as
  /// dropped, its credits returned). Checked every timeout / 8 (at most
  /// 250 ms) by the forwarder's own tick (deadline_book.hpp).
  std::chrono::milliseconds timeout{10000};
  /// How long frames wait behind an unanswered forward to their node before
  /// they go on their own. A forward is answered once the home applied it,
  /// so while one is in flight the next frames gather into one message
  /// (self-clocked batching); but a worker stuck at the home (its actor
  /// moving, its owners unreachable) must not hold every other worker homed
  /// there until the timeout.
  std::chrono::milliseconds max_wait{50};
  std::function<void(std::string_view)> count_event;
  /// Told the uid of every worker whose frames a forward dropped (given up at
  /// its timeout, or its home unreachable). They may never reach the home,
  /// and a worker that goes quiet after them shows no seq gap that would
  /// prove the loss (its last batch would be lost for good): the node has the
  /// worker asked for a full sync (guarded by frame_forwarder_test's
  /// an_unanswered_forward_times_out_once_and_its_late_answer_is_ignored).
  /// Unset: nothing is told.
  std::function<void(uint64_t worker_uid)> frames_lost;
};

struct frame_forwarder_state {
  static inline const char* name = "lmcc.frame_forwarder";
  frame_forwarder_config cfg;
  uint64_t dropped = 0;
  uint64_t in_flight = 0;
  /// By node index: forwards to it in flight, the frames waiting, and
  /// whether a tick is due to send them after max_wait.
  std::map<uint16_t, uint32_t> sent_to;
  std::map<uint16_t, pushed_msgs> waiting;
  std::map<uint16_t, bool> tick_due;
  std::vector<caf::typed_response_promise<bool>> drains;
  /// Each forward in flight, with what its timeout does.
  deadline_book<std::function<void()>> deadlines;
  bool expiry_tick_armed = false;
};

frame_forwarder_actor::behavior_type
frame_forwarder_main(frame_forwarder_actor::stateful_pointer<frame_forwarder_state> self,
                     frame_forwarder_config cfg);

} // namespace lmcc::actors
