// directory_logic: what the Directory does, without the actor: registration,
// re-registration, heartbeats (and the recovery path that re-registers an
// unknown worker), deregistration, the silent-worker reaper, the full-sync
// tracker's global view and the per-worker resync requests (spec 4.7, 4.8).
// It owns the registry (registry.hpp) and a hybrid logical clock whose stamps
// order registrations and name incarnations.
//
// Every effect outside the registry goes through directory_outbox: spawning,
// resetting and retiring WorkerActors, persisting rows (asynchronously: the
// Directory never writes the disk itself), forgetting a worker's control
// socket, counting events. After a change that lookups or the PULL thread
// must see, changed() is true until take_changed().
//
//   directory_logic d{options, outbox};
//   auto reply = d.on_register(msg, now_s, wall_ms, heartbeat_url);
//   if (d.take_changed()) publish(d.reg().make_view());
//
// Context: owned by the directory actor; not thread-safe. Time is passed in.
// CAF-free.
#pragma once

#include "cluster/hlc.hpp"
#include "messages/lmcache_msgs.hpp"
#include "persistence/schema.hpp"
#include "registry/controller_options.hpp"
#include "registry/full_sync_ask_log.hpp"
#include "registry/registry.hpp"
#include "registry/restore_plan.hpp"

#include <absl/container/flat_hash_map.h>

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

namespace lmcc::actors {

/// The full-sync reason when a node found slots whose every copy was lost
/// (directory_logic::on_slots_lost).
inline constexpr std::string_view slot_copies_lost_reason = "slot_copies_lost";

/// A node's directory, sent to a peer that (re)joined (row_put_atom): its
/// copy may have missed registrations and deregistrations while it was away.
struct directory_listing {
  /// The sender's member id.
  std::string node_id;
  /// The ring version the sender placed worker homes by.
  uint64_t ring_version = 0;
  /// The workers homed at the sender, and those homed at the peer now.
  std::vector<persistence::worker_row> rows;
  /// The deregistrations the sender remembers.
  std::vector<worker_tombstone> tombstones;
  /// The sender's registry is as complete as its peers' (lists_complete): a
  /// worker homed there that `rows` lacks was deregistered meanwhile.
  bool complete = false;
};

class directory_outbox {
public:
  virtual ~directory_outbox() = default;
  /// A new registration, or a worker restored from the store (with its plan).
  virtual void spawn_worker(const worker_record& rec, const restored_worker* restored) = 0;
  /// A re-registration: the worker's actor drops everything of the old incarnation.
  virtual void reset_worker(uint64_t uid, uint64_t incarnation) = 0;
  virtual void retire_worker(uint64_t uid) = 0;
  virtual void put_row(const persistence::worker_row& row) = 0;
  /// `incarnation`: the registration that ended (peers remember it: a tombstone).
  virtual void delete_row(uint64_t uid, uint64_t incarnation) = 0;
  virtual void forget_control(const std::string& endpoint) = 0;
  virtual void count(std::string_view event) = 0;
};

class directory_logic {
public:
  directory_logic(controller_options options, directory_outbox& out);

  /// Takes back the workers of a restart, in registration order. The reaper
  /// counts their silence from `mono_s` (the node was down, not the workers).
  void restore(std::vector<restored_worker>& workers, bool need_full_sync_all, uint64_t wall_ms,
               double mono_s);

  /// RegisterMsg (spec 4.7.1); `heartbeat_url` goes into extra_config.
  msg::Msg on_register(const msg::RegisterMsg& m, double now_s, uint64_t wall_ms,
                       const std::optional<std::string>& heartbeat_url);

