// deadline_book: the deadlines of an actor's outstanding requests, checked by
// one lazy tick of its own instead of CAF's clock.
//
// CAF 0.17 gives every `request` with a timeout an event in the actor clock:
// the clock thread wakes to file it and again when it expires -- also when the
// answer came long before, since 0.17 never cancels it -- and the expired
// event then wakes the requester for a message it drops. On a forwarding path
// that makes ~100 requests a second per node that was three wake-ups per
// request beside the two of the request itself. An actor that sends such
// requests with `caf::infinite` files each one here and runs one tick every
// check interval while any is outstanding; the tick expires the overdue ones
// (their error path runs, a late answer is then ignored). A deadline fires up
// to one check interval late.
//
//   deadline_book<std::function<void()>> book;          // T: what a timeout does
//   auto id = book.add(now + timeout, on_timeout);
//   self->request(dest, caf::infinite, ...).then(
//       [=](auto&) { if (book.settle(id)) on_answer(); },
//       [=](caf::error&) { if (book.settle(id)) on_error(); });
//   // on the tick: for (auto& f : book.expire(now)) f();
//
// Context: owned by one actor; not thread-safe. CAF-free, time passed in.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <map>
#include <utility>
#include <vector>

namespace lmcc::actors {

/// How often an actor with requests of `timeout` checks their deadlines:
/// an eighth of it, between 1 and 250 ms.
inline std::chrono::milliseconds expiry_check_interval(std::chrono::milliseconds timeout) {
  return std::clamp(timeout / 8, std::chrono::milliseconds{1}, std::chrono::milliseconds{250});
}

template <class T>
class deadline_book {
public:
  using clock = std::chrono::steady_clock;

  /// Files a deadline with what its expiry carries; returns its id (ids grow
  /// with each add).
  uint64_t add(clock::time_point due, T on_expiry) {
    const uint64_t id = next_id_++;
    pending_.emplace(id, entry{due, std::move(on_expiry)});
    return id;
  }

  /// The answer (or error) of `id` arrived: true if it was still outstanding,
  /// false if it had expired already (the caller ignores the answer then).
  bool settle(uint64_t id) { return pending_.erase(id) == 1; }

  /// Removes the entries due at or before `now` and returns what they carry,
  /// oldest first.
  std::vector<T> expire(clock::time_point now) {
    std::vector<T> out;
    for (auto it = pending_.begin(); it != pending_.end();) {
      if (it->second.due <= now) {
        out.push_back(std::move(it->second.on_expiry));
        it = pending_.erase(it);
      } else {
        ++it;
      }
    }
    return out;
  }

  /// Whether `id` is still outstanding (neither settled nor expired).
  bool pending(uint64_t id) const { return pending_.contains(id); }

  bool empty() const noexcept { return pending_.empty(); }
  size_t size() const noexcept { return pending_.size(); }

private:
  struct entry {
    clock::time_point due;
    T on_expiry;
  };
  uint64_t next_id_ = 1;
  std::map<uint64_t, entry> pending_;
};

} // namespace lmcc::actors
