// cluster_service: what a node does for the other nodes of its cluster,
// besides taking sub-batches (its shard), requests (its directory) and key
// reads (gateway/peer_read.hpp, a socket of its own):
// - counts: the entries per holder in the slots this node is the primary
//   of, or in slots a dead node was the primary of (/controller/workers);
// - anti-entropy and slot moves: slot digests, and this node's copy of a slot;
// - forwarded frames: PULL-socket frames of workers whose entity lives here
//   but whose PUSH socket is connected to another node. They go to the
//   worker's actor as if they had arrived here; the answer comes once that
//   actor has everything acknowledged, which is when the sending node gives
//   the frames' ingest credits back (flow control across nodes). A
//   DeRegisterMsg among them goes to the directory after the frames before it.
//
//   self->request(service, 2s, stats_atom::value)
//       .then([](std::vector<cluster::holder_count>& counts) { ... });
//
// Context: a CAF actor; one per node.
#pragma once

#include "actors/cluster/cluster_table.hpp"
#include "actors/deadline_book.hpp"
#include "actors/directory.hpp"
#include "actors/ingest_routes.hpp"
#include "actors/kv_shard.hpp"
#include "actors/type_ids.hpp"
#include "cluster/wire.hpp"
#include "index/kv_index.hpp"

#include <memory>
#include <span>

namespace lmcc::actors {

using cluster_service_actor = caf::typed_actor<
    caf::replies_to<push_atom, pushed_msgs>::with<bool>,
    // Entries per holder in the slots this node is primary of.
    caf::replies_to<stats_atom>::with<std::vector<cluster::holder_count>>,
    // The same over the given slots (a dead node's primary
    // slots, counted by a replica): a scan of those slots.
    caf::replies_to<stats_atom, std::vector<uint64_t>>::with<std::vector<cluster::holder_count>>,
    // Anti-entropy: the digest of each given slot; and this node's copy
    // of one slot, every holder labeled (slot_copy.hpp, from its shard).
    caf::replies_to<digest_atom, std::vector<uint64_t>>::with<cluster::slot_digests>,
    caf::replies_to<copy_atom, uint64_t>::with<slot_copy>,
    // Time to answer pushes whose workers did not drain within the timeout.
    caf::reacts_to<tick_atom>>;

struct cluster_service_config {
  std::shared_ptr<const kv_index> index;
  std::shared_ptr<route_board> routes;
  directory_actor directory;
  std::chrono::milliseconds timeout{10000};
  /// Counts a named event in the node's metrics.
  std::function<void(std::string_view)> count_event;
  /// Frames of a worker homed elsewhere by now (its home moved while they
  /// travelled) go on to that node through this.
  std::shared_ptr<cluster_board> board;
  std::function<void(uint16_t node, pushed_msgs msgs)> forward;
  /// This node's shard: slot copies come from it (it owns the coverage).
  kv_shard_actor shard;
};

struct cluster_service_state {
  static inline const char* name = "lmcc.cluster_service";
  cluster_service_config cfg;
  /// Each forwarded push waiting for its workers' drains, with what its
  /// timeout does (answer false).
  deadline_book<std::function<void()>> deadlines;
  bool expiry_tick_armed = false;
};

cluster_service_actor::behavior_type
cluster_service_main(cluster_service_actor::stateful_pointer<cluster_service_state> self,
                     cluster_service_config cfg);

/// This node's share of the entries per holder (the slots it is the primary
/// of: kv_index::set_share_slots).
std::vector<cluster::holder_count> share_counts(const kv_index& index);

/// Entries per holder in `slots` (scans the slots).
std::vector<cluster::holder_count> slot_counts(const kv_index& index,
                                               std::span<const uint64_t> slots);

/// The digest of each of `slots` (0 for one out of range), in their order.
cluster::slot_digests digests_of(const kv_index& index, std::span<const uint64_t> slots);

} // namespace lmcc::actors
