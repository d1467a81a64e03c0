#include "persistence/store.hpp"

#include "persistence/files.hpp"

#include <rocksdb/cache.h>
#include <rocksdb/convenience.h>
#include <rocksdb/db.h>
#include <rocksdb/memtablerep.h>
#include <rocksdb/options.h>
#include <rocksdb/table.h>
#include <rocksdb/utilities/checkpoint.h>
#include <rocksdb/write_batch.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <mutex>
#include <shared_mutex>
#include <system_error>

namespace lmcc::persistence {

namespace fs = std::filesystem;

namespace {

using clock_type = std::chrono::steady_clock;

double seconds_since(clock_type::time_point start) {
  return std::chrono::duration<double>(clock_type::now() - start).count();
}

error wrap(const std::string& what, const std::string& path, const rocksdb::Status& s) {
  return error{what + " " + path + ": " + s.ToString()};
}

error wrap(const std::string& what, const std::string& path, const std::error_code& ec) {
  return error{what + " " + path + ": " + ec.message()};
}

/// Releases a RocksDB snapshot when the reader is done with it.
struct snapshot_releaser {
  rocksdb::DB* db;
  void operator()(const rocksdb::Snapshot* s) const { db->ReleaseSnapshot(s); }
};
using snapshot_ptr = std::unique_ptr<const rocksdb::Snapshot, snapshot_releaser>;

snapshot_ptr take_snapshot(rocksdb::DB* db) {
  return snapshot_ptr{db->GetSnapshot(), snapshot_releaser{db}};
}

/// Calls fn(key, value) for every key in [lo, hi) (hi empty: no bound); false
/// from fn stops early.
/// Long scans bypass the block cache so that a load or a clear_holder does not
/// evict what lookups of recent data keep there.
template <class F>
rocksdb::Status scan(rocksdb::DB* db, const rocksdb::Snapshot* snap, const std::string& lo,
                     const std::string& hi, F&& fn) {
  rocksdb::Slice upper{hi};
  rocksdb::ReadOptions ro;
  ro.snapshot = snap;
  if (!hi.empty())
    ro.iterate_upper_bound = &upper;
  ro.fill_cache = false;
  ro.readahead_size = size_t{4} << 20;
  std::unique_ptr<rocksdb::Iterator> it{db->NewIterator(ro)};
  for (it->Seek(lo); it->Valid(); it->Next()) {
    auto k = it->key();
    auto v = it->value();
    if (!fn(std::string_view{k.data(), k.size()}, std::string_view{v.data(), v.size()}))
      break;
  }
  return it->status();
}

std::string prefix_of(char p) {
  return std::string(1, p);
}
std::string prefix_end(char p) {
  return std::string(1, static_cast<char>(p + 1));
}

/// The smallest key greater than every key starting with `p`; empty for none.
std::string prefix_successor(std::string p) {
  while (!p.empty() && static_cast<uint8_t>(p.back()) == 0xff)
    p.pop_back();
  if (!p.empty())
    p.back() = static_cast<char>(static_cast<uint8_t>(p.back()) + 1);
  return p;
}

rocksdb::Options make_options(const store_options& o) {
  rocksdb::Options opt;
  opt.create_if_missing = o.create_if_missing;
  opt.write_buffer_size = o.write_buffer_bytes;
  opt.max_write_buffer_number = o.max_write_buffer_number;
  opt.max_background_jobs = o.max_background_jobs;
  opt.level_compaction_dynamic_level_bytes = true;
  // Vector memtables: an insert is an append, sorted once when the memtable is
  // flushed. The index writes hash-random keys and never reads single keys
  // back (loads and clears are scans), and the default skiplist spent most of
  // a node's ingest CPU comparing keys on insert. Vector memtables do not take
  // concurrent inserts; the shards' commits still overlap in everything else.
  opt.memtable_factory = std::make_shared<rocksdb::VectorRepFactory>();
  opt.allow_concurrent_memtable_write = false;
  // RocksDB's own info log: keep it small, it lives in the data dir.
  opt.keep_log_file_num = 3;
  opt.max_log_file_size = size_t{8} << 20;

  rocksdb::BlockBasedTableOptions table;
  table.block_cache = rocksdb::NewLRUCache(o.block_cache_bytes);
  // Index and filter blocks are charged to the cache, so memory stays bounded
  // by block_cache_bytes however many SST files there are.
  table.cache_index_and_filter_blocks = true;
  table.pin_l0_filter_and_index_blocks_in_cache = true;
  // No bloom filter: the index never does point reads (evicts are blind
  // deletes, loads are scans), so a filter would only cost disk and memory.
  opt.table_factory.reset(rocksdb::NewBlockBasedTableFactory(table));

  opt.compression = rocksdb::kNoCompression;
  if (o.compression) {
    auto supported = rocksdb::GetSupportedCompressions();
    if (std::find(supported.begin(), supported.end(), rocksdb::kLZ4Compression) != supported.end())
      opt.compression = rocksdb::kLZ4Compression;
    else
      spdlog::warn("store-compression-unavailable path={} codec=lz4 using=none", o.path);
  }
  return opt;
}

} // namespace

// -- batch -----------------------------------------------------------------------

void store::batch::refuse(std::string why) {
  if (!invalid_)
    invalid_ = std::move(why);
}

void store::batch::admit(uint32_t slot, uint64_t key, uint32_t holder) {
  if (slot > max_slot)
    refuse("slot " + std::to_string(slot) + " exceeds " + std::to_string(max_slot));
  ops_.push_back({op_kind::admit, false, slot, holder, 0, key});
}

void store::batch::evict(uint32_t slot, uint64_t key, uint32_t holder) {
  if (slot > max_slot)
    refuse("slot " + std::to_string(slot) + " exceeds " + std::to_string(max_slot));
  ops_.push_back({op_kind::evict, false, slot, holder, 0, key});
}

void store::batch::put_worker(const worker_row& row) {
  rows_.push_back(encode_worker_row(row));
  ops_.push_back(
      {op_kind::put_worker, false, row.worker_num, static_cast<uint32_t>(rows_.size() - 1), 0, 0});
}

void store::batch::delete_worker(uint32_t worker_num) {
  ops_.push_back({op_kind::delete_worker, false, worker_num, 0, 0, 0});
}

void store::batch::put_watermark(const watermark& w) {
  ops_.push_back({op_kind::put_watermark, false, w.worker_num, w.location_index, w.shard, w.seq});
}

void store::batch::delete_watermark(uint32_t worker_num, uint32_t location_index, uint32_t shard) {
  ops_.push_back({op_kind::delete_watermark, false, worker_num, location_index, shard, 0});
}

void store::batch::clear_holder(uint32_t worker_num, std::optional<uint32_t> location_index) {
  if (location_index && *location_index > 0xff)
    refuse("location index " + std::to_string(*location_index) + " exceeds 255");
  ops_.push_back({op_kind::clear_holder, location_index.has_value(), worker_num,
                  location_index.value_or(0), 0, 0});
}

void store::batch::clear_watermarks(uint32_t worker_num, std::optional<uint32_t> location_index) {
  ops_.push_back({op_kind::clear_watermarks, location_index.has_value(), worker_num,
                  location_index.value_or(0), 0, 0});
}

// -- impl --------------------------------------------------------------------------

struct store::impl {
  store_options options;
  std::string node_id;
  std::unique_ptr<rocksdb::DB> db;
  rocksdb::WriteOptions write_options;
  /// Exclusive for batches with clears (they read, then write what they read);
  /// shared for the rest, so independent writers (one per KV shard) commit
  /// concurrently and RocksDB groups their WAL writes.
  std::shared_mutex write_mutex;
  std::atomic<uint64_t> writes{0};
  bool created = false;

