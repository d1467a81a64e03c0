#include "apps/lmcc/memory_releaser.hpp"

#include "clock/clock.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <malloc.h>
#include <sys/resource.h>
#include <unistd.h>

namespace lmcc::apps {
namespace {

double rss_mib() {
  std::ifstream statm("/proc/self/statm");
  long pages_total = 0, pages_resident = 0;
  statm >> pages_total >> pages_resident;
  return static_cast<double>(pages_resident) * static_cast<double>(sysconf(_SC_PAGESIZE)) /
         (1024.0 * 1024.0);
}

/// This process's user + system CPU seconds, every thread (one syscall).
double process_cpu_seconds() {
  rusage use{};
  if (::getrusage(RUSAGE_SELF, &use) != 0)
    return 0;
  auto seconds = [](const timeval& t) {
    return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6;
  };
  return seconds(use.ru_utime) + seconds(use.ru_stime);
}

} // namespace

bool memory_releaser::worked_since_last_check() {
  const double cpu = process_cpu_seconds();
  const double quiet = std::chrono::duration<double>(check_interval_).count() / 50;
  if (cpu - cpu_at_last_check_ < quiet)
    return false;
  cpu_at_last_check_ = cpu;
  return true;
}

memory_releaser::memory_releaser(size_t free_limit, std::chrono::milliseconds check_interval)
  : free_limit_(free_limit), check_interval_(check_interval),
    thread_([this](std::stop_token stop) { run(std::move(stop)); }) {}

memory_releaser::~memory_releaser() {
  thread_.request_stop();
  wake_.notify_all();
}

void memory_releaser::request() {
  {
    std::lock_guard lock(mutex_);
    requested_ = true;
  }
  wake_.notify_one();
}

void memory_releaser::run(std::stop_token stop) {
  std::unique_lock lock(mutex_);
  auto wait = check_interval_;
  while (!stop.stop_requested()) {
    const bool asked = free_limit_ > 0
                           ? wake_.wait_for(lock, stop, wait, [this] { return requested_; })
                           : wake_.wait(lock, stop, [this] { return requested_; });
    if (stop.stop_requested())
      return;
    requested_ = false;
    lock.unlock();
    const char* why = asked ? "index-shrank" : nullptr;
    size_t free_bytes = 0;
    const bool check = !asked && free_limit_ > 0 && worked_since_last_check();
    if (!asked && free_limit_ > 0)
      wait = check ? check_interval_ : std::min(wait * 2, check_interval_ * 32);
    if (check) {
      // Resident but not in use: RSS minus what malloc has handed out. (glibc's
      // own free-bytes figure also counts free chunks whose pages are already
      // back with the kernel, so it stays high after a trim.)
      const auto info = mallinfo2(); // walks the arenas' bins: a few ms at most
      const double in_use = static_cast<double>(info.uordblks + info.hblkhd);
      const double resident = rss_mib() * 1024.0 * 1024.0;
      free_bytes = resident > in_use ? static_cast<size_t>(resident - in_use) : 0;
      if (free_bytes > free_limit_)
        why = "allocator-free";
    }
    if (why) {
      const auto start = steady_now();
      const double before = rss_mib();
      malloc_trim(0);
      const double after = rss_mib();
      spdlog::info("memory-released why={} free_mib={:.0f} rss_before_mib={:.0f} "
                   "rss_after_mib={:.0f} seconds={:.3f}",
                   why, static_cast<double>(free_bytes) / (1024.0 * 1024.0), before, after,
                   std::chrono::duration<double>(steady_now() - start).count());
    }
    lock.lock();
  }
}

} // namespace lmcc::apps
