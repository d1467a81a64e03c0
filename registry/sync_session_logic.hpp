// sync_session_logic: what a worker's full-sync session actor does, without
// the actor (spec 4.8): it rebuilds one location of one worker from the
// worker's FullSyncBatchMsgs, and says "complete" only once the index has
// acknowledged every sub-batch it sent.
//
// Order of events. start() takes a new sync (a previous one of the same worker
// is replaced; its buffered batches give their credits back). Batches that
// arrive before go() are buffered: the worker actor says go only once its own
// earlier increments are acknowledged. go() first drops the location in every
// destination and marks it `syncing` (so a restart mid-sync knows its entries
// are partial), then sends the keys. FullSyncEndMsg sends the `resynced` mark;
// when everything is acknowledged the sync is COMPLETED and the worker actor is
// told, which lets increments flow again. An idle SYNCING session fails after
// the timeout (LMCache defines it and never enforces it); an End after that is
// ignored (it cannot complete a sync whose batches may be missing).
//
// Every key is filed under the session's location, whatever location a batch
// names (the sync rebuilds one holder).
//
//   sync_session_logic s{config, outbox};
//   s.start(params, now); s.go();
//   s.on_input(pushed_msg{batch, 2000}, now);
//
// Context: owned by one session actor; not thread-safe. Time is passed in.
// CAF-free.
#pragma once

#include "registry/full_sync_session.hpp"
#include "registry/worker_logic.hpp"

#include <optional>
#include <string>
#include <vector>

namespace lmcc::actors {

class session_outbox {
public:
  virtual ~session_outbox() = default;
  virtual void send(uint32_t destination, kv_sub_batch&& sb) = 0;
  virtual void give_credits(uint64_t n) = 0;
  /// The sync's state for the Directory's global progress.
  virtual void report(sync_phase phase, uint64_t missing_batches) = 0;
  /// The sync ended: completed (acknowledged everywhere) or failed;
  /// `left`: where it left the location's stream.
  virtual void ended(const std::string& sync_id, bool completed, const session_stream& left) = 0;
};

struct session_config {
  uint32_t slot_count = 4096;
  uint32_t destinations = 1;
  placement_table placement;
  uint64_t stream_base = 0;
  double timeout_s = 300;
};

class sync_session_logic {
public:
  sync_session_logic(session_config cfg, session_outbox& out);

  void start(const session_params& p, double now);
  void go();
  void on_input(pushed_msg&& m, double now);
  void on_ack(uint64_t stream, uint64_t up_to, double now);

  /// SYNCING and idle past the timeout: FAILED (true when it changed now).
  bool expire(double now);

  /// The worker-specific part of a FullSyncStatusRetMsg (global progress and
  /// can_exit_freeze are the Directory's).
  msg::FullSyncStatusRetMsg status(const msg::FullSyncStatusMsg& m) const;

  /// Gives back every credit it holds (the actor is stopping).
  void abort();

  sync_phase phase() const noexcept { return book_ ? book_->phase() : sync_phase::none; }
  const std::string& sync_id() const noexcept { return params_.sync_id; }
  bool ending() const noexcept { return ending_; }
  /// Nothing it sent is unacknowledged.
  bool idle() const noexcept { return stream_.idle(); }

private:
  void on_batch(const msg::FullSyncBatchMsg& m, uint64_t credits, double now);
  void on_end(const msg::FullSyncEndMsg& m, uint64_t credits, double now);
  void send_mark(seq_mark mark, bool drop);
  /// The placement epoch to split with now (noting when it changed; `before`:
  /// the position before the event about to be sent).
  uint64_t placement_epoch(const stream_pos& before);
  void check_done(double now);
  void give_buffered();

  session_config cfg_;
  session_outbox& out_;
  sub_batch_stream stream_;
  session_params params_;
  std::optional<full_sync_session> book_;
  std::vector<pushed_msg> buffered_;
  std::vector<bool> intro_sent_;
  std::vector<std::vector<kv_op>> split_;
  /// The sync's position in the location's stream (an era of its own: the
  /// drop, then one position per batch), and the last one sent to each
  /// destination.
  stream_pos pos_;
  session_stream left_;
  bool go_ = false;
  bool ending_ = false;
  uint64_t actual_total_keys_ = 0;
};

} // namespace lmcc::actors