  ~impl() {
    if (!db)
      return;
    // A clean stop flushes the memtables, so the next start reads SSTs instead
    // of replaying the WAL (which only a crash should need).
    auto start = clock_type::now();
    if (auto s = db->Flush(rocksdb::FlushOptions{}); !s.ok())
      spdlog::warn("store-flush-failed path={} error={}", options.path, s.ToString());
    else
      spdlog::info("store-flushed path={} seconds={:.3f}", options.path, seconds_since(start));
    if (auto s = db->Close(); !s.ok())
      spdlog::warn("store-close-failed path={} error={}", options.path, s.ToString());
    else
      spdlog::info("store-close path={}", options.path);
  }

  /// The one call site of DB::Write in lmcc.
  expected<void> write(rocksdb::WriteBatch& wb, const rocksdb::WriteOptions& wo) {
    writes.fetch_add(1, std::memory_order_relaxed);
    if (auto s = db->Write(wo, &wb); !s.ok())
      return wrap("commit", options.path, s);
    return {};
  }

  /// True when the clear op matches the holder.
  static bool clears(const batch::op& op, uint32_t holder) {
    if ((holder >> 8) != op.a)
      return false;
    return !op.has_location || (holder & 0xff) == op.b;
  }
};

store::store(passkey, std::unique_ptr<impl> p) : impl_(std::move(p)) {}

store::~store() = default;

// -- open ----------------------------------------------------------------------------

expected<std::unique_ptr<store>> store::open(const store_options& options,
                                             const std::string& node_id) {
  const std::string& path = options.path;
  if (path.empty())
    return error{"open: empty path"};
  if (node_id.empty())
    return error{"open " + path + ": empty node id"};
  if (options.sync && options.disable_wal)
    return error{"open " + path + ": sync needs the WAL (disable_wal is set)"};
  auto start = clock_type::now();
  if (options.create_if_missing) {
    std::error_code ec;
    fs::create_directories(path, ec);
    if (ec)
      return wrap("open", path, ec);
  }
  rocksdb::DB* raw = nullptr;
  auto s = rocksdb::DB::Open(make_options(options), path, &raw);
  std::unique_ptr<rocksdb::DB> db{raw};
  if (!s.ok())
    return wrap("open", path, s);

  auto p = std::make_unique<impl>();
  p->options = options;
  p->node_id = node_id;
  p->db = std::move(db);
  p->write_options.sync = options.sync;
  p->write_options.disableWAL = options.disable_wal;

  std::string version_value;
  std::string node_value;
  auto vs = p->db->Get(rocksdb::ReadOptions{}, format_version_key(), &version_value);
  if (!vs.ok() && !vs.IsNotFound())
    return wrap("open", path, vs);
  bool created = false;
  if (vs.IsNotFound()) {
    // A fresh DB (or one whose creation crashed before the stamp): stamp it.
    // Anything else without a stamp is not ours.
    bool empty = true;
    auto es = scan(p->db.get(), nullptr, std::string{}, std::string{},
                   [&](std::string_view, std::string_view) { return empty = false; });
    if (!es.ok())
      return wrap("open", path, es);
    if (!empty)
      return error{"open " + path + ": not an lmcc store (no format record)"};
    rocksdb::WriteBatch wb;
    wb.Put(format_version_key(), encode_u32(format_version));
    wb.Put(node_id_key(), node_id);
    rocksdb::WriteOptions stamp; // the stamp always goes through a synced WAL
    stamp.sync = true;
    if (auto r = p->write(wb, stamp); !r)
      return r.error();
    created = true;
  } else {
    auto version = decode_u32(version_value);
    if (!version)
      return error{"open " + path + ": unreadable format version record"};
    if (*version != format_version)
      return error{"open " + path + ": format version " + std::to_string(*version) +
                   ", this build reads " + std::to_string(format_version)};
    auto ns = p->db->Get(rocksdb::ReadOptions{}, node_id_key(), &node_value);
    if (!ns.ok())
      return error{"open " + path + ": node id record: " + ns.ToString()};
    if (node_value != node_id)
      return error{"open " + path + ": the store belongs to node '" + node_value + "', not '" +
                   node_id + "'"};
  }
  p->created = created;
  uint64_t keys = 0;
  p->db->GetIntProperty("rocksdb.estimate-num-keys", &keys);
  spdlog::info("store-open path={} node={} created={} estimated_keys={} sync={} wal={} "
               "seconds={:.3f}",
               path, node_id, created, keys, options.sync, !options.disable_wal,
               seconds_since(start));
  return std::make_unique<store>(passkey{}, std::move(p));
}

// -- commit --------------------------------------------------------------------------

expected<void> store::commit(const batch& b) {
  const std::string& path = impl_->options.path;
  if (b.invalid_)
    return error{"commit " + path + ": " + *b.invalid_};
  if (b.ops_.empty())
    return {};
  rocksdb::DB* db = impl_->db.get();
  const bool has_clears = std::any_of(b.ops_.begin(), b.ops_.end(), [](const batch::op& op) {
    return op.kind == batch::op_kind::clear_holder || op.kind == batch::op_kind::clear_watermarks;
  });
  std::unique_lock exclusive{impl_->write_mutex, std::defer_lock};
  std::shared_lock shared{impl_->write_mutex, std::defer_lock};
  if (has_clears)
    exclusive.lock();
  else
    shared.lock();

  // clear_holder needs the stored entries of its holders: one scan for all the
  // batch's clears, bucketed per clear op so the deletes keep their position.
  std::vector<size_t> clear_ops;
  for (size_t i = 0; i < b.ops_.size(); ++i)
    if (b.ops_[i].kind == batch::op_kind::clear_holder)
      clear_ops.push_back(i);
  std::vector<std::vector<std::string>> stored(clear_ops.size());
  if (!clear_ops.empty()) {
    auto start = clock_type::now();
    uint64_t scanned = 0;
    auto s = scan(db, nullptr, prefix_of(entry_prefix), prefix_end(entry_prefix),
                  [&](std::string_view k, std::string_view) {
                    ++scanned;
                    auto e = decode_entry_key(k);
                    if (!e)
                      return true;
                    for (size_t c = 0; c < clear_ops.size(); ++c)
                      if (impl::clears(b.ops_[clear_ops[c]], e->holder))
                        stored[c].emplace_back(k);
                    return true;
                  });
    if (!s.ok())
      return wrap("commit (clear_holder scan)", path, s);
    spdlog::info("store-clear-holder-scan path={} scanned={} clears={} seconds={:.3f}", path,
                 scanned, clear_ops.size(), seconds_since(start));
  }

  // The batch's effect as puts/deletes in batch order, straight into the
  // WriteBatch (the vector memtable appends, so the order of unrelated keys
  // costs nothing). ~20 bytes per entry op: reserved up front.
  rocksdb::WriteBatch wb(b.ops_.size() * 24 + 64);
  rocksdb::Status failed;
  auto put = [&](const rocksdb::Slice& k, const rocksdb::Slice& v) {
    if (auto st = wb.Put(k, v); !st.ok() && failed.ok())
      failed = st;
  };
  auto del = [&](const rocksdb::Slice& k) {
    if (auto st = wb.Delete(k); !st.ok() && failed.ok())
      failed = st;
  };
  size_t next_clear = 0;
  for (size_t i = 0; i < b.ops_.size(); ++i) {
    const auto& op = b.ops_[i];
    switch (op.kind) {
    case batch::op_kind::admit:
      put(entry_key(op.a, op.key, op.b), rocksdb::Slice{});
      break;
    case batch::op_kind::evict:
      del(entry_key(op.a, op.key, op.b));
      break;
    case batch::op_kind::put_worker:
      put(worker_key(op.a), b.rows_[op.b]);
      break;
    case batch::op_kind::delete_worker:
      del(worker_key(op.a));
      break;
    case batch::op_kind::put_watermark:
      put(watermark_key(op.a, op.b, op.c), encode_u64(op.key));
      break;
    case batch::op_kind::delete_watermark:
      del(watermark_key(op.a, op.b, op.c));
      break;
    case batch::op_kind::clear_holder: {
      for (const auto& k : stored[next_clear++])
        del(k);
      // Entries admitted earlier in this batch are not in the DB yet.
      for (size_t j = 0; j < i; ++j)
        if (b.ops_[j].kind == batch::op_kind::admit && impl::clears(op, b.ops_[j].b))
          del(entry_key(b.ops_[j].a, b.ops_[j].key, b.ops_[j].b));
      break;
    }
    case batch::op_kind::clear_watermarks: {
      // 'M' be32(worker) [be32(location)]: the watermarks to drop are one range.
      std::string lo = watermark_key(op.a, op.b, 0);
      lo.resize(op.has_location ? 9 : 5);
      std::string hi = prefix_successor(lo);
      auto s = scan(db, nullptr, lo, hi, [&](std::string_view k, std::string_view) {
        del(rocksdb::Slice{k.data(), k.size()});
        return true;
      });
      if (!s.ok())
        return wrap("commit (clear_watermarks scan)", path, s);
      for (size_t j = 0; j < i; ++j) {
        const auto& w = b.ops_[j];
        if (w.kind == batch::op_kind::put_watermark && w.a == op.a &&
            (!op.has_location || w.b == op.b))
          del(watermark_key(w.a, w.b, w.c));
      }
      break;
    }
    }
  }
  if (!failed.ok())
    return wrap("commit", path, failed);
  return impl_->write(wb, impl_->write_options);
}

expected<void> store::flush() {
  if (auto s = impl_->db->Flush(rocksdb::FlushOptions{}); !s.ok())
    return wrap("flush", impl_->options.path, s);
  return {};
}

expected<void> store::set_auto_compactions(bool on) {
  auto s = impl_->db->SetOptions({{"disable_auto_compactions", on ? "false" : "true"}});
  if (!s.ok())
    return wrap(on ? "enable compactions" : "disable compactions", impl_->options.path, s);
  return {};
}

expected<void> store::compact() {
  rocksdb::CompactRangeOptions co;
  co.bottommost_level_compaction = rocksdb::BottommostLevelCompaction::kForce;
  if (auto s = impl_->db->CompactRange(co, nullptr, nullptr); !s.ok())
    return wrap("compact", impl_->options.path, s);
  return {};
}

// -- load ------------------------------------------------------------------------------

namespace {

/// The worker rows and watermarks as of `snap`.
expected<load_result> load_directory_at(rocksdb::DB* db, const rocksdb::Snapshot* snap,
                                        const std::string& path) {
  load_result result;
  std::optional<error> bad;
  auto ws = scan(db, snap, prefix_of(worker_prefix), prefix_end(worker_prefix),
                 [&](std::string_view k, std::string_view v) {
                   auto num = decode_worker_key(k);
                   if (!num) {
                     bad = error{"load " + path + ": malformed worker key"};
                     return false;
                   }
                   auto row = decode_worker_row(*num, v);
                   if (!row) {
                     bad = error{"load " + path + ": " + row.error().message};
                     return false;
                   }
                   result.workers.push_back(std::move(*row));
                   return true;
                 });
  if (!ws.ok())
    return wrap("load", path, ws);
  if (bad)
    return *bad;

  auto ms = scan(db, snap, prefix_of(watermark_prefix), prefix_end(watermark_prefix),
                 [&](std::string_view k, std::string_view v) {
                   auto w = decode_watermark_key(k);
                   auto seq = decode_u64(v);
                   if (!w || !seq) {
                     bad = error{"load " + path + ": malformed watermark record"};
                     return false;
                   }
                   w->seq = *seq;
                   result.watermarks.push_back(*w);
                   return true;
                 });
  if (!ms.ok())
    return wrap("load", path, ms);
  if (bad)
    return *bad;
  return result;
}

} // namespace

expected<load_result> store::load_directory() const {
  auto snap = take_snapshot(impl_->db.get());
  return load_directory_at(impl_->db.get(), snap.get(), impl_->options.path);
}

expected<uint64_t> store::load_slots(const std::vector<uint32_t>& slots,
                                     const entry_fn& on_entry) const {
  const std::string& path = impl_->options.path;
  for (uint32_t slot : slots)
    if (slot > max_slot)
      return error{"load " + path + ": slot " + std::to_string(slot) + " exceeds " +
                   std::to_string(max_slot)};
  // One iterator for all the slots, seeking forward slot by slot: a fresh
  // iterator per slot would redo its readahead thousands of times.
  rocksdb::ReadOptions ro;
  ro.fill_cache = false;
  ro.readahead_size = size_t{1} << 20;
  std::unique_ptr<rocksdb::Iterator> it{impl_->db->NewIterator(ro)};
  uint64_t entries = 0;
  for (uint32_t slot : slots) {
    const std::string prefix = entry_key(slot, 0, 0).substr(0, 3);
    for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix); it->Next()) {
      auto e = decode_entry_key(std::string_view{it->key().data(), it->key().size()});
      if (!e)
        return error{"load " + path + ": malformed entry key in slot " + std::to_string(slot)};
      on_entry(e->slot, e->key, e->holder);
      ++entries;
    }
    if (!it->status().ok())
      return wrap("load", path, it->status());
  }
  return entries;
}

