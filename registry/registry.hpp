// registry: the worker registry in registration order (spec 4.2, 4.7), the
// full-sync tracker's global view (spec 4.8.3-4.8.4) and the read-only
// directory_view that lookups resolve holders with. Actor-free: the directory
// actor owns one and only adapts it.
//
// Registration order matters on the wire: LookupRetMsg lists the chunk-0
// holder first in registration order, get_instance_by_ip picks the first
// instance, and P2P lookups pick the first matching peer. Order is kept as sort
// keys, not as positions in a list, so that every node of a cluster (and a
// restarted node) derives the same order from the same rows: an instance sorts
// by `instance_order` (the stamp of its first registration while it kept
// workers), a worker inside its instance by `registration_order`; equal stamps
// (two nodes in the same millisecond) fall back to the uid.
//
// Workers are named by their uid (ids.hpp). A second identity hashing to a uid
// or holder id already in use is refused, never merged.
//
//   registry r;
//   auto reg = r.register_worker("A", 0, ip, port, peer, now, stamp);
//   r.heartbeat("A", 0, now, mono_now);
//   auto [ask, reason] = r.should_request_full_sync(reg.uid);
//
// Context: owned by the directory actor; not thread-safe. Time is passed in.
// CAF-free.
#pragma once

#include "index/ids.hpp"
#include "messages/lmcache_msgs.hpp"
#include "registry/full_sync_session.hpp"

#include <absl/container/flat_hash_map.h>
#include <absl/container/flat_hash_set.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace lmcc::actors {

/// One registered (instance_id, worker_id).
struct worker_record {
  uint64_t uid = 0;
  std::string instance_id;
  msg::wire_int worker_id;
  std::string ip;
  msg::wire_int port;
  std::optional<std::string> peer_init_url;
  double registration_time = 0;
  double last_heartbeat_time = 0;
  /// When this node last heard of a heartbeat of the worker (its own, or a
  /// newer last_heartbeat_time in its home's row), in monotonic seconds: the
  /// reaper's clock. Local to this node, never stored or replicated, so a
  /// wall clock that jumps, or differs between nodes, reaps nobody.
  double heard_at = 0;
  bool has_heartbeated = false;
  uint64_t registration_order = 0;
  uint64_t instance_order = 0;
  /// Which registration this is (a new stamp on every re-registration).
  uint64_t incarnation = 0;
  sync_phase sync = sync_phase::none;
  uint64_t missing_batches = 0;
  /// Location names the worker reported, first-seen order.
  std::vector<std::string> locations;
  /// Why this worker, and only it, must full-sync at its next heartbeat (a seq
  /// gap proven after a restart, a damaged snapshot); empty when it need not.
  /// Cleared when its sync starts or it re-registers.
  std::string resync_reason;

  msg::WorkerInfo info() const;
  /// "ip:port" of the worker's REP socket (S4).
  std::string control_endpoint() const;
  holder_id holder(std::string_view location) const {
    return make_holder_id(instance_id, worker_id, location);
  }
};

/// A deregistration remembered for a while (directory_logic): a peer that was
/// down when it happened still holds the row and must not bring it back.
struct worker_tombstone {
  uint64_t uid = 0;
  /// The incarnation that was deregistered; rows of it or an older one are dead.
  uint64_t incarnation = 0;
  friend bool operator==(const worker_tombstone&, const worker_tombstone&) = default;
};

/// What a lookup needs to turn holder ids into an answer; immutable, shared.
struct directory_view {
  struct worker_entry {
    uint64_t uid = 0;
    std::string instance_id;
    msg::wire_int worker_id;
    uint32_t instance_rank = 0; ///< position of the instance in registration order
    uint32_t worker_rank = 0;   ///< position of the worker inside its instance
    std::optional<std::string> peer_init_url;
  };
  struct holder_entry {
    uint32_t worker = 0; ///< index into workers
    std::string location;
    uint32_t location_rank = 0; ///< the location's first-seen position for its worker
  };
  std::vector<worker_entry> workers; ///< registration order
  absl::flat_hash_map<holder_id, holder_entry> holders;