  /// HeartbeatMsg (spec 4.7.2), at wall time now_s / wall_ms and monotonic mono_s.
  msg::Msg on_heartbeat(const msg::HeartbeatMsg& m, double now_s, uint64_t wall_ms, double mono_s);
  /// A HeartbeatMsg already answered from a heartbeat_view: records its time;
  /// the worker's record, or nullptr when it is unknown by now (deregistered
  /// meanwhile: its next heartbeat, if any, re-registers it through
  /// on_heartbeat).
  const worker_record* on_heartbeat_heard(const std::string& instance_id,
                                          const msg::wire_int& worker_id, double now_s,
                                          double mono_s);
  /// A cluster: worker `uid` heartbeated at another node, which answered it
  /// and tells this node now (wall now_s, monotonic mono_s). Only a
  /// registration that heartbeated here before takes it (a re-registration's
  /// first heartbeat is stored by on_heartbeat). null: not taken.
  const worker_record* on_heartbeat_heard_elsewhere(uint64_t uid, double now_s, double mono_s);
  /// A FullSyncStartMsg of worker `uid` goes to its entity now
  /// (registry::expect_sync_state) / its entity refused it.
  void on_sync_start_sent(uint64_t uid) { reg_.expect_sync_state(uid); }
  void on_sync_start_refused(uint64_t uid) { reg_.forget_expected_sync_state(uid); }

  /// DeRegisterMsg or the reaper; false when the worker was unknown.
  bool on_deregister(const std::string& instance_id, const msg::wire_int& worker_id,
                     std::string_view why, uint64_t wall_ms);

  /// Workers silent past lmcache_worker_timeout are deregistered (in a
  /// cluster, only those whose entity lives on this node: see set_home_filter).
  /// `mono_s` is the monotonic clock: a wall clock that jumps reaps nobody.
  void reap(double mono_s, uint64_t wall_ms);

  // -- a cluster: the Directory replicated from the workers' home nodes ---------

  /// Which workers this node is home to (their entity lives here); the others
  /// are replicas of another node's registrations. Unset: all (a single node).
  void set_home_filter(std::function<bool(uint64_t uid)> is_home) { is_home_ = std::move(is_home); }
  bool is_home(uint64_t uid) const { return !is_home_ || is_home_(uid); }

  /// What apply_replica() did with a row; true when it took it.
  struct replica_applied {
    bool applied = false;
    /// Only the heartbeat time moved (the home sends the row with every
    /// heartbeat): nothing a view, a route or a shard knows of changed.
    bool time_only = false;
    explicit operator bool() const noexcept { return applied; }
  };

  /// A registration (or its update) from the worker's home node. Persisted
  /// here only when more than its heartbeat time changed. A row of an
  /// incarnation this node saw deregistered is refused (false): a node that
  /// was down when it happened restored it from its disk; so is one older than
  /// the registration this node knows.
  replica_applied apply_replica(const persistence::worker_row& row, double now_s, uint64_t wall_ms,
                                double mono_s);

  /// A deregistration at the worker's home node, of registration `incarnation`.
  void remove_replica(uint64_t uid, uint64_t incarnation, uint64_t wall_ms);

  /// A row the home's directory sync no longer lists: dropped here without a
  /// tombstone (the list may only be late; a later row brings it back).
  void forget_replica(uint64_t uid);

  /// Deregistrations of the last tombstone_ttl, for a peer that (re)joins: the
  /// rows it restored of those registrations are dead. Why tombstones rather
  /// than "absent from the home's list": a restarted node may itself be the
  /// home now, and nobody else's list speaks for its workers.
  std::vector<worker_tombstone> tombstones(uint64_t wall_ms);

  /// A peer's tombstone: this node's row of that incarnation (or an older
  /// one) goes, and its entity too if it lives here. True when one went.
  bool apply_tombstone(const worker_tombstone& t, uint64_t wall_ms);

  /// How long a deregistration is remembered; also bounded to max_tombstones.
  /// A row that outlives it comes back at most until the reaper's worker
  /// timeout. Default: 1 h.
  void set_tombstone_ttl(std::chrono::milliseconds ttl) { tombstone_ttl_ms_ = ttl.count(); }
  static constexpr size_t max_tombstones = size_t{1} << 20;

