#include "apps/lmcc/thread_priority.hpp"

#include <spdlog/spdlog.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sched.h>
#include <string>
#include <sys/types.h>

namespace lmcc::apps {
namespace {

bool make_idle(pid_t tid, std::string_view what) {
  sched_param param{};
  param.sched_priority = 0;
  if (sched_setscheduler(tid, SCHED_IDLE, &param) == 0)
    return true;
  spdlog::warn("thread-priority-refused thread={} tid={} error={}", what, tid,
               std::strerror(errno));
  return false;
}

} // namespace

bool make_this_thread_idle(std::string_view what) {
  return make_idle(0, what);
}

std::function<void()> idle_at_start(bool idle, std::string_view what) {
  if (!idle)
    return {};
  return [what] { make_this_thread_idle(what); };
}

size_t make_threads_idle(std::string_view name) {
  size_t changed = 0;
  std::error_code ec;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task", ec)) {
    std::ifstream comm{task.path() / "comm"};
    std::string thread_name;
    if (!std::getline(comm, thread_name) || thread_name != name)
      continue;
    pid_t tid = 0;
    try {
      tid = static_cast<pid_t>(std::stol(task.path().filename().string()));
    } catch (const std::exception&) {
      continue;
    }
    changed += make_idle(tid, name) ? 1 : 0;
  }
  return changed;
}

} // namespace lmcc::apps
