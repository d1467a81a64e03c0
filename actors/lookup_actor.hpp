// lookup_actor: answers LookupMsg and BatchedP2PLookupMsg.
//
// It hashes a prompt's tokens into chunk keys (messages/chunk_hash.hpp, the
// same chain the workers compute), reads the holders of every key from the
// index under its read lock (kv_index.hpp: it waits at most for the one
// sub-batch being applied, never for an ingest backlog), and merges them in
// registration order with the directory_view the directory pushes to it
// after every registry change (lookup_logic.hpp). Several lookup actors run
// side by side; the front ends spread requests over them.
//
// Requests come from actors (request/reply) or straight from the front ends'
// socket and HTTP threads with a reply_callback, which this actor calls
// exactly once: a request costs one actor hop.
//
// Context: a CAF actor; stateless apart from its current view.
#pragma once

#include "actors/kv_index.hpp"
#include "actors/type_ids.hpp"
#include "messages/chunk_hash.hpp"

#include <memory>

namespace lmcc::actors {

using lookup_actor = caf::typed_actor<caf::replies_to<request_atom, msg::Msg>::with<msg::Msg>,
                                      caf::reacts_to<request_atom, msg::Msg, reply_callback>,
                                      caf::reacts_to<view_atom, view_ptr>>;

struct lookup_config {
  std::shared_ptr<const kv_index> index;
  msg::chunk_hash_options chunk_hashing;
};

struct lookup_actor_state {
  static inline const char* name = "lmcc.lookup";

  std::shared_ptr<const kv_index> index;
  msg::chunk_hasher hasher;
  view_ptr view = std::make_shared<directory_view>();

  /// The answer to a LookupMsg or BatchedP2PLookupMsg (an ErrorMsg for anything else).
  msg::Msg answer(const msg::Msg& m) const;
};

lookup_actor::behavior_type lookup_main(lookup_actor::stateful_pointer<lookup_actor_state> self,
                                        lookup_config cfg);

} // namespace lmcc::actors
