// hlc: a hybrid logical clock, the order every node agrees on for the
// Directory's registrations.
//
// A stamp is 64 bits: the upper 48 are milliseconds since the Unix epoch, the
// lower 16 a counter that orders events inside one millisecond. now() never
// returns a value at or below any value it returned or observed before, so
// stamps are strictly increasing on a node even when its wall clock steps back;
// observe() folds in a stamp from another node, so an event caused by a
// message is ordered after the event that sent it. Two stamps made on
// different nodes at the same instant can be equal; their users break the tie
// with something every node knows (lmcc: the worker's uid).
//
// Why it equals a single controller's order when registrations are not
// concurrent: if registration B starts after registration A finished (as seen
// by the client), B's node has either observed A's stamp (the Directory update
// reached it) or its wall clock has moved past A's, so stamp(B) > stamp(A).
//
//   hlc clock;
//   uint64_t stamp = clock.now(wall_ms);
//   clock.observe(remote_stamp, wall_ms);
//
// Context: not thread-safe; owned by one actor. Time is passed in. CAF-free.
#pragma once

#include <algorithm>
#include <cstdint>

namespace lmcc::cluster {

class hlc {
public:
  static constexpr int logical_bits = 16;

  static constexpr uint64_t physical_of(uint64_t stamp) noexcept { return stamp >> logical_bits; }

  /// A stamp for a local event at wall time `wall_ms`.
  uint64_t now(uint64_t wall_ms) noexcept {
    const uint64_t physical = wall_ms << logical_bits;
    last_ = std::max(last_ + 1, physical);
    return last_;
  }

  /// Folds in a stamp seen from another node.
  void observe(uint64_t remote, uint64_t wall_ms) noexcept {
    last_ = std::max({last_, remote, wall_ms << logical_bits});
  }

  uint64_t last() const noexcept { return last_; }

private:
  uint64_t last_ = 0;
};

} // namespace lmcc::cluster
