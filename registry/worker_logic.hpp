// worker_logic: what a WorkerActor does for one registered LMCache worker,
// without the actor: seq_num tracking per location (spec 4.3.2, and the check
// of the first op after a restart), turning each BatchedKVOperationMsg into
// sub-batches per destination shard, the acks that give the PULL socket its
// credits back, and the gate that holds increments back while a full sync
// runs (spec 4.8.5).
//
// Full sync and ordering. CAF orders messages per sender, and a sync is sent
// by the worker's session actor, not by the worker actor, so the order is made
// explicit with acks: on FullSyncStartMsg the gate closes (increments are
// discarded, as LMCache does), and the session may start only once every
// sub-batch this actor sent before is acknowledged (the session's first
// sub-batch drops the location); the gate opens again only when the session
// reports that the index acknowledged its last sub-batch. The same handshake
// holds when the destinations are other nodes.
//
// Re-registration and deregistration drop every holder of the worker with a
// newer incarnation, so a sub-batch of the old registration still in flight
// (from this actor or its session) is ignored by the shard when it lands.
//
//   worker_logic w{config, outbox};
//   w.on_push(pushed_msg{batch, 50});
//   w.on_ack(stream, number);
//
// Context: owned by one worker actor; not thread-safe. CAF-free; every effect
// goes through worker_outbox.
#pragma once

#include "index/handoff_marks.hpp"
#include "messages/lmcache_msgs.hpp"
#include "registry/sub_batch_stream.hpp"

