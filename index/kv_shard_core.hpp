// kv_shard_core: what a node's KV shard does, without the actor: applies
// sub-batches to the index, appends them to the op log, acknowledges them
// once durable, and snapshots dirty slots in the background.
//
// Write path. apply() changes the index (under its write lock, one sub-batch
// at a time) and appends one op-log record to the pending batch; commit()
// writes every pending record in one RocksDB write and returns the acks it may
// now send: per sender stream, the highest sub-batch number committed. The
// actor calls commit() when its mailbox has drained (a flush message it sent
// itself lands behind everything queued), so load turns into large group
// commits and an idle node commits per message. Without a store commit() only
// hands out the acks.
//
// Failing commits. A commit that fails keeps its batch and is retried (the
// actor backs off); acks wait, so the senders run out of credit and the PULL
// sockets push back on the workers. If commits keep failing for
// commit_failure_grace, the shard gives up on the pending records: it sends
// their acks (the index in memory has them), and marks every holder in them
// `gap`, a mark that stays on the holder's later records until a full sync
// or a drop replaces it, so a restart asks exactly those workers to resync.
//
// Background work, in bounded steps between sub-batches: cleaning holder
// drops (kv_index drop jobs) and snapshot rounds. A round starts when the log
// has grown by snapshot_log_bytes (and snapshot_log_percent of what the last
// round wrote) since the last round, or snapshot_interval
// has passed with dirty slots, never sooner than snapshot_min_interval after
// the previous one. It remembers P0 (the last log position), writes every
// slot whose version changed since its last snapshot (a few thousand entries
// per step, each step one commit with whatever records are pending), then the
// states of every holder, moves the log floor to P0 + 1 and deletes the log
// below it. A crash anywhere in between loses nothing: see schema.hpp.
//
//   kv_shard_core core{opts, index, store};
//   core.apply(sub_batch);
//   auto r = core.commit(now_ms);       // r.acks: stream -> number
//   while (core.background_due(now_ms)) core.background_step(now_ms);
//
// Context: owned by one kv_shard actor; not thread-safe. Time is passed in
// (milliseconds of a monotonic clock). CAF-free.
#pragma once

#include "cluster/wire.hpp"
#include "faults/fault_injection.hpp"
#include "index/coverage.hpp"
#include "index/handoff_marks.hpp"
#include "index/kv_index.hpp"
#include "index/slot_copy.hpp"
#include "index/sub_batch.hpp"
#include "persistence/store.hpp"

#include <absl/container/flat_hash_map.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace lmcc::actors {

/// How a node's KV shard logs, snapshots and cleans up. The cadence fields
/// trade restart time (log replayed at start-up) against background work.
struct shard_options {
  /// Slots of the key space (slot = mix64(key) mod slot_count). Default: 4096
  uint32_t slot_count = 4096;

  /// A snapshot round starts once the op log has grown this much since the
  /// last round: bounds what a restart replays (about 9 bytes an op, so the
  /// default is ~3.5 M ops, well under a second of replay). Default: 32 MiB
  uint64_t snapshot_log_bytes = uint64_t{32} << 20;

  /// ... and by at least this percentage of what the last round wrote. A
  /// round rewrites every dirty slot, so its cost grows with the index; tying
  /// the log's growth to it keeps the snapshot work per logged op constant
  /// (Redis's auto-aof-rewrite-percentage does the same for its AOF). A
  /// restart replays at most max(snapshot_log_bytes, this share of the last
  /// round) of log: at 10 M entries (~90 MB of slot values) and 50, ~45 MB.
  /// 0: only snapshot_log_bytes counts. Default: 50
  uint32_t snapshot_log_percent = 50;

