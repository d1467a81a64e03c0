// sooner_tick: the one self-addressed tick_atom an actor keeps armed only
// while it has something to do, where a need that comes sooner than the armed
// tick arms another and the later one, when it arrives, is ignored. An idle
// actor then has no timer at all (an idle node wakes for nothing), and a busy
// one never more than it needs.
//
// The actor's state holds a `sooner_tick tick`; its behavior handles
// `tick_atom`:
//
//   arm_sooner_tick(self, self->state.tick, 500ms);      // whenever work arrives
//   [self](tick_atom) {
//     if (!self->state.tick.fire(steady_now())) return;  // a superseded one
//     ...; arm_sooner_tick(self, self->state.tick, next);
//   },
//
// Context: called inside the actor's handlers.
#pragma once

#include "actors/type_ids.hpp"
#include "clock/clock.hpp"

#include <chrono>
#include <optional>

namespace lmcc::actors {

class sooner_tick {
public:
  using time_point = std::chrono::steady_clock::time_point;

  /// Whether a tick `delay` after `now` must be sent: none is armed that
  /// comes as soon. Notes it as the armed one.
  bool arm(time_point now, std::chrono::milliseconds delay) noexcept {
    const auto at = now + delay;
    if (at_ && *at_ <= at)
      return false;
    at_ = at;
    return true;
  }

  /// A tick arrived: true when it is due (nothing is armed any more until the
  /// caller arms again), false when a sooner one superseded it and is still
  /// to come.
  bool fire(time_point now) noexcept {
    if (at_ && now < *at_)
      return false;
    at_.reset();
    return true;
  }

private:
  std::optional<time_point> at_;
};

/// Sends the tick `delay` from now unless one as soon is armed.
template <class Self>
void arm_sooner_tick(Self self, sooner_tick& tick, std::chrono::milliseconds delay) {
  if (tick.arm(steady_now(), delay))
    self->delayed_send(self, delay, tick_atom::value);
}

} // namespace lmcc::actors
