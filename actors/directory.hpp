// directory: the node's worker registry and the answerer of every request
// that is not a lookup (directory_logic.hpp is the logic; this file adapts it
// to CAF).
//
// It answers registration, heartbeats, full-sync start and status, and the
// registry queries; it hands control commands to the control fan-out; it owns
// one WorkerActor per registered worker and, after every registry change,
// publishes a fresh directory_view to the lookup actors and a fresh ingest
// route table to the PULL thread. It never carries ingest (the PULL thread
// routes a worker's frames to its actor) and never writes the disk (rows go to
// an asynchronous writer), so heartbeats and registrations never queue behind
// either.
//
//   auto dir = sys.spawn(directory_main, directory_config{...});
//   self->request(dir, 5s, request_atom::value, msg::Msg{register_msg})...
//
// Context: a CAF actor; one per node.
#pragma once

#include "actors/cluster/cluster_table.hpp"
#include "actors/control_fanout.hpp"
#include "actors/ingest_routes.hpp"
#include "actors/lookup_actor.hpp"
#include "actors/worker_actor.hpp"
#include "clock/clock.hpp"
#include "cluster/peer_clock_offsets.hpp"
#include "registry/controller_options.hpp"
#include "registry/directory_logic.hpp"
#include "registry/heartbeat_reader.hpp"
#include "registry/lookup_reader.hpp"
#include "registry/restore_plan.hpp"

#include <absl/container/flat_hash_set.h>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <string_view>

