// ack_batcher: a shard's acks to senders on other nodes, held so that each
// sender gets at most one ack message per `delay`.
//
// Every message between nodes costs the middleman thread wake-ups on both
// sides, and a busy peer link's sub-batches commit hundreds of times a second:
// acking each commit made acks half of all inter-node messages. Acks are
// cumulative per stream, so holding them loses nothing: the held number of a
// stream is the largest seen.
//
//   ack_batcher<caf::strong_actor_ptr> acks{20ms};
//   acks.add(sender, stream, number);                 // after a commit
//   for (auto& [to, batch] : acks.take_due(now, false)) send(to, batch);
//   if (auto at = acks.next_due()) wake up at *at and take_due again;
//
// Context: owned by one actor (the shard); not thread-safe. CAF-free, time
// passed in.
#pragma once

#include "cluster/wire.hpp"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <utility>
#include <vector>

namespace lmcc::actors {

template <class Sender>
class ack_batcher {
public:
  using clock = std::chrono::steady_clock;

  /// `delay` 0: every add is due at once.
  explicit ack_batcher(std::chrono::milliseconds delay) : delay_(delay) {}

  /// Owes `sender` the ack of `stream` up to `number` (cumulative).
  void add(const Sender& sender, uint64_t stream, uint64_t number) {
    auto it =
        std::find_if(held_.begin(), held_.end(), [&](const held& h) { return h.sender == sender; });
    if (it == held_.end())
      it = held_.insert(held_.end(), held{sender, {}, std::nullopt});
    auto& n = it->numbers[stream];
    n = std::max(n, number);
  }

  /// One sender's due acks, streams ascending.
  struct batch {
    Sender sender;
    std::vector<cluster::stream_ack> acks;
  };

  /// The acks of every sender whose last batch is `delay` old (or never
  /// sent), or of every sender with `all` (a drain waits on them).
  std::vector<batch> take_due(clock::time_point now, bool all) {
    std::vector<batch> out;
    for (auto& h : held_) {
      if (h.numbers.empty() || (!all && h.last_sent && now - *h.last_sent < delay_))
        continue;
      batch b{h.sender, {}};
      b.acks.reserve(h.numbers.size());
      for (const auto& [stream, number] : h.numbers)
        b.acks.push_back({stream, number});
      h.numbers.clear();
      h.last_sent = now;
      out.push_back(std::move(b));
    }
    return out;
  }

  /// When the next held batch falls due; nullopt when nothing is held.
  std::optional<clock::time_point> next_due() const {
    std::optional<clock::time_point> due;
    for (const auto& h : held_)
      if (!h.numbers.empty()) {
        const auto at = h.last_sent ? *h.last_sent + delay_ : clock::time_point{};
        due = due ? std::min(*due, at) : at;
      }
    return due;
  }

private:
  struct held {
    Sender sender;
    std::map<uint64_t, uint64_t> numbers; ///< stream -> cumulative number
    std::optional<clock::time_point> last_sent;
  };

  std::chrono::milliseconds delay_;
  std::vector<held> held_; ///< few: one per peer node
};

} // namespace lmcc::actors
