#include "persistence/files.hpp"

#include "clock/clock.hpp"

#include <nlohmann/json.hpp>
#include <rocksdb/file_checksum.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <fcntl.h>
#include <filesystem>
#include <set>
#include <unistd.h>
#include <vector>

namespace lmcc::persistence::files {

namespace fs = std::filesystem;

namespace {

constexpr size_t io_chunk = size_t{1} << 20;

std::string errno_text(const std::string& what, const std::string& path) {
  return what + " " + path + ": " + std::strerror(errno);
}

/// Owns a POSIX file descriptor.
class fd_guard {
public:
  explicit fd_guard(int fd) noexcept : fd_(fd) {}
  ~fd_guard() {
    if (fd_ >= 0)
      ::close(fd_);
  }
  fd_guard(const fd_guard&) = delete;
  fd_guard& operator=(const fd_guard&) = delete;
  int get() const noexcept { return fd_; }
  /// Closes now so that a close error is reported.
  bool close() noexcept {
    int fd = fd_;
    fd_ = -1;
    return ::close(fd) == 0;
  }

private:
  int fd_;
};

/// RocksDB's crc32c generator behind a small interface.
class crc32c {
public:
  crc32c() {
    rocksdb::FileChecksumGenContext ctx;
    gen_ = rocksdb::GetFileChecksumGenCrc32cFactory()->CreateFileChecksumGenerator(ctx);
  }
  void update(const char* data, size_t n) { gen_->Update(data, n); }
  std::string hex() {
    gen_->Finalize();
    static constexpr char digits[] = "0123456789abcdef";
    std::string out;
    for (unsigned char c : gen_->GetChecksum()) {
      out.push_back(digits[c >> 4]);
      out.push_back(digits[c & 0xf]);
    }
    return out;
  }

private:
  std::unique_ptr<rocksdb::FileChecksumGenerator> gen_;
};

bool write_all(int fd, const char* data, size_t n) {
  while (n > 0) {
    ssize_t w = ::write(fd, data, n);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0)
      return false;
    data += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

bool valid_file_name(const std::string& name) {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string::npos &&
         name.find('\0') == std::string::npos && name != snapshot_manifest_name;
}

} // namespace

expected<std::string> file_crc32c(const std::string& path) {
  fd_guard fd{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (fd.get() < 0)
    return error{errno_text("open", path)};
  crc32c crc;
  std::vector<char> buf(io_chunk);
  for (;;) {
    ssize_t n = ::read(fd.get(), buf.data(), buf.size());
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      return error{errno_text("read", path)};
    if (n == 0)
      break;
    crc.update(buf.data(), static_cast<size_t>(n));
  }
  return crc.hex();
}

expected<copy_result> copy_file_checked(const std::string& src, const std::string& dst) {
  fd_guard in{::open(src.c_str(), O_RDONLY | O_CLOEXEC)};
  if (in.get() < 0)
    return error{errno_text("open", src)};
  fd_guard out{::open(dst.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644)};
  if (out.get() < 0)
    return error{errno_text("create", dst)};
  crc32c crc;
  copy_result result;
  std::vector<char> buf(io_chunk);
  for (;;) {
    ssize_t n = ::read(in.get(), buf.data(), buf.size());
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      return error{errno_text("read", src)};
    if (n == 0)
      break;
    // The checksum covers the bytes written, so what was verified is what lands.
    crc.update(buf.data(), static_cast<size_t>(n));
    if (!write_all(out.get(), buf.data(), static_cast<size_t>(n)))
      return error{errno_text("write", dst)};
    result.size += static_cast<uint64_t>(n);
  }
  if (::fsync(out.get()) != 0)
    return error{errno_text("fsync", dst)};
  if (!out.close())
    return error{errno_text("close", dst)};
  result.crc32c = crc.hex();
  return result;
}

expected<void> fsync_path(const std::string& path, bool directory) {
  fd_guard fd{::open(path.c_str(), (directory ? O_RDONLY | O_DIRECTORY : O_RDONLY) | O_CLOEXEC)};
  if (fd.get() < 0)
    return error{errno_text("open", path)};
  if (::fsync(fd.get()) != 0)
    return error{errno_text("fsync", path)};
  return {};
}

expected<void> write_file_synced(const std::string& path, const std::string& text) {
  fd_guard fd{::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)};
  if (fd.get() < 0)
    return error{errno_text("create", path)};
  if (!write_all(fd.get(), text.data(), text.size()))
    return error{errno_text("write", path)};
  if (::fsync(fd.get()) != 0)
    return error{errno_text("fsync", path)};
  if (!fd.close())
    return error{errno_text("close", path)};
  return {};
}

expected<std::string> make_temp_dir(const std::string& parent, const std::string& prefix) {
  std::string tmpl = (fs::path{parent} / (prefix + "XXXXXX")).string();
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  if (::mkdtemp(buf.data()) == nullptr)
    return error{errno_text("mkdtemp", tmpl)};
  return std::string{buf.data()};
}

expected<std::string> make_temp_name(const std::string& parent, const std::string& prefix) {
  auto dir = make_temp_dir(parent, prefix);
  if (!dir)
    return dir;
  // Reserve the unique name with mkdtemp, then free it for the caller to create.
  if (::rmdir(dir->c_str()) != 0)
    return error{errno_text("rmdir", *dir)};
  return dir;
}

std::optional<long> lock_holder(const std::string& db_dir) {
  std::string lock = (fs::path{db_dir} / "LOCK").string();
  fd_guard fd{::open(lock.c_str(), O_RDWR | O_CLOEXEC)};
  if (fd.get() < 0)
    return std::nullopt;
  // F_GETLK only asks; it neither takes nor disturbs the lock RocksDB holds.
  struct flock fl {};
  fl.l_type = F_WRLCK;
  fl.l_whence = SEEK_SET;
  if (::fcntl(fd.get(), F_GETLK, &fl) != 0 || fl.l_type == F_UNLCK)
    return std::nullopt;
  return static_cast<long>(fl.l_pid);
}

std::string render_manifest(const snapshot_info& info) {
  nlohmann::json files = nlohmann::json::array();
  for (const auto& f : info.files)
    files.push_back({{"name", f.name}, {"size", f.size}, {"crc32c", f.crc32c}});
  nlohmann::json j = {
      {"format", "lmcc-snapshot"},       {"format_version", info.format_version},
      {"node_id", info.node_id},         {"created_at", info.created_at},
      {"sequence", info.sequence},       {"workers", info.workers},
      {"holders", info.holders},         {"slots", info.slots},
      {"log_records", info.log_records}, {"checksum", "crc32c"},
      {"files", std::move(files)},
  };
  return j.dump(2) + "\n";
}

expected<snapshot_info> parse_manifest(const std::string& text, const std::string& dir) {
  auto fail = [&](const std::string& what) {
    return error{"snapshot " + dir + ": " + snapshot_manifest_name + " " + what};
  };
  auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object())
    return fail("is not a JSON object");
  auto str = [&](const char* key) -> const std::string* {
    auto it = j.find(key);
    return it != j.end() && it->is_string() ? it->get_ptr<const std::string*>() : nullptr;
  };
  auto num = [&](const nlohmann::json& obj, const char* key) -> std::optional<uint64_t> {
    auto it = obj.find(key);
    if (it == obj.end() || !it->is_number_unsigned())
      return std::nullopt;
    return it->get<uint64_t>();
  };
  const std::string* format = str("format");
  if (format == nullptr || *format != "lmcc-snapshot")
    return fail("is not an lmcc snapshot manifest (\"format\" is not \"lmcc-snapshot\")");
  auto version = num(j, "format_version");
  if (!version)
    return fail("has no format_version");
  if (*version != format_version)
    return fail("has format_version " + std::to_string(*version) + ", this build reads " +
                std::to_string(format_version));
  const std::string* checksum = str("checksum");
  if (checksum == nullptr || *checksum != "crc32c")
    return fail("names an unknown checksum (expected \"crc32c\")");
  snapshot_info info;
  info.format_version = static_cast<uint32_t>(*version);
  const std::string* node = str("node_id");
  const std::string* created = str("created_at");
  auto sequence = num(j, "sequence");
  auto workers = num(j, "workers");
  auto holders = num(j, "holders");
  auto slots = num(j, "slots");
  auto log_records = num(j, "log_records");
  if (node == nullptr || node->empty() || created == nullptr || !sequence || !workers || !holders ||
      !slots || !log_records)
    return fail("lacks node_id, created_at, sequence or a count");
  info.node_id = *node;
  info.created_at = *created;
  info.sequence = *sequence;
  info.workers = *workers;
  info.holders = *holders;
  info.slots = *slots;
  info.log_records = *log_records;
  auto fit = j.find("files");
  if (fit == j.end() || !fit->is_array() || fit->empty())
    return fail("has no file list");
  std::set<std::string> seen;
  for (const auto& f : *fit) {
    if (!f.is_object() || !f.contains("name") || !f["name"].is_string())
      return fail("has a file without a name");
    snapshot_file file;
    file.name = f["name"].get<std::string>();
    if (!valid_file_name(file.name))
      return fail("lists an invalid file name \"" + file.name + "\"");
    if (!seen.insert(file.name).second)
      return fail("lists " + file.name + " twice");
    auto size = num(f, "size");
    auto crc_it = f.find("crc32c");
    if (!size || crc_it == f.end() || !crc_it->is_string() ||
        crc_it->get<std::string>().size() != 8)
      return fail("has no size or crc32c for " + file.name);
    file.size = *size;
    file.crc32c = crc_it->get<std::string>();
    info.files.push_back(std::move(file));
  }
  if (!seen.contains("CURRENT"))
    return fail("lists no CURRENT file (not a RocksDB checkpoint)");
  return info;
}

std::string utc_now() {
  std::time_t t = static_cast<std::time_t>(wall_now());
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

} // namespace lmcc::persistence::files
