// fault_injection: the faults a test build can inject, and what a release
// build compiles in their place.
//
// Fault injection is a build feature, the CMake option LMCC_FAULT_INJECTION:
// OFF by default (a release build, the Dockerfile's), ON in `make build` and
// so in `make test`, `make run` and CI. A build with it has POST /admin/faults
// (failing and slow commits, clock jumps) and the deliberate bugs of
// lmcc_planted_bug (the chaos checker's negative tests). A build without it
// has none of that code: each mechanism below is replaced by a stand-in whose
// answer is a constant "no fault", so call sites need no #if and the compiler
// drops the branches behind them; the setters (a clock jump, a failing commit)
// do not exist, so only code under `#if LMCC_FAULT_INJECTION` (the
// /admin/faults route and its handler) can use them.
//
//   if (!sb.ops.empty() && cfg.planted.strikes(faults::planted_bug::skip_replica))
//     ...                                                 // never in a release build
//     ...
//   if (const char* why = faults.before_commit())         // nullptr in a release build
//     return error{...};
//
// `built` is for code that must say which build it is (the start-up refusal
// of lmcc_fault_injection, `lmcc --version`).
//
// The planted bugs are listed here, in one enum; the node gives the one it
// was started with to each actor that has a bug to plant (one `planted`
// member of its config, empty in a release build), and the code that would
// go wrong asks it whether that bug strikes now.
//
// Thread-safety: commit_faults and clock_offset are thread-safe; a
// planted_bugs is owned by one actor (each copy counts on its own).
#pragma once

#ifndef LMCC_FAULT_INJECTION
#error "LMCC_FAULT_INJECTION is undefined: link the target with lmcc_fault_injection"
#endif

#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>

namespace lmcc::faults {

/// Whether this build has fault injection.
inline constexpr bool built = LMCC_FAULT_INJECTION != 0;

/// The CMake option, as messages name it.
inline constexpr const char* build_option = "LMCC_FAULT_INJECTION";

/// What `lmcc --version` and `lmcc node --dump-config` say of this build.
inline constexpr const char* build_summary =
    built ? "fault injection: built in (LMCC_FAULT_INJECTION=ON, a test build)"
          : "fault injection: not built (LMCC_FAULT_INJECTION=OFF)";

/// lmcc_planted_bug's values: the deliberate bugs of a test build.
enum class planted_bug : uint8_t {
  none = 0,
  drop_acked_sub_batch = 1, ///< the shard acks every Nth sub-batch without applying it
  skip_replica = 2,         ///< a peer link acks every Nth sub-batch without sending it
  forget_watermark = 3,     ///< a takeover forgets the worker's seq watermarks
  /// A home does not resend the full syncs it owes to a peer that comes back
  /// (not a checker's negative test: the heard-heartbeat backstop must still
  /// get the worker asked, tests/integration/test_partitions.py).
  no_owed_resend = 4,
};

/// How often a planted bug that counts (drop, skip) strikes: every Nth case.
inline constexpr uint32_t planted_bug_every = 10;

#if LMCC_FAULT_INJECTION

/// The bug a node was started with, as one actor sees it.
class planted_bugs {
public:
  constexpr planted_bugs() = default;
  constexpr explicit planted_bugs(planted_bug bug, uint32_t every = planted_bug_every)
    : bug_(bug), every_(every) {}
  /// Counts one more case of `bug`; true when it is the planted bug and this
  /// case is struck (every Nth; N = 0: never).
  bool strikes(planted_bug bug) noexcept {
    return bug == bug_ && bug != planted_bug::none && every_ != 0 && ++count_ % every_ == 0;
  }
  /// True when `bug` is the planted one (a bug that is on or off).
  constexpr bool is(planted_bug bug) const noexcept {
    return bug == bug_ && bug != planted_bug::none;
  }

private:
  planted_bug bug_ = planted_bug::none;
  uint32_t every_ = 0;
  uint64_t count_ = 0;
};

/// How far the node's wall clock has been jumped (POST /admin/faults
/// clock_jump_ms), in ms.
class clock_offset {
public:
  /// Moves the clock by `by` (negative: back), on top of earlier jumps.
  void jump(std::chrono::milliseconds by) noexcept {
    ms_.fetch_add(by.count(), std::memory_order_relaxed);
  }
  int64_t ms() const noexcept { return ms_.load(std::memory_order_relaxed); }

private:
  std::atomic<int64_t> ms_{0};
};

/// Injected store failures (POST /admin/faults). Any field may be changed
/// from any thread.
struct commit_faults {
  /// Commits left to fail (each failing one decrements it). Default: 0
  std::atomic<uint64_t> fail_commits{0};
  /// Fail every commit while set. Default: false
  std::atomic<bool> fail_all_commits{false};
  /// Extra delay before every commit, in microseconds (a slow disk). Default: 0
  std::atomic<uint64_t> commit_delay_us{0};

  /// Before a commit: waits out the delay, then names the setting that fails
  /// this commit, or nullptr (it goes ahead).
  const char* before_commit() {
    if (auto us = commit_delay_us.load(std::memory_order_relaxed); us > 0)
      std::this_thread::sleep_for(std::chrono::microseconds(us));
    if (fail_all_commits.load(std::memory_order_relaxed))
      return "fail_all_commits";
    for (uint64_t n = fail_commits.load(); n > 0;)
      if (fail_commits.compare_exchange_weak(n, n - 1))
        return "fail_commits";
    return nullptr;
  }
};

#else // a release build: the same names, no faults, nothing to set

class planted_bugs {
public:
  constexpr planted_bugs() = default;
  constexpr explicit planted_bugs(planted_bug, uint32_t = planted_bug_every) {}
  static constexpr bool strikes(planted_bug) noexcept { return false; }
  static constexpr bool is(planted_bug) noexcept { return false; }
};

class clock_offset {
public:
  static constexpr int64_t ms() noexcept { return 0; }
};

struct commit_faults {
  static constexpr const char* before_commit() noexcept { return nullptr; }
};

#endif

} // namespace lmcc::faults
