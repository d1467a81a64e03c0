// cluster_command's node processes: starting an `lmcc node` child with its
// log, reading that log until the node-ready line, reaping children that
// exit, and stopping them all (the launcher's loop is cluster_command.cpp).
#include "apps/lmcc/launcher/cluster_layout.hpp"
#include "apps/lmcc/launcher/internal/cluster_launcher.hpp"
#include "clock/clock.hpp"

#include <algorithm>
#include <array>
#include <cerrno>
#include <csignal>
#include <ctime>
#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

namespace lmcc::apps {
namespace {

std::string local_time_text() {
  std::time_t now = static_cast<std::time_t>(wall_now());
  std::tm parts{};
  localtime_r(&now, &parts);
  std::array<char, 32> text{};
  std::strftime(text.data(), text.size(), "%Y-%m-%d %H:%M:%S", &parts);
  return text.data();
}

} // namespace

child_node launcher::spawn(const planned_node& node) {
  std::vector<std::string> args = {exe_, "node", "--config", node.config_path.string()};
  if (!node.restore_from.empty()) {
    args.emplace_back("--restore-from");
    args.push_back(node.restore_from.string());
  }
  std::string command_line;
  for (const auto& arg : args)
    command_line += (command_line.empty() ? "" : " ") + arg;

  unique_fd log_fd{::open(node.log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644)};
  if (!log_fd)
    throw setup_error("cannot open " + node.log_path.string() + ": " + errno_text(errno));
  // Runs append to one log; this line tells where each run starts.
  write_all(log_fd.get(), "---- lmcc cluster up " + local_time_text() + ": " + command_line + "\n",
            node.log_path);
  child_node child;
  child.node = &node;
  child.log_reader = unique_fd{::open(node.log_path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (!child.log_reader || ::lseek(child.log_reader.get(), 0, SEEK_END) < 0)
    throw setup_error("cannot read " + node.log_path.string() + ": " + errno_text(errno));
  unique_fd null_fd{::open("/dev/null", O_RDONLY | O_CLOEXEC)};
  if (!null_fd)
    throw setup_error("cannot open /dev/null: " + errno_text(errno));

  // Everything the child needs is prepared before fork(): between fork and
  // exec only async-signal-safe calls are allowed.
  std::vector<char*> argv;
  for (auto& arg : args)
    argv.push_back(arg.data());
  argv.push_back(nullptr);
  sigset_t no_signals;
  sigemptyset(&no_signals);
  const pid_t parent = ::getpid();

  pid_t pid = ::fork();
  if (pid < 0)
    throw setup_error("cannot start " + node.id + ": fork: " + errno_text(errno));
  if (pid == 0) {
    // Its own process group: the terminal's Ctrl-C reaches only the
    // launcher, which then stops the nodes in order and reports them.
    ::setpgid(0, 0);
    // If the launcher dies without stopping it (SIGKILL, crash), the node
    // stops too instead of holding the cluster's ports as an orphan.
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != parent)
      ::_exit(127);
    ::signal(SIGINT, SIG_DFL);
    ::signal(SIGTERM, SIG_DFL);
    ::signal(SIGHUP, SIG_DFL);
    ::sigprocmask(SIG_SETMASK, &no_signals, nullptr); // the node blocks what it needs itself
    ::dup2(null_fd.get(), STDIN_FILENO);
    ::dup2(log_fd.get(), STDOUT_FILENO);
    ::dup2(log_fd.get(), STDERR_FILENO);
    ::execv(argv[0], argv.data());
    constexpr std::string_view failed = "lmcc cluster up: exec of the lmcc binary failed\n";
    [[maybe_unused]] auto ignored = ::write(STDERR_FILENO, failed.data(), failed.size());
    ::_exit(127);
  }
  ::setpgid(pid, pid); // also here, so it holds before the child gets to it
  child.pid = pid;
  child.running = true;
  log_->info("node-started node={} pid={} log={}", node.id, pid, node.log_path.string());
  return child;
}

int launcher::wait_signal(std::chrono::milliseconds timeout) {
  timespec wait{};
  wait.tv_sec = static_cast<time_t>(timeout.count() / 1000);
  wait.tv_nsec = static_cast<long>((timeout.count() % 1000) * 1'000'000);
  int sig = ::sigtimedwait(&signals_, nullptr, &wait);
  return sig > 0 ? sig : 0;
}

void launcher::read_log(child_node& child) {
  if (!child.log_reader)
    return;
  std::array<char, 16384> buffer{};
  for (;;) {
    ssize_t n = ::read(child.log_reader.get(), buffer.data(), buffer.size());
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      break;
    child.partial_line.append(buffer.data(), static_cast<size_t>(n));
    size_t start = 0;
    for (size_t end = child.partial_line.find('\n'); end != std::string::npos;
         end = child.partial_line.find('\n', start)) {
      std::string_view line(child.partial_line.data() + start, end - start);
      start = end + 1;
      child.recent_lines.emplace_back(line);
      if (child.recent_lines.size() > 10)
        child.recent_lines.pop_front();
      if (!child.ready && is_node_ready_line(line, child.node->id)) {
        child.ready = true;
        emit(node_ready_line(plan_, *child.node, child.pid));
      }
    }
    child.partial_line.erase(0, start);
    // A line this long is not the node-ready line; do not hoard it.
    if (child.partial_line.size() > (size_t{1} << 20))
      child.partial_line.clear();
    if (child.ready)
      break;
  }
  // Past the ready line the launcher has nothing to look for; the node keeps
  // appending to its log file on its own.
  if (child.ready) {
    child.log_reader.reset();
    child.partial_line.clear();
  }
}

std::string launcher::log_tail(const child_node& child) const {
  std::string text;
  for (const auto& line : child.recent_lines)
    text += "  | " + line + "\n";
  return text.empty() ? "  (it wrote nothing)\n" : text;
}

child_node* launcher::reap() {
  child_node* failed = nullptr;
  for (auto& child : children_) {
    if (!child.running)
      continue;
    if (rolling_ && rolling_->at == rolling_restart::step::stopping &&
        &child == &children_[rolling_->index])
      continue; // its exit is the rolling restart's to see
    int status = 0;
    pid_t pid = ::waitpid(child.pid, &status, WNOHANG);
    if (pid != child.pid)
      continue;
    child.running = false;
    read_log(child); // its last words, maybe even its ready line
    emit("node-exited node=" + child.node->id + " pid=" + std::to_string(child.pid) +
         " status=" + describe_wait_status(status));
    if (!child.ready && failed == nullptr)
      failed = &child;
  }
  return failed;
}

void launcher::stop_all() {
  for (auto& child : children_)
    if (child.running)
      ::kill(child.pid, SIGTERM);
  const auto deadline = clock_type::now() + options_.stop_timeout;
  bool killed = false;
  auto kill_all = [&](std::string_view reason) {
    for (auto& child : children_)
      if (child.running) {
        log_->warn("node-kill node={} pid={} reason={}", child.node->id, child.pid, reason);
        ::kill(child.pid, SIGKILL);
      }
    killed = true;
  };
  for (;;) {
    for (auto& child : children_) {
      if (!child.running)
        continue;
      int status = 0;
      if (::waitpid(child.pid, &status, WNOHANG) != child.pid)
        continue;
      child.running = false;
      emit("node-stopped node=" + child.node->id + " pid=" + std::to_string(child.pid) +
           " status=" + describe_wait_status(status));
    }
    if (std::none_of(children_.begin(), children_.end(),
                     [](const child_node& c) { return c.running; }))
      return;
    int sig = wait_signal(std::chrono::milliseconds(100));
    if (killed)
      continue;
    // A second Ctrl-C means "now": the user does not want to wait.
    if (sig == SIGINT || sig == SIGTERM || sig == SIGHUP)
      kill_all("second-signal");
    else if (clock_type::now() >= deadline)
      kill_all("not-stopped-after-" + std::to_string(options_.stop_timeout.count()) + "s");
  }
}

} // namespace lmcc::apps
