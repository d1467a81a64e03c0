// store_impl: the RocksDB handles behind persistence::store, shared by the
// files that implement it (store.cpp: open, commit, load; store_snapshot.cpp:
// checkpoint, verify, restore).
//
// Private to persistence/: include only from its .cpp files.
#pragma once

#include "persistence/store.hpp"

#include <rocksdb/cache.h>
#include <rocksdb/db.h>
#include <rocksdb/snapshot.h>
#include <rocksdb/write_batch.h>

#include <chrono>
#include <memory>
#include <shared_mutex>
#include <string>
#include <system_error>
#include <vector>

namespace lmcc::persistence {

using clock_type = std::chrono::steady_clock;

inline double seconds_since(clock_type::time_point start) {
  return std::chrono::duration<double>(clock_type::now() - start).count();
}

inline error wrap(const std::string& what, const std::string& path, const rocksdb::Status& s) {
  return error{what + " " + path + ": " + s.ToString()};
}

inline error wrap(const std::string& what, const std::string& path, const std::error_code& ec) {
  return error{what + " " + path + ": " + ec.message()};
}

struct store::batch::rep {
  rocksdb::WriteBatch wb;
  rocksdb::ColumnFamilyHandle* log_cf = nullptr;
  rocksdb::ColumnFamilyHandle* default_cf = nullptr;
  size_t count = 0;
  rocksdb::Status failed; ///< first Put/Delete error (only on absurd sizes)
};

struct store::impl {
  store_options options;
  std::string node_id;
  /// The block cache both families share (store_options::block_cache_bytes).
  std::shared_ptr<rocksdb::Cache> block_cache;
  std::unique_ptr<rocksdb::DB> db;
  /// [0] default, [1] log; owned by db (destroyed before it is closed).
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::WriteOptions write_options;
  std::atomic<uint64_t> writes{0};
  store_faults faults;
  /// Shared by commits, exclusive for a checkpoint: the manifest's counts are
  /// read at exactly the checkpoint's state.
  std::shared_mutex write_mutex;
  bool created = false;

  rocksdb::ColumnFamilyHandle* default_cf() const { return handles.at(0); }
  rocksdb::ColumnFamilyHandle* log_cf() const { return handles.at(1); }

  ~impl();

  /// The one call site of DB::Write in lmcc.
  expected<void> write(rocksdb::WriteBatch& wb, const rocksdb::WriteOptions& wo);
};

/// Releases a RocksDB snapshot when the reader is done with it.
struct snapshot_releaser {
  rocksdb::DB* db;
  void operator()(const rocksdb::Snapshot* s) const { db->ReleaseSnapshot(s); }
};
using snapshot_ptr = std::unique_ptr<const rocksdb::Snapshot, snapshot_releaser>;

inline snapshot_ptr take_snapshot(rocksdb::DB* db) {
  return snapshot_ptr{db->GetSnapshot(), snapshot_releaser{db}};
}

/// Calls fn(key, value) for every key of `cf` in [lo, hi) (hi empty: no
/// bound); false from fn stops early. Long scans bypass the block cache.
template <class F>
rocksdb::Status scan(rocksdb::DB* db, rocksdb::ColumnFamilyHandle* cf,
                     const rocksdb::Snapshot* snap, const std::string& lo, const std::string& hi,
                     F&& fn) {
  rocksdb::Slice upper{hi};
  rocksdb::ReadOptions ro;
  ro.snapshot = snap;
  if (!hi.empty())
    ro.iterate_upper_bound = &upper;
  ro.fill_cache = false;
  ro.readahead_size = size_t{2} << 20;
  std::unique_ptr<rocksdb::Iterator> it{db->NewIterator(ro, cf)};
  for (it->Seek(lo); it->Valid(); it->Next()) {
    auto k = it->key();
    auto v = it->value();
    if (!fn(std::string_view{k.data(), k.size()}, std::string_view{v.data(), v.size()}))
      break;
  }
  return it->status();
}

inline std::string prefix_of(char p) {
  return std::string(1, p);
}
inline std::string prefix_end(char p) {
  return std::string(1, static_cast<char>(p + 1));
}

} // namespace lmcc::persistence
