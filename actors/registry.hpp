// registry: the node's worker registry in registration order (spec 4.2, 4.7),
// the full-sync tracker's global view (spec 4.8.3-4.8.4) and the read-only
// directory_view that lookups resolve holders with. Actor-free: the directory
// actor owns one and only adapts it.
//
// Registration order matters on the wire: LookupRetMsg lists the chunk-0
// holder first in registration order, get_instance_by_ip picks the first
// instance, and P2P lookups pick the first matching peer. Instances keep their
// first-registration position while they have workers; a worker keeps its
// position inside its instance.
//
//   registry r{controller_options{}};
//   auto [num, is_new] = r.register_worker(reg_msg, now);
//   r.heartbeat("A", 0, now);
//   auto [ask, reason] = r.should_request_full_sync(num);
//
// Context: owned by the directory actor; not thread-safe. Time is passed in.
#pragma once

#include "actors/full_sync_session.hpp"
#include "actors/kv_index.hpp"
#include "messages/lmcache_msgs.hpp"

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
  uint32_t worker_num = 0;
  std::string instance_id;
  msg::wire_int worker_id;
  std::string ip;
  msg::wire_int port;
  std::optional<std::string> peer_init_url;
  double registration_time = 0;
  double last_heartbeat_time = 0;
  bool has_heartbeated = false;
  sync_phase sync = sync_phase::none;
  uint64_t missing_batches = 0;
  /// Location names by location index (first-seen order).
  std::vector<std::string> locations;
  /// Why this worker, and only it, must full-sync at its next heartbeat (a seq
  /// gap proven after a restart); empty when it need not. Cleared when its sync
  /// starts or it re-registers.
  std::string resync_reason;

  msg::WorkerInfo info() const;
  /// "ip:port" of the worker's REP socket (S4).
  std::string control_endpoint() const;
};

/// What a lookup needs to turn holder ids into an answer; immutable, shared.
struct directory_view {
  struct worker_entry {
    std::string instance_id;
    msg::wire_int worker_id;
    uint32_t instance_rank = 0; ///< position of the instance in registration order
    uint32_t worker_rank = 0;   ///< position of the worker inside its instance
    std::optional<std::string> peer_init_url;
    std::vector<std::string> locations;
  };
  std::map<uint32_t, worker_entry> workers; ///< by worker number

  const worker_entry* find(uint32_t worker_num) const;
};

/// A worker the controller may have to command (spec 4.10 fan-out).
struct control_target {
  msg::wire_int worker_id;
  std::string endpoint;
  std::optional<std::string> peer_init_url;
};

class registry {
public:
  /// Most locations one worker may report (location index is 8 bits).
  static constexpr size_t max_locations_per_worker = 256;

  // -- registration ----------------------------------------------------------

  struct registration {
    uint32_t worker_num;
    bool is_new;
  };

  /// Registers, or refreshes the address of, (instance_id, worker_id).
  /// A re-registration keeps the worker's number and position (the caller
  /// clears its index state, as LMCache does); unlike LMCache it takes the
  /// new ip/port/peer_init_url, so a restarted worker on a new port is reachable.
  registration register_worker(const std::string& instance_id, const msg::wire_int& worker_id,
                               const std::string& ip, const msg::wire_int& port,
                               const std::optional<std::string>& peer_init_url, double now);

  /// Puts back a worker restored from the node's store: same number, appended
  /// to its instance in the order restores are made (worker_num order).
  /// Later registrations get numbers above every restored one.
  void restore_worker(worker_record rec);

  /// Removes the worker (and its instance when empty); the record, if any.
  std::optional<worker_record> remove(const std::string& instance_id,
                                      const msg::wire_int& worker_id);

  /// Records a heartbeat; false when the worker is unknown.
  bool heartbeat(const std::string& instance_id, const msg::wire_int& worker_id, double now);

  /// Workers that heartbeated at least once and then stayed silent longer
  /// than `timeout_s` (the decisions table: never-heartbeating workers stay).
  std::vector<std::pair<std::string, msg::wire_int>> silent_workers(double now,
                                                                    double timeout_s) const;

  // -- lookups ---------------------------------------------------------------

  std::optional<uint32_t> find(const std::string& instance_id,
                               const msg::wire_int& worker_id) const;
  const worker_record* record(uint32_t worker_num) const;

  /// Index of `location` for the worker, interning it; nullopt when the worker
  /// is unknown or already has max_locations_per_worker locations.
  std::optional<uint32_t> intern_location(uint32_t worker_num, const std::string& location);

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

  void set_sync_state(uint32_t worker_num, sync_phase phase, uint64_t missing_batches);

  /// (workers never asked to sync or COMPLETED) / all workers; 0 with none.
  double global_progress() const;

  /// The status reply's can_exit_freeze; the first time it is true the
  /// controller stops asking every worker for a full sync.
  bool can_exit_freeze(double completion_threshold);

  /// Asks this worker alone for a full sync at its next heartbeat.
  void request_full_sync(uint32_t worker_num, std::string reason);

  /// Whether the heartbeat reply should carry a FullSyncCommand, and its reason.
  std::pair<bool, std::string> should_request_full_sync(uint32_t worker_num) const;

  /// Controls `controller_restart` requests: true at start (LMCache's
  /// need_full_sync_all); a node that restored its index from its store
  /// clears it, since it lost nothing it cannot prove per worker.
  void set_need_full_sync_all(bool v) noexcept { need_full_sync_all_ = v; }
  bool need_full_sync_all() const noexcept { return need_full_sync_all_; }

  uint64_t workers_in(sync_phase phase) const;
  uint64_t missing_batches_total() const;

  // -- views -----------------------------------------------------------------

  /// A fresh immutable view for lookup actors.
  std::shared_ptr<const directory_view> make_view() const;

private:
  struct instance_entry {
    std::string instance_id;
    std::vector<uint32_t> workers; ///< worker numbers in registration order
  };

  std::vector<instance_entry> instances_;
  std::map<uint32_t, worker_record> records_;
  std::map<std::pair<std::string, msg::wire_int>, uint32_t> by_key_;
  uint32_t next_worker_num_ = 1;
  bool need_full_sync_all_ = true;
};

} // namespace lmcc::actors
