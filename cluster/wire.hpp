// wire: the records that only the nodes of a cluster say to each other, one
// struct per message part, each with the `inspect` CAF's serializer walks
// (as Broker declares its wire format). Fields are named, never positional:
// a `std::vector<uint64_t>` left in an actor interface is a list of one kind
// of thing (keys, slots, worker uids), not a record.
//
// The other types that cross nodes are defined where they belong and
// serialised in actors/inspect.hpp: LMCache's messages (messages/), a
// sub-batch (index/sub_batch.hpp), a slot's copy and what installing it did
// (index/slot_copy.hpp), the directory's rows and watermarks (registry/,
// persistence/). A membership record travels as its JSON text
// (cluster/membership_record.hpp), parsed and checked as a whole.
//
// Changing any of them, or what an actor of another node is sent, changes
// cluster_protocol_version (handshake.hpp): nodes of two versions refuse
// each other at the handshake, naming both versions.
//
//   self->send(link, ack_atom::value, std::vector<cluster::stream_ack>{{7, 12}});
//   self->request(service, 2s, digest_atom::value, slots)
//       .then([](cluster::slot_digests& d) { ... d.digests[i] is slots[i]'s ... });
//
// Each inspect names its fields in order and nothing else, so it needs no
// CAF header: this folder stays CAF-free (cmake/check_layout.cmake), and the
// actors register the types in actors/type_ids.hpp.
//
// Context: plain values; thread-compatible.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace lmcc::cluster {

/// A node says it is alive, every greet interval, to every joined peer
/// (greet_atom; the failure detector), with where its membership stands.
struct greeting {
  std::string node_id;
  /// It is stopping cleanly and hands its workers off first.
  bool leaving = false;
  /// Its membership record's epoch and identity (membership_record.hpp).
  uint64_t epoch = 0;
  uint64_t identity = 0;
  /// Its record is committed (not a joint change).
  bool committed = false;
  /// It holds the slots of its record (it copied every slot it gained).
  bool ready = false;
  /// It came back empty and copies its slots (refill_gate.hpp) ...
  bool refilling = false;
  /// ... and whether its index holds entries meanwhile.
  bool holds_index = false;
  /// It came back empty and its refill has not settled.
  bool unsettled = false;
  /// Its wall clock (ms since the epoch), for the peers' clock-offset check.
  uint64_t wall_ms = 0;
  /// A summary of its digests of the slots it shares with the greeted peer
  /// (actors/cluster/anti_entropy.hpp: shared_slots_summary); 0: none. Equal
  /// to the peer's own, that peer's anti-entropy need not compare them.
  uint64_t shared_summary = 0;
  friend bool operator==(const greeting&, const greeting&) = default;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, greeting& x) {
  return f(x.node_id, x.leaving, x.epoch, x.identity, x.committed, x.ready, x.refilling,
           x.holds_index, x.unsettled, x.wall_ms, x.shared_summary);
}

/// A shard's acknowledgement to a sender on another node (a peer_link):
/// the sub-batches of `stream` up to `number` are durable there. Cumulative
/// per stream; one commit's acks travel together, streams ascending.
struct stream_ack {
  uint64_t stream = 0;
  uint64_t number = 0;
  friend bool operator==(const stream_ack&, const stream_ack&) = default;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, stream_ack& x) {
  return f(x.stream, x.number);
}

/// How many entries of a holder a node counts (stats_atom: the slots it is
/// the primary of, or the slots it was asked to scan).
struct holder_count {
  uint64_t holder = 0;
  uint64_t count = 0;
  friend bool operator==(const holder_count&, const holder_count&) = default;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, holder_count& x) {
  return f(x.holder, x.count);
}

/// A node's digest of each slot it was asked of (digest_atom, anti-entropy):
/// `digests[i]` is the XOR of the entry hashes of the i-th slot asked, 0 for
/// a slot out of range. Fewer digests than slots asked: a malformed answer.
struct slot_digests {
  std::vector<uint64_t> digests;
  friend bool operator==(const slot_digests&, const slot_digests&) = default;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, slot_digests& x) {
  return f(x.digests);
}

/// A worker registration a node's directory knows: a shard drops the
/// holders of that worker's older incarnations (retire_atom).
struct registration_ref {
  uint64_t worker_uid = 0;
  uint64_t incarnation = 0;
  friend bool operator==(const registration_ref&, const registration_ref&) = default;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, registration_ref& x) {
  return f(x.worker_uid, x.incarnation);
}

} // namespace lmcc::cluster
