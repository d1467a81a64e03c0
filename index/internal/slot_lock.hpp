// slot_lock: the reader-writer lock of one kv_index slot, in 4 bytes.
//
// The index's one writer takes a slot's lock for every op it applies there,
// at millions of ops a second, on slots picked at random. A std::shared_mutex
// is 56 bytes: 4096 of them are 224 KiB, which under a flood falls out of the
// cache, and the writer paid a miss per op for it (the shard's CPU per op
// rose 0.41 -> 0.46 us). This one is 4 bytes and lives in the slot's own
// state, on the cache lines every op touches anyway.
//
// The word holds the writer bit, a bit saying someone sleeps on the word, and
// the number of readers inside. Both sides spin briefly before sleeping on
// the word (C++20 atomic wait: a futex): a reader holds a slot for one key's
// read and the writer for one op, well under a microsecond, unless the
// holder's thread was preempted, when sleeping is the right thing to do.
//
//   slot_lock l;
//   { std::lock_guard w{l}; ... }       // the writer
//   { std::shared_lock r{l}; ... }      // a lookup
//
// Thread-safety: any number of readers; REQUIRES: one writer at a time (the
// index's own lock makes it so). CAF-free.
#pragma once

#include <atomic>
#include <cstdint>
#include <thread>

namespace lmcc::actors::internal {

/// Tells the core this is a spin-wait (x86's pause); elsewhere, a yield.
inline void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#else
  std::this_thread::yield();
#endif
}

class slot_lock {
public:
  void lock() noexcept {
    uint32_t v = state_.fetch_or(writer_bit, std::memory_order_acquire);
    for (int spins = 0; (v & reader_mask) != 0; ++spins) {
      if (spins < max_spins) {
        cpu_relax();
        v = state_.load(std::memory_order_acquire);
        continue;
      }
      // The last reader out sees the writer bit and wakes us.
      if ((v & waiting_bit) == 0 &&
          !state_.compare_exchange_weak(v, v | waiting_bit, std::memory_order_acquire))
        continue;
      state_.wait(v | waiting_bit, std::memory_order_acquire);
      v = state_.load(std::memory_order_acquire);
    }
  }

  void unlock() noexcept {
    if ((state_.exchange(0, std::memory_order_release) & waiting_bit) != 0)
      state_.notify_all();
  }

  void lock_shared() noexcept {
    uint32_t v = state_.load(std::memory_order_relaxed);
    for (int spins = 0;;) {
      if ((v & writer_bit) == 0) {
        if (state_.compare_exchange_weak(v, v + 1, std::memory_order_acquire))
          return;
        continue;
      }
      if (spins++ < max_spins) {
        cpu_relax();
        v = state_.load(std::memory_order_relaxed);
        continue;
      }
      if ((v & waiting_bit) == 0 &&
          !state_.compare_exchange_weak(v, v | waiting_bit, std::memory_order_relaxed))
        continue;
      state_.wait(v | waiting_bit, std::memory_order_relaxed);
      v = state_.load(std::memory_order_relaxed);
    }
  }

  void unlock_shared() noexcept {
    const uint32_t v = state_.fetch_sub(1, std::memory_order_release) - 1;
    // The writer waits for the last reader (it set the waiting bit to sleep).
    if ((v & reader_mask) == 0 && (v & waiting_bit) != 0) {
      state_.fetch_and(~waiting_bit, std::memory_order_relaxed);
      state_.notify_all();
    }
  }

private:
  static constexpr uint32_t writer_bit = 1U << 31;
  static constexpr uint32_t waiting_bit = 1U << 30;
  static constexpr uint32_t reader_mask = waiting_bit - 1;
  /// ~1-3 us of pause instructions: longer than any op or key read takes.
  static constexpr int max_spins = 256;

  std::atomic<uint32_t> state_{0};
};

} // namespace lmcc::actors::internal
