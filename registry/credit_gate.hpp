// credit_gate: the bound on ingest in flight from a PULL socket to the index
// and the store (DESIGN.md "Flow control").
//
// The PULL thread takes credits (one per op of a KV batch or key of a
// full-sync batch, one per other message) before it hands a round of frames
// to the actors; whoever finishes with them (a worker actor when its
// sub-batches are acknowledged, or at once for what is discarded) gives them
// back. While `in_flight >= limit` the PULL thread stops reading its socket,
// so ZMQ's queues fill and TCP pushes back on the workers' PUSH sockets;
// nothing is dropped. It resumes once in_flight falls below `resume_below`,
// woken through an eventfd it polls beside the socket.
//
//   credit_gate gate{262144, 131072};
//   gate.take(2500);              // PULL thread, per round
//   if (gate.exhausted()) { gate.arm(); wait on gate.wake_fd(); }
//   gate.give(50);                // any thread
//
// Thread-safety: take/arm/exhausted from one thread (the PULL thread); give
// and the counters from any thread. CAF-free.
#pragma once

#include <atomic>
#include <cstdint>

namespace lmcc::actors {

class credit_gate {
public:
  /// REQUIRES: 0 < resume_below <= limit.
  credit_gate(uint64_t limit, uint64_t resume_below);
  ~credit_gate();
  credit_gate(const credit_gate&) = delete;
  credit_gate& operator=(const credit_gate&) = delete;

  /// Takes n credits (never refuses: a round may overshoot the limit).
  void take(uint64_t n) noexcept;

  /// Gives n credits back; wakes an armed PULL thread once below resume_below.
  void give(uint64_t n) noexcept;

  /// True while in_flight >= limit.
  bool exhausted() const noexcept { return in_flight() >= limit_; }

  /// The PULL thread is about to wait on wake_fd(); true when it may wait
  /// (false: credits came back meanwhile, go on reading).
  bool arm() noexcept;

  /// Clears the eventfd after a wake-up.
  void disarm() noexcept;

  /// Readable when an armed thread should resume.
  int wake_fd() const noexcept { return wake_fd_; }

  uint64_t in_flight() const noexcept { return in_flight_.load(std::memory_order_acquire); }
  uint64_t limit() const noexcept { return limit_; }
  /// Times the PULL thread stopped reading (backpressure episodes).
  uint64_t stalls() const noexcept { return stalls_.load(std::memory_order_relaxed); }
  /// The highest in_flight seen.
  uint64_t peak() const noexcept { return peak_.load(std::memory_order_relaxed); }

private:
  void notify() noexcept;

  const uint64_t limit_;
  const uint64_t resume_below_;
  std::atomic<uint64_t> in_flight_{0};
  std::atomic<bool> armed_{false};
  std::atomic<uint64_t> stalls_{0};
  std::atomic<uint64_t> peak_{0};
  int wake_fd_ = -1;
};

} // namespace lmcc::actors
