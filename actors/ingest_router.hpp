// ingest_router: hands one drain round of the PULL socket to the worker
// actors it concerns.
//
// The PULL thread is not a CAF thread: every message it sends to an idle
// actor wakes a scheduler thread (a futex round trip, several microseconds on
// a VM). Sending the whole round to this one actor costs one such wake-up; it
// then forwards each worker's frames from inside the scheduler, where an
// enqueue is a push onto the current thread's queue. At a moderate ingest
// rate these wake-ups are most of the node's CPU per op.
//
//   anon_send(router, push_atom::value, ingest_round{{worker, frames}, ...});
//
// It also relays the shard's acks back to the worker actors (ack_relay_actor
// in kv_shard.hpp): one message per commit into the scheduler instead of one
// per worker.
//
// Context: a CAF actor; one per node. Local only (its message holds handles).
#pragma once

#include "actors/worker_actor.hpp"

#include <vector>

namespace lmcc::actors {

/// One worker's frames of a round.
struct ingest_group {
  worker_actor worker;
  pushed_msgs msgs;
};
using ingest_round = std::vector<ingest_group>;

} // namespace lmcc::actors

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(lmcc::actors::ingest_round)

namespace lmcc::actors {

using ingest_router_actor =
    caf::typed_actor<caf::reacts_to<push_atom, ingest_round>, caf::reacts_to<ack_atom, local_acks>,
                     // Answers once every round before it was forwarded (a clean stop).
                     caf::replies_to<drain_atom>::with<bool>>;

inline ingest_router_actor::behavior_type ingest_router_main(ingest_router_actor::pointer self) {
  return {
      [self](push_atom, ingest_round& round) {
        for (auto& group : round)
          self->send(group.worker, push_atom::value, std::move(group.msgs));
      },
      [self](ack_atom, local_acks& acks) {
        for (auto& a : acks)
          self->send(caf::actor_cast<ack_receiver_actor>(std::move(a.sender)), ack_atom::value,
                     a.stream, a.number);
      },
      [](drain_atom) { return true; },
  };
}

} // namespace lmcc::actors
