// store: a node's durable state in one RocksDB (layout in schema.hpp and
// records.hpp): the op log, slot snapshots, holder states and the Directory.
//
// Contract:
// - open() creates the DB when missing and stamps it with the format version and
//   the node id; an existing DB of another version or node is refused with the
//   reason (a format-1 data dir, from lmcc before the op log, is named as such).
// - Every change goes through a batch made by new_batch(); commit() turns one
//   batch into exactly one RocksDB write through the WAL (atomic: all of it
//   survives a crash or none of it). It is the only place in lmcc that writes to
//   the DB. A failed commit leaves the batch as it was, for a retry.
// - Reading is for start-up: load_directory() (rows, holder states, log floor),
//   for_each_slot() over a slot range (threads with disjoint ranges may call it
//   concurrently) and for_each_log_record() from a position.
// - checkpoint() writes a consistent RocksDB checkpoint plus MANIFEST.lmcc.json
//   (every file's name, size and crc32c); verify_snapshot() checks all of it;
//   restore() verifies, copies into a temp dir beside the target, opens that,
//   and only then renames it into place, so a bad snapshot never replaces data.
// - Errors are values naming the path and RocksDB's status text.
//
//   auto s = store::open({.path = "/var/lib/lmcc/n1"}, "n1");
//   if (!s) return fail(s.error().message);
//   auto b = (*s)->new_batch();
//   b.append_log(position, encoded_record);
//   if (auto r = (*s)->commit(b); !r) ...   // keep b and retry later
//
// Thread-safety: a store may be used from several threads (RocksDB groups
// concurrent commits' WAL writes); batches are thread-compatible values. In a
// node the KV shard commits the log and snapshots, the Directory's row writer
// commits rows, both off the socket threads.
#pragma once

