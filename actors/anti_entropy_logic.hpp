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
// the two owners never copy from each other. This is Dynamo's anti-entropy
// with a "longest up wins" rule instead of vector clocks: a cache index can
// afford it (a wrong copy costs a cache miss or a fetch the worker answers
// with a miss, and the workers' next ops or full syncs correct it).
//
//   divergence_tracker t;
//   auto repair = t.compare(peer, slots, local_digests, remote_digests);
//   if (peer_is_senior(remote_uptime, peer, own_uptime, self)) copy `repair` from peer
//
// Context: owned by one actor; not thread-safe. CAF-free.
#pragma once

#include "cluster/ring.hpp"

#include <cstdint>
#include <map>
#include <span>
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
