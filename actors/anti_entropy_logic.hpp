// anti_entropy_logic: which slots a node repairs from which peer, without the
// actor (anti_entropy.hpp runs it on a timer).
//
// Copies of a slot drift apart only when an owner missed sub-batches: its
// peer's re-send buffer overflowed while it was away, or queued re-sends of
// two senders landed in another order than the originals. Each round a node
// compares the digest of every slot it shares with a peer (kv_index keeps an
// XOR of a hash of each entry per slot). A slot is repaired only when it
// differed *the same way* (same local and remote digest) in two rounds in a
// row: under ingest digests move and differ for a moment, and that is not
// drift. The repair copies the slot from the more senior owner -- the one
// that has been up longer, as the node that was away is the one that missed
// data; within seniority_tie of each other the lower node index wins -- so
// the two owners never copy from each other. Two things come before
// seniority, per slot: an owner that gained the slot in the last membership
// change is the junior one, and so is a *suspect* copy (slot_suspects below):
// one held by a node that stood still longer than the failure timeout. Such a
// node's uptime counts its freeze, yet its peers took it for down, wrote
// around it and may have lost what they queued for it (chaos seed 1033: a
// node frozen 10 s, then the other owner restarted cleanly with its queue;
// "longest up" copied the frozen node's stale slots over both peers'
// complete ones, and 5 entries were lost). This is Dynamo's anti-entropy
// with a "longest up wins" rule instead of vector clocks: a cache index can
// afford it (a wrong copy costs a cache miss or a fetch the worker answers
// with a miss, and the workers' next ops or full syncs correct it).
//
//   divergence_tracker t;
//   auto repair = t.compare(peer, slots, local_digests, remote_digests);
//   if (peer_is_senior(remote_uptime, peer, own_uptime, self)) copy `repair` from peer
//
// Context: divergence_tracker is owned by one actor and not thread-safe;
// slot_suspects is shared (the cluster node marks, the anti-entropy actor
// clears, the cluster service reports) and is. CAF-free.
#pragma once

#include "cluster/ring.hpp"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace lmcc::actors {

using cluster::node_index;

/// Uptimes closer than this count as equal (nodes started together).
inline constexpr uint64_t seniority_tie_ms = 1000;

/// Whether `peer`'s copies win over this node's: it has been up longer, or
/// about as long and it has the lower index.
bool peer_is_senior(uint64_t peer_uptime_ms, node_index peer, uint64_t own_uptime_ms,
                    node_index self) noexcept;

/// Which owner's copy of one slot wins a repair: `self_new`/`peer_new` gained
/// the slot in the last membership change, `*_suspect` are slot_suspects
/// flags, `peer_senior` is peer_is_senior(). True: copy the peer's.
bool peer_copy_wins(bool self_new, bool peer_new, bool own_suspect, bool peer_suspect,
                    bool peer_senior) noexcept;

