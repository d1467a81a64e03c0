#include "registry/credit_gate.hpp"

#include <cerrno>
#include <sys/eventfd.h>
#include <system_error>
#include <unistd.h>

namespace lmcc::actors {

credit_gate::credit_gate(uint64_t limit, uint64_t resume_below)
  : limit_(limit), resume_below_(resume_below), wake_fd_(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {
  if (wake_fd_ < 0)
    throw std::system_error(errno, std::generic_category(), "eventfd");
}

credit_gate::~credit_gate() {
  ::close(wake_fd_);
}

void credit_gate::take(uint64_t n) noexcept {
  const uint64_t now = in_flight_.fetch_add(n, std::memory_order_acq_rel) + n;
  if (now > peak_.load(std::memory_order_relaxed))
    peak_.store(now, std::memory_order_relaxed);
}

void credit_gate::give(uint64_t n) noexcept {
  // Never below zero: a double give would otherwise wrap and stop ingest for good.
  uint64_t before = in_flight_.load(std::memory_order_relaxed);
  uint64_t now = 0;
  do {
    now = before > n ? before - n : 0;
  } while (!in_flight_.compare_exchange_weak(before, now, std::memory_order_acq_rel));
  if (now < resume_below_ && armed_.load(std::memory_order_acquire) &&
      armed_.exchange(false, std::memory_order_acq_rel))
    notify();
}

bool credit_gate::arm() noexcept {
  armed_.store(true, std::memory_order_release);
  // Credits given back between exhausted() and arm() found nobody armed:
  // look again, so the wake-up cannot be lost.
  if (in_flight() < resume_below_ && armed_.exchange(false, std::memory_order_acq_rel))
    return false;
  stalls_.fetch_add(1, std::memory_order_relaxed);
  return true;
}

void credit_gate::disarm() noexcept {
  uint64_t value = 0;
  // EAGAIN just means it was not signalled.
  if (::read(wake_fd_, &value, sizeof value) < 0) {
  }
  armed_.store(false, std::memory_order_release);
}

void credit_gate::notify() noexcept {
  uint64_t one = 1;
  // Fails only when the counter is saturated, i.e. already signalled.
  if (::write(wake_fd_, &one, sizeof one) < 0) {
  }
}

} // namespace lmcc::actors
