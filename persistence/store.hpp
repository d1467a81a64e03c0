// store: a node's durable index, Directory and seq watermarks in one RocksDB
// (layout in persistence/schema.hpp), written in batches, loaded back by
// streaming, and copied out as verified snapshots.
//
// Contract:
// - open() creates the DB when missing and stamps it with the format version and
//   the node id; an existing DB of another version or another node is refused
//   and nothing stays open.
// - Every change goes through a batch; commit() turns one batch into exactly one
//   RocksDB write (atomic: all of it survives a crash or none of it). It is the
//   only place in lmcc that writes to the DB, and write_count() counts it.
// - load() reads one consistent view: the worker rows (worker_num order) and
//   watermarks into memory, the index entries streamed through a callback, so a
//   10M-entry index is never held twice.
// - checkpoint() writes a consistent RocksDB checkpoint plus MANIFEST.lmcc.json
//   (every file's name, size and crc32c); verify_snapshot() checks all of it;
//   restore() verifies, copies into a temp dir beside the target, opens that,
//   and only then renames it into place, so a bad snapshot never replaces data.
// - Errors are values naming the path and RocksDB's status text.
//
//   auto s = store::open({.path = "/var/lib/lmcc/n1"}, "n1");
//   if (!s) return fail(s.error().message);
//   store::batch b;
//   b.put_worker(row);
//   b.admit(slot, key, make_holder(row.worker_num, 0));
//   b.put_watermark({row.worker_num, 0, shard, seq});
//   if (auto r = (*s)->commit(std::move(b)); !r) ...
//   auto loaded = (*s)->load([&](uint32_t slot, uint64_t key, uint32_t h) { ... });
//
// Thread-safety: a store may be used from several threads. Commits run
// concurrently (RocksDB groups their WAL writes) except a batch with clears,
// which reads then writes and so runs alone; load, checkpoint and disk_bytes run
// beside them. A batch is a plain value, thread-compatible. In a node, each KV
// shard actor commits its own slots and the directory its rows, all off the
// socket threads.
#pragma once

#include "persistence/expected.hpp"
#include "persistence/schema.hpp"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace lmcc::persistence {

/// How a store is opened. Memory is bounded by block_cache_bytes (data, index
/// and filter blocks all live in it) plus write_buffer_bytes *
/// max_write_buffer_number (memtables).
struct store_options {
  /// Directory of the node's RocksDB; created with its parents when missing.
  /// `lmcc node` sets it from lmcc_data_dir, whose default this is.
  // Default: "./lmcc-data" (relative to the working directory).
  std::string path = "./lmcc-data";

  /// fsync the WAL on every commit. false relies on the WAL reaching the page
  /// cache: a process crash (kill -9) loses nothing, a machine crash may lose
  /// the last commits, which the seq watermarks then detect.
  // Default: false.
  bool sync = false;

  /// Skip the WAL: commits live only in memtables until a flush, so a crash
  /// loses them (detected by the watermarks, repaired by a full sync). For
  /// benchmarks; incompatible with sync.
  // Default: false.
  bool disable_wal = false;

  /// LRU block cache shared by data, index and filter blocks.
  // Default: 32 MiB.
  size_t block_cache_bytes = size_t{32} << 20;

  /// Size of one memtable before it is flushed to an SST.
  // Default: 32 MiB.
  size_t write_buffer_bytes = size_t{32} << 20;

  /// Memtables kept in memory (one active, the rest flushing).
  // Default: 2.
  int max_write_buffer_number = 2;

  /// Compress SST blocks with LZ4 (falls back to none when RocksDB lacks it).
  /// Entry keys are mostly hash bits, so the gain is modest; on by default
  /// because it costs little CPU.
  // Default: true.
  bool compression = true;

  /// RocksDB background threads for flushes and compactions.
  // Default: 2.
  int max_background_jobs = 2;

  /// Create the DB when the directory holds none; false makes a missing DB an error.
  // Default: true.
  bool create_if_missing = true;
};

/// Counts reported while loading and at its end.
struct load_progress {
  uint64_t workers = 0;
  uint64_t watermarks = 0;
  uint64_t entries = 0;
  double seconds = 0;
};

/// Everything but the entries (those are streamed).
struct load_result {
  std::vector<worker_row> workers;   ///< in worker_num (= registration) order
  std::vector<watermark> watermarks; ///< in (worker, location, shard) order
  uint64_t entries = 0;              ///< how many on_entry calls
  double seconds = 0;
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
  uint64_t watermarks = 0;
  uint64_t entries = 0;
  std::vector<snapshot_file> files;
};

/// Name of the manifest inside a snapshot directory.
inline constexpr const char* snapshot_manifest_name = "MANIFEST.lmcc.json";

class store {
public:
  // -- member types ----------------------------------------------------------

