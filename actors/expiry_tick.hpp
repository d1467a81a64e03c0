// expiry_tick: the one tick an actor runs to expire the requests it filed in
// its deadline_book (deadline_book.hpp), armed only while any is outstanding.
//
// The actor's state has `cfg.timeout`, `deadlines` (a deadline_book whose
// entries are callables) and `bool expiry_tick_armed`; its behavior handles
// `tick_atom` with on_expiry_tick(self):
//
//   st.deadlines.add(now + st.cfg.timeout, [=] { ... });  arm_expiry_tick(self);
//   [self](tick_atom) { on_expiry_tick(self); },
//
// Context: called inside the actor's handlers.
#pragma once

#include "actors/deadline_book.hpp"
#include "actors/type_ids.hpp"
#include "clock/clock.hpp"

#include <chrono>

namespace lmcc::actors {

/// Schedules the next tick, one check interval away, unless one is armed or
/// nothing is outstanding.
template <class Self>
void arm_expiry_tick(Self self) {
  auto& st = self->state;
  if (st.expiry_tick_armed || st.deadlines.empty())
    return;
  st.expiry_tick_armed = true;
  self->delayed_send(self, expiry_check_interval(st.cfg.timeout), tick_atom::value);
}

/// The tick: runs the expiry of every overdue request, then re-arms.
template <class Self>
void on_expiry_tick(Self self) {
  auto& st = self->state;
  st.expiry_tick_armed = false;
  for (auto& on_timeout : st.deadlines.expire(steady_now()))
    on_timeout();
  arm_expiry_tick(self);
}

} // namespace lmcc::actors
