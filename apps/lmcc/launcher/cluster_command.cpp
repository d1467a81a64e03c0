// cluster_command's process side: the launcher's loop, watching the
// `lmcc node` children until the cluster is ready and running rolling
// restarts (starting and stopping a child is cluster_processes.cpp, the data
// dir's layout cluster_layout.cpp, the pure parts cluster_plan.cpp).
#include "apps/lmcc/launcher/cluster_command.hpp"

#include "apps/lmcc/launcher/cluster_layout.hpp"
#include "apps/lmcc/launcher/internal/cluster_launcher.hpp"
#include "gateway/unique_fd.hpp"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <fcntl.h>
#include <memory>
#include <stdexcept>
#include <sys/wait.h>
#include <unistd.h>
#include <utility>

namespace lmcc::apps {

namespace fs = std::filesystem;

// -- the process side ---------------------------------------------------------------

namespace {

/// How long a rolling restart waits for the nodes' replication queues to
/// empty before it stops the next node anyway (under steady ingest they may
/// never be empty at the instant of a poll; a clean stop waits for its own
/// acks, so this is a courtesy, not what makes the restart safe).
constexpr auto settle_backlog_wait = std::chrono::seconds(10);

} // namespace

void launcher::emit(const std::string& line) {
  out_ << line << std::endl;
  if (!events_)
    return;
  try {
    write_all(events_.get(), line + "\n", launcher_events_path(plan_.dir));
  } catch (const setup_error& e) {
    log_->warn("launcher-events-not-written error=\"{}\"", e.what());
    events_.reset();
  }
}

std::vector<node_status> launcher::fetch_statuses() const {
  std::vector<node_status> statuses;
  for (const auto& child : children_) {
    if (!child.running) {
      statuses.push_back(node_status{.id = child.node->id, .status = {}, .error = "not running"});
      continue;
    }
    statuses.push_back(fetch_node_status(plan_, *child.node));
  }
  return statuses;
}

void launcher::start_rolling() {
  if (rolling_) {
    log_->info("rolling-restart-running node={} (the request is ignored)",
               children_[rolling_->index].node->id);
    return;
  }
  if (!cluster_reported_) {
    emit("rolling-restart-refused reason=cluster-not-ready-yet");
    return;
  }
  const auto now = clock_type::now();
  rolling_ = rolling_restart{.index = 0,
                             .at = rolling_restart::step::settle,
                             .began = now,
                             .step_began = now,
                             .killed = false};
  emit("rolling-restart-start nodes=" + std::to_string(children_.size()));
}

void launcher::abort_rolling(const std::string& reason) {
  emit("rolling-restart-aborted node=" + children_[rolling_->index].node->id + " reason=\"" +
       reason + "\"");
  rolling_.reset();
}

void launcher::advance_rolling() {
  auto& r = *rolling_;
  auto& child = children_[r.index];
  const auto now = clock_type::now();
  const auto in_step = now - r.step_began;
  auto seconds = [](clock_type::duration d) {
    return std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(d).count() /
                          1000.0);
  };
  using step = rolling_restart::step;
  switch (r.at) {
  case step::settle: {
    // Whole again, and (for a while at most) nothing queued between nodes.
    const auto statuses = fetch_statuses();
    const auto verdict = judge_cluster_status(plan_, statuses);
    if (!verdict.ready) {
      if (in_step >= options_.ready_timeout)
        abort_rolling("cluster not ready: " + verdict.reason);
      return;
    }
    if (auto backlog = replication_backlog(statuses); backlog && in_step < settle_backlog_wait) {
      return;
    } else if (backlog) {
      log_->warn("rolling-restart-backlog node={} backlog=\"{}\" (stopping anyway: a clean "
                 "stop waits for its own acks)",
                 child.node->id, *backlog);
    }
    ::kill(child.pid, SIGTERM);
    log_->info("rolling-restart-stopping node={} pid={}", child.node->id, child.pid);
    r.at = step::stopping;
    r.step_began = now;
    return;
  }
  case step::stopping: {
    int status = 0;
    if (::waitpid(child.pid, &status, WNOHANG) == child.pid) {
      emit("node-stopped node=" + child.node->id + " pid=" + std::to_string(child.pid) +
           " status=" + describe_wait_status(status));
      try {
        child = spawn(*child.node);
      } catch (const setup_error& e) {
        child.running = false;
        abort_rolling(e.what());
        return;
      }
      r.at = step::starting;
      r.step_began = now;
      return;
    }
    if (in_step >= options_.stop_timeout && !r.killed) {
      log_->warn("node-kill node={} pid={} reason=not-stopped-after-{}s", child.node->id, child.pid,
                 options_.stop_timeout.count());
      ::kill(child.pid, SIGKILL);
      r.killed = true;
    }
    return;
  }
  case step::starting: {
    if (!child.ready) {
      if (in_step >= options_.ready_timeout)
        abort_rolling("not ready after " + std::to_string(options_.ready_timeout.count()) + "s");
      return;
    }
    const auto verdict = judge_cluster_status(plan_, fetch_statuses());
    if (!verdict.ready) {
      if (in_step >= options_.ready_timeout)
        abort_rolling("cluster not whole again: " + verdict.reason);
      return;
    }
    emit("node-restarted node=" + child.node->id + " pid=" + std::to_string(child.pid) +
         " seconds=" + seconds(in_step) + " ring=" + verdict.ring_version);
    r = rolling_restart{.index = r.index + 1,
                        .at = step::settle,
                        .began = r.began,
                        .step_began = now,
                        .killed = false};
    if (r.index == children_.size()) {
      emit("rolling-restart-done nodes=" + std::to_string(children_.size()) +
           " seconds=" + seconds(now - r.began));
      rolling_.reset();
    }
    return;
  }
  }
}