expected<std::optional<entry>> store::first_entry_from(uint32_t slot) const {
  if (slot > max_slot)
    return std::optional<entry>{};
  std::optional<entry> first;
  std::string lo = entry_key(slot, 0, 0).substr(0, 3);
  auto s = scan(impl_->db.get(), nullptr, lo, prefix_end(entry_prefix),
                [&](std::string_view k, std::string_view) {
                  first = decode_entry_key(k);
                  return false;
                });
  if (!s.ok())
    return wrap("load", impl_->options.path, s);
  return first;
}

expected<load_result> store::load(const entry_fn& on_entry, const progress_fn& on_progress,
                                  uint64_t progress_every) const {
  const std::string& path = impl_->options.path;
  rocksdb::DB* db = impl_->db.get();
  auto start = clock_type::now();
  auto snap = take_snapshot(db);
  auto dir = load_directory_at(db, snap.get(), path);
  if (!dir)
    return dir.error();
  load_result result = std::move(*dir);
  std::optional<error> bad;

  auto progress = [&] {
    return load_progress{result.workers.size(), result.watermarks.size(), result.entries,
                         seconds_since(start)};
  };
  auto es = scan(db, snap.get(), prefix_of(entry_prefix), prefix_end(entry_prefix),
                 [&](std::string_view k, std::string_view) {
                   auto e = decode_entry_key(k);
                   if (!e) {
                     bad = error{"load " + path + ": malformed entry key after " +
                                 std::to_string(result.entries) + " entries"};
                     return false;
                   }
                   on_entry(e->slot, e->key, e->holder);
                   if (++result.entries % progress_every == 0) {
                     auto p = progress();
                     spdlog::info("store-load-progress path={} entries={} seconds={:.3f}", path,
                                  p.entries, p.seconds);
                     if (on_progress)
                       on_progress(p);
                   }
                   return true;
                 });
  if (!es.ok())
    return wrap("load", path, es);
  if (bad)
    return *bad;
  result.seconds = seconds_since(start);
  spdlog::info("store-load path={} workers={} watermarks={} entries={} seconds={:.3f}", path,
               result.workers.size(), result.watermarks.size(), result.entries, result.seconds);
  return result;
}

