// clock: the one place actor code reads the time.
//
// The actor-free state classes (registry, full_sync_session, ...) take `now`
// as an argument, so tests drive time; the actors read it here and pass it in.
// LMCache reports times as float seconds since the Unix epoch.
//
// Thread-safety: thread-safe.
#pragma once

#include "faults/fault_injection.hpp"

#include <absl/container/flat_hash_map.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>

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

/// Seconds of the monotonic clock: what interval checks compare (a session's
/// idle time, a worker's silence), so that the wall clock jumping (an NTP
/// step, a VM restored) neither reaps every worker nor fails every sync.
inline double monotonic_s() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
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

/// Each peer's wall clock minus this node's, in ms, as measured from the
/// wall time its greetings carry (cluster_node.hpp). A request forwarded to a
/// peer carries its deadline in that peer's clock, so clocks that differ or
/// jump (a node_clock jump, an NTP step) do not make a peer refuse every
/// forwarded request, or apply a late one.
///
/// One sample (its wall time at sending minus ours at handling) is the offset
/// minus the greeting's delay, and a greeting can wait seconds (a node frozen
/// or starved handles a burst of old ones): the estimate is the largest of the
/// last `window` samples. A peer's clock stepping ahead counts at once; one
/// stepping back counts once the window has passed (meanwhile its deadlines
/// are late, so it applies, rather than refuses, a request a little late).
/// Clocks within `deadband_ms` of each other count as in step (0): NTP keeps
/// clocks that close. Until a peer has greeted `min_samples` times a negative
/// estimate counts as 0 (a first greeting can be one that waited), but a
/// positive one counts at once: a sample is never above the true offset, and a
/// node that just started (its window empty) would otherwise give a peer far
/// ahead deadlines already past in that peer's clock (a restarted node's
/// forwarded full-sync start was refused as 463 s late; guarded by
/// clock_test's a_peer_ahead_counts_from_its_first_greeting).
///
/// Thread-safety: thread-safe.
class peer_clock_offsets {
public:
  static constexpr size_t window = 16;
  static constexpr size_t min_samples = 4;
  static constexpr int64_t deadband_ms = 1000;

  /// Adds a sample of `peer`'s offset; true when the estimate moved by more
  /// than `noticeable_ms` (or is first known and that far from 0).
  bool add_sample(const std::string& peer, int64_t sample_ms, int64_t noticeable_ms = 1000) {
    std::lock_guard lock{mutex_};
    auto& p = by_peer_[peer];
    const int64_t before = p.count == 0 ? 0 : p.estimate;
    p.samples[p.next] = sample_ms;
    p.next = (p.next + 1) % window;
    p.count = std::min(p.count + 1, window);
    p.estimate = p.samples[0];
    for (size_t i = 1; i < p.count; ++i)
      p.estimate = std::max(p.estimate, p.samples[i]);
    const int64_t moved = p.estimate > before ? p.estimate - before : before - p.estimate;
    return moved > noticeable_ms;
  }
  /// `peer`'s estimated offset; 0 while it counts as in step.
  int64_t of(const std::string& peer) const {
    std::lock_guard lock{mutex_};
    auto it = by_peer_.find(peer);
    if (it == by_peer_.end() || it->second.count == 0)
      return 0;
    int64_t e = it->second.estimate;
    if (it->second.count < min_samples)
      e = std::max<int64_t>(e, 0);
    return e > -deadband_ms && e < deadband_ms ? 0 : e;
  }

private:
  struct peer_samples {
    std::array<int64_t, window> samples{};
    size_t next = 0;
    size_t count = 0;
    int64_t estimate = 0;
  };
  mutable std::mutex mutex_;
  absl::flat_hash_map<std::string, peer_samples> by_peer_;
};

} // namespace lmcc::actors
