#include "actors/worker_actor.hpp"

#include "actors/clock.hpp"

#include <spdlog/spdlog.h>

namespace lmcc::actors {

using worker_self = worker_actor::stateful_pointer<worker_actor_state>;

/// The worker logic's effects, as messages.
class worker_effects final : public worker_outbox {
public:
  worker_effects(worker_self self, uint64_t uid, std::string instance_id, msg::wire_int worker_id)
    : self_(self), uid_(uid), instance_id_(std::move(instance_id)), worker_id_(worker_id) {}

  void send(uint32_t destination, kv_sub_batch&& sb) override {
    self_->send(self_->state.env.shards.at(destination), apply_atom::value, std::move(sb));
  }
  void give_credits(uint64_t n) override {
    if (n > 0 && self_->state.env.gate)
      self_->state.env.gate->give(n);
  }
  void seq_gap(const std::string& location, uint64_t expected, uint64_t got) override {
    // One line a second per worker at most: a worker that skips seq numbers on
    // every batch must not flood the log (every gap is counted in the metric).
    const uint64_t now = monotonic_ms();
    if (gap_logged_ms_ == 0 || now - gap_logged_ms_ >= 1000) {
      spdlog::warn("seq-gap instance={} worker={} location={} expected={} got={} suppressed={}",
                   instance_id_, worker_id_.to_string(), location, expected, got, gaps_suppressed_);
      gap_logged_ms_ = now;
      gaps_suppressed_ = 0;
    } else {
      ++gaps_suppressed_;
    }
    self_->send(self_->state.env.directory, seq_gap_atom::value, uid_, uint64_t{1});
  }
  void request_resync(const std::string& reason) override {
    self_->send(self_->state.env.directory, resync_atom::value, uid_, reason);
  }
  void new_location(const std::string& location) override {
    self_->send(self_->state.env.directory, location_atom::value, uid_, location);
  }
  void session_start(const session_params& p) override {
    auto& st = self_->state;
    if (!st.session) {
      session_env env{uid_, st.env.shards, st.env.gate, st.env.directory,
                      caf::actor_cast<session_owner_actor>(self_)};
      st.session = self_->spawn<caf::linked>(sync_session_main, std::move(env), st.session_cfg);
    }
    self_->send(*st.session, sync_start_atom::value, p);
    spdlog::info("full-sync-start instance={} worker={} location={} sync_id={} total_keys={} "
                 "batches={}",
                 instance_id_, worker_id_.to_string(), p.location, p.sync_id, p.total_keys,
                 p.batch_count);
  }
  void session_go() override {
    if (auto& s = self_->state.session)
      self_->send(*s, go_atom::value);
  }
  void session_input(pushed_msg&& m) override {
    if (auto& s = self_->state.session)
      self_->send(*s, push_atom::value, std::move(m));
    else
      give_credits(m.credits);
  }

private:
  uint64_t gap_logged_ms_ = 0;
  uint64_t gaps_suppressed_ = 0;
  worker_self self_;
  uint64_t uid_;
  std::string instance_id_;
  msg::wire_int worker_id_;
};

worker_actor_state::worker_actor_state() = default;
worker_actor_state::~worker_actor_state() = default;

namespace {

/// Stops the session actor (a re-registration or deregistration): its late
/// sub-batches are fenced by the drop's newer incarnation.
void stop_session(worker_self self) {
  auto& st = self->state;
  if (!st.session)
    return;
  self->unlink_from(*st.session);
  self->send_exit(*st.session, caf::exit_reason::user_shutdown);
  st.session.reset();
}

void answer_drains(worker_self self) {
  auto& st = self->state;
  if (st.drains.empty() || !st.logic->stream().idle())
    return;
  for (auto& rp : st.drains)
    rp.deliver(true);
  st.drains.clear();
}

void quit_if_finished(worker_self self) {
  if (self->state.logic->finished()) {
    answer_drains(self);
    self->quit();
  }
}

} // namespace

worker_actor::behavior_type worker_main(worker_actor::stateful_pointer<worker_actor_state> self,
                                        worker_env env, worker_config cfg) {
  auto& st = self->state;
  st.env = std::move(env);
  st.session_cfg = session_config{cfg.slot_count, cfg.destinations, cfg.placement,
                                  cfg.stream_base + cfg.destinations, st.env.full_sync_timeout_s};
  st.effects = std::make_unique<worker_effects>(self, cfg.uid, cfg.instance_id, cfg.worker_id);
  st.logic = std::make_unique<worker_logic>(std::move(cfg), *st.effects);
  return {
      [self](push_atom, pushed_msgs& msgs) {
        for (auto& m : msgs)
          self->state.logic->on_push(std::move(m));
      },
      [self](sync_start_atom, const msg::Msg& m) {
        if (const auto* start = std::get_if<msg::FullSyncStartMsg>(&m))
          return msg::Msg{self->state.logic->on_sync_start(*start)};
        return msg::Msg{msg::ErrorMsg{"expected FullSyncStartMsg"}};
      },
      [self](sync_status_atom, msg::Msg& m) -> caf::result<msg::Msg> {
        if (auto& s = self->state.session)
          return self->delegate(*s, sync_status_atom::value, std::move(m));
        msg::FullSyncStatusRetMsg ret;
        if (const auto* status = std::get_if<msg::FullSyncStatusMsg>(&m))
          ret.sync_id = status->sync_id;
        return msg::Msg{std::move(ret)};
      },
      [self](ack_atom, uint64_t stream, uint64_t up_to) {
        self->state.logic->on_ack(stream, up_to);
        answer_drains(self);
        quit_if_finished(self);
      },
      [self](session_done_atom, const std::string& sync_id, bool completed) {
        self->state.logic->on_session_ended(sync_id, completed);
      },
      [self](reset_atom, uint64_t incarnation) {
        stop_session(self);
        self->state.logic->on_reset(incarnation);
      },
      [self](retire_atom) {
        stop_session(self);
        self->state.logic->on_retire();
        quit_if_finished(self);
      },
      [self](drain_atom) -> caf::result<bool> {
        auto& st = self->state;
        auto rp = self->make_response_promise<bool>();
        auto own = [self, rp]() mutable {
          auto& st = self->state;
          if (st.logic->stream().idle())
            rp.deliver(true);
          else
            st.drains.push_back(rp);
        };
        if (!st.session) {
          own();
          return rp;
        }
        self->request(*st.session, std::chrono::seconds(30), drain_atom::value)
            .then([own](bool) mutable { own(); }, [rp](caf::error&) mutable { rp.deliver(false); });
        return rp;
      },
  };
}

} // namespace lmcc::actors
