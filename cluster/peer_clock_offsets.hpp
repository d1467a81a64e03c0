// peer_clock_offsets: how far each peer's wall clock is from this node's.
//
//   offsets.add_sample(peer, their_wall_ms - our_wall_ms);
//   const auto deadline_there = deadline_here + offsets.of(peer);
//
// Context: shared by the cluster node (which samples the greetings) and the
// directory (which forwards requests with deadlines). CAF-free.
#pragma once

#include <absl/container/flat_hash_map.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <mutex>
#include <string>

namespace lmcc::cluster {

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
/// stepping back counts once the window has passed (4 s of greetings while
/// the cluster changes, 16 s while it is quiet; meanwhile its deadlines are
/// late, so it applies, rather than refuses, a request a little late).
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

} // namespace lmcc::cluster
