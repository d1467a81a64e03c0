// cluster_launcher: the launcher behind `lmcc cluster up`, shared by its two
// files: cluster_command.cpp runs it (the main loop, cluster readiness,
// rolling restarts); cluster_processes.cpp starts, watches and stops the
// `lmcc node` children.
//
// Private to apps/lmcc/: included by cluster_command.cpp and cluster_processes.cpp only.
#pragma once

#include "apps/lmcc/launcher/cluster_command.hpp"
#include "gateway/unique_fd.hpp"

#include <spdlog/spdlog.h>

#include <chrono>
#include <csignal>
#include <deque>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <sys/types.h>
#include <vector>

namespace lmcc::apps {

using clock_type = std::chrono::steady_clock;

using gateway::unique_fd;

/// One started node: its process and the unread end of its log.
struct child_node {
  const planned_node* node = nullptr;
  pid_t pid = -1;
  bool running = false;
  bool ready = false;
  /// Read from where this run's output starts, until the node-ready line.
  unique_fd log_reader;
  std::string partial_line;
  /// The last lines read, shown when the node fails before it is ready.
  std::deque<std::string> recent_lines;
};

class launcher {
public:
  launcher(const cluster_plan& plan, const cluster_up_options& options, std::ostream& out,
           std::ostream& err, std::shared_ptr<spdlog::logger> log)
    : plan_(plan), options_(options), out_(out), err_(err), log_(std::move(log)) {
    sigemptyset(&signals_);
    for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGCHLD, SIGUSR1})
      sigaddset(&signals_, sig);
  }

  int run();

private:
  /// A rolling restart in progress: node `index` is in step `at`.
  struct rolling_restart {
    enum class step { settle, stopping, starting };
    size_t index = 0;
    step at = step::settle;
    clock_type::time_point began;
    clock_type::time_point step_began;
    bool killed = false;
  };

  child_node spawn(const planned_node& node);
  /// Prints a protocol line and appends it to DIR/launcher-events.log.
  void emit(const std::string& line);
  void start_rolling();
  /// One step of the rolling restart (called every loop turn while it runs).
  void advance_rolling();
  void abort_rolling(const std::string& reason);
  std::vector<node_status> fetch_statuses() const;
  /// A signal among signals_, or 0 after `timeout`.
  int wait_signal(std::chrono::milliseconds timeout);
  void read_log(child_node& child);
  /// Reaps exited children; returns the first one that exited before it was
  /// ready, if any.
  child_node* reap();
  void stop_all();
  void poll_cluster(clock_type::time_point all_ready_at);
  std::string log_tail(const child_node& child) const;

  const cluster_plan& plan_;
  const cluster_up_options& options_;
  std::ostream& out_;
  std::ostream& err_;
  std::shared_ptr<spdlog::logger> log_;
  sigset_t signals_{};
  std::string exe_;
  unique_fd events_;
  std::vector<child_node> children_;
  std::optional<rolling_restart> rolling_;
  bool cluster_reported_ = false;
  bool cluster_late_warned_ = false;
  std::string last_reason_;
};

} // namespace lmcc::apps
