// Helpers for the persistence tests (and the actors' shard tests, which use a
// real store too): a unique temp dir under /tmp that is removed with everything
// in it, a store opened small, everything a store holds read back in order,
// raw RocksDB writes that bypass the store (to plant damage or a foreign data
// dir), and directory fingerprints.
//
//   temp_dir tmp;                      // /tmp/lmcc-persistence-XXXXXX
//   auto s = must_open(tmp.sub("db"));
//   auto c = read_all(*s);             // rows, holder states, slots, log
//
// Context: test code, single-threaded.
#pragma once

#include "persistence/files.hpp"
#include "persistence/store.hpp"

#include <gtest/gtest.h>
#include <rocksdb/db.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace lmcc::persistence::test {

namespace fs = std::filesystem;

class temp_dir {
public:
  temp_dir() {
    std::string tmpl = "/tmp/lmcc-persistence-XXXXXX";
    if (::mkdtemp(tmpl.data()) == nullptr)
      throw std::runtime_error("mkdtemp failed");
    path_ = tmpl;
  }
  ~temp_dir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;

  const std::string& path() const { return path_; }
  std::string sub(const std::string& name) const { return (fs::path{path_} / name).string(); }

private:
  std::string path_;
};

inline store_options options_at(const std::string& path) {
  store_options o;
  o.path = path;
  // Small memory for tests: several stores may be open at once.
  o.block_cache_bytes = size_t{4} << 20;
  o.write_buffer_bytes = size_t{4} << 20;
  return o;
}

inline std::unique_ptr<store> must_open(const std::string& path, const std::string& node = "n1") {
  auto s = store::open(options_at(path), node);
  if (!s)
    ADD_FAILURE() << s.error().message;
  return s ? std::move(*s) : nullptr;
}

/// Everything a store holds, as the tests compare it.
struct contents {
  std::vector<worker_row> workers;
  std::vector<holder_state> holders;
  uint64_t log_floor = 0;
  std::map<uint32_t, std::string> slots;
  std::map<uint64_t, std::string> log;
  friend bool operator==(const contents&, const contents&) = default;
};

inline contents read_all(const store& s) {
  contents c;
  auto d = s.load_directory();
  if (!d) {
    ADD_FAILURE() << d.error().message;
    return c;
  }
  c.workers = std::move(d->workers);
  c.holders = std::move(d->holders);
  c.log_floor = d->log_floor;
  EXPECT_TRUE(d->damaged_holders.empty());
  auto slots = s.for_each_slot(0, 0xffffffffU, [&](uint32_t slot, std::string_view v) {
    c.slots.emplace(slot, std::string{v});
  });
  EXPECT_TRUE(slots) << (slots ? "" : slots.error().message);
  auto log = s.for_each_log_record(
      0, [&](uint64_t position, std::string_view v) { c.log.emplace(position, std::string{v}); });
  EXPECT_TRUE(log) << (log ? "" : log.error().message);
  return c;
}

inline worker_row sample_worker(uint64_t uid, std::string instance, msg::wire_int worker_id) {
  worker_row w;
  w.uid = uid;
  w.instance_id = std::move(instance);
  w.worker_id = worker_id;
  w.ip = "10.0.0." + std::to_string(uid % 250);
  w.port = 8500 + static_cast<int64_t>(uid % 1000);
  w.registration_time = 1700000000.25 + static_cast<double>(uid % 1000);
  w.last_heartbeat_time = 1700000100.5 + static_cast<double>(uid % 1000);
  w.has_heartbeated = uid % 2 == 1;
  w.registration_order = (uint64_t{1700000000000} << 16) + uid;
  w.instance_order = uint64_t{1700000000000} << 16;
  w.incarnation = w.registration_order + 7;
  if (uid % 3 == 2)
    w.peer_init_url = "10.0.0.2:8200";
  return w;
}

inline holder_state sample_holder(uint64_t holder, uint64_t worker_uid, seq_mark mark = {}) {
  return holder_state{holder, worker_uid, "LocalCPUBackend", 5, mark};
}

/// Writes `value` under `key` of column family `family` ("default" or "log")
/// straight into the RocksDB at `path`, bypassing the store (which must be
/// closed): damage a store would never write, or a data dir of another format.
inline void raw_put(const std::string& path, const std::string& family, const std::string& key,
                    const std::string& value) {
  std::vector<std::string> names;
  ASSERT_TRUE(rocksdb::DB::ListColumnFamilies(rocksdb::DBOptions{}, path, &names).ok()) << path;
  std::vector<rocksdb::ColumnFamilyDescriptor> families;
  for (const auto& n : names)
    families.emplace_back(n, rocksdb::ColumnFamilyOptions{});
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* raw = nullptr;
  auto st = rocksdb::DB::Open(rocksdb::DBOptions{}, path, families, &handles, &raw);
  ASSERT_TRUE(st.ok()) << st.ToString();
  std::unique_ptr<rocksdb::DB> db{raw};
  rocksdb::ColumnFamilyHandle* cf = nullptr;
  for (size_t i = 0; i < names.size(); ++i)
    if (names[i] == family)
      cf = handles[i];
  EXPECT_NE(cf, nullptr) << "no column family " << family;
  if (cf) {
    EXPECT_TRUE(db->Put(rocksdb::WriteOptions{}, cf, key, value).ok());
  }
  for (auto* h : handles)
    EXPECT_TRUE(db->DestroyColumnFamilyHandle(h).ok());
  EXPECT_TRUE(db->Close().ok());
}

/// name -> (size, crc32c) of every file under dir (recursively), to prove a
/// directory was not touched.
inline std::map<std::string, std::pair<uint64_t, std::string>> fingerprint(const std::string& dir) {
  std::map<std::string, std::pair<uint64_t, std::string>> out;
  for (const auto& de : fs::recursive_directory_iterator{dir}) {
    if (!de.is_regular_file())
      continue;
    auto crc = files::file_crc32c(de.path().string());
    out[fs::relative(de.path(), dir).string()] = {de.file_size(), crc ? *crc : "?"};
  }
  return out;
}

inline std::vector<std::string> list_names(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& de : fs::directory_iterator{dir})
    out.push_back(de.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

} // namespace lmcc::persistence::test
