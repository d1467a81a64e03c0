// simulated_worker: one LMCache worker (one TP rank of one instance) as the
// controller sees it (spec 1.1, 2.1-2.4, 4.3.1, 4.9):
//
//  * REP socket bound on 127.0.0.1 (W4), answering ControlMsgs;
//  * DEALER to the reply ROUTER (W2): RegisterMsg, full-sync start/status;
//  * DEALER to the handed-out heartbeat URL (W3), when heartbeats are on;
//  * PUSH to the PULL socket (W1): BatchedKVOperationMsg of `batch_ops` ops with
//    per-location seq_num 0, 1, 2, ... across batches, up to
//    `msgs_per_multipart` messages per multipart; full-sync batches; DeRegisterMsg.
//
// A service thread owns the REP and heartbeat sockets; the caller's thread
// (the "driver": one at a time) owns the DEALER and the PUSH and runs the
// pushes and full syncs, so a requested full sync runs between two pushes,
// with ingest frozen, as a real worker's does.
//
//   simulated_worker w{ctx, identity, config};
//   w.register_with_controller();   // throws unreachable_error after 5 s
//   w.start_service();
//   w.push_random(limits);          // in a driver thread
//
// Context: see above; counters() may be read from any thread.
#pragma once

#include "apps/lmcc-bench/key_space.hpp"
#include "apps/lmcc-bench/zmq_io.hpp"

#include <zmq.hpp>

#include <atomic>
#include <mutex>
#include <optional>
#include <span>
#include <stop_token>
#include <string>
#include <thread>

namespace lmcc::bench {

struct worker_identity {
  std::string instance_id;
  int64_t worker_id = 0; ///< TP rank
  size_t instance_index = 0;
};

struct worker_config {
  std::string push_url;  ///< tcp:// of the PULL socket (or the floor sink)
  std::string reply_url; ///< tcp:// of the reply ROUTER; empty: no controller
  std::string location = "LocalCPUBackend";
  uint32_t batch_ops = 50;
  uint32_t msgs_per_multipart = 50;
  double evict_ratio = 0;
  double heartbeat_interval_s = 0;
  bool full_sync_on_request = false;
  uint32_t timeout_ms = 5000;
  double register_timeout_s = 5;
  uint32_t full_sync_batch_keys = 2000;
  uint32_t full_sync_poll_ms = 10;
  double full_sync_timeout_s = 30;
  uint64_t seed = 1;
};

/// Monotonic counters, readable while the worker runs.
struct worker_counters {
  std::atomic<uint64_t> ops_sent{0};
  std::atomic<uint64_t> admits{0};
  std::atomic<uint64_t> evicts{0};
  std::atomic<uint64_t> batches{0};
  std::atomic<uint64_t> multiparts{0};
  std::atomic<uint64_t> send_stalls{0}; ///< SNDTIMEO expiries (controller backpressure)
  std::atomic<uint64_t> heartbeats_ok{0};
  std::atomic<uint64_t> heartbeat_failures{0};
  std::atomic<uint64_t> control_msgs{0};
  std::atomic<uint64_t> full_sync_requests{0};
  std::atomic<uint64_t> full_syncs{0};
  std::atomic<uint64_t> restarts{0};      ///< restart_as_new_process() runs
  std::atomic<uint64_t> stream_faults{0}; ///< injected stream faults carried out
  std::atomic<uint64_t> skipped_ops{0};   ///< ops a rate-limited push let go (max_backlog_s)
};

/// Bounds for one push run: whichever comes first.
struct push_limits {
  steady::time_point deadline;
  double ops_per_s = 0; ///< 0: as fast as the controller takes them
  uint64_t max_ops = 0; ///< 0: unbounded
  std::stop_token stop;
  /// 0: none. Else, once this many random keys are live, every admit comes
  /// with an evict of the oldest key, so the worker's share of the index
  /// grows to this and is held there.
  uint64_t live_cap = 0;
  /// With ops_per_s: ops a worker could not send for this long (a full sync,
  /// a PUSH blocked by a node that is down) are let go instead of sent in one
  /// burst afterwards, as a real worker stores only what its requests make; 0:
  /// every op is caught up.
  double max_backlog_s = 0;
};

/// A fault of a worker's own PUSH stream (what the chaos runner does to a
/// worker's frames): the next `multiparts` multiparts are each sent twice, or
/// the next order.size() multiparts go out in `order`.
struct stream_fault {
  enum class kind { duplicate, reorder };
  kind what = kind::duplicate;
  uint32_t multiparts = 1;     ///< duplicate
  std::vector<uint32_t> order; ///< reorder: a permutation of 0..n-1
};

struct full_sync_result {
  std::string reason;
  std::string error; ///< empty on success
  bool accepted = false;
  bool complete = false;
  bool can_exit_freeze = false;
  uint64_t keys = 0;
  uint32_t batches = 0;
  uint32_t resends = 0;
  uint32_t polls = 0;
  double elapsed_s = 0;     ///< FullSyncStartMsg sent -> complete and can_exit_freeze
  double exit_freeze_s = 0; ///< FullSyncStartMsg sent -> first can_exit_freeze
  /// When the sync began, in seconds of steady_clock's epoch (CLOCK_MONOTONIC
  /// on Linux, the clock of Python's time.monotonic()); it ended elapsed_s later.
  double started_s = 0;
};

class simulated_worker {
public:
  simulated_worker(zmq::context_t& ctx, worker_identity identity, worker_config config);
  ~simulated_worker();
  simulated_worker(const simulated_worker&) = delete;
  simulated_worker& operator=(const simulated_worker&) = delete;