void launcher::poll_cluster(clock_type::time_point all_ready_at) {
  auto verdict = judge_cluster_status(plan_, fetch_statuses());
  if (verdict.ready) {
    cluster_reported_ = true;
    emit("cluster-ready nodes=" + std::to_string(plan_.nodes.size()) +
         " ring=" + verdict.ring_version);
    return;
  }
  if (verdict.reason != last_reason_) {
    log_->debug("cluster-not-ready reason=\"{}\"", verdict.reason);
    last_reason_ = verdict.reason;
  }
  // Not fatal: nodes serve their workers meanwhile, and a slow peer may still
  // join; but say why the cluster-ready line is not coming.
  if (!cluster_late_warned_ && clock_type::now() - all_ready_at >= options_.ready_timeout) {
    cluster_late_warned_ = true;
    log_->warn("cluster-not-ready-yet after_s={} reason=\"{}\" (still waiting)",
               options_.ready_timeout.count(), verdict.reason);
  }
}

int launcher::run() {
  std::error_code ec;
  exe_ = fs::read_symlink("/proc/self/exe", ec).string();
  if (ec) {
    err_ << "lmcc cluster up: cannot find this program's path: " << ec.message() << "\n";
    return 2;
  }
  // Taken with sigtimedwait in this loop, never by handlers: the launcher
  // then reacts to signals and child exits at one well-defined point.
  pthread_sigmask(SIG_BLOCK, &signals_, nullptr);
  events_ = unique_fd{::open(launcher_events_path(plan_.dir).c_str(),
                             O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644)};
  if (!events_)
    log_->warn("launcher-events-not-written path={} error=\"{}\"",
               launcher_events_path(plan_.dir).string(), errno_text(errno));
  try {
    for (const auto& node : plan_.nodes)
      children_.push_back(spawn(node));
  } catch (const setup_error& e) {
    err_ << "lmcc cluster up: " << e.what() << "\n";
    stop_all();
    return 1;
  }

  const auto ready_deadline = clock_type::now() + options_.ready_timeout;
  std::optional<clock_type::time_point> all_ready_at;
  auto next_poll = clock_type::now();
  for (;;) {
    int sig = wait_signal(std::chrono::milliseconds(100));
    if (sig == SIGINT || sig == SIGTERM || sig == SIGHUP) {
      log_->info("cluster-stopping signal={}", sigabbrev_np(sig));
      if (rolling_)
        abort_rolling("the launcher is stopping");
      stop_all();
      return 0;
    }
    if (sig == SIGUSR1)
      start_rolling();
    for (auto& child : children_)
      if (child.running && !child.ready)
        read_log(child);
    if (child_node* failed = reap()) {
      err_ << "lmcc cluster up: node " << failed->node->id
           << " exited before it became ready; the end of " << failed->node->log_path.string()
           << ":\n"
           << log_tail(*failed);
      // A node restarted by a rolling restart that fails to start: the others
      // keep serving; the operator sees why and starts it again.
      if (rolling_ && failed == &children_[rolling_->index]) {
        abort_rolling("exited before it became ready");
        continue;
      }
      stop_all();
      return 1;
    }
    if (std::none_of(children_.begin(), children_.end(),
                     [](const child_node& c) { return c.running; })) {
      err_ << "lmcc cluster up: every node has exited\n";
      return 1;
    }
    if (rolling_) {
      advance_rolling();
      continue;
    }
    const auto now = clock_type::now();
    bool all_ready = std::all_of(children_.begin(), children_.end(),
                                 [](const child_node& c) { return c.ready; });
    if (!all_ready) {
      if (now < ready_deadline)
        continue;
      for (const auto& child : children_)
        if (!child.ready)
          err_ << "lmcc cluster up: node " << child.node->id << " did not become ready within "
               << options_.ready_timeout.count() << " s; the end of "
               << child.node->log_path.string() << ":\n"
               << log_tail(child);
      stop_all();
      return 1;
    }
    if (!all_ready_at)
      all_ready_at = now;
    if (!cluster_reported_ && now >= next_poll) {
      poll_cluster(*all_ready_at);
      next_poll = clock_type::now() + std::chrono::milliseconds(100);
    }
  }
}

