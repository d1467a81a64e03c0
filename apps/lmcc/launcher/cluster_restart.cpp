// `lmcc cluster restart --rolling --data-dir DIR`: the client side of a
// rolling restart. The launcher (`lmcc cluster up`) owns the node processes
// and does the restart on SIGUSR1 (cluster_command.cpp); this command sends
// the signal and follows the launcher's event log until the restart ends.
#include "apps/lmcc/launcher/cluster_command.hpp"
#include "clock/clock.hpp"

#include <cerrno>
#include <csignal>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

namespace lmcc::apps {

namespace fs = std::filesystem;

namespace {

/// The launcher's pid from DIR/launcher.pid, if it names a live process.
std::optional<pid_t> running_launcher(const fs::path& dir, std::string& why) {
  std::ifstream in(launcher_pid_path(dir));
  long pid = 0;
  if (!in || !(in >> pid) || pid <= 0) {
    why = "no `lmcc cluster up` runs on " + dir.string() + " (no readable " +
          launcher_pid_path(dir).string() + ")";
    return std::nullopt;
  }
  if (::kill(static_cast<pid_t>(pid), 0) != 0 && errno != EPERM) {
    why = "the launcher of " + dir.string() + " (pid " + std::to_string(pid) + ") is not running";
    return std::nullopt;
  }
  return static_cast<pid_t>(pid);
}

bool starts_with(std::string_view line, std::string_view prefix) {
  return line.substr(0, prefix.size()) == prefix;
}

} // namespace

int run_cluster_restart(const fs::path& data_dir, std::chrono::seconds timeout, std::ostream& out,
                        std::ostream& err) {
  std::string why;
  auto pid = running_launcher(data_dir, why);
  if (!pid) {
    err << "lmcc cluster restart: " << why << "\n";
    return 2;
  }
  // Follow the event log from its current end: only this restart's lines.
  const fs::path events = launcher_events_path(data_dir);
  std::error_code ec;
  std::uintmax_t offset = fs::exists(events, ec) ? fs::file_size(events, ec) : 0;
  if (ec)
    offset = 0;
  if (::kill(*pid, SIGUSR1) != 0) {
    err << "lmcc cluster restart: cannot signal the launcher (pid " << *pid
        << "): " << std::strerror(errno) << "\n";
    return 2;
  }
  const auto deadline = steady_now() + timeout;
  std::string partial;
  for (;;) {
    std::ifstream in(events, std::ios::binary);
    if (in) {
      in.seekg(static_cast<std::streamoff>(offset));
      std::ostringstream chunk;
      chunk << in.rdbuf();
      const std::string text = chunk.str();
      offset += text.size();
      partial += text;
      size_t start = 0;
      for (size_t end = partial.find('\n'); end != std::string::npos;
           end = partial.find('\n', start)) {
        const std::string line = partial.substr(start, end - start);
        start = end + 1;
        if (starts_with(line, "cluster-ready"))
          continue; // not this restart's business
        out << line << std::endl;
        if (starts_with(line, "rolling-restart-done"))
          return 0;
        if (starts_with(line, "rolling-restart-aborted") ||
            starts_with(line, "rolling-restart-refused"))
          return 1;
      }
      partial.erase(0, start);
    }
    if (::kill(*pid, 0) != 0 && errno != EPERM) {
      err << "lmcc cluster restart: the launcher (pid " << *pid << ") exited\n";
      return 1;
    }
    if (steady_now() >= deadline) {
      err << "lmcc cluster restart: no rolling-restart-done within " << timeout.count()
          << " s (the launcher goes on; see " << events.string() << ")\n";
      return 1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

} // namespace lmcc::apps
