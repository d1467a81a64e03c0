// memory_release: when the index has shrunk enough that the allocator should
// hand freed pages back to the kernel.
//
// glibc keeps freed memory inside its arenas; after a deregistration or a full
// sync drops millions of entries the node's RSS would stay at its peak
// (931 MiB RSS at 0 keys was measured). jemalloc and mimalloc give pages back
// on their own but cost 1.5-1.8x the CPU per applied op on the ingest path, so
// lmcc keeps glibc and asks it to trim (malloc_trim) after a large drop. This
// policy decides when: the index's bytes fell at least `threshold_bytes`
// below their high-water mark since the last release, they stopped falling (a
// drop of millions of entries runs in steps; trimming in the middle would
// leave the rest behind and cost a second walk), and `min_interval_ms` passed
// since the last release, so churn never trims in a loop.
//
//   memory_release_policy policy{{.threshold_bytes = 64 << 20}};
//   if (policy.should_release(index.memory_bytes(), now_ms)) releaser();
//
// Context: not thread-safe; owned by the shard actor. Time is passed in. CAF-free.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace lmcc::actors {

struct memory_release_options {
  /// How far the index must shrink below its high-water mark before memory
  /// is released. Default: 64 MiB (the slack `lmcc-bench flood` allows after
  /// a drop).
  size_t threshold_bytes = size_t{64} << 20;
  /// The least time between two releases. Default: 2 s.
  int64_t min_interval_ms = 2000;
};

class memory_release_policy {
public:
  explicit memory_release_policy(memory_release_options options = {}) : options_(options) {}

  /// True when memory should be released now; the caller then releases it.
  bool should_release(size_t index_bytes, int64_t now_ms) noexcept {
    const bool falling = index_bytes < last_bytes_;
    last_bytes_ = index_bytes;
    high_water_ = std::max(high_water_, index_bytes);
    if (falling || high_water_ - index_bytes < options_.threshold_bytes)
      return false;
    if (released_once_ && now_ms - last_release_ms_ < options_.min_interval_ms)
      return false;
    released_once_ = true;
    last_release_ms_ = now_ms;
    high_water_ = index_bytes;
    return true;
  }

  /// The index shrank by the threshold and no release followed yet: the
  /// caller must ask again later (once it stops falling, or the interval passed).
  bool owes() const noexcept { return high_water_ - last_bytes_ >= options_.threshold_bytes; }

private:
  memory_release_options options_;
  size_t high_water_ = 0;
  size_t last_bytes_ = 0;
  int64_t last_release_ms_ = 0;
  bool released_once_ = false;
};

} // namespace lmcc::actors
