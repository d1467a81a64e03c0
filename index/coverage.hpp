// coverage: what one node's copy of each slot holds of each holder's stream,
// so that two copies of a slot can be compared holder by holder
// (docs/convergence.md gives the argument; this is its bookkeeping).
//
// Every event of a holder -- a batch of its ops, a drop, a full-sync batch --
// has a position in its stream (persistence::stream_pos), given by the
// worker's home in the order it accepts them. A sub-batch names its own
// position (`end`) and the position of the last sub-batch its sender sent
// this node (`prev`), and the placement epoch it was split under. Per holder a
// node keeps `applied`, the highest position it applied, and per slot one of:
//
//   following   the slot's entries of the holder are its stream's up to
//               `applied`: every sub-batch since reached this node and
//               covered the slot.
//   labeled(C)  ... up to at least C: a copy of another owner installed here,
//               or a slot the latest sub-batches did not cover (split under a
//               placement in which this node did not own it yet).
//   pending     the entries may lack ops at or below the holder's `hole`
//               (a sub-batch did not continue from `prev`: a sender's queue
//               was lost, this node came back empty, or it gained the slot);
//               they count only once a copy that covers the hole and every op
//               applied here since (`pos`) is installed. `uncovered`: gained,
//               and no sub-batch split under a placement that gives it to
//               this node came yet.
//
// A copy from another owner carries each holder's label (its position, or
// "uncertain" for a pending one) and is installed per holder when it is
// newer; two certain copies with the same label and different entries are a
// conflict that only the worker can settle (a full sync). Applying a suffix of
// a holder's ops again, in order, onto entries that already reflect them
// changes nothing, so a label may run behind what a copy holds.
//
//   coverage_book book{4096};
//   auto step = book.begin(sb);                  // before the ops
//   index.apply_where(sb.holder, sb.ops, [&](uint32_t s) { return book.wants(s); });
//   book.finish(sb);                             // after them
//   auto verdict = book.judge(h, slot, copy_pos, certain, same_entries);
//
// Context: owned by one kv_shard_core (or by a restarting node's replay); not
// thread-safe. CAF-free.
#pragma once

#include "index/ids.hpp"
#include "index/sub_batch.hpp"

