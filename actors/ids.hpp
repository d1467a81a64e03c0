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
// with splitmix64's mixer; it is part of the disk format (persistence/schema.hpp).
//
//   uint64_t uid = worker_uid("vllm-0", msg::wire_int{0});
//   holder_id h = make_holder_id("vllm-0", msg::wire_int{0}, "LocalCPUBackend");
//
// Context: pure functions; thread-safe. CAF-free.
#pragma once

#include "messages/wire_int.hpp"
#include "persistence/schema.hpp"

#include <cstdint>
#include <string_view>

namespace lmcc::actors {

/// A (worker, location) as the index stores it; bit 63 is clear.
using holder_id = uint64_t;

/// Mask of the bits a holder_id may use.
constexpr uint64_t holder_id_mask = (uint64_t{1} << 63) - 1;

/// splitmix64's finalizer: spreads chunk hashes (already hashes, but not
/// uniformly in their low bits after CPython's mod 2^61-1) over slots.
constexpr uint64_t mix64(uint64_t x) noexcept {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}

/// slot = mix64(key) mod slot_count; REQUIRES: slot_count is a power of two.
constexpr uint32_t slot_of(uint64_t key, uint32_t slot_count) noexcept {
  return static_cast<uint32_t>(mix64(key) & (slot_count - 1));
}

/// FNV-1a, 64 bit, fed field by field (each field length-prefixed so that
/// ("ab", "c") and ("a", "bc") differ).
class identity_hasher {
public:
  constexpr identity_hasher& add(std::string_view bytes) noexcept {
    add_u64(bytes.size());
    for (char c : bytes)
      byte(static_cast<uint8_t>(c));
    return *this;
  }
  constexpr identity_hasher& add(const msg::wire_int& v) noexcept {
    byte(v.is_negative() ? 1 : 0);
    add_u64(v.bits());
    return *this;
  }
  constexpr uint64_t finish() const noexcept { return mix64(state_); }

private:
  constexpr void byte(uint8_t b) noexcept {
    state_ ^= b;
    state_ *= 0x100000001b3ULL;
  }
  constexpr void add_u64(uint64_t v) noexcept {
    for (int i = 0; i < 8; ++i)
      byte(static_cast<uint8_t>(v >> (8 * i)));
  }
  uint64_t state_ = 0xcbf29ce484222325ULL;
};

/// The worker's cluster-wide id.
constexpr uint64_t worker_uid(std::string_view instance_id, const msg::wire_int& worker_id) noexcept {
  return identity_hasher{}.add(instance_id).add(worker_id).finish();
}

/// The (worker, location)'s cluster-wide holder id.
constexpr holder_id make_holder_id(std::string_view instance_id, const msg::wire_int& worker_id,
                                   std::string_view location) noexcept {
  return identity_hasher{}.add(instance_id).add(worker_id).add(location).finish() &
         holder_id_mask;
}

/// The durable vocabulary the index shares with the store.
using persistence::kv_op;
using persistence::seq_mark;
using persistence::seq_state;

} // namespace lmcc::actors