// -- snapshots ---------------------------------------------------------------------------

expected<snapshot_info> store::checkpoint(const std::string& dir) {
  const std::string& path = impl_->options.path;
  rocksdb::DB* db = impl_->db.get();
  auto start = clock_type::now();
  auto fail = [&](const std::string& what) { return error{"checkpoint " + dir + ": " + what}; };
  std::error_code ec;
  fs::path target = fs::absolute(dir, ec);
  if (ec)
    return fail(ec.message());
  if (fs::exists(target, ec))
    return fail("already exists");
  fs::path parent = target.parent_path();
  fs::create_directories(parent, ec);
  if (ec)
    return fail("create " + parent.string() + ": " + ec.message());
  // Built under a unique partial name and renamed at the end, so `dir` exists
  // only when complete (a crash leaves a .partial directory, never a torn dir).
  auto partial = files::make_temp_name(parent.string(), target.filename().string() + ".partial-");
  if (!partial)
    return fail(partial.error().message);

  snapshot_info info;
  info.format_version = format_version;
  info.node_id = impl_->node_id;
  info.created_at = files::utc_now();
  snapshot_ptr snap{nullptr, snapshot_releaser{db}};
  {
    // No commit between the checkpoint and the read snapshot: both see the same
    // state, so the counts in the manifest are the checkpoint's.
    std::unique_lock lock{impl_->write_mutex};
    rocksdb::Checkpoint* raw = nullptr;
    auto s = rocksdb::Checkpoint::Create(db, &raw);
    std::unique_ptr<rocksdb::Checkpoint> cp{raw};
    if (!s.ok())
      return wrap("checkpoint", path, s);
    // log_size_for_flush = 0: always flush, so the checkpoint holds everything
    // in SSTs even when the WAL is disabled.
    s = cp->CreateCheckpoint(*partial, 0, &info.sequence);
    if (!s.ok())
      return wrap("checkpoint", *partial, s);
    snap = take_snapshot(db);
  }
  auto remove_partial = [&] { fs::remove_all(*partial, ec); };

  auto count = [&](char prefix, uint64_t& n) {
    return scan(db, snap.get(), prefix_of(prefix), prefix_end(prefix),
                [&](std::string_view, std::string_view) { return ++n, true; });
  };
  for (auto [prefix, counter] :
       {std::pair{worker_prefix, &info.workers}, std::pair{watermark_prefix, &info.watermarks},
        std::pair{entry_prefix, &info.entries}})
    if (auto s = count(prefix, *counter); !s.ok()) {
      remove_partial();
      return wrap("checkpoint (count)", path, s);
    }
  snap.reset();

  uint64_t bytes = 0;
  for (const auto& de : fs::directory_iterator{*partial, ec}) {
    if (!de.is_regular_file()) {
      remove_partial();
      return fail("unexpected non-file " + de.path().filename().string() + " in checkpoint");
    }
    auto crc = files::file_crc32c(de.path().string());
    if (!crc) {
      remove_partial();
      return fail(crc.error().message);
    }
    snapshot_file f{de.path().filename().string(), de.file_size(), std::move(*crc)};
    bytes += f.size;
    info.files.push_back(std::move(f));
  }
  if (ec) {
    remove_partial();
    return fail("list " + *partial + ": " + ec.message());
  }
  std::sort(info.files.begin(), info.files.end(),
            [](const auto& a, const auto& b) { return a.name < b.name; });
  std::string manifest_path = (fs::path{*partial} / snapshot_manifest_name).string();
  if (auto r = files::write_file_synced(manifest_path, files::render_manifest(info)); !r) {
    remove_partial();
    return fail(r.error().message);
  }
  if (auto r = files::fsync_path(*partial, true); !r) {
    remove_partial();
    return fail(r.error().message);
  }
  fs::rename(*partial, target, ec);
  if (ec) {
    remove_partial();
    return fail("rename " + *partial + ": " + ec.message());
  }
  if (auto r = files::fsync_path(parent.string(), true); !r)
    return fail(r.error().message);
  spdlog::info("store-checkpoint path={} dir={} sequence={} workers={} watermarks={} entries={} "
               "files={} bytes={} seconds={:.3f}",
               path, target.string(), info.sequence, info.workers, info.watermarks, info.entries,
               info.files.size(), bytes, seconds_since(start));
  return info;
}

