// ids: the identities every node agrees on without asking anyone.
//
// - worker_uid: a 64-bit hash of (instance_id, worker_id). It names a worker in
//   the Directory, on disk and on the wire between nodes, and it places the
//   worker's entity on the ring. Re-registering the same worker gives the same
//   uid; each registration also gets an `incarnation` (see registry.hpp) that
//   fences writes of an older incarnation.
// - holder_id: a 63-bit hash of (instance_id, worker_id, location). The index
//   stores it per entry. Bit 63 is always clear (the index uses it to mark a
//   key with several holders).
//
// Why hashes and not counters: a counter is node-local (two nodes would hand
// out the same number to different workers, and a counter that wraps aliases
// holders: after 2^24 registrations the old `worker_num << 8 | location` did),
// whereas a hash of the identity is the same on every node and on disk for the
// lifetime of the data. Two different identities with the same hash are
// astronomically unlikely (2^-63 per pair); the registry detects the case and
// refuses the newcomer with a clear error instead of merging two workers.
//
// The hash is FNV-1a over a length-prefixed encoding of the fields, finished
// with splitmix64's mixer (both in cluster/hash.hpp, shared with the ring); it
// is part of the disk format (persistence/schema.hpp).
//
//   uint64_t uid = worker_uid("vllm-0", msg::wire_int{0});
//   holder_id h = make_holder_id("vllm-0", msg::wire_int{0}, "LocalCPUBackend");
//
// Context: pure functions; thread-safe. CAF-free.
#pragma once

#include "cluster/hash.hpp"
#include "messages/wire_int.hpp"
#include "persistence/schema.hpp"

#include <cstdint>
#include <string_view>

namespace lmcc::actors {

/// A (worker, location) as the index stores it; bit 63 is clear.
using holder_id = uint64_t;

/// Mask of the bits a holder_id may use.
constexpr uint64_t holder_id_mask = (uint64_t{1} << 63) - 1;

using cluster::mix64;
using cluster::slot_of;

/// The identity fields as the ids hash them: strings length-prefixed, a
/// wire_int as its sign byte then its 64-bit pattern (cluster/hash.hpp does the
/// hashing; this adds the wire_int field).
class identity_hasher {
public:
  constexpr identity_hasher& add(std::string_view bytes) noexcept {
    h_.add(bytes);
    return *this;
  }
  constexpr identity_hasher& add(const msg::wire_int& v) noexcept {
    h_.add_byte(v.is_negative() ? 1 : 0).add_u64(v.bits());
    return *this;
  }
  constexpr uint64_t finish() const noexcept { return h_.finish(); }

private:
  cluster::fnv1a_hasher h_;
};

/// The worker's cluster-wide id.
constexpr uint64_t worker_uid(std::string_view instance_id,
                              const msg::wire_int& worker_id) noexcept {
  return identity_hasher{}.add(instance_id).add(worker_id).finish();
}

/// The (worker, location)'s cluster-wide holder id.
constexpr holder_id make_holder_id(std::string_view instance_id, const msg::wire_int& worker_id,
                                   std::string_view location) noexcept {
  return identity_hasher{}.add(instance_id).add(worker_id).add(location).finish() & holder_id_mask;
}

/// The durable vocabulary the index shares with the store.
using persistence::kv_op;
using persistence::seq_mark;
using persistence::seq_state;
using persistence::stream_pos;

} // namespace lmcc::actors
