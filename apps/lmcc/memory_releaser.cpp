#include "apps/lmcc/memory_releaser.hpp"

#include <malloc.h>
#include <unistd.h>

#include <chrono>
#include <fstream>

#include <spdlog/spdlog.h>

namespace lmcc::apps {
namespace {

double rss_mib() {
  std::ifstream statm("/proc/self/statm");
  long pages_total = 0, pages_resident = 0;
  statm >> pages_total >> pages_resident;
  return static_cast<double>(pages_resident) * static_cast<double>(sysconf(_SC_PAGESIZE)) /
         (1024.0 * 1024.0);
}

} // namespace

memory_releaser::memory_releaser()
    : thread_([this](std::stop_token stop) { run(std::move(stop)); }) {}

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
  while (wake_.wait(lock, stop, [this] { return requested_; })) {
    requested_ = false;
    lock.unlock();
    const auto start = std::chrono::steady_clock::now();
    const double before = rss_mib();
    malloc_trim(0);
    const double after = rss_mib();
    spdlog::info("memory-released rss_before_mib={:.0f} rss_after_mib={:.0f} seconds={:.3f}",
                 before, after,
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    lock.lock();
  }
}

} // namespace lmcc::apps