expected<snapshot_info> store::verify_snapshot(const std::string& dir) {
  auto fail = [&](const std::string& what) { return error{"snapshot " + dir + ": " + what}; };
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    return fail("not a directory");
  fs::path manifest_path = fs::path{dir} / snapshot_manifest_name;
  if (!fs::is_regular_file(manifest_path, ec))
    return fail(std::string{snapshot_manifest_name} + " is missing");
  std::string text;
  {
    auto size = fs::file_size(manifest_path, ec);
    if (ec)
      return fail(std::string{snapshot_manifest_name} + ": " + ec.message());
    // A manifest lists a few dozen files; anything huge is not one.
    if (size > (size_t{16} << 20))
      return fail(std::string{snapshot_manifest_name} + " is too large to be a manifest");
    std::FILE* f = std::fopen(manifest_path.c_str(), "rb");
    if (f == nullptr)
      return fail("cannot read " + std::string{snapshot_manifest_name});
    std::unique_ptr<std::FILE, int (*)(std::FILE*)> guard{f, &std::fclose};
    text.resize(size);
    if (std::fread(text.data(), 1, size, f) != size)
      return fail("cannot read " + std::string{snapshot_manifest_name});
  }
  auto info = files::parse_manifest(text, dir);
  if (!info)
    return info;
  for (const auto& file : info->files) {
    fs::path p = fs::path{dir} / file.name;
    if (!fs::is_regular_file(p, ec))
      return fail("file " + file.name + " listed in the manifest is missing");
    auto size = fs::file_size(p, ec);
    if (ec)
      return fail("file " + file.name + ": " + ec.message());
    if (size != file.size)
      return fail("file " + file.name + " has " + std::to_string(size) +
                  " bytes, the manifest says " + std::to_string(file.size));
    auto crc = files::file_crc32c(p.string());
    if (!crc)
      return fail(crc.error().message);
    if (*crc != file.crc32c)
      return fail("file " + file.name + " is corrupted: crc32c " + *crc + ", the manifest says " +
                  file.crc32c);
  }
  return info;
}

