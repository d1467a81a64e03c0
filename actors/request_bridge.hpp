// request_bridge: lets non-actor threads (ZMQ and HTTP) make requests to the
// actors and get each answer through a callback.
//
// The socket threads must never block on the index, and a ROUTER request must
// get exactly one reply whatever happens inside the node; so the bridge issues
// a CAF request with a finite timeout and always calls the callback once: with
// the answer, or with an ErrorMsg naming the failure (timeout, actor down).
//
//   anon_send(bridge, request_atom::value, msg::Msg{reg}, timeout_ms, reply_callback{...});
//
// Context: a CAF actor; one per node.
#pragma once

#include "actors/directory.hpp"
#include "actors/type_ids.hpp"

#include <functional>
#include <optional>

namespace lmcc::actors {

using request_bridge_actor =
    caf::typed_actor<caf::reacts_to<request_atom, msg::Msg, uint32_t, reply_callback>,
                     caf::reacts_to<stats_atom, uint32_t, stats_callback>>;

struct request_bridge_state {
  static inline const char* name = "lmcc.request_bridge";
  // Not an aggregate on purpose: CAF constructs a state from the actor pointer
  // when it can, and C++20 would let it aggregate-initialise `directory` from it.
  request_bridge_state() = default;
  directory_actor directory;
};

request_bridge_actor::behavior_type
request_bridge_main(request_bridge_actor::stateful_pointer<request_bridge_state> self,
                    directory_actor directory);

} // namespace lmcc::actors