#include "faults/fault_injection.hpp"
#include "persistence/expected.hpp"
#include "persistence/records.hpp"
#include "persistence/schema.hpp"

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace lmcc::persistence {

/// How a store is opened. Memory is bounded by block_cache_bytes (data, index
/// and filter blocks all live in it) plus write_buffer_bytes *
/// max_write_buffer_number per column family (memtables; two families).
struct store_options {
  /// Directory of the node's RocksDB; created with its parents when missing.
  /// `lmcc node` sets it from lmcc_data_dir, whose default this is.
  /// Default: "./lmcc-data" (relative to the working directory).
  std::string path = "./lmcc-data";

  /// fsync the WAL on every commit. false relies on the WAL reaching the page
  /// cache: a process crash (kill -9) loses nothing, a machine crash may lose
  /// the last commits, which the seq watermarks then detect.
  /// Default: false.
  bool sync = false;

  /// Skip the WAL: commits live only in memtables until a flush, so a crash
  /// loses them (detected by the watermarks, repaired by a full sync). For
  /// benchmarks; incompatible with sync.
  /// Default: false.
  bool disable_wal = false;

  /// LRU block cache shared by data, index and filter blocks.
  /// Default: 32 MiB.
  size_t block_cache_bytes = size_t{32} << 20;

  /// Size of one memtable before it is flushed to an SST. The op log's family
  /// uses it too: records deleted by a snapshot round while still in the
  /// memtable are never written to an SST at all.
  /// Default: 32 MiB.
  size_t write_buffer_bytes = size_t{32} << 20;

  /// Memtables kept in memory per column family (one active, the rest flushing).
  /// Default: 2.
  int max_write_buffer_number = 2;

  /// Bound on the write-ahead log's files. A WAL file is freed only once every
  /// family with records in it has flushed them; the slot-snapshot family
  /// fills its memtable slowly, so without a bound the WAL kept the op log's
  /// records (deleted long ago) for as long as RocksDB's default allows, four
  /// times all memtables (512 MiB at the defaults): a soak's data dir swung
  /// between ~50 and ~220 MiB. Past the bound RocksDB flushes the families
  /// holding the oldest WAL file. 0: RocksDB's default.
  /// Default: 64 MiB.
  size_t max_wal_bytes = size_t{64} << 20;

  /// Compress SST blocks of the default family with LZ4 (slot snapshots are
  /// hash bits and do not compress; worker rows do). The op log is never
  /// compressed (it lives briefly and is random bits).
  /// Default: true.
  bool compression = true;

  /// RocksDB background threads for flushes and compactions.
  /// Default: 2.
  int max_background_jobs = 2;

  /// Run those threads under SCHED_IDLE (RocksDB's CpuPriority::kIdle), with
  /// the node's other ingest threads (lmcc_ingest_idle_priority). Process-wide:
  /// RocksDB's default Env owns the threads, and never raises them again.
  /// Default: false.
  bool idle_background_threads = false;

  /// Create the DB when the directory holds none; false makes a missing DB an error.
  /// Default: true.
  bool create_if_missing = true;
};

/// Injected failures for crash and chaos tests (a node sets them only with
/// its fault-injection option): failing and slow commits. A build without
/// fault injection has nothing to set and no fault (faults/fault_injection.hpp).
using store_faults = faults::commit_faults;

/// What load_directory() reads.
struct directory_data {
  std::vector<worker_row> workers;   ///< in uid order (sort by registration_order)
  std::vector<holder_state> holders; ///< in holder order
  uint64_t log_floor = 0;            ///< records below it are gone
  /// Holder states that failed their checksum: their holder ids, with why.
  std::vector<std::pair<uint64_t, std::string>> damaged_holders;
};

/// One file of a snapshot as its manifest lists it.
struct snapshot_file {
  std::string name;
  uint64_t size = 0;
  std::string crc32c; ///< 8 lowercase hex digits
};

/// A snapshot's manifest (MANIFEST.lmcc.json).
struct snapshot_info {
  uint32_t format_version = 0;
  std::string node_id;
  std::string created_at; ///< ISO 8601 UTC
  uint64_t sequence = 0;  ///< RocksDB sequence number of the checkpoint
  uint64_t workers = 0;
  uint64_t holders = 0;
  uint64_t slots = 0;       ///< slot snapshot values
  uint64_t log_records = 0; ///< op-log records above the floor
  std::vector<snapshot_file> files;
};

/// Name of the manifest inside a snapshot directory.
inline constexpr const char* snapshot_manifest_name = "MANIFEST.lmcc.json";

class store {
public:
  // -- member types ----------------------------------------------------------

  struct impl;

  /// Changes applied in order by one commit; made by new_batch().
  class batch {
  public:
    batch(batch&&) noexcept;
    batch& operator=(batch&&) noexcept;
    ~batch();

    /// Op-log record at `position` (encoded by encode_log_record).
    void append_log(uint64_t position, std::string_view record);

    /// Replaces slot `slot`'s snapshot (encoded by slot_snapshot_writer).
    void put_slot(uint32_t slot, std::string_view value);
    void delete_slot(uint32_t slot);

    void put_holder(const holder_state& state);
    void delete_holder(uint64_t holder);

    void put_worker(const worker_row& row);
    void delete_worker(uint64_t uid);

    /// Deletes every log record below `floor` (one range delete) and records
    /// the floor.
    void truncate_log(uint64_t floor);

    /// Puts and deletes in the batch.
    size_t count() const noexcept;
    /// Bytes of the batch's payload.
    size_t bytes() const noexcept;
    bool empty() const noexcept { return count() == 0; }

  private:
    friend class store;
    struct rep;
    explicit batch(std::unique_ptr<rep> r);
    std::unique_ptr<rep> rep_;
  };

  using slot_fn = std::function<void(uint32_t slot, std::string_view value)>;
  using log_fn = std::function<void(uint64_t position, std::string_view record)>;

  // -- construction ----------------------------------------------------------

  /// Opens (creating when allowed) the DB at options.path for `node_id`.
  static expected<std::unique_ptr<store>> open(const store_options& options,
                                               const std::string& node_id);

  /// Only open() can make the key, so only open() constructs a store.
  class passkey {
    friend class store;
    explicit passkey() = default;
  };
  store(passkey, std::unique_ptr<impl> p);

  ~store();
  store(const store&) = delete;
  store& operator=(const store&) = delete;

  // -- writing ---------------------------------------------------------------

  batch new_batch() const;

  /// Applies the batch with exactly one RocksDB write (none when it is empty).
  /// The batch is left as it was, so a caller can retry it after a failure.
  expected<void> commit(batch& b);

  /// Deletes the op log's SST files that lie wholly below `floor` (after a
  /// committed truncate_log): they go without being read or compacted, which
  /// is most of what a snapshot round would otherwise cost in the background.
  expected<void> release_log_files(uint64_t floor);

  /// Flushes memtables to SST files.
  expected<void> flush();

  /// Asks RocksDB to flush both families' memtables in the background and
  /// returns at once (their memory is freed when each flush ends).
  expected<void> request_flush();

  /// Turns RocksDB's automatic compactions off (false) or back on (true); a
  /// node turns them off while it loads.
  expected<void> set_auto_compactions(bool on);

  /// Compacts every key range (drops tombstones; for disk measurements).
  expected<void> compact();

  /// Injected failures (tests, chaos; none in a build without fault injection).
  store_faults& faults() noexcept;

  // -- reading (start-up) ------------------------------------------------------

  /// Worker rows, holder states and the log floor, from one consistent view.
  expected<directory_data> load_directory() const;

  /// Calls fn for every slot snapshot with lo <= slot < hi, in slot order; the
  /// number of values. Threads with disjoint ranges may call it concurrently.
  expected<uint64_t> for_each_slot(uint32_t lo, uint32_t hi, const slot_fn& fn) const;

  /// Calls fn for every log record at or above `from`, in position order; the
  /// number of records.
  expected<uint64_t> for_each_log_record(uint64_t from, const log_fn& fn) const;

  /// The highest log position stored (0 when the log is empty).
  expected<uint64_t> last_log_position() const;

  // -- snapshots ---------------------------------------------------------------

  /// Writes a checkpoint and its manifest into `dir`, which must not exist;
  /// `dir` appears only once complete. SST files are hard links when `dir` is on
  /// the DB's file system (they are immutable, so the snapshot stays valid).
  /// `extra_files` (name -> content; plain names, no '/') are written beside
  /// it and listed in the manifest, so they are verified and restored with it
  /// (the node's cluster member set: it lives in the data dir, outside RocksDB).
  expected<snapshot_info> checkpoint(const std::string& dir,
                                     const std::map<std::string, std::string>& extra_files = {});

  /// Checks a snapshot: manifest present and parsable, this format version,
  /// every listed file present with its size and crc32c. The manifest on success.
  static expected<snapshot_info> verify_snapshot(const std::string& dir);

  /// Verifies `snapshot_dir` (taken by `node_id`), copies it into a temp dir
  /// beside target.path checking every checksum again, opens it, then replaces
  /// target.path with it (the old contents are removed) and returns the opened
  /// store. On any error target.path is untouched. No process may have
  /// target.path open (checked through RocksDB's LOCK file for other processes).
  static expected<std::unique_ptr<store>>
  restore(const std::string& snapshot_dir, const store_options& target, const std::string& node_id);

  // -- properties ------------------------------------------------------------

  /// Bytes of the DB's files (SSTs, WAL, MANIFEST, OPTIONS; not info logs).
  expected<uint64_t> disk_bytes() const;

  /// What the store holds in memory now: its memtables (active, immutable and
  /// pinned, both families; at most write_buffer_bytes x
  /// max_write_buffer_number each) and its block cache (at most
  /// block_cache_bytes). Any thread.
  struct memory {
    uint64_t memtable_bytes = 0;
    uint64_t block_cache_bytes = 0;
  };
  memory memory_usage() const;

  /// RocksDB writes issued so far (commits plus the format record at creation).
  uint64_t write_count() const noexcept;

  /// True when open() created this DB (it held nothing before), false when it
  /// opened one that existed (a restart or a restore).
  bool created() const noexcept;

  const std::string& path() const noexcept;
  const std::string& node_id() const noexcept;

private:
  std::unique_ptr<impl> impl_;
};

} // namespace lmcc::persistence