  // -- setup (caller's thread) ---------------------------------------------------

  /// RegisterMsg -> RegisterRetMsg; reads extra_config.heartbeat_url.
  void register_with_controller();

  /// Starts the REP / heartbeat thread (heartbeats only if configured and a
  /// heartbeat URL was handed out).
  void start_service();

  // -- driver-thread operations ------------------------------------------------

  /// Random admits/evicts until a limit is hit; runs requested full syncs in
  /// between. Returns the ops sent.
  uint64_t push_random(const push_limits& limits);

  /// Admits `keys` (never evicted) and adds them to the ground truth.
  bool admit_pinned(std::span<const int64_t> keys, steady::time_point deadline);

  /// Makes the ground truth hold `n` more random keys without sending them:
  /// state a full sync will have to resend.
  void preload(uint64_t n);

  /// One full sync of the whole ground truth (spec 4.9).
  full_sync_result full_sync(std::string reason, std::stop_token stop = {});

  /// The reason of a pending controller request for a full sync, if any.
  std::optional<std::string> take_full_sync_request();

  /// Runs pending full syncs until `limits` end (an otherwise idle worker).
  void serve_full_sync_requests(const push_limits& limits);

  // -- faults, asked from any thread, carried out by the driver's push_random ----

  /// The worker becomes a new process: its cache is empty (the ground truth
  /// too), its seq numbers start again at 0, the frames its PUSH socket still
  /// queued die with it, it registers again (the controller drops the old
  /// process's entries) and admits its pinned keys again.
  void request_restart();

  /// Applies `f` to the next multiparts push_random sends.
  void inject(stream_fault f);

  /// DeRegisterMsg over PUSH (what LMCache sends on shutdown), after the
  /// service thread has stopped: no heartbeat follows it.
  void deregister();

  /// Stops the REP / heartbeat thread; a heartbeat in flight is waited for
  /// (up to the request timeout), so that none reaches the controller later.
  void stop_service();

  /// The non-blocking first half of stop_service(), to stop many workers at once.
  void request_service_stop();

  // -- any thread ------------------------------------------------------------------

  const worker_identity& identity() const { return identity_; }
  std::string peer_init_url() const { return "127.0.0.1:" + std::to_string(rep_port_); }
  uint16_t rep_port() const { return rep_port_; }
  uint64_t truth_size() const { return truth_.size(); }
  const ground_truth& truth() const { return truth_; }
  const worker_counters& counters() const { return counters_; }

  /// Odd while a full sync runs; +2 per sync. FullSyncStartMsg clears the
  /// location on the controller (spec 4.8.2), so lookups that overlap a sync
  /// may rightly miss this worker's keys.
  uint64_t sync_epoch() const { return sync_epoch_.load(); }
  std::optional<std::string> heartbeat_url() const;

  /// Results of every full sync run so far (copy).
  std::vector<full_sync_result> full_sync_results() const;

private:
  void service_loop(std::stop_token stop);
  std::string answer_control(std::string_view request);
  std::vector<std::string> encode_batches(std::vector<msg::KVOpEvent>& ops);
  void restart_as_new_process(const push_limits& limits);
  /// The next order.size() single-batch multiparts, sent in `order`; the ops sent.
  uint64_t push_reordered(const std::vector<uint32_t>& order, const push_limits& limits);
  /// Appends `count` ops (seq numbers following next_seq_ and what `ops`
  /// holds) that admit key(hi++) or evict key(lo++).
  void make_ops(std::vector<msg::KVOpEvent>& ops, uint64_t count, uint64_t& lo, uint64_t& hi,
                uint64_t evict_below, uint64_t live_cap, uint64_t& evicts);
  bool send_until(const std::vector<std::string>& frames, const push_limits& limits);
  full_sync_result run_full_sync(std::string reason, std::stop_token stop);
  bool send_full_sync_batches(const std::vector<int64_t>& keys, const std::string& sync_id,
                              std::span<const int64_t> batch_ids);

  zmq::context_t* ctx_;
  worker_identity identity_;
  worker_config config_;
  ground_truth truth_;
  std::mt19937_64 rng_;
  int64_t next_seq_ = 0;

  zmq::socket_t push_;
  zmq::socket_t rep_;
  uint16_t rep_port_ = 0;
  std::optional<dealer_channel> reply_;

  mutable std::mutex mutex_; // guards the members below
  std::optional<std::string> heartbeat_url_;
  std::optional<std::string> pending_full_sync_;
  std::optional<stream_fault> pending_fault_;
  bool restart_requested_ = false;
  std::vector<full_sync_result> full_sync_results_;

  worker_counters counters_;
  std::atomic<uint64_t> sync_epoch_{0};
  std::jthread service_; // last: stops before the sockets go
};

} // namespace lmcc::bench
