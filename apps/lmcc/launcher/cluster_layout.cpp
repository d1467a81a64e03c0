// cluster_layout: the files of `lmcc cluster up`'s data dir (see
// cluster_layout.hpp).
#include "apps/lmcc/launcher/cluster_layout.hpp"

#include "gateway/unique_fd.hpp"

#include <array>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

namespace lmcc::apps {

namespace fs = std::filesystem;
using gateway::unique_fd;

std::string errno_text(int error) {
  return std::strerror(error);
}

void write_all(int fd, std::string_view text, const fs::path& path) {
  while (!text.empty()) {
    ssize_t n = ::write(fd, text.data(), text.size());
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      throw setup_error("cannot write " + path.string() + ": " + errno_text(errno));
    text.remove_prefix(static_cast<size_t>(n));
  }
}

std::string read_file(const fs::path& path) {
  unique_fd fd{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (!fd)
    throw setup_error("cannot read " + path.string() + ": " + errno_text(errno));
  std::string text;
  std::array<char, 8192> buffer{};
  for (;;) {
    ssize_t n = ::read(fd.get(), buffer.data(), buffer.size());
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      throw setup_error("cannot read " + path.string() + ": " + errno_text(errno));
    if (n == 0)
      return text;
    text.append(buffer.data(), static_cast<size_t>(n));
  }
}

bool install_file(const fs::path& path, std::string_view text, mode_t mode, bool exclusive) {
  fs::path temporary = path;
  temporary += ".tmp-" + std::to_string(::getpid());
  {
    unique_fd fd{::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode)};
    if (!fd)
      throw setup_error("cannot create " + temporary.string() + ": " + errno_text(errno));
    write_all(fd.get(), text, temporary);
    if (::fsync(fd.get()) != 0)
      throw setup_error("cannot sync " + temporary.string() + ": " + errno_text(errno));
  }
  // link() refuses to replace, which is what an exclusive create needs;
  // rename() replaces atomically.
  int rc = exclusive ? ::link(temporary.c_str(), path.c_str())
                     : ::rename(temporary.c_str(), path.c_str());
  int error = errno;
  if (exclusive || rc != 0)
    ::unlink(temporary.c_str());
  if (rc != 0 && exclusive && error == EEXIST)
    return false;
  if (rc != 0)
    throw setup_error("cannot write " + path.string() + ": " + errno_text(error));
  return true;
}

namespace {

/// DIR/cluster.secret: kept when present (a restarted cluster must keep
/// trusting itself), else 32 random bytes in hex, mode 0600.
void ensure_secret(const fs::path& path, spdlog::logger& log) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) { // a symlink to a shared secret is fine
    if (!S_ISREG(st.st_mode))
      throw setup_error(path.string() + " exists and is not a regular file");
    std::string secret = read_file(path);
    if (secret.find_first_not_of(" \t\r\n") == std::string::npos)
      throw setup_error(path.string() + " is empty; delete it to have a new secret made " +
                        "(every node of the cluster must then be restarted)");
    if ((st.st_mode & 077) != 0)
      log.warn("cluster-secret-readable path={} mode={:o} (others than its owner can read it)",
               path.string(), st.st_mode & 0777);
    log.info("cluster-secret-kept path={}", path.string());
    return;
  }
  if (errno != ENOENT)
    throw setup_error("cannot stat " + path.string() + ": " + errno_text(errno));

  std::array<unsigned char, 32> bytes{};
  for (size_t filled = 0; filled < bytes.size();) {
    ssize_t n = ::getrandom(bytes.data() + filled, bytes.size() - filled, 0);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      throw setup_error(std::string("getrandom failed: ") + errno_text(errno));
    filled += static_cast<size_t>(n);
  }
  static constexpr char digits[] = "0123456789abcdef";
  std::string hex;
  for (unsigned char byte : bytes) {
    hex += digits[byte >> 4];
    hex += digits[byte & 0xF];
  }
  if (install_file(path, hex + "\n", 0600, /*exclusive=*/true))
    log.info("cluster-secret-created path={}", path.string());
  else
    log.info("cluster-secret-kept path={} (made by another run meanwhile)", path.string());
}

} // namespace

void lay_out(const cluster_plan& plan, bool rewrite_config, spdlog::logger& log) {
  std::error_code ec;
  std::vector<bool> keep(plan.nodes.size(), false);
  for (size_t i = 0; i < plan.nodes.size(); ++i) {
    const auto& node = plan.nodes[i];
    if (!node.restore_from.empty() && !fs::is_directory(node.restore_from, ec))
      throw setup_error("--restore-from: " + node.restore_from.string() +
                        " is not a folder (the snapshot folder must hold one folder per "
                        "node id)");
    if (rewrite_config || !fs::exists(node.config_path, ec))
      continue;
    if (auto why = config_mismatch(read_file(node.config_path), plan, node))
      throw setup_error(node.config_path.string() + " belongs to another layout: " + *why +
                        ". Run with the flags of the first `cluster up` on this folder, or "
                        "with --rewrite-config to write the configs anew (the data is kept)");
    keep[i] = true;
  }

  fs::create_directories(plan.dir, ec);
  if (ec)
    throw setup_error("cannot create " + plan.dir.string() + ": " + ec.message());
  ensure_secret(plan.secret_file, log);
  for (size_t i = 0; i < plan.nodes.size(); ++i) {
    const auto& node = plan.nodes[i];
    fs::create_directories(node.dir, ec);
    if (ec)
      throw setup_error("cannot create " + node.dir.string() + ": " + ec.message());
    if (keep[i]) {
      log.info("node-config-kept node={} config={} (--rewrite-config writes it anew)", node.id,
               node.config_path.string());
      continue;
    }
    install_file(node.config_path, node_config_yaml(plan, node), 0644, /*exclusive=*/false);
    log.info("node-config-written node={} config={}", node.id, node.config_path.string());
  }
}

} // namespace lmcc::apps
