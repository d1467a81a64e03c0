// schema: how a node's durable state is laid out in its RocksDB, and the
// codecs for its keys and worker rows. Everything the store writes goes through
// this header and records.hpp, so the two are the on-disk format's definition.
//
// The index lives in memory; the disk holds what rebuilds it: an op log and
// per-slot snapshots (DESIGN.md "Durability"). One RocksDB per node, in one
// directory (`--data-dir`), two column families. Keys start with a one-byte
// prefix; integers in keys are big-endian so that bytewise order is numeric.
//
//   column family "default"
//   'F' "format_version"      be32(format_version), currently 2
//   'F' "node_id"             the node id, raw bytes
//   'P' "log_floor"           be64: every op-log record below it is deleted
//   'W' be64(worker_uid)      worker row, msgpack (below)
//   'H' be64(holder_id)       holder state (records.hpp): its worker and location,
//                             incarnation and seq watermark as of a snapshot round
//   'S' be32(slot)            slot snapshot (records.hpp): the slot's sorted keys
//                             and holders, stamped with the log position it covers
//   column family "log"
//   'L' be64(position)        one op-log record (records.hpp): one applied
//                             sub-batch, or a holder drop, with its seq mark
//
// - 'F' (format): written when the DB is created; open refuses a DB of another
//   version (format 1, lmcc before the op log, kept one key per entry) or of
//   another node, so a data dir is never read by the wrong code or node.
// - 'W' (Directory): one row per registered worker, keyed by its cluster-wide
//   uid (index/ids.hpp); registration order is a field (registration_order),
//   so every node sorts the same way.
// - 'L' (op log): positions are assigned by the node's KV shard, one per record,
//   increasing. A commit writes every record that queued since the previous
//   one in one RocksDB write through the WAL (group commit).
// - 'S' + 'H' (snapshots): the shard periodically writes each dirty slot as one
//   value, and the state of every holder, then moves 'P' up to the position
//   the round started at and deletes the log below it (one range delete).
//   Replaying a record on a slot whose snapshot already contains it changes
//   nothing (admit/evict/drop are set operations where the last op wins), so a
//   crash anywhere in a round loses nothing: a restart loads 'S' and 'H', then
//   replays the log from 'P' (skipping, per slot, what its stamp covers).
//
// Worker rows are msgpack arrays, position = field:
//   [instance_id: str, worker_id: int, ip: str, port: int,
//    peer_init_url: str | nil, registration_time: float64,
//    last_heartbeat_time: float64, has_heartbeated: bool,
//    registration_order: uint, instance_order: uint, incarnation: uint]
// msgpack because its integer encoding keeps a wire_int's sign by type as the
// LMCache wire does, its float64 is bit-exact, and messages/ links msgpack-cxx.
//
//   std::string k = worker_key(uid);
//   std::string v = encode_worker_row(row);
//   expected<worker_row> back = decode_worker_row(uid, v);
//
// Context: pure functions, thread-safe.
#pragma once

#include "messages/wire_int.hpp"
#include "persistence/expected.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace lmcc::persistence {

// -- format --------------------------------------------------------------------

/// Bumped on any incompatible change of the layout above. 1 = one key per
/// entry (lmcc before the op log), 2 = no stream positions (both refused with
/// a message saying so).
constexpr uint32_t format_version = 3;

/// Key prefixes.
constexpr char format_prefix = 'F';
constexpr char floor_prefix = 'P';
constexpr char worker_prefix = 'W';
constexpr char holder_prefix = 'H';
constexpr char slot_prefix = 'S';
constexpr char log_prefix = 'L';

/// Name of the op log's column family.
constexpr const char* log_column_family = "log";

// -- shared value types ------------------------------------------------------------

/// What the durable seq watermark of one (worker, location) says. Explicit
/// states instead of reserved seq values: every seq_num a worker can send
/// (the whole 64-bit range) is a valid `tracking` value.
enum class seq_state : uint8_t {
  none = 0,     ///< nothing of this location is durable (or it was dropped)
  tracking = 1, ///< every op up to `seq` is durable; the next must carry seq + 1
  syncing = 2,  ///< a full sync started and has not ended: the entries are partial
  resynced = 3, ///< a full sync ended, no increment since: the next op re-initialises
  gap = 4,      ///< ops were lost before reaching the disk (a failed commit): resync
};

