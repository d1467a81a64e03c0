// lookup_actor: answers LookupMsg and BatchedP2PLookupMsg.
//
// It hashes a prompt's tokens into chunk keys (messages/chunk_hash.hpp, the
// same chain the workers compute), asks every shard that owns some of the keys
// for their holders in parallel, and merges the answers in registration order
// with the directory_view the directory pushes to it after every registry
// change (lookup_logic.hpp). Several lookup actors run side by side; the
// directory spreads requests over them.
//
// Context: a CAF actor; stateless apart from its current view.
#pragma once

#include "actors/kv_shard.hpp"
#include "actors/type_ids.hpp"
#include "messages/chunk_hash.hpp"

#include <chrono>

namespace lmcc::actors {

using lookup_actor = caf::typed_actor<caf::replies_to<request_atom, msg::Msg>::with<msg::Msg>,
                                      caf::reacts_to<view_atom, view_ptr>>;

struct lookup_config {
  std::vector<kv_shard_actor> shards;
  uint32_t slot_count = 4096;
  msg::chunk_hash_options chunk_hashing;
  std::chrono::milliseconds timeout{10'000};
};

struct lookup_actor_state {
  static inline const char* name = "lmcc.lookup";

  lookup_config cfg;
  msg::chunk_hasher hasher;
  view_ptr view = std::make_shared<directory_view>();

  /// For each shard, the positions of `keys` it owns.
  std::vector<std::vector<uint32_t>> positions_by_shard(const key_list& keys) const;
};

lookup_actor::behavior_type lookup_main(lookup_actor::stateful_pointer<lookup_actor_state> self,
                                        lookup_config cfg);

} // namespace lmcc::actors
