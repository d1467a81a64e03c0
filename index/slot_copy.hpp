// slot_copy: one owner's copy of one slot as it crosses to another owner
// (anti-entropy, a refill, a membership change's move): per holder its
// label -- the stream position its entries reflect, or "uncertain" -- and
// its keys, so that the receiver can take each holder's part only where it
// is newer than its own (coverage.hpp).
//
// Every holder the sender knows is listed, with or without keys in the slot:
// "none here as of position p" is a label too. A copy crosses nodes as these
// structs (actors/inspect.hpp); what arrives is checked before it is used:
//
//   if (auto why = check_slot_copy(copy, slot_count); !why.empty())
//     refuse(why);                                    // never installed
//
// Context: pure functions; thread-safe. CAF-free.
#pragma once

#include "index/ids.hpp"

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace lmcc::actors {

struct holder_slot_copy {
  holder_id holder = 0;
  uint64_t worker_uid = 0;
  bool certain = true;
  stream_pos pos;
  std::vector<uint64_t> keys;
  friend bool operator==(const holder_slot_copy&, const holder_slot_copy&) = default;
};

struct slot_copy {
  uint32_t slot = 0;
  /// The sender's copy of the slot is not blank (coverage_book::blank_all):
  /// a holder it does not list holds nothing there.
  bool complete = true;
  std::vector<holder_slot_copy> holders;
  /// The keys it carries over every holder (progress counts).
  uint64_t key_count() const noexcept;
  friend bool operator==(const slot_copy&, const slot_copy&) = default;
};

/// Why `copy` cannot be installed in a shard of `slot_count` slots (its slot
/// out of range, a holder id past holder_id_mask, a key of another slot), or
/// "" when it can.
std::string check_slot_copy(const slot_copy& copy, uint32_t slot_count);

/// What a node did with another owner's copy of a slot (kv_shard_core::install).
struct copy_outcome {
  uint64_t installed = 0; ///< holders whose part was taken
  uint64_t waiting = 0;   ///< pending here and not covered by the copy yet
  uint64_t changed = 0;   ///< entries added plus removed
  /// Holders with the same label on both sides and other entries: only their
  /// workers can tell which is right (worker uid, holder).
  std::vector<std::pair<uint64_t, holder_id>> conflicts;
  /// Holders still pending here after the copy (worker uid, holder).
  std::vector<std::pair<uint64_t, holder_id>> unresolved;
  /// The slot is still blank here: the copy was of an owner blank too.
  bool still_blank = false;
  friend bool operator==(const copy_outcome&, const copy_outcome&) = default;
};

/// The XOR of kv_index::entry_hash over `keys` held by `h`: equal for equal
/// key sets (the digest a slot keeps per entry, restricted to one holder).
uint64_t holder_keys_digest(holder_id h, std::span<const uint64_t> keys);

} // namespace lmcc::actors