  using entry_fn = std::function<void(uint32_t slot, uint64_t key, uint32_t holder)>;
  using progress_fn = std::function<void(const load_progress&)>;

  /// Changes applied in order by one commit. Holds no reference to a store.
  class batch {
  public:
    /// Adds (key, holder) to the index under `slot` (<= max_slot).
    void admit(uint32_t slot, uint64_t key, uint32_t holder);

    /// Removes (key, holder); a no-op when absent.
    void evict(uint32_t slot, uint64_t key, uint32_t holder);

    /// Inserts or replaces the row stored under row.worker_num.
    void put_worker(const worker_row& row);

    /// Removes a worker's row (not its entries or watermarks: see clear_*).
    void delete_worker(uint32_t worker_num);

    /// Sets one shard's watermark for a (worker, location).
    void put_watermark(const watermark& w);

    /// Removes one shard's watermark for a (worker, location); a no-op when absent.
    void delete_watermark(uint32_t worker_num, uint32_t location_index, uint32_t shard);

    /// Removes every entry of the worker's `location_index` (< 256), or of all
    /// its locations, including entries admitted earlier in this batch. Scans
    /// every stored entry at commit (see schema.hpp for the cost).
    void clear_holder(uint32_t worker_num, std::optional<uint32_t> location_index);

    /// Removes the watermarks of the worker's location, or of all its locations.
    void clear_watermarks(uint32_t worker_num, std::optional<uint32_t> location_index);

    size_t size() const noexcept { return ops_.size(); }
    bool empty() const noexcept { return ops_.empty(); }

  private:
    friend class store;

    enum class op_kind : uint8_t {
      admit,
      evict,
      put_worker,
      delete_worker,
      put_watermark,
      delete_watermark,
      clear_holder,
      clear_watermarks,
    };

    /// Fields by kind: entries (a = slot, key, b = holder); workers (a =
    /// worker_num, b = index into rows_); watermarks (a = worker, b = location,
    /// c = shard, key = seq); clears (a = worker, b = location, has_location).
    struct op {
      op_kind kind;
      bool has_location = false;
      uint32_t a = 0;
      uint32_t b = 0;
      uint32_t c = 0;
      uint64_t key = 0;
    };

    void refuse(std::string why);

    std::vector<op> ops_;
    std::vector<std::string> rows_; ///< encoded worker rows
    std::optional<std::string> invalid_;
  };

  // -- construction ----------------------------------------------------------

  /// Opens (creating when allowed) the DB at options.path for `node_id`.
  static expected<std::unique_ptr<store>> open(const store_options& options,
                                               const std::string& node_id);

  struct impl;
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

  /// Applies the batch with exactly one RocksDB write (none when it is empty).
  /// The batch is left as it was, so a caller can retry it after a failure.
  expected<void> commit(const batch& b);

  /// Flushes memtables to SST files (benchmarks measure disk bytes after it).
  expected<void> flush();

  /// Turns RocksDB's automatic compactions off (false) or back on (true); a
  /// node turns them off while it loads, so that no new compaction competes
  /// with the load for the cores (one already running finishes; waiting for
  /// it, as PauseBackgroundWork would, cost seconds after a large ingest).
  expected<void> set_auto_compactions(bool on);

  /// Compacts the whole key range (drops tombstones; for disk measurements).
  expected<void> compact();

  // -- reading ---------------------------------------------------------------

  /// Reads one consistent view: rows and watermarks first, then every entry
  /// through on_entry in (slot, key, holder) order; on_progress (optional) every
  /// `progress_every` entries. A malformed record is an error naming it.
  expected<load_result> load(const entry_fn& on_entry, const progress_fn& on_progress = {},
                             uint64_t progress_every = 1'000'000) const;

  /// The worker rows and watermarks only (load_result::entries stays 0).
  expected<load_result> load_directory() const;

  /// Streams the entries of the listed slots (each <= max_slot), slot by slot
  /// in list order, through on_entry; the number streamed. Threads given
  /// disjoint slot lists may call it concurrently, which is how a node loads
  /// its index on several cores. Reads the latest state (no snapshot): meant
  /// for start-up, before anything writes.
  expected<uint64_t> load_slots(const std::vector<uint32_t>& slots, const entry_fn& on_entry) const;

  /// The first entry stored at or after `slot`, if any (finds entries beyond
  /// a smaller --slots than the data was written with).
  expected<std::optional<entry>> first_entry_from(uint32_t slot) const;

  // -- snapshots ---------------------------------------------------------------

  /// Writes a checkpoint and its manifest into `dir`, which must not exist;
  /// `dir` appears only once complete. SST files are hard links when `dir` is on
  /// the DB's file system (they are immutable, so the snapshot stays valid).
  expected<snapshot_info> checkpoint(const std::string& dir);

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