/// This node's slots whose copy may lack writes: all of them after the node
/// stood still longer than the failure timeout (its peers took it for down
/// meanwhile). A slot stops being suspect when its digest equals another
/// owner's, which anti-entropy checks every round (a repair makes them equal).
///
/// The cluster node's tick finds a stall (membership::tick) and calls
/// mark_all(), but after a thaw the digest requests queued meanwhile may be
/// answered before that tick runs, with the stale copies presented as sound
/// (seen: a peer copied them at once). So the tick also reports each run to
/// ticked(), and whoever answers for this node's copies first asks
/// stood_still(), which marks them when no tick ran for too long.
/// A steady clock's now in ms, as slot_suspects takes it.
inline int64_t steady_now_ms() noexcept {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

class slot_suspects {
public:
  /// `stall_after`: the failure timeout, in ms.
  slot_suspects(uint32_t slot_count, int64_t stall_after_ms)
    : flags_(slot_count), stall_after_ms_(stall_after_ms) {}
  slot_suspects(const slot_suspects&) = delete;
  slot_suspects& operator=(const slot_suspects&) = delete;

  void mark_all() noexcept;
  /// The cluster node's tick ran at `now_ms` (a steady clock).
  void ticked(int64_t now_ms) noexcept { last_tick_ms_.store(now_ms, std::memory_order_relaxed); }
  /// True, after marking every slot, when no tick ran for longer than the
  /// failure timeout before `now_ms` (none ran yet: false).
  bool stood_still(int64_t now_ms) noexcept;
  void clear(uint32_t slot) noexcept;
  bool suspect(uint32_t slot) const noexcept;
  /// Suspect slots now (for /cluster/status).
  uint32_t count() const noexcept;
  uint32_t slot_count() const noexcept { return static_cast<uint32_t>(flags_.size()); }

  /// `slots`' flags as bit words (bit i of word i / 64), as a digest answer
  /// carries them after the digests.
  std::vector<uint64_t> bits(std::span<const uint64_t> slots) const;
  /// How many such words `n` slots take.
  static constexpr size_t word_count(size_t n) noexcept { return (n + 63) / 64; }
  /// Flag i of such words; false past their end (a peer that sent none).
  static bool bit(std::span<const uint64_t> words, size_t i) noexcept {
    return i / 64 < words.size() && ((words[i / 64] >> (i % 64)) & 1) != 0;
  }

private:
  std::vector<std::atomic<uint8_t>> flags_;
  int64_t stall_after_ms_;
  std::atomic<int64_t> last_tick_ms_{-1};
};

/// Slot copies of a peer that lack writes this node's copies hold: a home
/// whose peer link to that peer was down queued them for it, and told the
/// slot's other owners (and itself) which slots. If the home dies with the
/// queue (or restarts), nobody re-sends them, and the peer -- not frozen, so
/// its copies are not suspect, and maybe senior -- would win a repair with
/// its stale copy. A hinted copy counts as suspect on both sides of the
/// comparison: this node does not copy it, and its digest answers tell the
/// peer so (the peer copies this node's instead). Hints are kept per
/// (peer, source home); a home's hints end when its link delivered its whole
/// queue to the peer (the home says so), and every hint of a slot ends when
/// the two copies' digests are equal.
///
///   peer_lag_hints hints{4096};
///   hints.add("n1", "n3", slots);           // home n3's hint arrived
///   if (hints.lagging("n1", slot)) ...      // compare: the peer's copy loses
///   hints.clear_source("n1", "n3");         // n3 caught n1 up
///   hints.clear("n1", slot);                // the digests are equal now
///
/// The hints outlive a restart of this node (save(), given a hook, writes
/// them whenever they change; load_text() reads them back): a home that is
/// also an owner of the slots holds the only hint about its own complete
/// copies, and restarting makes it the junior owner.
///
/// Context: shared by the cluster service (adds, answers digests), the peer
/// links (add this node's own) and the anti-entropy actor (reads, clears);
/// thread-safe. CAF-free; the hook does the I/O.
class peer_lag_hints {
public:
  explicit peer_lag_hints(uint32_t slot_count) : slot_count_(slot_count) {}
  peer_lag_hints(const peer_lag_hints&) = delete;
  peer_lag_hints& operator=(const peer_lag_hints&) = delete;

  /// `save` gets the hints as text after every change, under the hints'
  /// lock (changes are rare: once per slot per peer's down period).
  void set_save(std::function<void(const std::string& text)> save) { save_ = std::move(save); }
  /// Reads what save() wrote ("peer source slot slot ...\n"); returns the
  /// slots marked. Lines that do not parse are skipped.
  size_t load_text(std::string_view text);

  /// Marks `slots` of `peer` as hinted by home `source`; returns how many
  /// were not marked by it yet.
  size_t add(const std::string& peer, const std::string& source, std::span<const uint64_t> slots);
  /// Home `source` delivered to `peer` everything it had queued.
  void clear_source(const std::string& peer, const std::string& source);
  /// Whether any home hinted `slot` of `peer`.
  bool lagging(const std::string& peer, uint32_t slot) const;
  /// Ends every hint of `slot` of `peer` (the copies are equal).
  void clear(const std::string& peer, uint32_t slot);
  /// `peer`'s hinted flags of `slots` as bit words (bit i of word i / 64);
  /// empty when none of them is hinted.
  std::vector<uint64_t> bits(const std::string& peer, std::span<const uint64_t> slots) const;
  /// Hinted (peer, source, slot) flags in all (for /cluster/status).
  size_t count() const;

private:
  using by_source = std::map<std::string, std::vector<bool>>;
  /// REQUIRES: mutex_ held.
  bool lagging_locked(const std::string& peer, uint32_t slot) const;
  void changed();

  uint32_t slot_count_;
  mutable std::mutex mutex_;
  std::map<std::string, by_source> flags_; ///< peer -> source -> slot flags
  std::function<void(const std::string&)> save_;
};

class divergence_tracker {
public:
  /// One round's comparison with `peer` of `slots` (local and remote digests,
  /// same order). Returns the slots that differed the same way last round.
  /// REQUIRES: the three spans have the same size.
  std::vector<uint32_t> compare(node_index peer, std::span<const uint32_t> slots,
                                std::span<const uint64_t> local, std::span<const uint64_t> remote);

  /// Forgets `peer` (it is down, or this node copies nothing from it).
  void forget(node_index peer);

  /// Slots that differ now, over every peer.
  size_t differing() const noexcept { return seen_.size(); }

private:
  std::map<std::pair<node_index, uint32_t>, std::pair<uint64_t, uint64_t>> seen_;
};

} // namespace lmcc::actors
