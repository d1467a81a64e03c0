// clock: the one place actor code reads the time.
//
// The actor-free state classes (registry, full_sync_session, ...) take `now`
// as an argument, so tests drive time; the actors read it here and pass it in.
// LMCache reports times as float seconds since the Unix epoch.
//
// Thread-safety: thread-safe.
#pragma once

#include <chrono>
#include <cstdint>

namespace lmcc::actors {

/// Seconds since the Unix epoch, as LMCache's time.time().
inline double wall_now() {
  using namespace std::chrono;
  return duration<double>(system_clock::now().time_since_epoch()).count();
}

/// Milliseconds of the monotonic clock (intervals, timeouts, snapshot cadence).
inline uint64_t monotonic_ms() {
  using namespace std::chrono;
  return static_cast<uint64_t>(
      duration_cast<milliseconds>(steady_clock::now().time_since_epoch()).count());
}

} // namespace lmcc::actors
