// worker_homes: the directory's part that moves worker entities between the
// nodes of a cluster as liveness changes (handoff.hpp is the protocol).
//
// On every ring change (cluster_node sends ring_atom) the directory compares
// each worker's home in the new table with where its actor is:
// - an actor here whose worker is now homed elsewhere is handed off: it is
//   taken out of the PULL routes (its frames go to the new home from now on),
//   drains, and its marks are kept for the peers that ask (a while);
// - a worker now homed here without an actor is taken over: an actor is
//   spawned at once and parks the worker's frames, every live peer is asked
//   whether it hosted the worker (a peer that still sees itself as the home
//   says "retry"), and the actor starts from the marks found -- or, if nobody
//   had the worker (its old home died), from this node's shard -- within
//   takeover_timeout at the latest.
// A restarting node takes over its restored workers the same way, so a worker
// that a peer hosted while this node was down continues where it left off.
// Frames that still reach a handed-off actor come back here and are sent to
// the worker's new home.
//
// Context: runs inside the directory actor (directory.cpp); not thread-safe.
#pragma once

#include "actors/directory.hpp"
#include "cluster/restart_race.hpp"
#include "registry/handoff.hpp"

#include <cstdint>
#include <map>
#include <set>
#include <vector>

namespace lmcc::actors {

using directory_self = directory_actor::stateful_pointer<directory_state>;

/// How long apart a seq back at 0 at a worker's old entity and its renewal
/// still prove lost frames: a registration made through a node cut off from
/// the worker's home reaches the home when the partition heals.
inline constexpr uint64_t restart_race_window_ms = 30'000;

struct worker_homes_state {
  /// A takeover in progress: what each peer answered.
  struct takeover {
    enum class peer : uint8_t { unasked, asking, retry, done };
    uint64_t deadline_ms = 0;
    uint64_t retry_at_ms = 0;
    std::vector<peer> peers; ///< by node_index
    std::vector<std::vector<location_mark>> found;
    std::vector<std::string> found_at;
    /// A full sync a peer said the worker owes (worker_handoff::resync_reason).
    std::string resync_reason;
  };
  std::map<uint64_t, takeover> takeovers;
  /// Handoffs under way (the actor drains) and who waits for their marks.
  std::map<uint64_t, std::vector<caf::typed_response_promise<worker_handoff>>> handing;
  /// Handoffs done lately: (when, marks), for peers that ask later.
  std::map<uint64_t, std::pair<uint64_t, std::vector<location_mark>>> handed;
  /// Handed-off workers whose new home has not asked for the marks yet.
  std::set<uint64_t> unserved;
  /// Unserved handoffs whose home was told the worker had two entities.
  std::set<uint64_t> split_told;
  /// A clean stop waiting until nothing is left to hand over.
  std::vector<caf::typed_response_promise<uint64_t>> leave_waiters;
  /// Handed-off actors: they pass late frames back for a while, and the
  /// directory's exit takes them along.
  /// (when, actor); an actor ends by itself 30 s after its handoff.
  std::vector<std::pair<uint64_t, worker_actor>> departed;
  /// Which peers were live at the last call: a loss arms every hosted
  /// worker's seq check (worker_logic::check_next_batches).
  std::vector<uint8_t> was_live;
  /// Seq run starts and renewals, to find frames of a new process that the
  /// old entity applied (restart_race.hpp).
  restart_race race{restart_race_window_ms};
  bool tick_scheduled = false;
  uint64_t handed_off_total = 0;
  uint64_t taken_over_total = 0;
};

/// Spawns a worker's actor (defined in directory.cpp): restored from a
/// restart, or waiting for a takeover's marks.
worker_actor spawn_worker_actor(directory_self self, const worker_record& rec,
                                const restored_worker* restored, bool await_takeover);

/// Publishes the PULL routes of the actors in state.workers (directory.cpp).
void publish_routes(directory_self self);

/// A ring change (or the takeover timer): hand off, take over, advance.
void on_ring_change(directory_self self);

/// Takes over a worker homed here whose actor is not here (a restart's
/// restored workers, or a ring change).
void start_takeover(directory_self self, const worker_record& rec);

/// A replicated row arrived: if this node is the worker's home and hosts no
/// actor for it (registered elsewhere while this node was down, learnt from a
/// peer's directory sync after the ring change), it takes the worker over.
void adopt_if_home(directory_self self, uint64_t uid);

/// A newer registration of worker `uid` made elsewhere (this node was down or
/// cut off meanwhile) reached this node by replication while it hosts an
/// entity of the older one: that entity tags its batches with the old
/// incarnation, which the shards fence, and seeds its seq checks from the
/// old marks. It is stopped without dropping anything (the re-registration
/// already dropped the old holders where it happened) and, if this node is
/// the home, the worker is taken over afresh under the new registration.
void renew_entity(directory_self self, uint64_t uid);

/// A worker entity of registration `incarnation` saw a seq go back to 0: a
/// proof of lost frames if the entity was renewed meanwhile (restart_race.hpp).
void on_seq_start(directory_self self, uint64_t uid, uint64_t incarnation);

/// A peer asks whether this node hosted worker `uid`.
caf::result<worker_handoff> answer_handoff(directory_self self, uint64_t uid);

/// Workers a stopping node still has to hand over: hosted here though homed
/// elsewhere, draining, or drained but not yet asked for by their new home.
uint64_t handoffs_pending(directory_self self);

/// Answers (with 0) once handoffs_pending() is 0: a clean stop waits for it.
caf::result<uint64_t> await_handoffs(directory_self self);

/// Frames that reached a handed-off actor: to the worker's current home.
void return_frames(directory_self self, pushed_msgs&& msgs);

} // namespace lmcc::actors
