// slot_copy: one owner's copy of one slot as it crosses to another owner
// (anti-entropy, a refill, a membership change's move): per holder its
// label -- the stream position its entries reflect, or "uncertain" -- and
// its keys, so that the receiver can take each holder's part only where it
// is newer than its own (coverage.hpp).
//
// On the wire it is a flat vector of u64 (CAF carries those cheaply):
//   [format, slot, flags (1 = complete), holders, then per holder:
//    holder, worker_uid, flags (1 = certain), pos.incarnation, pos.era,
//    pos.n, pos.sub, keys, key...]
// Every holder the sender knows is listed, with or without keys in the slot:
// "none here as of position p" is a label too.
//
//   std::vector<uint64_t> wire = encode_slot_copy(copy);
//   auto back = decode_slot_copy(wire, slot_count);   // error text on bad input
//
// Context: pure functions; thread-safe. CAF-free.
#pragma once

#include "index/ids.hpp"

#include <cstdint>
#include <span>
#include <string>
#include <variant>
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
  friend bool operator==(const slot_copy&, const slot_copy&) = default;
};

/// The format word a copy starts with.
inline constexpr uint64_t slot_copy_format = 0x5c02;

std::vector<uint64_t> encode_slot_copy(const slot_copy& copy);

/// The copy, or why the words are not one (a slot out of range, counts past
/// the end, a key outside the slot).
std::variant<slot_copy, std::string> decode_slot_copy(std::span<const uint64_t> words,
                                                      uint32_t slot_count);

/// The keys a copy's words carry, over every holder (0 for words that are
/// not a copy); for progress counts, without decoding the copy.
uint64_t slot_copy_keys(std::span<const uint64_t> words);

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

/// [installed, waiting, changed, conflicts, (uid, holder)..., unresolved, (uid, holder)...,
///  still_blank]
std::vector<uint64_t> encode_copy_outcome(const copy_outcome& o);
/// A malformed answer reads as an empty outcome.
copy_outcome decode_copy_outcome(std::span<const uint64_t> words);

/// The XOR of kv_index::entry_hash over `keys` held by `h`: equal for equal
/// key sets (the digest a slot keeps per entry, restricted to one holder).
uint64_t holder_keys_digest(holder_id h, std::span<const uint64_t> keys);

} // namespace lmcc::actors
