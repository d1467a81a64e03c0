// store: open, batches, commit and the start-up reads (store.hpp). Snapshots
// are in store_snapshot.cpp.
#include "persistence/internal/store_impl.hpp"

#include <rocksdb/cache.h>
#include <rocksdb/convenience.h>
#include <rocksdb/experimental.h>
#include <rocksdb/memtablerep.h>
#include <rocksdb/options.h>
#include <rocksdb/table.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <filesystem>
#include <mutex>

namespace lmcc::persistence {

namespace fs = std::filesystem;

namespace {

/// `cache`: the one block cache of the DB, shared by both families, so that
/// block_cache_bytes bounds them together (a cache per family doubled it).
rocksdb::BlockBasedTableOptions table_options(std::shared_ptr<rocksdb::Cache> cache) {
  rocksdb::BlockBasedTableOptions table;
  table.block_cache = std::move(cache);
  // Index and filter blocks are charged to the cache, so memory stays bounded
  // by block_cache_bytes however many SST files there are.
  table.cache_index_and_filter_blocks = true;
  table.pin_l0_filter_and_index_blocks_in_cache = true;
  // No bloom filter: the store never does point reads on the write path (the
  // index is in memory; start-up reads are scans).
  return table;
}

rocksdb::DBOptions db_options(const store_options& o) {
  rocksdb::DBOptions opt;
  opt.create_if_missing = o.create_if_missing;
  opt.create_missing_column_families = o.create_if_missing;
  opt.max_background_jobs = o.max_background_jobs;
  opt.max_total_wal_size = o.max_wal_bytes;
  // RocksDB's own info log: keep it small, it lives in the data dir.
  opt.keep_log_file_num = 3;
  opt.max_log_file_size = size_t{8} << 20;
  // A torn last WAL record (a crash mid-append) is dropped, everything before
  // it is recovered: the default, stated because the op log relies on it.
  opt.wal_recovery_mode = rocksdb::WALRecoveryMode::kPointInTimeRecovery;
  // The op log's vector memtable takes no concurrent inserts; a node has one
  // log writer anyway.
  opt.allow_concurrent_memtable_write = false;
  return opt;
}

rocksdb::ColumnFamilyOptions default_cf_options(const store_options& o,
                                                std::shared_ptr<rocksdb::Cache> cache) {
  rocksdb::ColumnFamilyOptions cf;
  cf.write_buffer_size = o.write_buffer_bytes;
  cf.max_write_buffer_number = o.max_write_buffer_number;
  cf.level_compaction_dynamic_level_bytes = true;
  cf.table_factory.reset(rocksdb::NewBlockBasedTableFactory(table_options(cache)));
  cf.compression = rocksdb::kNoCompression;
  if (o.compression) {
    auto supported = rocksdb::GetSupportedCompressions();
    if (std::find(supported.begin(), supported.end(), rocksdb::kLZ4Compression) != supported.end())
      cf.compression = rocksdb::kLZ4Compression;
    else
      spdlog::warn("store-compression-unavailable path={} codec=lz4 using=none", o.path);
  }
  return cf;
}

rocksdb::ColumnFamilyOptions log_cf_options(const store_options& o,
                                            std::shared_ptr<rocksdb::Cache> cache) {
  rocksdb::ColumnFamilyOptions cf;
  cf.write_buffer_size = o.write_buffer_bytes;
  cf.max_write_buffer_number = o.max_write_buffer_number;
  // Records arrive in key order and are read only by scans: a vector memtable
  // appends (no skiplist comparisons on the ingest path).
  cf.memtable_factory = std::make_shared<rocksdb::VectorRepFactory>();
  cf.compression = rocksdb::kNoCompression;
  cf.level_compaction_dynamic_level_bytes = true;
  cf.table_factory.reset(rocksdb::NewBlockBasedTableFactory(table_options(cache)));
  return cf;
}

} // namespace

// -- batch -----------------------------------------------------------------------

store::batch::batch(std::unique_ptr<rep> r) : rep_(std::move(r)) {}
store::batch::batch(batch&&) noexcept = default;
store::batch& store::batch::operator=(batch&&) noexcept = default;
store::batch::~batch() = default;

namespace {

void note(rocksdb::Status st, rocksdb::Status& failed) {
  if (!st.ok() && failed.ok())
    failed = std::move(st);
}

} // namespace

void store::batch::append_log(uint64_t position, std::string_view record) {
  note(rep_->wb.Put(rep_->log_cf, log_key(position), rocksdb::Slice{record.data(), record.size()}),
       rep_->failed);
  ++rep_->count;
}

void store::batch::put_slot(uint32_t slot, std::string_view value) {
  note(rep_->wb.Put(rep_->default_cf, slot_key(slot), rocksdb::Slice{value.data(), value.size()}),
       rep_->failed);
  ++rep_->count;
}

void store::batch::delete_slot(uint32_t slot) {
  note(rep_->wb.Delete(rep_->default_cf, slot_key(slot)), rep_->failed);
  ++rep_->count;
}

void store::batch::put_holder(const holder_state& state) {
  note(rep_->wb.Put(rep_->default_cf, holder_key(state.holder), encode_holder_state(state)),
       rep_->failed);
  ++rep_->count;
}

void store::batch::delete_holder(uint64_t holder) {
  note(rep_->wb.Delete(rep_->default_cf, holder_key(holder)), rep_->failed);
  ++rep_->count;
}

void store::batch::put_worker(const worker_row& row) {
  note(rep_->wb.Put(rep_->default_cf, worker_key(row.uid), encode_worker_row(row)), rep_->failed);
  ++rep_->count;
}

void store::batch::delete_worker(uint64_t uid) {
  note(rep_->wb.Delete(rep_->default_cf, worker_key(uid)), rep_->failed);
  ++rep_->count;
}

void store::batch::truncate_log(uint64_t floor) {
  note(rep_->wb.DeleteRange(rep_->log_cf, log_key(0), log_key(floor)), rep_->failed);
  note(rep_->wb.Put(rep_->default_cf, log_floor_key(), encode_u64(floor)), rep_->failed);
  rep_->count += 2;
}

size_t store::batch::count() const noexcept {
  return rep_->count;
}

size_t store::batch::bytes() const noexcept {
  return rep_->wb.GetDataSize();
}

// -- impl --------------------------------------------------------------------------

store::impl::~impl() {
  if (!db)
    return;
  // A clean stop flushes the memtables, so the next start reads SSTs instead
  // of replaying the WAL (which only a crash should need).
  auto start = clock_type::now();
  if (auto s = db->Flush(rocksdb::FlushOptions{}, handles); !s.ok())
    spdlog::warn("store-flush-failed path={} error={}", options.path, s.ToString());
  else
    spdlog::info("store-flushed path={} seconds={:.3f}", options.path, seconds_since(start));
  for (auto* h : handles)
    if (auto s = db->DestroyColumnFamilyHandle(h); !s.ok())
      spdlog::warn("store-close-failed path={} error={}", options.path, s.ToString());
  handles.clear();
  if (auto s = db->Close(); !s.ok())
    spdlog::warn("store-close-failed path={} error={}", options.path, s.ToString());
  else
    spdlog::info("store-close path={}", options.path);
}

expected<void> store::impl::write(rocksdb::WriteBatch& wb, const rocksdb::WriteOptions& wo) {
  writes.fetch_add(1, std::memory_order_relaxed);
  if (const char* why = faults.before_commit())
    return error{"commit " + options.path + ": injected failure (" + why + ")"};
  if (auto s = db->Write(wo, &wb); !s.ok())
    return wrap("commit", options.path, s);
  return {};
}

store::store(passkey, std::unique_ptr<impl> p) : impl_(std::move(p)) {}

store::~store() = default;

// -- open ----------------------------------------------------------------------------

namespace {

/// Checks (or, on a fresh DB, writes) the format stamp. true when it was created.
expected<bool> check_stamp(store::impl& p) {
  const std::string& path = p.options.path;
  std::string version_value;
  auto vs = p.db->Get(rocksdb::ReadOptions{}, p.default_cf(), format_version_key(), &version_value);
  if (!vs.ok() && !vs.IsNotFound())
    return wrap("open", path, vs);
  if (vs.IsNotFound()) {
    // A fresh DB (or one whose creation crashed before the stamp): stamp it.
    // Anything else without a stamp is not ours.
    bool empty = true;
    for (auto* cf : p.handles) {
      auto es = scan(p.db.get(), cf, nullptr, std::string{}, std::string{},
                     [&](std::string_view, std::string_view) { return empty = false; });
      if (!es.ok())
        return wrap("open", path, es);
    }
    if (!empty)
      return error{"open " + path + ": not an lmcc store (no format record)"};
    rocksdb::WriteBatch wb;
    wb.Put(p.default_cf(), format_version_key(), encode_u32(format_version));
    wb.Put(p.default_cf(), node_id_key(), p.node_id);
    rocksdb::WriteOptions stamp; // the stamp always goes through a synced WAL
    stamp.sync = true;
    if (auto r = p.write(wb, stamp); !r)
      return r.error();
    return true;
  }
  auto version = decode_u32(version_value);
  if (!version)
    return error{"open " + path + ": unreadable format version record"};
  if (*version != format_version) {
    std::string hint =
        *version == 1 ? " (format 1 kept one RocksDB key per entry, before lmcc's op log; move "
                        "the data dir aside and let the workers full-sync, or keep running the "
                        "lmcc that wrote it)"
        : *version == 2
            ? " (format 2 kept no stream positions per holder and slot, which copies between "
              "nodes now compare; move the data dir aside: a cluster node copies its slots from "
              "its peers, a single node asks its workers to full-sync)"
            : "";
    return error{"open " + path + ": format version " + std::to_string(*version) +
                 ", this build reads " + std::to_string(format_version) + hint};
  }
  std::string node_value;
  auto ns = p.db->Get(rocksdb::ReadOptions{}, p.default_cf(), node_id_key(), &node_value);
  if (!ns.ok())
    return error{"open " + path + ": node id record: " + ns.ToString()};
  if (node_value != p.node_id)
    return error{"open " + path + ": the store belongs to node '" + node_value + "', not '" +
                 p.node_id + "'"};
  return false;
}

} // namespace

expected<std::unique_ptr<store>> store::open(const store_options& options,
                                             const std::string& node_id) {
  const std::string& path = options.path;
  if (path.empty())
    return error{"open: empty path"};
  if (node_id.empty())
    return error{"open " + path + ": empty node id"};
  if (options.sync && options.disable_wal)
    return error{"open " + path + ": sync needs the WAL (disable_wal is set)"};
  if (options.idle_background_threads)
    for (auto pool : {rocksdb::Env::Priority::LOW, rocksdb::Env::Priority::HIGH})
      (void)rocksdb::Env::Default()->LowerThreadPoolCPUPriority(pool, rocksdb::CpuPriority::kIdle);
  auto start = clock_type::now();
  if (options.create_if_missing) {
    std::error_code ec;
    fs::create_directories(path, ec);
    if (ec)
      return wrap("open", path, ec);
  }
  // A data dir without the op log's family is either format 1 (lmcc before
  // the op log) or not lmcc's: look at its stamp read-only, so that a refused
  // DB is left exactly as it was (no family is created in it).
  std::vector<std::string> existing;
  if (rocksdb::DB::ListColumnFamilies(rocksdb::DBOptions{}, path, &existing).ok() &&
      !existing.empty() &&
      std::find(existing.begin(), existing.end(), log_column_family) == existing.end()) {
    rocksdb::DB* probe = nullptr;
    if (rocksdb::DB::OpenForReadOnly(rocksdb::Options{}, path, &probe).ok()) {
      std::unique_ptr<rocksdb::DB> guard{probe};
      std::string v;
      const bool stamped = probe->Get(rocksdb::ReadOptions{}, format_version_key(), &v).ok();
      if (stamped && decode_u32(v) == uint32_t{1})
        return error{"open " + path + ": format version 1, this build reads " +
                     std::to_string(format_version) +
                     " (format 1 kept one RocksDB key per entry, before lmcc's op log; move the "
                     "data dir aside and let the workers full-sync, or keep running the lmcc "
                     "that wrote it)"};
      if (!stamped)
        return error{"open " + path + ": not an lmcc store (no format record)"};
    }
  }
  auto p = std::make_unique<impl>();
  p->block_cache = rocksdb::NewLRUCache(options.block_cache_bytes);
  std::vector<rocksdb::ColumnFamilyDescriptor> families{
      {rocksdb::kDefaultColumnFamilyName, default_cf_options(options, p->block_cache)},
      {log_column_family, log_cf_options(options, p->block_cache)}};
  p->options = options;
  p->node_id = node_id;
  rocksdb::DB* raw = nullptr;
  auto s = rocksdb::DB::Open(db_options(options), path, families, &p->handles, &raw);
  p->db.reset(raw);
  if (!s.ok()) {
    p->db.reset();
    p->handles.clear();
    return wrap("open", path, s);
  }
  p->write_options.sync = options.sync;
  p->write_options.disableWAL = options.disable_wal;
  auto created = check_stamp(*p);
  if (!created)
    return created.error();
  p->created = *created;
  uint64_t keys = 0;
  p->db->GetIntProperty(p->default_cf(), "rocksdb.estimate-num-keys", &keys);
  spdlog::info("store-open path={} node={} created={} estimated_keys={} sync={} wal={} "
               "seconds={:.3f}",
               path, node_id, p->created, keys, options.sync, !options.disable_wal,
               seconds_since(start));
  return std::make_unique<store>(passkey{}, std::move(p));
}

// -- writing ---------------------------------------------------------------------------

store::batch store::new_batch() const {
  auto r = std::make_unique<batch::rep>();
  r->log_cf = impl_->log_cf();
  r->default_cf = impl_->default_cf();
  return batch{std::move(r)};
}

expected<void> store::commit(batch& b) {
  if (!b.rep_->failed.ok())
    return wrap("commit (batch)", impl_->options.path, b.rep_->failed);
  if (b.empty())
    return {};
  std::shared_lock lock{impl_->write_mutex};
  return impl_->write(b.rep_->wb, impl_->write_options);
}

expected<void> store::release_log_files(uint64_t floor) {
  const std::string begin = log_key(0);
  const std::string end = log_key(floor);
  rocksdb::Slice b{begin}, e{end};
  // include_end = false: a file holding the floor's record stays.
  auto s = rocksdb::DeleteFilesInRange(impl_->db.get(), impl_->log_cf(), &b, &e, false);
  if (!s.ok())
    return wrap("release log files", impl_->options.path, s);
  // DeleteFilesInRange leaves level-0 files: they go with the next level-0
  // compaction (at most level0_file_num_compaction_trigger files wait), which
  // drops what the range delete covers without holding up the caller. The
  // hint below asks RocksDB to pick the range sooner where it can.
  s = rocksdb::experimental::SuggestCompactRange(impl_->db.get(), impl_->log_cf(), &b, &e);
  if (!s.ok())
    return wrap("release log files", impl_->options.path, s);
  return {};
}

expected<void> store::flush() {
  if (auto s = impl_->db->Flush(rocksdb::FlushOptions{}, impl_->handles); !s.ok())
    return wrap("flush", impl_->options.path, s);
  return {};
}

expected<void> store::request_flush() {
  rocksdb::FlushOptions background;
  background.wait = false;
  background.allow_write_stall = true;
  if (auto s = impl_->db->Flush(background, impl_->handles); !s.ok())
    return wrap("request flush", impl_->options.path, s);
  return {};
}

expected<void> store::set_auto_compactions(bool on) {
  for (auto* cf : impl_->handles) {
    auto s = impl_->db->SetOptions(cf, {{"disable_auto_compactions", on ? "false" : "true"}});
    if (!s.ok())
      return wrap(on ? "enable compactions" : "disable compactions", impl_->options.path, s);
  }
  return {};
}

expected<void> store::compact() {
  rocksdb::CompactRangeOptions co;
  co.bottommost_level_compaction = rocksdb::BottommostLevelCompaction::kForce;
  for (auto* cf : impl_->handles)
    if (auto s = impl_->db->CompactRange(co, cf, nullptr, nullptr); !s.ok())
      return wrap("compact", impl_->options.path, s);
  return {};
}

store_faults& store::faults() noexcept {
  return impl_->faults;
}

// -- reading -----------------------------------------------------------------------------

expected<directory_data> store::load_directory() const {
  const std::string& path = impl_->options.path;
  rocksdb::DB* db = impl_->db.get();
  auto snap = take_snapshot(db);
  directory_data out;
  std::optional<error> bad;
  auto ws = scan(db, impl_->default_cf(), snap.get(), prefix_of(worker_prefix),
                 prefix_end(worker_prefix), [&](std::string_view k, std::string_view v) {
                   auto uid = decode_worker_key(k);
                   if (!uid) {
                     bad = error{"load " + path + ": malformed worker key"};
                     return false;
                   }
                   auto row = decode_worker_row(*uid, v);
                   if (!row) {
                     bad = error{"load " + path + ": " + row.error().message};
                     return false;
                   }
                   out.workers.push_back(std::move(*row));
                   return true;
                 });
  if (!ws.ok())
    return wrap("load", path, ws);
  if (bad)
    return *bad;
  auto hs = scan(db, impl_->default_cf(), snap.get(), prefix_of(holder_prefix),
                 prefix_end(holder_prefix), [&](std::string_view k, std::string_view v) {
                   auto holder = decode_holder_key(k);
                   if (!holder) {
                     bad = error{"load " + path + ": malformed holder key"};
                     return false;
                   }
                   auto state = decode_holder_state(*holder, v);
                   if (state)
                     out.holders.push_back(std::move(*state));
                   else
                     out.damaged_holders.emplace_back(*holder, state.error().message);
                   return true;
                 });
  if (!hs.ok())
    return wrap("load", path, hs);
  if (bad)
    return *bad;
  std::string floor;
  auto fs = db->Get(rocksdb::ReadOptions{}, impl_->default_cf(), log_floor_key(), &floor);
  if (fs.ok()) {
    auto v = decode_u64(floor);
    if (!v)
      return error{"load " + path + ": unreadable log floor"};
    out.log_floor = *v;
  } else if (!fs.IsNotFound()) {
    return wrap("load", path, fs);
  }
  return out;
}

expected<uint64_t> store::for_each_slot(uint32_t lo, uint32_t hi, const slot_fn& fn) const {
  uint64_t n = 0;
  std::optional<error> bad;
  auto s = scan(impl_->db.get(), impl_->default_cf(), nullptr, slot_key(lo), slot_key(hi),
                [&](std::string_view k, std::string_view v) {
                  auto slot = decode_slot_key(k);
                  if (!slot) {
                    bad = error{"load " + impl_->options.path + ": malformed slot key"};
                    return false;
                  }
                  fn(*slot, v);
                  ++n;
                  return true;
                });
  if (!s.ok())
    return wrap("load", impl_->options.path, s);
  if (bad)
    return *bad;
  return n;
}

expected<uint64_t> store::for_each_log_record(uint64_t from, const log_fn& fn) const {
  uint64_t n = 0;
  std::optional<error> bad;
  auto s = scan(impl_->db.get(), impl_->log_cf(), nullptr, log_key(from), prefix_end(log_prefix),
                [&](std::string_view k, std::string_view v) {
                  auto position = decode_log_key(k);
                  if (!position) {
                    bad = error{"load " + impl_->options.path + ": malformed log key"};
                    return false;
                  }
                  fn(*position, v);
                  ++n;
                  return true;
                });
  if (!s.ok())
    return wrap("load", impl_->options.path, s);
  if (bad)
    return *bad;
  return n;
}

expected<uint64_t> store::last_log_position() const {
  rocksdb::ReadOptions ro;
  std::unique_ptr<rocksdb::Iterator> it{impl_->db->NewIterator(ro, impl_->log_cf())};
  it->SeekForPrev(prefix_end(log_prefix));
  if (!it->status().ok())
    return wrap("load", impl_->options.path, it->status());
  if (!it->Valid())
    return uint64_t{0};
  auto position = decode_log_key(std::string_view{it->key().data(), it->key().size()});
  if (!position)
    return error{"load " + impl_->options.path + ": malformed log key"};
  return *position;
}

} // namespace lmcc::persistence