expected<std::unique_ptr<store>> store::restore(const std::string& snapshot_dir,
                                                const store_options& target,
                                                const std::string& node_id) {
  auto start = clock_type::now();
  auto fail = [&](const std::string& what) {
    spdlog::warn("store-restore-refused snapshot={} target={} error={}", snapshot_dir, target.path,
                 what);
    return error{"restore " + target.path + " from " + snapshot_dir + ": " + what};
  };
  auto info = verify_snapshot(snapshot_dir);
  if (!info)
    return fail(info.error().message);
  if (info->node_id != node_id)
    return fail("the snapshot was taken by node '" + info->node_id + "', not '" + node_id + "'");
  std::error_code ec;
  fs::path dest = fs::absolute(target.path, ec);
  if (ec || target.path.empty())
    return fail("bad target path");
  if (auto pid = files::lock_holder(dest.string()))
    return fail("the target is in use by process " + std::to_string(*pid));
  fs::path parent = dest.parent_path();
  fs::create_directories(parent, ec);
  if (ec)
    return fail("create " + parent.string() + ": " + ec.message());

  // Copy into a temp dir beside the target (same file system, so the final
  // rename is atomic), checking every file's checksum on the bytes copied.
  std::string name = dest.filename().string();
  auto tmp = files::make_temp_dir(parent.string(), "." + name + ".restore-");
  if (!tmp)
    return fail(tmp.error().message);
  auto drop_tmp = [&] { fs::remove_all(*tmp, ec); };
  for (const auto& file : info->files) {
    auto copied = files::copy_file_checked((fs::path{snapshot_dir} / file.name).string(),
                                           (fs::path{*tmp} / file.name).string());
    if (!copied) {
      drop_tmp();
      return fail(copied.error().message);
    }
    if (copied->size != file.size || copied->crc32c != file.crc32c) {
      drop_tmp();
      return fail("file " + file.name + " changed while it was copied");
    }
  }
  if (auto r = files::fsync_path(*tmp, true); !r) {
    drop_tmp();
    return fail(r.error().message);
  }
  // Open the copy once: RocksDB and the format stamp accept it before anything
  // at the target is touched.
  {
    store_options probe = target;
    probe.path = *tmp;
    probe.create_if_missing = false;
    auto s = open(probe, node_id);
    if (!s) {
      drop_tmp();
      return fail(s.error().message);
    }
  }

  // Swap: target -> .replaced, tmp -> target, then drop the old contents.
  std::optional<std::string> old;
  if (fs::exists(dest, ec)) {
    auto name_old = files::make_temp_name(parent.string(), "." + name + ".replaced-");
    if (!name_old) {
      drop_tmp();
      return fail(name_old.error().message);
    }
    fs::rename(dest, *name_old, ec);
    if (ec) {
      drop_tmp();
      return fail("move aside " + dest.string() + ": " + ec.message());
    }
    old = *name_old;
  }
  fs::rename(*tmp, dest, ec);
  if (ec) {
    std::string why = ec.message();
    if (old)
      fs::rename(*old, dest, ec);
    drop_tmp();
    return fail("rename into place: " + why);
  }
  if (auto r = files::fsync_path(parent.string(), true); !r)
    spdlog::warn("store-restore-fsync-failed dir={} error={}", parent.string(), r.error().message);
  if (old)
    fs::remove_all(*old, ec);
  auto s = open(target, node_id);
  if (!s)
    return fail(s.error().message);
  spdlog::info("store-restore snapshot={} target={} node={} sequence={} workers={} entries={} "
               "replaced={} seconds={:.3f}",
               snapshot_dir, dest.string(), node_id, info->sequence, info->workers, info->entries,
               old.has_value(), seconds_since(start));
  return s;
}

// -- properties ----------------------------------------------------------------------

expected<uint64_t> store::disk_bytes() const {
  const std::string& path = impl_->options.path;
  std::error_code ec;
  uint64_t total = 0;
  for (const auto& de : fs::directory_iterator{path, ec}) {
    auto name = de.path().filename().string();
    // RocksDB's info logs (LOG, LOG.old.*) are diagnostics, not data.
    if (name.starts_with("LOG"))
      continue;
    std::error_code fec;
    if (de.is_regular_file(fec))
      total += de.file_size(fec);
  }
  if (ec)
    return wrap("disk_bytes", path, ec);
  return total;
}

bool store::created() const noexcept {
  return impl_->created;
}

uint64_t store::write_count() const noexcept {
  return impl_->writes.load(std::memory_order_relaxed);
}

const std::string& store::path() const noexcept {
  return impl_->options.path;
}

const std::string& store::node_id() const noexcept {
  return impl_->node_id;
}

} // namespace lmcc::persistence