int run_cluster_up(const cluster_up_options& options, std::ostream& out, std::ostream& err) {
  auto plan = plan_cluster(options);
  if (!plan) {
    err << "lmcc cluster up: " << plan.error().message << "\n";
    return 2;
  }
  // The launcher's own log goes to stderr, so stdout carries only the lines
  // scripts wait for (node-ready, cluster-ready, node-exited, node-stopped).
  auto log = std::make_shared<spdlog::logger>(
      "cluster", std::make_shared<spdlog::sinks::stderr_color_sink_mt>());
  log->set_level(spdlog::level::from_str(options.log_level));
  try {
    lay_out(*plan, options.rewrite_config, *log);
  } catch (const setup_error& e) {
    err << "lmcc cluster up: " << e.what() << "\n";
    return 2;
  } catch (const fs::filesystem_error& e) {
    err << "lmcc cluster up: " << e.what() << "\n";
    return 2;
  }
  // One launcher per DIR: a second one would start a second set of nodes on
  // the same data and ports.
  const fs::path pid_path = launcher_pid_path(plan->dir);
  if (std::error_code ec; fs::exists(pid_path, ec)) {
    try {
      const long other = std::stol(read_file(pid_path));
      // A live `lmcc cluster up` with that pid (a pid file left by a killed
      // launcher may name an unrelated process by now).
      std::string cmdline;
      try {
        cmdline = read_file("/proc/" + std::to_string(other) + "/cmdline");
      } catch (const setup_error&) {
        // not running (or not ours to read): the file is stale
      }
      std::replace(cmdline.begin(), cmdline.end(), '\0', ' ');
      if (other > 0 && other != ::getpid() && cmdline.find(" cluster up ") != std::string::npos) {
        err << "lmcc cluster up: " << plan->dir.string() << " is in use by the launcher with pid "
            << other << " (" << pid_path.string() << ")\n";
        return 2;
      }
    } catch (const std::exception&) {
      // unreadable or stale: replaced below
    }
  }
  try {
    install_file(pid_path, std::to_string(::getpid()) + "\n", 0644, /*exclusive=*/false);
  } catch (const setup_error& e) {
    err << "lmcc cluster up: " << e.what() << "\n";
    return 2;
  }
  struct pid_file_remover {
    fs::path path;
    ~pid_file_remover() {
      std::error_code ec;
      fs::remove(path, ec);
    }
  } remove_pid_file{pid_path};
  launcher cluster{*plan, options, out, err, std::move(log)};
  return cluster.run();
}

} // namespace lmcc::apps