#include <absl/container/flat_hash_map.h>

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace lmcc::actors {

enum class cover_state : uint8_t {
  following = 0,
  labeled = 1,
  pending = 2,
};

const char* to_string(cover_state s) noexcept;

/// One holder's copy of one slot, when it does not simply follow the stream.
struct slot_cover {
  cover_state state = cover_state::following;
  /// pending: gained, and no covering sub-batch yet.
  bool uncovered = false;
  /// labeled: the label; pending: the last position applied to the slot
  /// since it became pending (none: nothing).
  stream_pos pos;
  friend bool operator==(const slot_cover&, const slot_cover&) = default;
};

/// One holder's coverage on this node.
struct holder_cover {
  stream_pos applied;
  /// Pending slots may lack ops at or below this (the highest hole since the
  /// holder last had no pending slot).
  stream_pos hole;
  /// The placement epoch of the last sub-batch applied.
  uint64_t placement_epoch = 0;
  /// Per slot, when some slot does not follow; empty when all do.
  std::vector<slot_cover> slots;
  uint32_t exceptions = 0;
  uint32_t pending = 0;
};

/// What begin() decided for one sub-batch.
struct cover_step {
  /// Drop the holder's entries first (a drop sub-batch, or one of a newer
  /// era whose drop never reached this node), except in `keep` (copies
  /// installed here that are newer than the drop).
  bool reset = false;
  std::vector<uint32_t> keep;
  enum class ops_mode : uint8_t { all, none, some } ops = ops_mode::all;
  /// The sub-batch did not continue this node's copy (`prev` is past
  /// `applied`): every slot that followed now waits for a copy.
  bool hole = false;
  /// The sub-batch is older than everything it would touch (a stale
  /// sender's, or a re-send): nothing of it is applied.
  bool stale = false;
  /// Stale by its era, yet its ops lie past every op this node has of the
  /// newer era (the worker's seq only grows): its sender continues an era it
  /// did not know was over, and every copy that knows the newer one drops
  /// ops that may reach nobody else. Only the worker can give them back.
  bool era_behind = false;
};

/// What to do with another owner's copy of one holder's entries in one slot.
enum class install_verdict : uint8_t {
  keep,     ///< this node's copy is as new or newer, or the other is uncertain
  install,  ///< replace this node's entries of the holder in the slot
  conflict, ///< same label, different entries: only the worker can tell
  wait,     ///< this node's copy is pending and the other does not cover it yet
};

/// A node's ownership as one word per slot (how it crosses actors): the
/// placement epoch since which the node owns the slot, or not_owned.
inline constexpr uint64_t not_owned = UINT64_MAX;

class coverage_book {
public:
  explicit coverage_book(uint32_t slot_count);

  uint32_t slot_count() const noexcept { return slot_count_; }

  /// The slots this node owns and, per slot, the placement epoch since which
  /// it owns it without a break (0: from the start). Slots it gains become
  /// pending for every holder it knows (their entries here are partial).
  /// Empty `owned`: every slot, since epoch 0 (a single node).
  void set_ownership(std::vector<uint8_t> owned, std::vector<uint64_t> owned_since);
  /// The same from one word per slot (not_owned or the epoch since).
  void set_ownership(std::span<const uint64_t> words);

  bool owns(uint32_t slot) const noexcept { return owned_.empty() || owned_[slot] != 0; }

  // -- the write path -------------------------------------------------------------

  /// Decides what `sb` does and moves the holder's coverage to where it
  /// stands once the sub-batch's ops are applied; call wants() for each op's
  /// slot when the step says ops_mode::some, then finish().
  cover_step begin(const kv_sub_batch& sb);
  /// For ops_mode::some: whether the ops of `slot` are applied.
  bool wants(uint32_t slot) const noexcept { return decided_[slot] != 0; }
  /// After the ops: records which pending slots got ops.
  void finish(const kv_sub_batch& sb);

  // -- copies between owners ---------------------------------------------------------

  /// The label this node gives holder `h`'s entries in `slot`: nullopt when
  /// they are pending (uncertain). A holder this node never heard of has
  /// the position none (it holds nothing of it).
  std::optional<stream_pos> label(holder_id h, uint32_t slot) const;

  /// What to do with a copy of holder `h`'s entries in `slot` labeled `pos`
  /// (`certain`: not pending where it comes from); `same_entries`: the copy's
  /// entries equal this node's.
  install_verdict judge(holder_id h, uint32_t slot, const stream_pos& pos, bool certain,
                        bool same_entries) const;

  /// The copy judged `install` is in: its label now holds here.
  void installed(holder_id h, uint32_t slot, const stream_pos& pos);

  // -- what others read -----------------------------------------------------------------

  bool knows(holder_id h) const { return holders_.contains(h); }
  const holder_cover* find(holder_id h) const;
  /// The holders known here (any order).
  std::vector<holder_id> holders() const;
  /// How holder h's copy of `slot` stands.
  slot_cover cover(holder_id h, uint32_t slot) const;
  /// Whether any holder's copy of `slot` is pending, or the slot is blank
  /// and owned (a blank slot owned elsewhere is nothing this node reads or
  /// waits for, but it stays blank: its copy is no one's to take).
  bool slot_pending(uint32_t slot) const noexcept {
    return slot < slot_count_ && (pending_per_slot_[slot] > 0 || (blank_[slot] != 0 && owns(slot)));
  }

  // -- a node back empty ------------------------------------------------------------------

  /// This node came back with an empty store (a disk lost): what it holds of
  /// any slot says nothing of the holders it has not heard of since, so
  /// every slot is *blank* -- uncertain as a whole where owned, and offered
  /// to no one as a whole copy (slot_copy::complete) -- until a copy of an
  /// owner that is not blank itself is installed, or the slot is known to be
  /// lost everywhere (settle()). Slots owned elsewhere too: a node back
  /// empty may still be a previous owner of slots a membership change is
  /// moving, and its empty copy must not pass for theirs.
  void blank_all();
  /// One slot's entries were emptied (given away in a membership change):
  /// blank, so that its copy never passes for a whole one if the node still
  /// answers for it, or gets it back.
  void blank_slot(uint32_t slot);
  void settle(uint32_t slot);
  /// Every slot: nothing existed before (a new cluster: no peer holds an index).
  void settle_all();
  bool blank(uint32_t slot) const noexcept { return slot < slot_count_ && blank_[slot] != 0; }
  /// Pending (slot, holder) pairs.
  uint64_t pending_count() const noexcept;
  /// Slots whose cover changed since the last call (repeats possible): their
  /// next snapshot must record it.
  std::vector<uint32_t> take_changed() { return std::exchange(changed_, {}); }
  /// Forgets a holder (its entries are gone: a deregistration long past).
  void forget(holder_id h) { holders_.erase(h); }

  // -- restart -----------------------------------------------------------------------------

  /// A holder as a snapshot round left it (before its log suffix is replayed).
  void restore_holder(holder_id h, const stream_pos& applied, const stream_pos& hole,
                      uint64_t placement_epoch);
  /// A slot's stored cover of a holder (from the slot's snapshot).
  void restore_cover(holder_id h, uint32_t slot, const slot_cover& c, const stream_pos& hole);
  /// A slot stored blank.
  void restore_blank(uint32_t slot) {
    if (slot < slot_count_)
      blank_[slot] = 1;
  }

  /// The state a slot snapshot records for a blank slot (holder 0).
  static constexpr uint8_t blank_record_state = 3;
  /// Replay of the op-log record at `position`: begin() changes only the
  /// slots whose snapshot is older (`stamps[slot] < position`); a newer one
  /// holds the record's effect already. Null: every slot (live).
  void set_replay(const std::vector<uint64_t>* stamps, uint64_t position) noexcept {
    replay_stamps_ = stamps;
    replay_position_ = position;
  }

private:
  holder_cover& holder(holder_id h) { return holders_[h]; }
  /// Makes the per-slot vector exist (every slot following).
  void materialize(holder_cover& hc);
  void set_slot(holder_cover& hc, uint32_t slot, const slot_cover& c);
  /// Drops the per-slot vector when every slot follows again.
  void compact(holder_cover& hc);
  bool covered(uint32_t slot, uint64_t epoch) const noexcept {
    return owned_since_.empty() || epoch >= owned_since_[slot];
  }
  bool gained(uint32_t slot) const noexcept {
    return !owned_since_.empty() && owned_since_[slot] > 0;
  }
  bool replays(uint32_t slot) const noexcept {
    return !replay_stamps_ || (*replay_stamps_)[slot] < replay_position_;
  }
  /// The drop at `at`: entries go, every slot follows from `at`, but copies
  /// installed here that are newer than it.
  void reset(holder_cover& hc, const stream_pos& at, cover_step& step);

  uint32_t slot_count_;
  std::vector<uint8_t> owned_; ///< empty: every slot
  std::vector<uint64_t> owned_since_;
  bool ownership_known_ = false;
  uint64_t newest_gain_ = 0;
  absl::flat_hash_map<holder_id, holder_cover> holders_;
  /// begin()'s per-slot decision for ops_mode::some, and whether the last
  /// begin() took the per-slot path (finish() has work).
  std::vector<uint8_t> decided_;
  bool slow_ = false;
  std::vector<uint32_t> pending_per_slot_;
  std::vector<uint8_t> blank_;
  std::vector<uint32_t> changed_;
  const std::vector<uint64_t>* replay_stamps_ = nullptr;
  uint64_t replay_position_ = 0;
};

} // namespace lmcc::actors
