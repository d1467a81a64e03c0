#include "actors/sync_session.hpp"

#include "clock/clock.hpp"

namespace lmcc::actors {

using session_self = sync_session_actor::stateful_pointer<sync_session_state>;

/// The session logic's effects, as messages.
class session_effects final : public session_outbox {
public:
  explicit session_effects(session_self self) : self_(self) {}

  void send(uint32_t destination, kv_sub_batch&& sb) override {
    self_->send(self_->state.env.shards.at(destination), apply_atom::value, std::move(sb));
  }
  void give_credits(uint64_t n) override {
    if (n > 0 && self_->state.env.gate)
      self_->state.env.gate->give(n);
  }
  void report(sync_phase phase, uint64_t missing) override {
    self_->send(self_->state.env.directory, sync_state_atom::value, self_->state.env.worker_uid,
                phase, missing);
  }
  void ended(const std::string& sync_id, bool completed, const session_stream& left) override {
    self_->send(self_->state.env.owner, session_done_atom::value, sync_id, completed, left.words());
  }

private:
  session_self self_;
};

sync_session_state::sync_session_state() = default;
sync_session_state::~sync_session_state() = default;

namespace {

std::chrono::milliseconds tick_interval(double timeout_s) {
  auto ms = static_cast<int64_t>(timeout_s * 1000.0 / 10.0);
  return std::chrono::milliseconds{std::clamp<int64_t>(ms, 10, 1000)};
}

void answer_drains(session_self self) {
  auto& st = self->state;
  if (st.drains.empty() || !st.logic->idle())
    return;
  for (auto& rp : st.drains)
    rp.deliver(true);
  st.drains.clear();
}

} // namespace

sync_session_actor::behavior_type
sync_session_main(sync_session_actor::stateful_pointer<sync_session_state> self, session_env env,
                  session_config cfg) {
  auto& st = self->state;
  st.env = std::move(env);
  const double timeout_s = cfg.timeout_s;
  st.effects = std::make_unique<session_effects>(self);
  st.logic = std::make_unique<sync_session_logic>(std::move(cfg), *st.effects);
  self->set_exit_handler([self](caf::exit_msg& m) {
    // Stopping (the worker retired or re-registered): what it holds of the
    // PULL socket's credit goes back.
    self->state.logic->abort();
    self->quit(m.reason);
  });
  return {
      [self, timeout_s](sync_start_atom, const session_params& p) {
        auto& st = self->state;
        st.logic->start(p, monotonic_s());
        if (!st.ticking) {
          st.ticking = true;
          self->delayed_send(self, tick_interval(timeout_s), tick_atom::value);
        }
      },
      [self](go_atom) { self->state.logic->go(); },
      [self](push_atom, pushed_msg& m) {
        self->state.logic->on_input(std::move(m), monotonic_s());
      },
      [self](ack_atom, uint64_t stream, uint64_t up_to) {
        self->state.logic->on_ack(stream, up_to, monotonic_s());
        answer_drains(self);
      },
      [self](sync_status_atom, const msg::Msg& m) {
        if (const auto* status = std::get_if<msg::FullSyncStatusMsg>(&m))
          return msg::Msg{self->state.logic->status(*status)};
        return msg::Msg{msg::ErrorMsg{"expected FullSyncStatusMsg"}};
      },
      [self, timeout_s](tick_atom) {
        auto& st = self->state;
        st.logic->expire(monotonic_s());
        if (st.logic->phase() != sync_phase::syncing) {
          st.ticking = false;
          return;
        }
        self->delayed_send(self, tick_interval(timeout_s), tick_atom::value);
      },
      [self](drain_atom) -> caf::result<bool> {
        auto& st = self->state;
        if (st.logic->idle())
          return true;
        st.drains.push_back(self->make_response_promise<bool>());
        return st.drains.back();
      },
  };
}

} // namespace lmcc::actors
