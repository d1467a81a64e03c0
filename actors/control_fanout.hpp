// control_fanout: runs one control_plan (spec 4.10) against the workers.
//
// The directory turns ClearMsg, PinMsg, ... into a control_plan; this actor
// sends every command through the injected send function (the node wires it
// to gateway::control_channel, which queues per worker and times out), gathers
// the replies and answers with aggregate_control's result. Commands to
// different workers run concurrently.
//
// Context: a CAF actor; one per node.
#pragma once

#include "actors/type_ids.hpp"

#include <functional>
#include <map>
#include <string>

namespace lmcc::actors {

/// Sends `command` to the worker REP socket at `endpoint`; the callback runs
/// exactly once, on any thread, with the reply or the reason there is none.
using control_send_fn = std::function<void(const std::string& endpoint, msg::Msg command,
                                           std::function<void(control_reply)> done)>;

using control_fanout_actor =
    caf::typed_actor<caf::replies_to<fanout_atom, control_plan>::with<msg::Msg>,
                     caf::reacts_to<control_result_atom, uint64_t, uint64_t, control_reply>>;

struct control_fanout_state {
  static inline const char* name = "lmcc.control_fanout";

  struct running {
    control_plan plan;
    std::vector<control_reply> replies;
    size_t waiting = 0;
    caf::typed_response_promise<msg::Msg> promise;
  };

  control_send_fn send;
  uint64_t next_id = 1;
  std::map<uint64_t, running> plans;
};

control_fanout_actor::behavior_type
control_fanout_main(control_fanout_actor::stateful_pointer<control_fanout_state> self,
                    control_send_fn send);

} // namespace lmcc::actors
