// records: the three checksummed value formats of the op-log design
// (schema.hpp): op-log records, slot snapshots and holder states.
//
// Op-log record ('L'): one applied sub-batch, or one holder drop.
//   u8 format (2) | u8 flags (1 = has mark, 2 = has intro, 4 = drop)
//   u64 holder | varint incarnation
//   pos prev | pos end | varint placement epoch | pos placement since
//   (pos: 4 varints, a stream_pos)
//   [mark]  u8 state | varint seq
//   [intro] u64 worker_uid | varint len | location bytes
//   varint n | n x u64 key | ceil(n/8) bytes admit bitmap (bit i = op i admits)
//   u32 crc32c of everything before it
// Keys are hashes (random bits): 8 raw bytes each is as small as they get.
//
// Slot snapshot ('S'): every (key, holders) of one slot, keys sorted.
//   header: u8 format (2) | varint slot | u64 position | varint h |
//           h x u64 holder (the slot's holder dictionary) |
//           varint c | c x cover | u32 crc32c(header)
//   cover:  u64 holder | u8 state | u8 flags (1 = uncovered) | pos | pos hole
//           (the holders whose copy of the slot does not simply follow their
//           stream: coverage.hpp)
//   body:   varint n | n x (varint key delta | holders) | u32 crc32c(body)
//   holders: one varint per holder, (dictionary index << 1) | (1 if more follow)
// A slot at 10 M entries / 4096 slots has ~2.4 k sorted random keys: a delta is
// ~8 bytes, a holder 1, so ~9 bytes an entry with one holder and ~5.5 an entry
// with two. The two checksums tell a damaged body (its holders are known: ask
// only those workers to resync) from a damaged header (ask everyone).
//
// Holder state ('H'):
//   u8 format (2) | u64 worker_uid | varint len | location | varint incarnation |
//   u8 state | varint seq | pos applied | pos hole | varint placement epoch |
//   u32 crc32c
//
//   std::string v;
//   encode_log_record(rec, v);
//   log_record back;
//   if (auto r = decode_log_record(v, back); !r) ...;
//
// Context: pure functions; thread-safe.
#pragma once

#include "persistence/expected.hpp"
#include "persistence/schema.hpp"

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace lmcc::persistence {

// -- op-log records ------------------------------------------------------------------

/// Which worker and location a holder id stands for; logged with the first
/// record of a holder, so that replay can name holders that no row mentions yet.
struct holder_intro {
  uint64_t worker_uid = 0;
  std::string location;
  friend bool operator==(const holder_intro&, const holder_intro&) = default;
};

struct log_record {
  uint64_t holder = 0;
  uint64_t incarnation = 0;
  /// The position the sender had reached with this node before this record
  /// (what the node must hold for the record to continue its copy), this
  /// record's own position, and the placement epoch its ops were split under.
  stream_pos prev;
  stream_pos end;
  uint64_t placement_epoch = 0;
  stream_pos placement_since;
  /// Drop every entry of `holder` (no ops) instead of applying ops.
  bool drop = false;
  /// The holder's seq watermark once this record is applied, if it moves.
  std::optional<seq_mark> mark;
  std::optional<holder_intro> intro;
  std::vector<kv_op> ops;
  friend bool operator==(const log_record&, const log_record&) = default;
};

/// Appends the encoded record to `out`.
void encode_log_record(const log_record& rec, std::string& out);

/// The same, from the parts (the shard encodes a sub-batch without copying it
/// into a log_record first).
struct log_header {
  uint64_t holder = 0;
  uint64_t incarnation = 0;
  bool drop = false;
  stream_pos prev;
  stream_pos end;
  uint64_t placement_epoch = 0;
  stream_pos placement_since;
};
void encode_log_record(const log_header& head, const std::optional<seq_mark>& mark,
                       const holder_intro* intro, std::span<const kv_op> ops, std::string& out);

/// Decodes into `rec` (its ops vector is reused); an error says what is wrong.
expected<void> decode_log_record(std::string_view value, log_record& rec);

// -- slot snapshots --------------------------------------------------------------------

/// How one holder's copy of a slot stands when it does not simply follow the
/// holder's stream (index/coverage.hpp gives the meaning of each state).
struct slot_cover_record {
  uint64_t holder = 0;
  uint8_t state = 0;
  bool uncovered = false;
  stream_pos pos;
  stream_pos hole;
  friend bool operator==(const slot_cover_record&, const slot_cover_record&) = default;
};

/// Builds one slot's snapshot value from its entries (any order).
class slot_snapshot_writer {
public:
  slot_snapshot_writer(uint32_t slot, uint64_t position) : slot_(slot), position_(position) {}

  /// Records how one holder's copy of the slot stands (at most once per holder).
  void add_cover(const slot_cover_record& c) { covers_.push_back(c); }

  /// Makes room for `keys` keys and `entries` (key, holder) pairs.
  void reserve(size_t keys, size_t entries) {
    keys_.reserve(keys);
    holders_.reserve(entries);
  }

  /// Adds a key with its holders (at least one).
  void add(uint64_t key, std::span<const uint64_t> holders);

  size_t entries() const noexcept { return holders_.size(); }

  /// Sorts and encodes; appends the value to `out`.
  void finish(std::string& out);

private:
  uint32_t slot_;
  uint64_t position_;
  struct key_run {
    uint64_t key;
    uint32_t first; ///< index into holders_
    uint32_t count;
  };
  std::vector<key_run> keys_;
  std::vector<uint64_t> holders_;
  std::vector<slot_cover_record> covers_;
};

struct slot_snapshot_header {
  uint32_t slot = 0;
  uint64_t position = 0;
  std::vector<uint64_t> holders; ///< the dictionary
  std::vector<slot_cover_record> covers;
};

/// Why a slot snapshot could not be read.
enum class slot_damage : uint8_t {
  none,
  header, ///< the header (and so the holder dictionary) is unreadable
  body,   ///< the header is fine: its holders are the affected ones
};

struct slot_read_result {
  slot_damage damage = slot_damage::none;
  std::string what; ///< when damaged
  slot_snapshot_header header;
  uint64_t entries = 0;
};

/// Decodes a slot snapshot and calls on_count(keys) once, then
/// on_key(key, holders) for each key. The body's checksum is verified before
/// the first call, so on_key sees either every key or none (a body damaged in
/// a way its checksum misses stops the walk and is reported).
slot_read_result
read_slot_snapshot(std::string_view value,
                   const std::function<void(uint64_t key, std::span<const uint64_t>)>& on_key,
                   const std::function<void(uint64_t keys)>& on_count = {});

// -- holder states -------------------------------------------------------------------

struct holder_state {
  uint64_t holder = 0; ///< from the key
  uint64_t worker_uid = 0;
  std::string location;
  uint64_t incarnation = 0;
  seq_mark mark;
  /// Where the holder's stream stood at the snapshot round's start, the
  /// highest position its uncertain copies may lack, and the placement
  /// epoch of the last record applied (index/coverage.hpp).
  stream_pos applied;
  stream_pos hole;
  uint64_t placement_epoch = 0;
  friend bool operator==(const holder_state&, const holder_state&) = default;
};

std::string encode_holder_state(const holder_state& s);
expected<holder_state> decode_holder_state(uint64_t holder, std::string_view value);

} // namespace lmcc::persistence