constexpr uint8_t max_seq_state = 4;

const char* to_string(seq_state s) noexcept;

/// A (worker, location)'s seq watermark.
struct seq_mark {
  seq_state state = seq_state::none;
  uint64_t seq = 0; ///< meaningful when state == tracking
  friend bool operator==(const seq_mark&, const seq_mark&) = default;
};

/// Where a holder's stream stands: the position of one event (a batch of ops,
/// a drop, a full-sync batch) in the totally ordered history of one (worker,
/// location), as the worker's home accepted it. Every copy of a slot carries,
/// per holder, the position its entries reflect, so that two copies compare
/// holder by holder (docs/convergence.md).
///
/// Lexicographic: a registration (incarnation) and a full sync or a reset
/// inside it (era) start over from a drop; inside one era `n` is the highest
/// seq_num the home has accepted, so frames the worker sent later always sort
/// after earlier ones whichever node accepts them, and `sub` counts events
/// since `n` last grew (frames duplicated or reordered on the way, full-sync
/// batches, which carry no seq).
struct stream_pos {
  uint64_t incarnation = 0;
  uint64_t era = 0;
  uint64_t n = 0;
  uint64_t sub = 0;

  /// Before any event: the position of a copy that holds nothing of the holder.
  constexpr bool none() const noexcept {
    return incarnation == 0 && era == 0 && n == 0 && sub == 0;
  }
  /// The position of the drop that starts this position's era.
  constexpr stream_pos era_start() const noexcept { return {incarnation, era, 0, 0}; }
  constexpr bool same_era(const stream_pos& o) const noexcept {
    return incarnation == o.incarnation && era == o.era;
  }
  friend constexpr auto operator<=>(const stream_pos&, const stream_pos&) = default;
};

/// "incarnation.era.n.sub", for logs.
std::string to_string(const stream_pos& p);

/// One admit or evict of a key (its 64-bit pattern).
struct kv_op {
  uint64_t key = 0;
  bool admit = true;
  friend bool operator==(const kv_op&, const kv_op&) = default;
};

/// What the Directory keeps of a registered worker across a restart (the
/// durable part of actors::worker_record). Sync state is not durable on
/// purpose: a restart decides it again from the holders' seq marks.
struct worker_row {
  uint64_t uid = 0;
  std::string instance_id;
  msg::wire_int worker_id;
  std::string ip;
  msg::wire_int port;
  std::optional<std::string> peer_init_url;
  double registration_time = 0;
  double last_heartbeat_time = 0;
  bool has_heartbeated = false;
  /// Sort key of this worker's registration (a hybrid logical clock value):
  /// its position among its instance's workers.
  uint64_t registration_order = 0;
  /// Sort key of its instance's position: the registration_order of the
  /// instance's first registration while the instance kept workers (LMCache
  /// keeps an instance's place as long as it has workers).
  uint64_t instance_order = 0;
  /// Which registration of this worker the row describes; a holder whose
  /// state names an older incarnation still has entries of the previous one.
  uint64_t incarnation = 0;
  friend bool operator==(const worker_row&, const worker_row&) = default;
};

// -- key codecs --------------------------------------------------------------------

std::string format_version_key();
std::string node_id_key();
std::string log_floor_key();

std::string worker_key(uint64_t uid);
std::optional<uint64_t> decode_worker_key(std::string_view k);

std::string holder_key(uint64_t holder);
std::optional<uint64_t> decode_holder_key(std::string_view k);

std::string slot_key(uint32_t slot);
std::optional<uint32_t> decode_slot_key(std::string_view k);

std::string log_key(uint64_t position);
std::optional<uint64_t> decode_log_key(std::string_view k);

/// be32 / be64 values.
std::string encode_u32(uint32_t v);
std::optional<uint32_t> decode_u32(std::string_view v);
std::string encode_u64(uint64_t v);
std::optional<uint64_t> decode_u64(std::string_view v);

// -- value codecs --------------------------------------------------------------------

/// The row without its uid (that is in the key).
std::string encode_worker_row(const worker_row& row);

/// Decodes a row stored under `uid`; an error names what is wrong.
expected<worker_row> decode_worker_row(uint64_t uid, std::string_view value);

} // namespace lmcc::persistence