  /// A worker's sync phase as its entity or session on this node reports it.
  void on_sync_state(uint64_t uid, sync_phase phase, uint64_t missing);
  /// A worker's sync phase as a peer replicated it: applied where the worker
  /// is not homed (a replica's copy), not at its home. A session runs only
  /// where the worker's entity lives, so a peer's phase at the home is a
  /// session that ran there under a split view (a partition, a takeover
  /// racing a restart) and ended when the entity came back here. Its
  /// `syncing` kept would hold off every ask (should_request_full_sync) with
  /// no session left to end it: the worker would owe its sync forever. A
  /// peer's `completed` still lets the freeze end (on_peer_sync_completed).
  /// True when applied.
  bool on_peer_sync_state(uint64_t uid, sync_phase phase, uint64_t missing);
  /// This node took the worker over: its entity starts without a session, so
  /// a `syncing` copied from the previous home is dropped (a sync cut short
  /// by the move is asked again through the takeover's marks).
  void on_taken_over(uint64_t uid);

  /// A cluster: a worker homed on another node finished its full sync there
  /// (a replicated `completed`). Its home answered the status queries that
  /// may end LMCache's freeze (need_full_sync_all); this node ends it too when
  /// its own view agrees. Otherwise a node whose workers all synced while
  /// others were still syncing keeps the flag, and asks a worker it takes
  /// over later for a `controller_restart` sync the cluster never needed.
  void on_peer_sync_completed();
  /// A cluster: this node started empty, but a peer holds the index and this
  /// node copies its slots (refill_gate.hpp). The freeze that asks every
  /// worker for a full sync is for an index lost everywhere; here, as on a
  /// standby that joins, it would make every worker resync for nothing.
  void on_index_held_by_peers();
  /// A cluster: `slots` of this node (or of a peer: `replica`) lost every
  /// copy (each owner came back empty, refill_leftovers.hpp). Their entries
  /// belonged to any worker: every registered worker owes a full sync
  /// (slot_copies_lost_reason). Returns how many were marked.
  size_t on_slots_lost(uint64_t slots, bool replica);
  void on_seq_gap(uint64_t n) { seq_discontinuities_ += n; }
  void on_resync(uint64_t uid, const std::string& reason);
  /// The home's resync request, replicated here (not counted again).
  void on_replicated_resync(uint64_t uid, const std::string& reason);
  void on_location(uint64_t uid, const std::string& location);

  /// Fills a worker's FullSyncStatusRetMsg with the global progress.
  void complete_status(msg::FullSyncStatusRetMsg& ret);

  const registry& reg() const noexcept { return reg_; }
  uint64_t seq_discontinuities() const noexcept { return seq_discontinuities_; }

  /// The entities (uid -> the incarnation each was made or last reset with)
  /// whose worker has registered again since, by the registry: such an
  /// entity's sub-batches are fenced by every owner that knows the newer
  /// registration, so everything the worker sends through it, a full sync
  /// included, is lost until it is renewed (guarded by directory_logic_test's
  /// an_entity_older_than_a_registration_taken_elsewhere_is_behind). Ascending uid.
  std::vector<uint64_t>
  entities_behind(const std::map<uint64_t, uint64_t>& entity_incarnations) const;

  /// The registry changed in a way lookups and routes must see.
  bool take_changed() noexcept { return std::exchange(changed_, false); }

private:
  registry::registration do_register(const std::string& instance_id, const msg::wire_int& worker_id,
                                     const std::string& ip, const msg::wire_int& port,
                                     const std::optional<std::string>& peer_url, double now_s,
                                     uint64_t wall_ms);
  void persist(uint64_t uid);
  void bury(uint64_t uid, uint64_t incarnation, uint64_t wall_ms);
  void expire_tombstones(uint64_t wall_ms);

  /// uid -> newest deregistered incarnation; `tombstone_order_` is burial
  /// order (uid, incarnation, wall ms) for expiry; entries superseded in the
  /// map are skipped when they expire.
  absl::flat_hash_map<uint64_t, uint64_t> tombstones_;
  std::deque<std::tuple<uint64_t, uint64_t, uint64_t>> tombstone_order_;
  int64_t tombstone_ttl_ms_ = 3'600'000;

  controller_options options_;
  directory_outbox& out_;
  registry reg_;
  full_sync_ask_log asks_;
  cluster::hlc clock_;
  std::function<bool(uint64_t)> is_home_;
  uint64_t seq_discontinuities_ = 0;
  bool changed_ = false;
};

} // namespace lmcc::actors
