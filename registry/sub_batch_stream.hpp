// sub_batch_stream: the sending side of the sub-batch protocol (sub_batch.hpp)
// for one sender (a worker actor, a full-sync session): numbers sub-batches
// per destination, remembers what is unacknowledged and how much ingest
// credit each holds, and turns cumulative acks back into credits.
//
// Each destination d gets its own stream id, base + d, so an ack (stream,
// number) names its destination by itself.
//
//   sub_batch_stream out{base_id, destinations};
//   out.stamp(d, sb, credits);            // then send sb to destination d
//   uint64_t released = out.ack(stream, n);
//   if (out.idle()) ...                   // nothing unacknowledged
//
// Context: owned by one actor; not thread-safe. CAF-free.
#pragma once

#include "index/sub_batch.hpp"

#include <cstdint>
#include <deque>
#include <vector>

namespace lmcc::actors {

class sub_batch_stream {
public:
  sub_batch_stream(uint64_t base_id, uint32_t destinations)
    : base_(base_id), lanes_(destinations) {}

  /// Gives `sb` its stream and next number for `destination` and records that
  /// it holds `credits`.
  void stamp(uint32_t destination, kv_sub_batch& sb, uint64_t credits) {
    auto& lane = lanes_.at(destination);
    sb.stream = base_ + destination;
    sb.number = ++lane.last_number;
    lane.unacked.push_back({sb.number, credits});
    ++unacked_;
  }

  /// A cumulative ack; the credits it releases (0 for an unknown or old ack).
  uint64_t ack(uint64_t stream, uint64_t up_to) {
    if (stream < base_ || stream - base_ >= lanes_.size())
      return 0;
    auto& lane = lanes_[stream - base_];
    uint64_t released = 0;
    while (!lane.unacked.empty() && lane.unacked.front().number <= up_to) {
      released += lane.unacked.front().credits;
      lane.unacked.pop_front();
      --unacked_;
    }
    return released;
  }

  /// Nothing unacknowledged.
  bool idle() const noexcept { return unacked_ == 0; }
  /// Every number up to this one is acknowledged on `destination`'s lane.
  uint64_t acked_up_to(uint32_t destination) const {
    const auto& lane = lanes_.at(destination);
    return lane.unacked.empty() ? lane.last_number : lane.unacked.front().number - 1;
  }
  uint64_t unacked() const noexcept { return unacked_; }
  uint64_t base() const noexcept { return base_; }
  uint32_t destinations() const noexcept { return static_cast<uint32_t>(lanes_.size()); }

  /// Credits of everything unacknowledged (given back when a sender quits).
  uint64_t outstanding_credits() const noexcept {
    uint64_t n = 0;
    for (const auto& lane : lanes_)
      for (const auto& u : lane.unacked)
        n += u.credits;
    return n;
  }

private:
  struct unacked_entry {
    uint64_t number;
    uint64_t credits;
  };
  struct lane {
    uint64_t last_number = 0;
    std::deque<unacked_entry> unacked;
  };
  uint64_t base_;
  std::vector<lane> lanes_;
  uint64_t unacked_ = 0;
};

} // namespace lmcc::actors