  /// ... or once this much time has passed with dirty slots. Default: 60 s
  std::chrono::milliseconds snapshot_interval{60'000};

  /// Rounds never start closer together than this (a flood would otherwise
  /// snapshot back to back). Default: 2 s
  std::chrono::milliseconds snapshot_min_interval{2'000};

  /// Ops applied per hold of the index's write lock: a lookup waits behind at
  /// most this many ops of ingest (~0.1 ms at 256), not a whole sub-batch
  /// (up to lmcc_pull_coalesce_ops and more). A smaller hold also makes it
  /// unlikely that the kernel preempts the shard while it holds the lock on a
  /// busy machine, which would stall every reader for a time slice.
  /// Default: 256
  uint32_t write_lock_ops = 256;

  /// A clean stop writes the dirty slots first when they hold at most this many
  /// entries (about 1 s of work), so the next start reads slot snapshots
  /// instead of replaying the log; more are left to the log replay, which keeps
  /// SIGTERM within ~2 s. A start that replayed log records starts a round at
  /// once, for the same reason. Default: 4000000
  uint64_t stop_snapshot_entries = 4'000'000;

  /// Entries encoded per snapshot step; bounds the time one step holds the
  /// shard (about 2-5 ms). Default: 40000
  uint64_t snapshot_step_entries = 40'000;

  /// Slots cleaned per drop step. Default: 64
  uint32_t drop_step_slots = 64;

  /// A drop step also stops once the slots it cleaned held this many keys:
  /// cleaning walks each slot's table under the writer lock, and at 65 M
  /// entries 64 slots are a million keys (tens of ms of lookups waiting).
  /// Default: 100000 (a few ms)
  uint64_t drop_step_keys = 100'000;

  /// The planted bug of a test build (fault_injection.hpp; empty in a
  /// release build): drop_acked_sub_batch acknowledges every Nth sub-batch
  /// with ops without applying it. Default: none
  [[no_unique_address]] faults::planted_bugs planted;

  /// How long commits may keep failing before the pending records are given
  /// up (acked, their holders marked `gap`). Default: 5 s
  std::chrono::milliseconds commit_failure_grace{5'000};

  /// The store's memtables are flushed once the shard has logged and
  /// committed nothing for this long and they hold at least
  /// idle_flush_min_bytes: an idle node gives back what they hold (up to
  /// write_buffer_bytes x max_write_buffer_number per family; ~50 MiB, half
  /// of the node's RSS, after a 30 s flood's workers left). 0: never.
  /// Default: 2 s
  std::chrono::milliseconds idle_flush{2'000};

  /// Memtables smaller than this are not worth an SST. Default: 8 MiB
  uint64_t idle_flush_min_bytes = uint64_t{8} << 20;
};

/// What the shard knows of a holder.
struct holder_meta {
  uint64_t worker_uid = 0;
  std::string location;
  uint64_t incarnation = 0;
  seq_mark mark;
  /// Its intro (worker uid and location) is in the log or an 'H' state.
  bool intro_durable = false;
  /// Changed since the last snapshot round wrote the holder states.
  bool changed = false;
  /// The sender's durable seq (kv_sub_batch::durable_seq), in memory only.
  std::optional<uint64_t> durable;
  /// The older incarnation whose fenced sub-batches were last logged (in
  /// memory only: one warning per holder and incarnation).
  uint64_t fenced_logged_incarnation = 0;
  /// The era this node's copy was in when it last reported a sender behind
  /// it (in memory only: one report per holder and era).
  uint64_t era_behind_reported = 0;
};

using holder_metas = absl::flat_hash_map<holder_id, holder_meta>;

/// What a restart hands the shard (node_restore fills it).
struct shard_start_state {
  uint64_t next_position = 1;
  /// The log position each slot's snapshot covers (0 = none).
  std::vector<uint64_t> slot_stamps;
  /// Each slot's index version as its snapshot left it (before the log was
  /// replayed): a slot the replay changed is dirty for the next round.
  std::vector<uint64_t> clean_versions;
  holder_metas holders;
  /// Each holder's coverage of each slot as the store left it (null: none).
  std::shared_ptr<coverage_book> covers;
  /// Monotonic milliseconds at start (the snapshot interval counts from it).
  uint64_t started_ms = 0;
};

/// Counters for /metrics and the benchmarks.
struct shard_counters {
  uint64_t sub_batches = 0;
  uint64_t ops = 0;
  uint64_t fenced = 0;     ///< sub-batches of an older incarnation or older than applied, ignored
  uint64_t era_behind = 0; ///< ... of those, ops past the newer era's from a sender in an older one
  uint64_t implied_drops = 0;    ///< eras whose drop never came, dropped on their first ops
  uint64_t holes = 0;            ///< sub-batches that did not continue this node's copy
  uint64_t copies_installed = 0; ///< (slot, holder) parts of other owners' copies taken
  uint64_t copy_conflicts = 0;   ///< ... that had the same label and other entries
  uint64_t commits = 0;
  uint64_t commit_failures = 0;
  uint64_t records_given_up = 0;
  uint64_t log_records = 0;
  uint64_t log_bytes = 0;
  uint64_t snapshot_rounds = 0;
  uint64_t snapshot_slots = 0;
  uint64_t snapshot_bytes = 0;
  double max_commit_ms = 0;
  double last_round_ms = 0;
};

class kv_shard_core {
public:
  struct commit_result {
    bool ok = true;
    std::string error; ///< when !ok
    /// Acks now owed: stream -> highest sub-batch number.
    absl::flat_hash_map<uint64_t, uint64_t> acks;
  };

  kv_shard_core(shard_options opts, std::shared_ptr<kv_index> index,
                std::shared_ptr<persistence::store> store, shard_start_state start = {});

  bool durable() const noexcept { return store_ != nullptr; }
  const shard_options& options() const noexcept { return opts_; }

  /// Applies a sub-batch to the index and appends its record to the pending
  /// batch; its ack is owed once committed.
  void apply(const kv_sub_batch& sb);

  /// Drops holder `h`'s entries as a drop sub-batch of registration
  /// `incarnation` would (logged; it fences older incarnations' stragglers).
  void drop_holder(holder_id h, uint64_t incarnation);

  /// A cluster: the registrations this node's directory knows. A holder of such a worker with an
  /// older incarnation is dropped as the re-registration's own drop would
  /// have done (and logged like it): that drop went to this copy while it
  /// was down or cut off and was lost with the node that held it, and anti-
  /// entropy would otherwise spread the stale copy from a senior node (chaos
  /// schedules of kill -9 and worker restarts). Returns the holders dropped.
  size_t retire_older(std::span<const cluster::registration_ref> known);

  /// True when records wait for a commit or acks are owed.
  bool work_pending() const noexcept { return !owed_.empty() || pending_records_ > 0; }

  /// Commits what is pending (see the header).
  commit_result commit(uint64_t now_ms);

  /// Drop cleaning or a snapshot round has work now.
  bool background_due(uint64_t now_ms) const;

  /// One bounded step of background work (and the commit it includes).
  commit_result background_step(uint64_t now_ms);

  /// Starts a snapshot round now if anything is dirty (a clean stop, tests).
  void request_snapshot();

  /// Asks the store to flush its memtables when the shard has been idle for
  /// options().idle_flush (see there), once per idle spell. Call it
  /// periodically; true when it asked.
  bool flush_if_idle(uint64_t now_ms);

  /// When the shard next has work of its own if nothing else arrives (an idle
  /// flush, a snapshot whose interval runs out), in the clock of the calls
  /// above; nullopt: none until something arrives. Lets an idle shard sleep
  /// instead of ticking. Call it after flush_if_idle().
  std::optional<uint64_t> next_idle_work_ms(uint64_t now_ms) const;

  /// Entries in slots changed since their last snapshot: what a round would write.
  uint64_t dirty_entries() const;

  /// Runs a whole snapshot round now (a clean stop, admin); false when a
  /// commit failed. Acks it settles are returned through `on_acks`.
  template <class OnAcks>
  bool snapshot_now(uint64_t now_ms, OnAcks&& on_acks) {
    request_snapshot();
    bool ok = true;
    while (ok && background_due(now_ms)) {
      auto r = background_step(now_ms);
      on_acks(r);
      ok = r.ok;
      if (!snapshot_running() && !background_due(now_ms))
        break;
    }
    return ok;
  }

  bool snapshot_running() const noexcept { return round_.has_value(); }

  /// Records how long a commit took (the actor measures it).
  void note_commit_ms(double ms) noexcept {
    counters_.max_commit_ms = std::max(counters_.max_commit_ms, ms);
  }

  // -- properties ------------------------------------------------------------

  const holder_metas& holders() const noexcept { return holders_; }
  /// Makes `slot` hold exactly the (key, holder) pairs of `flat` (key, holder,
  /// key, holder, ...): another owner's copy (anti-entropy). The slot turns
  /// dirty, so the next snapshot round makes the repair durable (a crash
  /// before it is repaired again). Returns the entries added plus removed.
  /// With `keep_own`, entries this shard has and `flat` lacks stay (a slot
  /// copied in while writes already reach this node: a write that raced the
  /// copy is kept; an evict that raced it leaves an extra entry, which
  /// anti-entropy removes from the owner that held the slot throughout).
  uint64_t repair_slot(uint32_t slot, std::span<const uint64_t> flat, bool keep_own = false);

  /// This node's copy of `slot`: every holder it knows, with its label and keys.
  slot_copy copy_of(uint32_t slot) const;

  /// Takes from another owner's copy, holder by holder, what is newer than
  /// this node's (coverage.hpp's rules). The slot turns dirty.
  copy_outcome install(const slot_copy& copy);

  /// The slots this node owns, and since which placement epoch each
  /// (coverage_book::set_ownership).
  void set_ownership(std::vector<uint8_t> owned, std::vector<uint64_t> owned_since);
  void set_ownership_words(std::span<const uint64_t> words);

  /// Blank slots (coverage_book::blank_all) whose copy is as complete as it
  /// can get: lost on every owner (only the workers' full syncs refill them),
  /// or the node came back empty into a cluster that holds no index.
  void settle(std::span<const uint32_t> slots);
  void settle_all();

  const coverage_book& covers() const noexcept { return *cover_; }

  /// The watermarks this shard keeps of one worker's holders (handoff.hpp).
  std::vector<location_mark> marks_of(uint64_t worker_uid) const;
  const shard_counters& counters() const noexcept { return counters_; }
  /// The workers whose ops a sender behind their stream's era made this
  /// node drop since the last call (cover_step::era_behind): each owes a
  /// full sync. Taken by the shard actor after each apply.
  std::vector<uint64_t> take_era_behind() { return std::exchange(era_behind_, {}); }
  uint64_t next_position() const noexcept { return next_position_; }
  /// The last log position whose record touched `slot` (0: none since start).
  uint64_t slot_position(uint32_t slot) const { return slot_positions_.at(slot); }
  /// The log position `slot`'s latest snapshot covers (0: none).
  uint64_t slot_stamp(uint32_t slot) const { return slot_stamps_.at(slot); }
  uint64_t log_bytes_since_round() const noexcept { return log_bytes_since_round_; }
  /// How much the log must grow before the next round may start (bytes).
  uint64_t snapshot_log_threshold() const noexcept;

private:
  struct round_state {
    uint64_t start_position = 0; ///< P0
    /// The state of each holder that changed since the last round, as it
    /// stood at P0: a restart replays the log from P0 on, from there.
    std::vector<persistence::holder_state> holders;
    uint64_t start_log_bytes = 0;
    uint64_t bytes_written = 0; ///< slot values so far
    std::vector<uint32_t> slots;
    size_t cursor = 0;
    uint64_t started_ms = 0;
  };

  void append_record(const kv_sub_batch& sb, holder_meta& meta);
  /// Marks the slots whose coverage changed dirty (their snapshot records it).
  void touch_changed_covers();
  void snapshot_some();
  void finish_round(uint64_t now_ms);
  bool snapshot_due(uint64_t now_ms) const;
  commit_result write_pending(uint64_t now_ms);

  shard_options opts_;
  std::shared_ptr<kv_index> index_;
  std::shared_ptr<persistence::store> store_;

  holder_metas holders_;
  std::shared_ptr<coverage_book> cover_;
  uint64_t next_position_ = 1;
  std::vector<uint64_t> slot_positions_;
  std::vector<uint64_t> slot_stamps_;
  std::vector<uint64_t> snapshotted_versions_;

  std::optional<persistence::store::batch> pending_;
  uint64_t pending_records_ = 0;
  /// Holders with records in the pending batch (marked gap if it is given up).
  holder_set pending_holders_;
  absl::flat_hash_map<uint64_t, uint64_t> owed_;
  std::optional<uint64_t> failing_since_ms_;
  std::string scratch_;

  std::optional<round_state> round_;
  bool snapshot_requested_ = false;
  uint64_t last_round_start_ms_ = 0;
  bool drops_pending_ = false;
  std::vector<uint64_t> era_behind_; ///< take_era_behind()
  /// Slots whose snapshot is in the pending batch (dirty again if it is lost).
  std::vector<uint32_t> pending_slots_;
  /// Holder states in the pending batch (written again if it is lost).
  std::vector<holder_id> pending_holder_states_;
  /// A truncation in the pending batch: once committed, the log files below
  /// it are released.
  std::optional<uint64_t> pending_floor_;
  uint64_t log_bytes_since_round_ = 0;
  uint64_t log_bytes_total_ = 0;
  /// Slot values the last finished round wrote (snapshot_log_percent).
  uint64_t last_round_bytes_ = 0;
  /// flush_if_idle: the activity seen last (log position + commits), since
  /// when, and whether this idle spell's flush was asked for.
  uint64_t idle_activity_ = 0;
  uint64_t idle_since_ms_ = 0;
  bool idle_flushed_ = false;
  shard_counters counters_;
};

} // namespace lmcc::actors
