// owner_reads: one lookup's reads from the owners of its keys' slots, hedged
// and re-routed, so that an owner that stops answering delays an answer by
// about the hedge delay and never leaves it partial while another owner of
// those slots is reachable.
//
// Why: a frozen node (SIGSTOP, a VM pause) or one cut off by a partition
// answers nothing and closes nothing. Until the failure detector takes it for
// down (lmcc_cluster_failure_timeout_ms) the cluster table still routes its
// slots' reads to it. Unhedged, such a read would wait the whole internal
// timeout (10 s) and the lookup then answer without those slots' holders: a
// shorter prefix, i.e. a cache miss that one controller would not have caused
// (lookups must be complete within the detection timeout + 1 s). So, for the
// keys an owner has not answered:
//  - after `hedge_delay` they are asked again of the next owner of their slots
//    that holds all of them (the first answer wins; a replica may be a few ms
//    behind the primary, which the AP index of DESIGN.md accepts: a stale
//    answer costs a miss; an owner still copying slots a membership change gave
//    it is never hedged to, or its partial answer would win the race);
//  - every `recheck`, an owner the table now calls down is given up and its
//    keys go to the next owner at once;
//  - a send that fails or a connection that breaks re-routes at once;
//  - an owner that says its copy of a key's slot is uncertain (it missed ops
//    and waits for another owner's copy: peer_read_uncertain) answers only
//    provisionally: the key is asked of the next owner. A certain answer
//    replaces a provisional one; provisional answers add up (the union of
//    their holders). An uncertain copy lacks ops another owner applied --
//    admits as well as evicts -- so no one of them is the better answer, and
//    taking the first one kept a copy's gap even when the next owner held
//    the entry (a gained slot still blank answered first). The union misses
//    no entry any owner holds; at worst it names a holder that evicted the
//    chunk, which costs the router what a miss costs. This node's own copy
//    joins the same way when it is uncertain (local_uncertain).
// Keys stay unanswered only when no owner of their slot is reachable.
//
// Context: CAF-free. The node wires `owner_read_routes` to its cluster table
// (apps/lmcc/node_cluster.cpp); tests wire it to peer_read_servers on
// loopback (tests/gateway/owner_reads_test.cpp). Runs on the caller's thread.
#pragma once

#include "gateway/peer_read.hpp"

#include <chrono>
#include <cstdint>
#include <functional>
#include <span>
#include <string>

namespace lmcc::gateway {

/// A node of the cluster table (cluster::node_index).
using owner_index = uint16_t;
inline constexpr owner_index no_owner = 0xffff;

struct owner_read_options {
  /// The whole read's bound: keys unanswered by then stay unanswered.
  /// Default: 10 s (the node passes its internal timeout)
  std::chrono::milliseconds timeout{10'000};
  /// How long an owner may take before its keys are also asked of the next
  /// owner. Idle loopback reads take ~0.1 ms and loaded ones a few ms, so
  /// hedges are rare unless an owner is stuck. 0: never hedge (a stuck owner
  /// then costs up to the failure timeout). Default: 250 ms
  std::chrono::milliseconds hedge_delay{250};
  /// How often the table's liveness is read again while answers are awaited.
  /// Default: 20 ms
  std::chrono::milliseconds recheck{20};
};

/// How one lookup finds its keys' owners; the node answers from its table.
struct owner_read_routes {
  owner_index self = 0;
  /// The owner to read item `i` (an index into the keys) from, passing over
  /// `avoid`: `self` for the local index, no_owner when none is left. With
  /// `complete_only` (a hedge: the slow owner's call stays open) only an owner
  /// known to hold all of the item's slot; otherwise (a first ask, or an owner
  /// given up) any owner left, since a partial answer beats none.
  std::function<owner_index(uint32_t i, std::span<const owner_index> avoid, bool complete_only)>
      owner;
  /// The owner's key-read access endpoint; "" when it is not known.
  std::function<std::string(owner_index)> endpoint;
  /// Reads the liveness the next calls of owner() and reachable() use.
  std::function<void()> refresh;
  /// False once the failure detector took the owner for down.
  std::function<bool(owner_index)> reachable;
  /// Reads `items` from the local index and records their holders: in place
  /// of what they had, or with `add` into it (a union: provisional answers).
  std::function<void(std::span<const uint32_t> items, bool add)> read_local;
  /// Item `i`'s holders as another owner answered them, in place of what it
  /// had or (`add`) into it.
  std::function<void(uint32_t i, std::span<const uint64_t> holders, bool add)> fill;
  /// Whether this node's copy of item `i`'s slot is uncertain (its answer is
  /// provisional). Empty: never.
  std::function<bool(uint32_t i)> local_uncertain;
};

/// What one lookup's reads took beyond the plain path (the node counts them).
struct owner_read_outcome {
  uint32_t hedged = 0;     ///< owners whose keys were asked again after hedge_delay
  uint32_t rerouted = 0;   ///< owners given up (down, unreachable, broken)
  uint32_t unanswered = 0; ///< keys no owner answered
  uint32_t uncertain = 0;  ///< answers from a copy its owner was uncertain of, asked again
  /// Keys answered only by owners uncertain of their copies (this node's
  /// included; no certain owner answered): the answer may be short.
  uint32_t provisional = 0;
  /// The first such key, or an unanswered one (an index into the keys);
  /// keys.size() when every key had a certain answer.
  uint32_t first_unsure = 0;
};

/// Reads the holders of `keys` from their owners: every owner's request
/// leaves before any answer is awaited, and the local read happens meanwhile.
owner_read_outcome read_owners(std::span<const uint64_t> keys, const owner_read_routes& routes,
                               peer_read_client& client, const owner_read_options& options);

} // namespace lmcc::gateway
