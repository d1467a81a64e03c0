// store_snapshot: checkpoints with verified manifests, snapshot verification
// and restore (store.hpp's "snapshots" section).
#include "persistence/files.hpp"
#include "persistence/internal/store_impl.hpp"

#include <rocksdb/utilities/checkpoint.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <mutex>
#include <tuple>

namespace lmcc::persistence {

namespace fs = std::filesystem;

// -- snapshots ---------------------------------------------------------------------------

expected<snapshot_info> store::checkpoint(const std::string& dir,
                                          const std::map<std::string, std::string>& extra_files) {
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
  for (const auto& [name, content] : extra_files) {
    if (name.empty() || name.find('/') != std::string::npos || name == snapshot_manifest_name ||
        fs::exists(fs::path{*partial} / name, ec)) {
      remove_partial();
      return fail("bad extra file name '" + name + "'");
    }
    if (auto r = files::write_file_synced((fs::path{*partial} / name).string(), content); !r) {
      remove_partial();
      return fail(r.error().message);
    }
  }

  auto count = [&](rocksdb::ColumnFamilyHandle* cf, char prefix, uint64_t& n) {
    return scan(db, cf, snap.get(), prefix_of(prefix), prefix_end(prefix),
                [&](std::string_view, std::string_view) { return ++n, true; });
  };
  for (auto [cf, prefix, counter] : {std::tuple{impl_->default_cf(), worker_prefix, &info.workers},
                                     std::tuple{impl_->default_cf(), holder_prefix, &info.holders},
                                     std::tuple{impl_->default_cf(), slot_prefix, &info.slots},
                                     std::tuple{impl_->log_cf(), log_prefix, &info.log_records}})
    if (auto s = count(cf, prefix, *counter); !s.ok()) {
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
  spdlog::info("store-checkpoint path={} dir={} sequence={} workers={} holders={} slots={} "
               "log_records={} files={} bytes={} seconds={:.3f}",
               path, target.string(), info.sequence, info.workers, info.holders, info.slots,
               info.log_records, info.files.size(), bytes, seconds_since(start));
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
  spdlog::info("store-restore snapshot={} target={} node={} sequence={} workers={} slots={} "
               "log_records={} replaced={} seconds={:.3f}",
               snapshot_dir, dest.string(), node_id, info->sequence, info->workers, info->slots,
               info->log_records, old.has_value(), seconds_since(start));
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

store::memory store::memory_usage() const {
  memory m;
  for (auto* family : impl_->handles) {
    uint64_t bytes = 0;
    if (impl_->db->GetIntProperty(family, rocksdb::DB::Properties::kSizeAllMemTables, &bytes))
      m.memtable_bytes += bytes;
  }
  m.block_cache_bytes = impl_->block_cache ? impl_->block_cache->GetUsage() : 0;
  return m;
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
