// sub_batch: the unit of ingest between actors and, in a cluster, between
// nodes: the ops of one worker batch (or a full-sync batch, or a holder drop)
// that go to one destination shard, with what the destination needs to apply,
// log and acknowledge them.
//
// Flow control and acknowledgement (DESIGN.md "Flow control"): each sender
// (a worker actor, a full-sync session) numbers its sub-batches per
// destination, 1, 2, 3, ... in `stream` (a random id of the sender); the
// destination answers with a cumulative ack (stream, number) once a sub-batch
// is applied to the index and, with persistence on, committed to the op log.
// The sender returns the sub-batch's ingest credits on that ack, so what is
// in flight from a PULL socket to the disk is bounded. The same scheme crosses
// nodes: an ack from a remote primary means the sub-batch is there (and, with
// replicas, held by them).
//
// Context: a plain value type; it crosses CAF's middleman (type_ids.hpp
// registers it with an `inspect`). CAF-free.
#pragma once

#include "index/ids.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace lmcc::actors {

struct kv_sub_batch {
  /// The sender's stream (acks go to the sender under this id).
  uint64_t stream = 0;
  /// Position in the stream to this destination, from 1.
  uint64_t number = 0;
  holder_id holder = 0;
  /// The worker's registration this sub-batch belongs to; a destination drops
  /// sub-batches of an incarnation older than one it has seen a drop for.
  uint64_t incarnation = 0;
  /// Drop every entry of `holder` (ops is empty): the start of the era of `end`.
  bool drop = false;
  /// Stream positions (persistence::stream_pos, docs/convergence.md): `end`
  /// is this sub-batch's own position in the holder's stream, `prev` the one
  /// of the last sub-batch its sender sent this destination (or, for the
  /// first one of a new sender, where that sender took the stream over).
  /// A destination whose copy is not at `prev` missed something.
  stream_pos prev;
  stream_pos end;
  /// The placement (membership epoch) the ops were split under: a slot the
  /// destination gained in a later epoch got none of its ops from this one.
  uint64_t placement_epoch = 0;
  /// Where the sender's stream stood when it began splitting with that
  /// placement: a slot the destination gained only gets ops from there on,
  /// whatever `prev` says of the slots it had before.
  stream_pos placement_since;
  /// The holder's seq watermark once applied, when it moves.
  bool has_mark = false;
  seq_mark mark;
  /// The seq up to which every sub-batch the sender sent for this holder
  /// was acknowledged by all of its destinations (a cluster's worker actors
  /// only). A mark can reach one owner while the ops of the same batch for
  /// another owner die in a killed node's queue; a node that takes the
  /// worker over trusts only this much (kv_shard_core::marks_of), so such a
  /// loss shows as a seq gap and a full sync instead of vanishing.
  bool has_durable = false;
  uint64_t durable_seq = 0;
  /// Names the holder (its worker and location) for the op log, on the first
  /// sub-batch a sender sends for it.
  bool has_intro = false;
  uint64_t intro_worker_uid = 0;
  std::string intro_location;
  std::vector<kv_op> ops;

  friend bool operator==(const kv_sub_batch&, const kv_sub_batch&) = default;
};

/// Positions as four words each (how they cross between local actors).
inline std::vector<uint64_t> position_words(const std::vector<stream_pos>& ps) {
  std::vector<uint64_t> out;
  out.reserve(ps.size() * 4);
  for (const auto& p : ps)
    out.insert(out.end(), {p.incarnation, p.era, p.n, p.sub});
  return out;
}

inline std::vector<stream_pos> positions_of(const std::vector<uint64_t>& words) {
  std::vector<stream_pos> out;
  for (size_t i = 0; i + 3 < words.size(); i += 4)
    out.push_back(stream_pos{words[i], words[i + 1], words[i + 2], words[i + 3]});
  return out;
}

} // namespace lmcc::actors