  /// The holder's worker and location, or nullptr (unknown or deregistered).
  std::pair<const worker_entry*, const holder_entry*> find(holder_id h) const;
};

/// What a heartbeat's answer depends on, for the workers whose answer is
/// decided by this state alone (heartbeat_reader answers them on the socket
/// thread). Immutable, shared; current only while the registry's answers
/// version is still `version` (any change that could alter an answer bumps it).
struct heartbeat_view {
  struct entry {
    std::string instance_id;
    msg::wire_int worker_id;
    /// The FullSyncCommand's reason the answer carries, if it carries one.
    std::optional<std::string> full_sync_reason;
  };
  /// Workers that heartbeated before (a first heartbeat is stored: the
  /// directory answers it), by uid.
  absl::flat_hash_map<uint64_t, entry> workers;
  uint64_t version = 0;
  /// The registry's answers version (null: never current).
  std::shared_ptr<const std::atomic<uint64_t>> live;

  bool current() const noexcept { return live && live->load(std::memory_order_acquire) == version; }
};

/// A worker the controller may have to command (spec 4.10 fan-out).
struct control_target {
  msg::wire_int worker_id;
  std::string endpoint;
  std::optional<std::string> peer_init_url;
};

class registry {
public:
  /// Most locations one worker may report (bounds its row and its holder list).
  static constexpr size_t max_locations_per_worker = 256;

  // -- registration ----------------------------------------------------------

  struct registration {
    uint64_t uid = 0;
    bool is_new = false;
    uint64_t incarnation = 0;
    /// Non-empty: refused (the identity collides with another worker's uid).
    std::string refused;
  };

  /// Registers, or refreshes the address of, (instance_id, worker_id); `stamp`
  /// is a fresh HLC stamp (the new incarnation and, for a new worker, its
  /// order). A re-registration keeps the worker's position (the caller drops
  /// its index entries, as LMCache does) and, unlike LMCache, takes the new
  /// ip/port/peer_init_url so a restarted worker on a new port is reachable.
  registration register_worker(const std::string& instance_id, const msg::wire_int& worker_id,
                               const std::string& ip, const msg::wire_int& port,
                               const std::optional<std::string>& peer_init_url, double now,
                               uint64_t stamp);

  /// Puts back a worker restored from the node's store (any order).
  void restore_worker(worker_record rec);

  /// A replica's row that moved only the worker's heartbeat time (the home
  /// sends one per heartbeat): the record is updated in place, nothing else
  /// changes. False when the worker is unknown or a sync state is expected
  /// for it; restore_worker() then takes the row.
  bool refresh_heartbeat(uint64_t uid, double last_heartbeat_time, double heard_at);

  /// Removes the worker (and its instance when empty); the record, if any.
  std::optional<worker_record> remove(const std::string& instance_id,
                                      const msg::wire_int& worker_id);

  /// Records a heartbeat at wall time `now`, heard at monotonic `heard_at`;
  /// false when the worker is unknown.
  bool heartbeat(const std::string& instance_id, const msg::wire_int& worker_id, double now,
                 double heard_at);

  /// Workers that heartbeated at least once and then stayed silent longer
  /// than `timeout_s` (the decisions table: never-heartbeating workers stay),
  /// by the monotonic clock (`mono_now` against heard_at).
  std::vector<std::pair<std::string, msg::wire_int>> silent_workers(double mono_now,
                                                                    double timeout_s) const;

  /// Adds `location` to the worker's known locations. False when the worker is
  /// unknown, has max_locations_per_worker already, or the location's holder
  /// id collides with another worker's holder.
  bool add_location(uint64_t uid, const std::string& location);

  // -- lookups ---------------------------------------------------------------

  const worker_record* find(const std::string& instance_id, const msg::wire_int& worker_id) const;
  const worker_record* record(uint64_t uid) const;