#include <absl/container/flat_hash_map.h>

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace lmcc::actors {

/// A frame from the PULL socket for one worker, with the ingest credits it holds.
struct pushed_msg {
  msg::Msg msg;
  uint64_t credits = 0;
  /// The worker's registration (incarnation) the node that read the frame
  /// knew when it read it; 0: not stamped (it knew none). A KV batch read
  /// under an older registration than the entity's was sent before that
  /// registration, or read by a node that had not heard of it yet
  /// (worker_logic::on_push).
  uint64_t read_under = 0;
  /// Read by another node and forwarded to this one.
  bool forwarded = false;
};
using pushed_msgs = std::vector<pushed_msg>;

/// Where slots go: slot -> the set of destinations that own it, bit d for
/// destination d (a slot's primary and replicas in a cluster; one bit on a
/// node split into shards). The whole table is swapped when the cluster's
/// member set changes (membership_record.hpp); a reader loads it once per
/// batch, so a batch is split by one table.
class placement_cell {
public:
  /// The destinations of each slot, and the placement epoch (membership
  /// epoch) they belong to: sub-batches carry it (kv_sub_batch::placement_epoch).
  struct table {
    std::vector<uint64_t> masks;
    uint64_t epoch = 0;
    uint64_t operator[](size_t slot) const noexcept { return masks[slot]; }
  };
  explicit placement_cell(std::vector<uint64_t> masks, uint64_t epoch = 0)
    : table_(std::make_shared<const table>(table{std::move(masks), epoch})) {}
  std::shared_ptr<const table> load() const noexcept {
    return table_.load(std::memory_order_acquire);
  }
  void store(std::vector<uint64_t> masks, uint64_t epoch) {
    table_.store(std::make_shared<const table>(table{std::move(masks), epoch}),
                 std::memory_order_release);
  }

private:
  std::atomic<std::shared_ptr<const table>> table_;
};
/// Null: everything to destination 0.
using placement_table = std::shared_ptr<placement_cell>;

/// Calls fn(d) for every destination in `mask`.
template <class Fn>
void for_each_destination(uint64_t mask, Fn&& fn) {
  while (mask != 0) {
    fn(static_cast<uint32_t>(__builtin_ctzll(mask)));
    mask &= mask - 1;
  }
}

/// Where a full sync's session left the location's stream: per destination
/// the last position sent, and the placement it split with since when.
struct session_stream {
  std::vector<stream_pos> sent_to;
  uint64_t placement_epoch = UINT64_MAX;
  stream_pos placement_since;

  /// As words (local actors carry it so): the positions, then since, then epoch.
  std::vector<uint64_t> words() const;
  static session_stream from_words(const std::vector<uint64_t>& words);
};

/// What a full sync's session starts with.
struct session_params {
  std::string sync_id;
  std::string location;
  holder_id holder = 0;
  uint64_t worker_uid = 0;
  uint64_t incarnation = 0;
  /// The era the sync starts (its drop is the era's first event).
  uint64_t era = 0;
  uint64_t total_keys = 0;
  uint64_t batch_count = 0;
};

/// The effects a worker's logic asks for.
class worker_outbox {
public:
  virtual ~worker_outbox() = default;
  virtual void send(uint32_t destination, kv_sub_batch&& sb) = 0;
  virtual void give_credits(uint64_t n) = 0;
  /// A seq discontinuity (spec 4.3.2), reported once per batch.
  virtual void seq_gap(const std::string& location, uint64_t expected, uint64_t got) = 0;
  /// A batch of this entity (of registration `incarnation`) went back to seq
  /// 0 on a location that had seqs: a new process (or a duplicated first
  /// frame) whose registration this entity has not heard of (restart_race.hpp).
  virtual void seq_started(uint64_t incarnation) = 0;
  /// Ask this worker alone for a full sync at its next heartbeat.
  virtual void request_resync(const std::string& reason) = 0;
  /// A location reported for the first time (the Directory names its holder).
  virtual void new_location(const std::string& location) = 0;
  /// The session (spawned on first use) takes over a new sync and buffers its
  /// batches until go.
  virtual void session_start(const session_params& p) = 0;
  virtual void session_go() = 0;
  /// A FullSyncBatchMsg or FullSyncEndMsg for the session.
  virtual void session_input(pushed_msg&& m) = 0;
  /// Call worker_logic::flush_durable() a little later (once per wish:
  /// wishes while one is scheduled are covered by it).
  virtual void durable_flush_wanted() = 0;
};

struct worker_config {
  uint64_t uid = 0;
  std::string instance_id;
  msg::wire_int worker_id;
  uint64_t incarnation = 0;
  uint32_t slot_count = 4096;
  /// Destination shards and the slot -> destination table.
  uint32_t destinations = 1;
  placement_table placement;
  /// The destinations that keep this worker's seq watermarks, bit d for
  /// destination d: every batch's watermark reaches each of them, even with no
  /// op of their slots, so a restart of this node, or the node that takes the
  /// worker over when its home dies (handoff.hpp), finds the worker's latest
  /// seq. A single node: its shard; a cluster: every owner of the worker's
  /// uid slot. 0 means destination 0.
  uint64_t mark_mask = 1;
  /// With a placement: the marks go to the current owners of this slot (the
  /// uid's slot) instead of mark_mask, so they follow a membership change.
  std::optional<uint32_t> mark_slot;
  /// This actor's stream ids are [stream_base, stream_base + destinations).
  uint64_t stream_base = 0;
  /// Taken over from another node (handoff.hpp): the actor parks the frames
  /// it gets until the directory hands it the worker's marks.
  bool await_takeover = false;
  /// Restored after a restart: per location the seq tracker and the seq the
  /// first op must carry (nullopt: no check); other locations must start at 0.
  bool restored = false;
  /// Cluster only: in the first fault_window_batches batches of a location
  /// after a re-registration, a seq gap proves a loss. An older process's
  /// frames can reach the home after the new process's first ones (handed
  /// back by the node the worker left, forwarded from a node that held them
  /// through a freeze or a restart) and be taken for the new process's;
  /// one LMCache controller reads a worker's frames from one queue and does
  /// not see that order (stale entries would be kept). Guarded by
  /// worker_logic_cluster_test's
  /// in_a_cluster_a_gap_after_a_reregistration_proves_old_frames_or_a_loss.
  bool strict_after_reregistration = false;
  /// This node's directory made the registration (a new worker, or one
  /// restored from this node's disk) rather than a peer's: a frame read here
  /// under an older registration was read before this one was published, so
  /// it is certainly an older process's (on_reset sets it too).
  bool registered_here = true;
  std::map<std::string, uint64_t> last_seq;
  std::map<std::string, std::optional<uint64_t>> expected_next;
  std::vector<std::string> locations;
  /// Per location, where its stream stands (restored or handed over); a
  /// location not listed starts at its registration's drop.
  std::map<std::string, stream_pos> start_pos;
  /// A clock for new eras (full syncs, a reset inside a registration):
  /// milliseconds, growing; an era is never below the one before it.
  /// Null: eras count up from the last one.
  std::function<uint64_t()> era_clock;
};

class worker_logic {
public:
  /// A gap at most this many batches before a peer's loss counts as proof.
  static constexpr uint32_t recent_gap_batches = 64;
  /// After a peer's loss or a takeover, a gap in this many batches of a
  /// location proves a loss (LMCache otherwise only counts a gap).
  static constexpr uint32_t fault_window_batches = 256;

  /// Most batches one sync may announce (bounds the session's bitmap).
  static constexpr uint64_t max_batch_count = uint64_t{1} << 20;

  worker_logic(worker_config cfg, worker_outbox& out);

  /// One message of this worker from the PULL socket.
  void on_push(pushed_msg&& m);

  /// The messages of one PULL round follow, until end_round(): the batches
  /// of a location that each continue its seq are sent as one sub-batch (per
  /// destination) carrying their ops, the last one's mark and all their
  /// credits, instead of one per message. A worker sends many small batches
  /// (50 ops); each sub-batch costs an actor message, an op-log record and an
  /// ack. Anything else (another location, a gap, a sync frame, a seq that
  /// starts over) sends what is held first, so order is kept.
  void begin_round() noexcept { in_round_ = true; }
  void end_round() {
    in_round_ = false;
    flush_held();
  }

  /// FullSyncStartMsg (spec 4.8.2): accepted unless another sync id runs.
  msg::FullSyncStartRetMsg on_sync_start(const msg::FullSyncStartMsg& m);

  void on_ack(uint64_t stream, uint64_t up_to);

  /// Tells the owners of each location whose last batch became durable (no
  /// batch of it unacknowledged now) that it is durable: one mark-only
  /// sub-batch to each owner that got a batch since the last time. Called
  /// after outbox.durable_flush_wanted(), not at once: a worker that keeps
  /// sending tells them in its next batches, and the flush would double the
  /// sub-batches of a steady stream. `only_if_quiet`: a location that sent a
  /// batch since the wish waits for another (false: drains and handoffs,
  /// which must leave every owner told).
  void flush_durable(bool only_if_quiet = true);

  /// The session's sync ended (completed: the index acknowledged all of it);
  /// `sent_to`: where the session left each destination's stream (the
  /// stream continues from there).
  void on_session_ended(const std::string& sync_id, bool completed,
                        const session_stream& left = {});

  /// A re-registration: everything of the old incarnation is dropped.
  void on_reset(uint64_t incarnation);

  /// Deregistration: everything is dropped; finished() once acknowledged.
  void on_retire();

  /// A peer node died: frames of this worker may have died with it (read by
  /// its PULL socket, or forwarded through it). The next batch of every
  /// tracked location must continue its seq; one that does not proves the
  /// loss and asks this worker alone for a full sync ("frames_lost_with_node").
  /// A gap seen in the last recent_gap_batches batches (the loss is noticed
  /// a little after the frames went missing) asks at once, and so does one in
  /// the next fault_window_batches batches.
  void check_next_batches();

  /// The seq the next op of `location` should carry, when known.
  std::optional<uint64_t> next_seq(const std::string& location) const;

  /// Every location's seq tracker as a watermark, for the node that takes
  /// this worker over (handoff.hpp): tracking N, resynced (no check), none
  /// (the next op starts at 0) or syncing (a full sync was cut short: the new
  /// home asks for it again).
  std::vector<location_mark> marks() const;

  bool finished() const noexcept { return retired_ && out_stream_.idle(); }
  bool gate_open() const noexcept { return gate_ == gate::open; }
  uint64_t discarded_batches() const noexcept { return discarded_; }
  /// KV batches dropped as read under an older registration (on_push).
  uint64_t stale_read_dropped() const noexcept { return stale_read_dropped_; }
  const sub_batch_stream& stream() const noexcept { return out_stream_; }
  uint64_t incarnation() const noexcept { return cfg_.incarnation; }

private:
  enum class gate : uint8_t {
    open,     ///< increments flow
    draining, ///< a sync was accepted; waiting for this actor's acks
    syncing,  ///< the session runs
  };

  struct location_state {
    holder_id holder = 0;
    /// The position of the last event of this location's stream, and of the
    /// last one sent to each destination (a sub-batch's `prev`).
    stream_pos pos;
    std::vector<stream_pos> sent_to;
    /// Where the event being sent began (the position before its first
    /// batch), the placement epoch the location last split with, and where
    /// the stream stood when it began splitting with it (a sub-batch's
    /// placement_since); unknown_epoch until the first split.
    stream_pos event_from;
    uint64_t placement_epoch = unknown_epoch;
    stream_pos placement_since;
    std::optional<uint64_t> last_seq;
    /// After a restore or a re-registration: the seq the first op must carry
    /// (checked once).
    std::optional<std::optional<uint64_t>> expect_first;
    /// Why a mismatch of expect_first asks for a full sync.
    const char* expect_reason = "seq_gap_after_restart";
    /// Batches since the last seq gap (capped): a gap just before a peer's
    /// loss was noticed is one its death caused.
    uint32_t batches_since_gap = recent_gap_batches + 1;
    /// Batches left in which a gap proves frames lost to a fault (after a
    /// peer's loss or a takeover): frames held by a frozen or dying node can
    /// surface later than the next batch.
    uint32_t fault_window = 0;
    /// What a gap within fault_window proves (the full sync's reason).
    const char* fault_reason = "frames_lost_with_node";
    /// The seq the next op should carry, when known.
    std::optional<uint64_t> next_seq() const {
      if (expect_first)
        return *expect_first;
      return last_seq ? std::optional{*last_seq + 1} : std::nullopt;
    }
    std::vector<bool> intro_sent; ///< per destination
    /// Cluster only: the seq up to which every sub-batch of this location
    /// was acknowledged by all its destinations (kv_sub_batch::durable_seq),
    /// and the batches still waiting for acks, each with its (destination,
    /// number) pairs.
    std::optional<uint64_t> durable;
    struct unacked_batch {
      uint64_t seq = 0;
      std::vector<std::pair<uint32_t, uint64_t>> numbers;
    };
    std::deque<unacked_batch> unacked;
    /// Destinations sent a batch's sub-batch since the last flush: their
    /// durable seq is behind, and any shard's marks may serve a takeover.
    uint64_t behind_mask = 0;
    /// The durable seq moved since the owners in behind_mask were told, and
    /// the count of tracked batches sent when that was last wished.
    bool durable_untold = false;
    uint64_t untold_since_batch = 0;
    uint64_t tracked_batches = 0;
    /// First reported after a re-registration: a batch starting at seq 0
    /// after others is a newer process's first, and the ones before it were
    /// an older process's frames read late (worker_logic::on_batch).
    bool after_reregistration = false;
    /// Told to the directory by this entity (worker_logic::location).
    bool announced = false;
  };

  /// Ops of consecutive batches of one location, not sent yet (begin_round).
  static constexpr uint64_t unknown_epoch = UINT64_MAX;

  struct held_batches {
    bool active = false;
    std::string location;
    std::vector<kv_op> ops;
    seq_mark mark;
    uint64_t credits = 0;
  };

  /// Moves `loc`'s stream past a batch whose highest seq is `max_seq`.
  static void advance(location_state& loc, uint64_t max_seq);
  /// Starts a new era of `loc` (its drop's position); every destination is
  /// told by the drop.
  void new_era(location_state& loc, const stream_pos& at);
  /// A new era number above `loc`'s.
  uint64_t next_era(const location_state& loc) const;

  location_state& location(const std::string& name);
  /// Sends what begin_round() held back.
  void flush_held();
  /// True when batch `m` continues the held batches' seq on their location.
  bool continues_held(const msg::BatchedKVOperationMsg& m) const;
  void on_batch(const msg::BatchedKVOperationMsg& m, uint64_t credits);
  /// True (and the frame's credits returned) when KV frame `m` was read under
  /// an older registration than this entity's and is dropped.
  bool read_before_registration(const pushed_msg& m);
  void send_ops(location_state& loc, const std::string& name, std::vector<kv_op>&& ops,
                std::optional<seq_mark> mark, uint64_t credits, uint64_t also_mark_to = 0);
  void drop_all(uint64_t incarnation);
  /// Drops every entry of one location (a drop sub-batch to every
  /// destination), starting the era whose first event is at `at`.
  void drop_location(location_state& loc, const stream_pos& at);
  /// The worker's seq started again: the durable seq and the batches waiting
  /// for acks belong to the sequence before.
  static void forget_durable(location_state& loc);
  /// Moves each location's durable seq past its fully acknowledged batches;
  /// a location whose last batch just became durable asks for a
  /// flush_durable(), so that a worker gone quiet is not taken for one with
  /// a gap.
  void advance_durable();
  void maybe_go();

  worker_config cfg_;
  worker_outbox& out_;
  sub_batch_stream out_stream_;
  absl::flat_hash_map<std::string, location_state> locations_;
  gate gate_ = gate::open;
  std::string sync_id_;
  bool retired_ = false;
  bool reregistered_ = false; ///< on_reset happened
  /// A frame read under an older registration asked for a full sync; the
  /// next one asks again only after that sync started (or a new registration).
  bool stale_read_asked_ = false;
  uint64_t stale_read_dropped_ = 0;
  uint64_t discarded_ = 0;
  std::vector<std::vector<kv_op>> split_; ///< per destination, reused
  std::string sync_location_;             ///< the location the running sync rebuilds
  bool in_round_ = false;
  held_batches held_;
};

} // namespace lmcc::actors
