// Helpers for the persistence tests: a unique temp dir under /tmp that is
// removed with everything in it, directory fingerprints, and a sample data set.
//
//   temp_dir tmp;                      // /tmp/lmcc-persistence-XXXXXX
//   auto s = store::open({.path = tmp.sub("db")}, "n1");
//
// Context: test code, single-threaded.
#pragma once

#include "persistence/files.hpp"
#include "persistence/store.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <map>
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
  std::vector<watermark> watermarks;
  std::vector<entry> entries;
  friend bool operator==(const contents&, const contents&) = default;
};

inline contents read_all(const store& s) {
  contents c;
  auto r = s.load([&](uint32_t slot, uint64_t key, uint32_t holder) {
    c.entries.push_back({slot, key, holder});
  });
  if (!r) {
    ADD_FAILURE() << r.error().message;
    return c;
  }
  c.workers = std::move(r->workers);
  c.watermarks = std::move(r->watermarks);
  return c;
}

inline worker_row sample_worker(uint32_t num, std::string instance, msg::wire_int worker_id) {
  worker_row w;
  w.worker_num = num;
  w.instance_id = std::move(instance);
  w.worker_id = worker_id;
  w.ip = "10.0.0." + std::to_string(num);
  w.port = 8500 + static_cast<int64_t>(num);
  w.registration_time = 1700000000.25 + num;
  w.last_heartbeat_time = 1700000100.5 + num;
  w.has_heartbeated = num % 2 == 1;
  w.locations = {"LocalCPUBackend", "LocalDiskBackend"};
  if (num == 2)
    w.peer_init_url = "10.0.0.2:8200";
  return w;
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
