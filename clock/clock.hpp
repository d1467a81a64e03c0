// clock: the one place lmcc reads the time.
//
// - steady_now, monotonic_ms, monotonic_s: the monotonic clock, for intervals,
//   timeouts and deadlines within one node;
// - wall_now: seconds since the Unix epoch, as LMCache's time.time();
// - node_clock: the wall clock as one node reads it, with the offset fault
//   injection moves (a test build's clock jumps).
//
// The CAF-free logic (registry/, index/, cluster/) takes `now` as an argument,
// so tests drive time; the actors, the gateway's loops and the apps read it
// here and pass it in. Nothing else calls std::chrono's clocks (the process
// hash seed's fallback entropy in messages/wire_int.hpp is not a time read).
//
//   const auto deadline = steady_now() + timeout;   // inside namespace lmcc
//   session.on_progress(monotonic_s());
//
// Thread-safety: thread-safe. CAF-free.
#pragma once

#include "faults/fault_injection.hpp"

#include <chrono>
#include <cstdint>

namespace lmcc {

using steady_time = std::chrono::steady_clock::time_point;

/// Now on the monotonic clock: what deadlines and elapsed times are measured on.
inline steady_time steady_now() noexcept {
  return std::chrono::steady_clock::now();
}

/// Seconds since the Unix epoch, as LMCache's time.time().
inline double wall_now() {
  using namespace std::chrono;
  return duration<double>(system_clock::now().time_since_epoch()).count();
}

/// Milliseconds of the monotonic clock (intervals, timeouts, snapshot cadence).
inline uint64_t monotonic_ms() {
  using namespace std::chrono;
  return static_cast<uint64_t>(
      duration_cast<milliseconds>(steady_now().time_since_epoch()).count());
}

/// Seconds of the monotonic clock: what interval checks compare (a session's
/// idle time, a worker's silence), so that the wall clock jumping (an NTP
/// step, a VM restored) neither reaps every worker nor fails every sync.
inline double monotonic_s() {
  return std::chrono::duration<double>(steady_now().time_since_epoch()).count();
}

/// The wall clock as one node reads it: the system clock plus an offset that
/// fault injection moves (`clock_jump_ms` in POST /admin/faults; chaos tests
/// jump one node's clock; always 0 in a build without fault injection). The
/// wall clock serves what is reported (LMCache's timestamps), registration
/// order (cluster/hlc.hpp is made for jumps) and deadlines between nodes
/// (corrected by each peer's measured offset, cluster_table.hpp); never an
/// interval.
///
/// Thread-safety: thread-safe.
class node_clock {
public:
  /// Seconds since the Unix epoch, as LMCache's time.time().
  double wall_s() const noexcept { return wall_now() + static_cast<double>(offset_ms()) / 1000.0; }
  uint64_t wall_ms() const noexcept { return static_cast<uint64_t>(wall_s() * 1000.0); }
  /// The injected offset in ms (the sum of the jumps).
  int64_t offset_ms() const noexcept { return injected_.ms(); }
  /// What jumps the clock: `injected().jump(by)` moves it by `by` (negative:
  /// back), on top of earlier jumps. Only a build with fault injection can.
  faults::clock_offset& injected() noexcept { return injected_; }

private:
  faults::clock_offset injected_;
};

} // namespace lmcc
