// full_sync_session: one worker's running full sync (spec 4.8), actor-free.
//
// A worker that lost (or may have lost) the controller's view of its cache
// freezes, sends FullSyncStartMsg, its whole key set in numbered batches and
// FullSyncEndMsg, then polls FullSyncStatusMsg until it may unfreeze. This
// class is the bookkeeping of one such session: which batches arrived, how
// many keys, when it was last active, and its phase. lmcc enforces the
// timeout LMCache defines but never checks: a session idle longer than
// full_sync_timeout becomes FAILED, so the worker is asked to retry instead of
// losing all its increments forever.
//
// Why not an actor of its own: the session's key writes and the worker's
// incremental writes must reach each KV shard in order, and CAF orders
// messages only per sender; so the worker actor owns the session and sends
// both kinds of writes itself.
//
//   full_sync_session s{"A_0_ab12", 4000, 2, now};
//   s.record_batch(0, 2000, now);
//   s.missing_batches();      // {1}
//   s.complete(4000, now);
//
// Context: owned by one worker_actor; not thread-safe. Time is passed in.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace lmcc::actors {

/// LMCache's WorkerSyncInfo.state; `none` plays the role of "no sync_info".
enum class sync_phase : uint8_t { none, syncing, completed, failed };

const char* to_string(sync_phase p) noexcept;

class full_sync_session {
public:
  /// Most batches one session may announce; LMCache sends 2000 keys per batch,
  /// so this allows two billion keys while bounding the batch bitmap (128 KiB).
  static constexpr uint64_t max_batch_count = uint64_t{1} << 20;

  full_sync_session(std::string sync_id, uint64_t expected_keys, uint64_t batch_count, double now);

  /// A FullSyncBatchMsg arrived (duplicates count again, as in LMCache).
  void record_batch(uint64_t batch_id, uint64_t key_count, double now);

  /// FullSyncEndMsg: SYNCING -> COMPLETED. Returns false when the key count
  /// differs from the batches received (logged by the caller, not an error).
  bool complete(uint64_t actual_total_keys, double now);

  /// SYNCING and idle longer than `timeout_s` -> FAILED; true when it changed.
  bool expire(double now, double timeout_s);

  /// Sorted ids in [0, batch_count) not received yet (empty unless SYNCING).
  std::vector<uint64_t> missing_batches() const;
  uint64_t missing_batch_count() const;

  const std::string& sync_id() const noexcept { return sync_id_; }
  sync_phase phase() const noexcept { return phase_; }
  uint64_t received_keys() const noexcept { return received_keys_; }
  uint64_t expected_keys() const noexcept { return expected_keys_; }
  uint64_t batch_count() const noexcept { return batch_count_; }
  double last_activity() const noexcept { return last_activity_; }

private:
  std::string sync_id_;
  sync_phase phase_ = sync_phase::syncing;
  uint64_t expected_keys_;
  uint64_t batch_count_;
  std::vector<bool> received_;
  uint64_t received_distinct_ = 0;
  uint64_t received_keys_ = 0;
  double last_activity_;
};

} // namespace lmcc::actors
