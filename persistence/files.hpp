// files: the file-system steps behind snapshots and restore — crc32c of a file,
// a copy that checksums what it wrote, fsync of files and directories, temp
// dirs, and the MANIFEST.lmcc.json codec. Used by store; tested through it.
//
// Checksums are RocksDB's crc32c (hardware-accelerated, the same generator
// RocksDB uses for its own file checksums), as 8 hex digits, big-endian.
//
//   auto crc = file_crc32c("/snap/000012.sst");        // expected<std::string>
//   auto info = parse_manifest(text, "/snap");          // expected<snapshot_info>
//
// Context: free functions, thread-safe (they share no state).
#pragma once

#include "persistence/expected.hpp"
#include "persistence/store.hpp"

#include <cstdint>
#include <optional>
#include <string>

namespace lmcc::persistence::files {

/// crc32c of the whole file.
expected<std::string> file_crc32c(const std::string& path);

/// Copies src to dst (created, must not exist), fsyncs dst, and returns the
/// crc32c of the bytes copied and their count.
struct copy_result {
  std::string crc32c;
  uint64_t size = 0;
};
expected<copy_result> copy_file_checked(const std::string& src, const std::string& dst);

/// fsync of a file or a directory (a directory's fsync makes renames and new
/// entries in it durable).
expected<void> fsync_path(const std::string& path, bool directory);

/// Writes `text` to `path` (replacing it) and fsyncs it.
expected<void> write_file_synced(const std::string& path, const std::string& text);

/// Creates a fresh directory `<parent>/<prefix>XXXXXX` (mkdtemp); its path.
expected<std::string> make_temp_dir(const std::string& parent, const std::string& prefix);

/// Like make_temp_dir but returns a unique path that does not exist (RocksDB
/// checkpoints and renames want a non-existing destination).
expected<std::string> make_temp_name(const std::string& parent, const std::string& prefix);

/// pid of another process holding RocksDB's LOCK file in `db_dir`, if any.
std::optional<long> lock_holder(const std::string& db_dir);

/// The manifest as JSON text.
std::string render_manifest(const snapshot_info& info);

/// Parses and validates a manifest's fields (not the files); errors name `dir`.
expected<snapshot_info> parse_manifest(const std::string& text, const std::string& dir);

/// Now as ISO 8601 UTC ("2025-01-31T12:00:00Z").
std::string utc_now();

} // namespace lmcc::persistence::files