namespace lmcc::actors {

/// The full-sync reason owed to a worker whose frames this node's forwarder
/// gave up (frame_forwarder_config::frames_lost); its resync_atom is the proof.
inline constexpr std::string_view frames_not_forwarded_reason = "frames_not_forwarded";

using directory_actor = directory_feedback_actor::extend<
    caf::reacts_to<push_atom, msg::Msg>, caf::replies_to<request_atom, msg::Msg>::with<msg::Msg>,
    // A cluster: a request another node forwarded here, with the wall-clock
    // time (ms) after which its sender no longer waits: a node that was
    // frozen or cut off does not apply it late (home_request_deadline_slack).
    caf::replies_to<request_atom, msg::Msg, uint64_t>::with<msg::Msg>,
    caf::replies_to<stats_atom>::with<node_stats>, caf::reacts_to<tick_atom>,
    // Heartbeats the socket thread answered: record them (heartbeat_reader::take_heard).
    caf::reacts_to<heard_atom>,
    // Answers once everything every worker actor sent so far is acknowledged.
    caf::replies_to<drain_atom>::with<bool>,
    // A cluster: a registration (or update) and a deregistration at the
    // worker's home node, replicated to every other node's directory.
    caf::reacts_to<row_put_atom, persistence::worker_row>,
    // From a worker's home: the rows of workers whose heartbeat time moved,
    // gathered for heartbeat_replication_delay.
    caf::reacts_to<row_put_atom, std::vector<persistence::worker_row>>,
    // From another node: workers homed here that heartbeated there (their
    // heartbeats answered there), gathered like the rows above.
    caf::reacts_to<heard_atom, std::vector<uint64_t>>,
    // Its own timer: send the gathered heartbeat rows and heard workers.
    caf::reacts_to<flush_atom>, caf::reacts_to<row_delete_atom, uint64_t, uint64_t>,
    // A cluster: answered once every row the asking directory sent before it
    // is applied (CAF keeps the order of one sender's messages): a worker's
    // home holds a registration's answer until the peers hold the new row.
    caf::replies_to<rows_applied_atom>::with<bool>,
    // A peer (re)joined: send it every worker homed here (its copy may have
    // missed registrations and deregistrations while it was away).
    caf::reacts_to<peer_atom, caf::actor>,
    // A peer's directory; if the list is complete, replicas of its workers
    // not in it were deregistered meanwhile (when this node's ring version
    // is the listing's too, i.e. both place homes alike).
    caf::reacts_to<row_put_atom, directory_listing>,
    // Liveness changed (from the cluster node): worker homes may have moved
    // (worker_homes.hpp).
    caf::reacts_to<ring_atom>,
    // From the cluster node: this node came back empty and a peer holds the
    // index (refill_gate.hpp): its slots are copied, not resynced.
    caf::reacts_to<refill_atom>,
    // From this node's refill, then replicated: n slots are lost on every
    // owner (each came back empty, refill_leftovers.hpp): every worker must
    // full-sync.
    caf::reacts_to<refill_atom, uint64_t>,
    // From this node's refill: it settled, or was not needed (a new
    // cluster): the registry is as complete as the peers' (lists_complete).
    caf::reacts_to<settled_atom>,
    // From a peer taking a worker over: did this node host it, and its marks.
    caf::replies_to<handoff_atom, uint64_t>::with<worker_handoff>,
    // Frames that reached a handed-off worker actor.
    caf::reacts_to<forward_atom, pushed_msgs>,
    // A clean stop: how many workers are still to be handed over.
    caf::replies_to<leave_atom>::with<uint64_t>>;

/// Hooks into the rest of the node, so that actors stay free of sockets and disks.
struct directory_hooks {
  /// The heartbeat URL to hand a worker registering from this IP (spec 2.3), if any.
  std::function<std::optional<std::string>(const std::string& worker_ip)> heartbeat_url_for;
  /// A worker left: drop its control socket.
  std::function<void(const std::string& endpoint)> forget_control;
  /// Counts a named event in the node's metrics.
  std::function<void(std::string_view event)> count_event;
  /// Persists a worker row / deletes one, asynchronously (null: in memory only).
  std::function<void(const persistence::worker_row&)> put_row;
  std::function<void(uint64_t uid)> delete_row;
  /// A cluster: sends frames to member `node`'s service (credits held until
  /// it answered).
  std::function<void(uint16_t node, pushed_msgs msgs)> forward_frames;
};

struct directory_config {
  controller_options options;
  std::vector<kv_shard_actor> shards;
  std::vector<lookup_actor> lookups;
  control_fanout_actor fanout;
  directory_hooks hooks;
  uint64_t seed = 0; ///< worker_event_id suffixes and stream ids
  std::shared_ptr<const kv_index> index;
  std::shared_ptr<shard_monitor> shard_stats;
  std::shared_ptr<credit_gate> gate;
  std::shared_ptr<route_board> routes;
  /// Answers lookups on the front ends' threads; gets every new view.
  std::shared_ptr<lookup_reader> reader;
  /// Answers heartbeats on the front ends' threads; gets a fresh view
  /// whenever its last one went stale (null: the directory answers all).
  std::shared_ptr<heartbeat_reader> heartbeats;
  /// Workers taken back from the store, in registration order.
  std::vector<restored_worker> restored;
  /// A cluster: the latest cluster table (null: a single node). Requests of a
  /// worker whose entity lives on another node are forwarded there; rows,
  /// locations and sync states of workers homed here are replicated to every
  /// peer's directory.
  std::shared_ptr<cluster_board> cluster;
  /// A cluster: which destinations own each slot (bit per node), and the
  /// index of this node's own shard among `shards`.
  placement_table placement;
  uint32_t home_destination = 0;
  /// A cluster: how long a takeover waits for the peers' answers before the
  /// worker starts from this node's own marks (worker_homes.hpp).
  std::chrono::milliseconds takeover_timeout{7000};
  /// A cluster: how long a quiet worker waits before telling its owners its
  /// last batch is durable (worker_logic::flush_durable).
  std::chrono::milliseconds durable_flush_delay{50};
  /// A cluster: how long the home gathers heartbeat times before it sends them
  /// to the peers in one message each, and a node the heartbeats it answered
  /// for workers homed elsewhere before it tells their homes (at most a
  /// quarter of lmcache_worker_timeout; cluster_options). 0: at once.
  std::chrono::milliseconds heartbeat_replication_delay{1000};
  /// The planted bug of a test build (fault_injection.hpp; empty in a
  /// release build): forget_watermark makes a takeover forget the worker's
  /// seq watermarks, so a gap across it goes unnoticed (marks turned
  /// `resynced`: the first op is not checked); no_owed_resend keeps a peer
  /// that comes back from being told the full syncs owed by the workers
  /// homed here. Default: none
  [[no_unique_address]] faults::planted_bugs planted;
  /// A cluster: how long one attempt of a request forwarded to the worker's
  /// home waits before it is asked again (the home may have died unnoticed).
  std::chrono::milliseconds home_request_timeout{2'500};
  /// A cluster: how long a worker's home holds a registration's answer until
  /// every live peer's directory has the new row, so a control command sent
  /// through any node after the answer reaches the worker's new address (as
  /// with one LMCache controller). A peer cut off but not yet declared dead
  /// delays registrations by this much. Default: 500 ms
  std::chrono::milliseconds registration_replica_wait{500};
  /// A cluster: how long deregistrations are remembered (directory_logic).
  std::chrono::milliseconds tombstone_ttl{3'600'000};
  /// This node's wall clock (fault injection can jump it), and the peers'
  /// offsets from it (a forwarded request's deadline is in its home's clock).
  std::shared_ptr<const node_clock> clock = std::make_shared<node_clock>();
  std::shared_ptr<const cluster::peer_clock_offsets> peer_clocks =
      std::make_shared<cluster::peer_clock_offsets>();
  /// This node's registry came from its own store, so the workers homed
  /// here that its directory sync lacks were deregistered here. False on a
  /// node that started empty (a lost disk, or no persistence): its registry
  /// comes from its peers, and at its join its list lacks workers it was never
  /// told of; a peer that took the absence for deregistrations would drop them
  /// (two disks lost: registrations gone from every node). Guarded by test_failover.py's
  /// test_two_disks_lost_one_after_the_other_ask_every_worker_for_a_full_sync.
  /// Set once the refill settled (settled_atom): the peers handed it back.
  bool lists_complete = true;
  /// LMCache's need_full_sync_all at start: true on a node that starts empty,
  /// false on one that restored its index.
  bool need_full_sync_all = true;
};

class directory_effects;
struct worker_homes_state;

struct directory_state {
  static inline const char* name = "lmcc.directory";

  directory_config cfg;
  std::unique_ptr<directory_effects> effects;
  std::unique_ptr<directory_logic> logic;
  std::map<uint64_t, worker_actor> workers;
  /// The incarnation each of `workers` was made or last reset with (entries
  /// of gone entities are pruned by the homes tick).
  std::map<uint64_t, uint64_t> entity_incarnations;
  std::unique_ptr<worker_homes_state> homes; ///< a cluster only
  size_t next_lookup = 0;
  std::mt19937_64 rng;
  /// A cluster: workers homed here whose heartbeat time the peers have not
  /// heard yet, workers homed elsewhere that heartbeated here since the last
  /// flush (their homes hear of it), and whether the flush is scheduled.
  absl::flat_hash_set<uint64_t> heartbeats_unsent;
  absl::flat_hash_set<uint64_t> heartbeats_for_homes;
  bool heartbeat_flush_scheduled = false;

  std::string random_hex();

  directory_state();
  ~directory_state();
};

directory_actor::behavior_type
directory_main(directory_actor::stateful_pointer<directory_state> self, directory_config cfg);

} // namespace lmcc::actors
