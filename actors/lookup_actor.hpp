// lookup_actor: answers LookupMsg and BatchedP2PLookupMsg that reach it as
// actor messages (the directory delegates the lookups of its orchestration
// requests here).
//
// It holds no state of its own: it asks the node's lookup_reader, the same
// object the front ends call on their own threads for the lookups that arrive
// on their sockets (lookup_reader.hpp), so both paths see one view and one
// index.
//
// Requests come from actors (request/reply) or with a reply_callback, which
// this actor calls exactly once.
//
// Context: a CAF actor.
#pragma once

#include "actors/type_ids.hpp"
#include "registry/lookup_reader.hpp"

#include <memory>

namespace lmcc::actors {

using lookup_actor = caf::typed_actor<caf::replies_to<request_atom, msg::Msg>::with<msg::Msg>,
                                      caf::reacts_to<request_atom, msg::Msg, reply_callback>>;

struct lookup_actor_state {
  static inline const char* name = "lmcc.lookup";

  std::shared_ptr<const lookup_reader> reader;
};

lookup_actor::behavior_type lookup_main(lookup_actor::stateful_pointer<lookup_actor_state> self,
                                        std::shared_ptr<const lookup_reader> reader);

} // namespace lmcc::actors