  /// First instance (registration order) with a worker registered from `ip`.
  std::optional<std::string> instance_by_ip(const std::string& ip) const;

  /// Workers of an instance sorted by worker_id (LMCache get_worker_ids order).
  std::vector<control_target> control_targets(const std::string& instance_id) const;

  /// spec 4.7.6 query_worker_info.
  std::vector<msg::WorkerInfo>
  worker_infos(const std::string& instance_id,
               const std::optional<std::vector<msg::wire_int>>& ids) const;

  /// Every worker in registration order.
  std::vector<const worker_record*> all_workers() const;

  size_t worker_count() const noexcept { return records_.size(); }

  // -- full sync (spec 4.8.3, 4.8.4) -------------------------------------------

  void set_sync_state(uint64_t uid, sync_phase phase, uint64_t missing_batches);

  /// (workers never asked to sync or COMPLETED) / all workers; 0 with none.
  double global_progress() const;

  /// The status reply's can_exit_freeze; the first time it is true the
  /// controller stops asking every worker for a full sync.
  bool can_exit_freeze(double completion_threshold);

  /// Asks this worker alone for a full sync at its next heartbeat.
  void request_full_sync(uint64_t uid, std::string reason);

  /// Whether the heartbeat reply should carry a FullSyncCommand, and its reason.
  std::pair<bool, std::string> should_request_full_sync(uint64_t uid) const;

  /// A FullSyncStartMsg of the worker went to its entity, whose session
  /// reports `syncing` after the start's reply (set_sync_state): until then
  /// the worker counts as syncing for should_request_full_sync, as with
  /// LMCache, which marks it before it answers. Cleared by its next sync
  /// state, registration or removal, or forget_expected_sync_state (refused).
  void expect_sync_state(uint64_t uid);
  void forget_expected_sync_state(uint64_t uid);

  /// Controls `controller_restart` requests: true at start (LMCache's
  /// need_full_sync_all); a node that restored its index from its store
  /// clears it, since it lost nothing it cannot prove per worker.
  void set_need_full_sync_all(bool v) noexcept {
    if (v != need_full_sync_all_)
      answers_changing();
    need_full_sync_all_ = v;
  }
  bool need_full_sync_all() const noexcept { return need_full_sync_all_; }

  uint64_t workers_in(sync_phase phase) const;
  uint64_t missing_batches_total() const;

  // -- views -----------------------------------------------------------------

  /// A fresh immutable view for lookup actors.
  std::shared_ptr<const directory_view> make_view() const;

  /// A fresh heartbeat_view, current until the next change of an answer.
  std::shared_ptr<const heartbeat_view> make_heartbeat_view() const;
  /// Bumped (before the change) by every change that could alter a
  /// heartbeat's answer: registrations, removals, first heartbeats, sync
  /// states, owed full syncs, need_full_sync_all.
  uint64_t answers_version() const noexcept {
    return answers_version_->load(std::memory_order_relaxed);
  }

private:
  struct instance_entry {
    std::string instance_id;
    uint64_t order = 0;
    std::vector<uint64_t> workers; ///< uids sorted by (registration_order, uid)
  };

  void place(const worker_record& rec);
  void unplace(const worker_record& rec);
  /// Seq-cst, before the change: a socket thread that still reads the old
  /// version answers as if its heartbeat came first.
  void answers_changing() noexcept { answers_version_->fetch_add(1); }

  std::vector<instance_entry> instances_; ///< sorted by (order, instance_id)
  std::map<uint64_t, worker_record> records_;
  absl::flat_hash_map<holder_id, uint64_t> holder_owner_; ///< holder -> worker uid
  bool need_full_sync_all_ = true;
  /// Workers with a FullSyncStartMsg on its way (expect_sync_state).
  absl::flat_hash_set<uint64_t> sync_state_expected_;
  std::shared_ptr<std::atomic<uint64_t>> answers_version_ =
      std::make_shared<std::atomic<uint64_t>>(0);
};

} // namespace lmcc::actors
