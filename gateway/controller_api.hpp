// controller_api: what the HTTP API asks of the controller.
//
// http_api.hpp turns LMCache's HTTP endpoints into calls on this interface and
// the answers back into LMCache's JSON shapes; the node implements it on top of
// its actors. Every call returns at once with a future; the HTTP handler waits
// at most http_options::handler_timeout for it (504 otherwise).
//
// Thread-safety: implementations must accept calls from many HTTP threads.
#pragma once

#include "faults/fault_injection.hpp"
#include "messages/lmcache_msgs.hpp"

#include <cstdint>
#include <future>
#include <optional>
#include <string>
#include <vector>

namespace lmcc::gateway {

/// One registered worker with its index size (GET /controller/workers).
struct worker_view {
  msg::WorkerInfo info;
  uint64_t key_count = 0;
};

struct instance_stats {
  std::string instance_id;
  uint64_t key_count = 0;
  uint64_t worker_count = 0;
};

/// GET /controller/key-stats, instances in registration order.
struct key_stats {
  uint64_t total_key_count = 0;
  uint64_t total_instance_count = 0;
  uint64_t total_worker_count = 0;
  std::vector<instance_stats> instances;
};

/// The controller-state gauges of spec 5.3 (socket gauges come from the front end).
struct controller_gauges {
  uint64_t kv_pool_keys_count = 0;
  uint64_t registered_workers_count = 0;
  uint64_t kv_op_seq_discontinuity_count = 0;
  uint64_t full_sync_workers_syncing = 0;
  uint64_t full_sync_workers_completed = 0;
  double full_sync_global_progress = 0.0;
  uint64_t full_sync_missing_batches_total = 0;
};

/// One worker as lmcc's GET /cluster/workers shows it: what /controller/workers
/// shows, and what an operator asks besides.
struct worker_detail {
  worker_view view;
  uint64_t locations = 0; ///< storage locations the worker reported
  std::string home;       ///< id of the node its entity lives on ("" while no node is live)
  /// "owed": it is asked for a full sync at its next heartbeat (`full_sync_reason`
  /// says why); "none": nothing owed; "unknown": it has not heartbeated yet.
  std::string full_sync;
  std::string full_sync_reason;
};

/// GET /cluster/workers (lmcc's own endpoint; LMCache's /controller/workers
/// stays as LMCache shapes it).
struct workers_detail {
  int status = 200;                   ///< 200, or 503 (loading, or the directory did not answer)
  std::string error;                  ///< why not, when status != 200
  std::string node;                   ///< the answering node's id
  std::vector<worker_detail> workers; ///< registration order
  uint64_t syncing = 0;               ///< workers whose full sync is running
  uint64_t completed = 0;             ///< workers whose last full sync completed
  uint64_t missing_batches = 0;       ///< batches the running syncs still miss
};

/// POST /admin/snapshot: a checkpoint of the node's store written to `dir`.
struct snapshot_outcome {
  int status = 200;  ///< 200, 409 (no store / loading) or 500 (the checkpoint failed)
  std::string error; ///< why not, when status != 200
  std::string dir;
  uint64_t sequence = 0; ///< RocksDB sequence number of the checkpoint
  uint64_t workers = 0;
  uint64_t holders = 0;
  uint64_t slots = 0;       ///< slot snapshot values in the checkpoint
  uint64_t log_records = 0; ///< op-log records above the floor
  uint64_t files = 0;
  uint64_t bytes = 0;
  double seconds = 0;
};

/// POST /admin/faults: store failures injected for crash and chaos tests (only
/// in a build with fault injection, faults/fault_injection.hpp, on a node
/// started with --fault-injection on). Absent fields stay as they are.
struct store_fault_settings {
  std::optional<uint64_t> fail_commits;    ///< the next N commits fail
  std::optional<bool> fail_all_commits;    ///< every commit fails while true
  std::optional<uint64_t> commit_delay_us; ///< a slow disk: delay before each commit
  /// Moves the node's wall clock by this many ms (negative: back), on top of
  /// earlier jumps (node_clock, clock/clock.hpp): an NTP step, a restored VM.
  std::optional<int64_t> clock_jump_ms;
};

/// What /admin/faults answers: the settings now in force.
struct fault_outcome {
  int status = 200;  ///< 200, 404 (fault injection off) or 409 (store faults, no store)
  std::string error; ///< why not, when status != 200
  uint64_t fail_commits = 0;
  bool fail_all_commits = false;
  uint64_t commit_delay_us = 0;
  int64_t clock_offset_ms = 0; ///< the wall clock's total injected offset
};

/// What POST /cluster/members did.
struct members_outcome {
  int status = 200;   ///< 200, 404 (not a cluster) or 409 (refused: see error)
  std::string record; ///< the new membership record (JSON) when 200
  std::string error;  ///< why not, otherwise
};

class controller_api {
public:
  virtual ~controller_api() = default;

  /// Handles one OrchMsg (LookupMsg, QueryInstMsg, ClearMsg, ..., QueryWorkerInfoMsg)
  /// and yields its OrchRetMsg, or an ErrorMsg saying why not.
  virtual std::future<msg::Msg> orchestrate(msg::Msg request) = 0;

  /// Every registered worker, instances and workers in registration order.
  virtual std::future<std::vector<worker_view>> workers() = 0;

  virtual std::future<key_stats> stats() = 0;

  /// Every registered worker with its home node, locations and full-sync
  /// state (GET /cluster/workers). The default answers 404.
  virtual std::future<workers_detail> worker_details() {
    std::promise<workers_detail> p;
    p.set_value({.status = 404, .error = "this node does not list workers in detail"});
    return p.get_future();
  }

  virtual std::future<controller_gauges> gauges() = 0;

  /// False while the node is still starting (loading its index); /readyz says 503.
  virtual bool ready() const = 0;

  /// Writes a consistent checkpoint of the node's store plus its manifest into
  /// `dir` (which must not exist, on the node's file system).
  virtual std::future<snapshot_outcome> snapshot(const std::string& dir) = 0;

  /// GET /cluster/status as JSON text: members and liveness as this node sees
  /// them, ring version, slots held, replication queues. nullopt: this node
  /// is not part of a cluster (404).
  virtual std::optional<std::string> cluster_status_json() const { return std::nullopt; }

  /// POST /cluster/members: makes `ids` the cluster's member set (every id
  /// a configured node; cluster/membership_record.hpp). Slots move in the
  /// background; /cluster/status shows the progress.
  virtual members_outcome change_members(const std::vector<std::string>& ids) {
    (void)ids;
    return members_outcome{.status = 404,
                           .error = "this node is not part of a cluster "
                                    "(lmcc_cluster_members is empty)"};
  }

#if LMCC_FAULT_INJECTION
  /// Applies injected store faults (see store_fault_settings). The default
  /// refuses: only a node started with fault injection on accepts them. A
  /// build without fault injection has neither this nor POST /admin/faults.
  virtual fault_outcome set_store_faults(const store_fault_settings&) {
    return fault_outcome{.status = 404,
                         .error =
                             "fault injection is off (start the node with --fault-injection on)"};
  }
#endif
};

} // namespace lmcc::gateway
