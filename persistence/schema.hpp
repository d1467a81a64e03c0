// schema: how a node's durable state is laid out in its RocksDB, and the
// codecs for its keys and values. Everything the store writes goes through
// these functions, so this header is the on-disk format's single definition.
//
// One RocksDB per node, in one directory (`--data-dir`), default column family
// only. Keys start with a one-byte prefix; integers are big-endian so that
// RocksDB's bytewise order is numeric order and a prefix is one contiguous range.
//
//   key                                          value
//   'F' "format_version"                         be32(format_version), currently 1
//   'F' "node_id"                                the node id, raw bytes
//   'W' be32(worker_num)                         worker row, msgpack (below)
//   'E' be16(slot) be64(key bits) be32(holder)   empty: one index entry
//   'M' be32(worker_num) be32(location) be32(shard)  be64(seq watermark)
//
// - 'F' (format): written once when the DB is created; open refuses a DB whose
//   version or node id differ, so a data dir is never read by the wrong code or
//   the wrong node.
// - 'W' (Directory): one row per registered worker. worker_num is assigned in
//   registration order, so the key order is registration order and a prefix
//   scan returns the Directory already sorted.
// - 'E' (index entry): (slot, key, holder) with holder =
//   (worker_num << 8) | location_index (actors/kv_index.hpp). Slot first: a slot's
//   entries are one range, the unit of snapshot and handoff. The value is empty;
//   the key is 15 bytes and consecutive keys share their slot prefix, which
//   RocksDB's block prefix compression stores once. An evict is a blind Delete,
//   so the index never reads on the write path.
//   Cost of holder last: dropping a holder's entries (deregistration, full-sync
//   start) cannot be a range delete; store::batch::clear_holder scans every 'E'
//   key once, under the commit lock (measured about 1 s per 1M entries on the
//   shared 2-core dev box, so ~10 s at 10M, during which commits wait).
//   Acceptable for these rare events at this stage; a holder-first secondary
//   layout would make them a range delete at the price of doubling every write
//   and the disk footprint.
// - 'M' (seq watermark): "every op of this (worker, location) with seq_num <= N
//   that routes to this shard is durable". Every incremental batch carries its
//   last seq_num to every shard (also those it has no op for), and a shard
//   commits it in the same write as its ops. Shards commit independently, so a
//   restart takes, per (worker, location), the minimum over the shards (a
//   missing shard counts as "nothing durable") and asks for a full sync only
//   when the worker's next seq_num does not follow it. Two values are marks,
//   not seq numbers: watermark_syncing (a full sync of the location started and
//   has not ended: the location's entries are partial) and watermark_resynced
//   (a full sync ended, no increment since: the next op re-initialises).
//
// Worker rows are msgpack arrays, position = field:
//   [instance_id: str, worker_id: int, ip: str, port: int,
//    peer_init_url: str | nil, registration_time: float64,
//    last_heartbeat_time: float64, has_heartbeated: bool, locations: [str],
//    reset_pending: bool]
// msgpack rather than JSON because its integer encoding keeps a wire_int's sign
// by type exactly as the LMCache wire does (2^64-1 and -1 stay distinct), its
// float64 is bit-exact without relying on shortest round-trip printing, a row is
// about half the size, and messages/ already links msgpack-cxx. The decoder
// requires exactly these ten fields; adding one bumps format_version.
//
//   std::string k = entry_key(slot, key_bits, holder);
//   auto e = decode_entry_key(k);            // std::optional<entry>
//   std::string v = encode_worker_row(row);
//   expected<worker_row> back = decode_worker_row(row.worker_num, v);
//
// Context: pure functions, thread-safe.
#pragma once

#include "messages/wire_int.hpp"
#include "persistence/expected.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace lmcc::persistence {

// -- format --------------------------------------------------------------------

/// Bumped on any incompatible change of the layout above.
constexpr uint32_t format_version = 1;

/// Key prefixes.
constexpr char format_prefix = 'F';
constexpr char worker_prefix = 'W';
constexpr char entry_prefix = 'E';
constexpr char watermark_prefix = 'M';

/// Largest slot the 16-bit slot field holds (slot counts up to 65536).
constexpr uint32_t max_slot = 0xffff;

/// Key sizes, for validation while loading.
constexpr size_t entry_key_size = 1 + 2 + 8 + 4;
constexpr size_t worker_key_size = 1 + 4;
constexpr size_t watermark_key_size = 1 + 4 + 4 + 4;

// -- records ---------------------------------------------------------------------

/// One index entry.
struct entry {
  uint32_t slot = 0;
  uint64_t key = 0; ///< the chunk hash's 64-bit pattern
  uint32_t holder = 0;
  friend bool operator==(const entry&, const entry&) = default;
};

/// What the Directory keeps of a registered worker across a restart (the
/// durable part of actors::worker_record; sync state is not durable on purpose:
/// a restart decides it again from the watermarks).
struct worker_row {
  uint32_t worker_num = 0;
  std::string instance_id;
  msg::wire_int worker_id;
  std::string ip;
  msg::wire_int port;
  std::optional<std::string> peer_init_url;
  double registration_time = 0;
  double last_heartbeat_time = 0;
  bool has_heartbeated = false;
  /// Location names by location index (first-seen order).
  std::vector<std::string> locations;
  /// A re-registration's reset (drop every entry and watermark of the worker)
  /// is spread over the shards: the row says so before it starts and stops
  /// saying so once every shard has committed it. A restart that finds it set
  /// finishes the reset itself (the worker keeps no entries, no watermarks).
  bool reset_pending = false;
  friend bool operator==(const worker_row&, const worker_row&) = default;
};

/// One shard's seq_num watermark for a (worker, location).
struct watermark {
  uint32_t worker_num = 0;
  uint32_t location_index = 0;
  uint32_t shard = 0;
  uint64_t seq = 0;
  friend bool operator==(const watermark&, const watermark&) = default;
};

/// Watermark marks (see 'M' above). A worker's seq_num counts up from 0, so
/// these two patterns are never real seq numbers; a worker sending them anyway
/// only costs itself a full sync after a restart.
constexpr uint64_t watermark_syncing = UINT64_MAX;
constexpr uint64_t watermark_resynced = UINT64_MAX - 1;

// -- key codecs --------------------------------------------------------------------

std::string format_version_key();
std::string node_id_key();

/// REQUIRES: slot <= max_slot (the batch checks it before calling).
std::string entry_key(uint32_t slot, uint64_t key, uint32_t holder);
std::optional<entry> decode_entry_key(std::string_view k);

std::string worker_key(uint32_t worker_num);
std::optional<uint32_t> decode_worker_key(std::string_view k);

std::string watermark_key(uint32_t worker_num, uint32_t location_index, uint32_t shard);
/// The watermark's key fields (seq left 0).
std::optional<watermark> decode_watermark_key(std::string_view k);

/// be32 / be64 values.
std::string encode_u32(uint32_t v);
std::optional<uint32_t> decode_u32(std::string_view v);
std::string encode_u64(uint64_t v);
std::optional<uint64_t> decode_u64(std::string_view v);

// -- value codecs --------------------------------------------------------------------

/// The row without worker_num (that is in the key).
std::string encode_worker_row(const worker_row& row);

/// Decodes a row stored under worker_num; an error names what is wrong.
expected<worker_row> decode_worker_row(uint32_t worker_num, std::string_view value);

} // namespace lmcc::persistence
