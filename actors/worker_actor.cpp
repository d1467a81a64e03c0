#include "actors/worker_actor.hpp"

#include "clock/clock.hpp"
#include "registry/handoff.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>

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
  void seq_started(uint64_t incarnation) override {
    self_->send(self_->state.env.directory, seq_start_atom::value, uid_, incarnation);
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
  void durable_flush_wanted() override {
    auto& st = self_->state;
    if (!st.durable_flush_scheduled) {
      st.durable_flush_scheduled = true;
      self_->delayed_send(self_, st.env.durable_flush_delay, flush_atom::value);
    }
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
  if (!st.logic)
    return;
  // Someone waits for this worker to be settled (a clean stop, a handoff):
  // its owners hear the durable seq now, not after durable_flush_delay, so a
  // restart that follows trusts its marks.
  if (!st.drains.empty() || !st.handoffs.empty())
    st.logic->flush_durable(/*only_if_quiet=*/false);
  if (!st.logic->stream().idle())
    return;
  for (auto& rp : st.drains)
    rp.deliver(true);
  st.drains.clear();
  if (st.handoffs.empty())
    return;
  // Everything sent is acknowledged by every owner: the trackers are final.
  auto marks = st.logic->marks();
  for (auto& rp : st.handoffs)
    rp.deliver(marks);
  st.handoffs.clear();
  st.handed_off = true;
  // Frames still on their way here are passed back meanwhile; then it ends.
  self->delayed_send(self, std::chrono::seconds(30), retire_atom::value);
}

/// Frames that reached this actor after its worker moved: back to the
/// directory, which sends them to the new home.
void pass_back(worker_self self, pushed_msgs&& msgs) {
  auto& st = self->state;
  if (msgs.empty())
    return;
  if (st.env.returns) {
    self->send(st.env.returns, forward_atom::value, std::move(msgs));
    return;
  }
  for (auto& m : msgs)
    st.effects->give_credits(m.credits);
}

/// Orders parked frames of each location by their first seq_num: frames of
/// one worker may reach a new home by two paths (straight, and through the
/// old home) while it waits. Other frames keep their places.
void order_parked(pushed_msgs& parked) {
  std::map<std::string, std::vector<size_t>> by_location;
  for (size_t i = 0; i < parked.size(); ++i)
    if (const auto* b = std::get_if<msg::BatchedKVOperationMsg>(&parked[i].msg);
        b && !b->operations.empty())
      by_location[b->location].push_back(i);
  for (auto& [name, at] : by_location) {
    std::vector<pushed_msg> frames;
    for (size_t i : at)
      frames.push_back(std::move(parked[i]));
    std::stable_sort(frames.begin(), frames.end(), [](const pushed_msg& a, const pushed_msg& b) {
      return std::get<msg::BatchedKVOperationMsg>(a.msg).operations.front().seq_num.bits() <
             std::get<msg::BatchedKVOperationMsg>(b.msg).operations.front().seq_num.bits();
    });
    for (size_t k = 0; k < at.size(); ++k)
      parked[at[k]] = std::move(frames[k]);
  }
}

/// The first seq of a KV batch, and its location.
std::optional<std::pair<const std::string*, uint64_t>> batch_start(const pushed_msg& m) {
  const auto* b = std::get_if<msg::BatchedKVOperationMsg>(&m.msg);
  if (!b || b->operations.empty())
    return std::nullopt;
  return std::make_pair(&b->location, b->operations.front().seq_num.bits());
}

/// Applies held batches that are next in seq order, as long as there are.
void release_held(worker_self self) {
  auto& st = self->state;
  bool progress = true;
  while (progress && !st.held.empty()) {
    progress = false;
    for (size_t i = 0; i < st.held.size(); ++i) {
      auto start = batch_start(st.held[i]);
      auto next = start ? st.logic->next_seq(*start->first) : std::nullopt;
      if (start && next && start->second > *next)
        continue;
      auto m = std::move(st.held[i]);
      st.held.erase(st.held.begin() + static_cast<std::ptrdiff_t>(i));
      st.logic->on_push(std::move(m));
      progress = true;
      break;
    }
  }
}

/// The reorder window closed (or the worker moves on): what still waits goes
/// in seq order; a hole left is a gap the logic counts (and proves).
void end_reordering(worker_self self) {
  auto& st = self->state;
  if (!st.reordering)
    return;
  st.reordering = false;
  auto held = std::move(st.held);
  st.held.clear();
  order_parked(held);
  for (auto& m : held)
    st.logic->on_push(std::move(m));
}

/// A frame during the reorder window: a batch ahead of its location's seq
/// waits for the ones before it.
void push_reordering(worker_self self, pushed_msg&& m) {
  auto& st = self->state;
  auto start = batch_start(m);
  auto next = start ? st.logic->next_seq(*start->first) : std::nullopt;
  if (start && next && start->second > *next) {
    st.held.push_back(std::move(m));
    return;
  }
  st.logic->on_push(std::move(m));
  release_held(self);
}

void quit_if_finished(worker_self self) {
  if (self->state.logic->finished()) {
    answer_drains(self);
    self->quit();
  }
}

/// Starts the logic of a taken-over worker from `marks` (handoff.hpp) and
/// replays what was parked.
void start_taken_over(worker_self self, const std::vector<location_mark>& marks) {
  auto& st = self->state;
  if (!st.waiting)
    return; // started already (a reset or retire came first)
  auto cfg = std::move(*st.waiting);
  st.waiting.reset();
  persistence::worker_row row;
  row.uid = cfg.uid;
  row.instance_id = cfg.instance_id;
  row.worker_id = cfg.worker_id;
  row.incarnation = cfg.incarnation;
  auto plan = takeover_plan(row, marks, 0);
  cfg.restored = true;
  cfg.last_seq = std::move(plan.last_seq);
  cfg.expected_next = std::move(plan.expected_next);
  cfg.locations = std::move(plan.record.locations);
  for (const auto& m : marks) // the stream goes on from the newest position any owner had
    cfg.start_pos[m.location] = std::max(cfg.start_pos[m.location], m.pos);
  st.logic = std::make_unique<worker_logic>(std::move(cfg), *st.effects);
  auto parked = std::move(st.parked);
  st.parked.clear();
  order_parked(parked);
  // The frames before the first parked one may still be on their way
  // through the old home: the reorder window covers the parked ones too.
  st.reordering = true;
  self->delayed_send(self, takeover_reorder_window, tick_atom::value);
  for (auto& m : parked)
    push_reordering(self, std::move(m));
}

} // namespace

worker_actor::behavior_type worker_main(worker_actor::stateful_pointer<worker_actor_state> self,
                                        worker_env env, worker_config cfg) {
  auto& st = self->state;
  st.env = std::move(env);
  st.session_cfg = session_config{cfg.slot_count, cfg.destinations, cfg.placement,
                                  cfg.stream_base + cfg.destinations, st.env.full_sync_timeout_s};
  st.effects = std::make_unique<worker_effects>(self, cfg.uid, cfg.instance_id, cfg.worker_id);
  if (cfg.await_takeover)
    st.waiting = std::move(cfg);
  else
    st.logic = std::make_unique<worker_logic>(std::move(cfg), *st.effects);
  // A reset or retire while waiting: nothing to continue, start empty.
  auto ensure_logic = [self] {
    if (self->state.waiting)
      start_taken_over(self, {});
  };
  return {
      [self](push_atom, pushed_msgs& msgs) {
        auto& st = self->state;
        if (st.handed_off) {
          pass_back(self, std::move(msgs));
          return;
        }
        if (st.waiting) {
          for (auto& m : msgs)
            st.parked.push_back(std::move(m));
          return;
        }
        if (st.reordering) {
          for (auto& m : msgs)
            push_reordering(self, std::move(m));
          return;
        }
        // The round's batches of a location go out as one sub-batch.
        st.logic->begin_round();
        for (auto& m : msgs)
          st.logic->on_push(std::move(m));
        st.logic->end_round();
      },
      [self](tick_atom) { end_reordering(self); },
      [self](flush_atom) {
        self->state.durable_flush_scheduled = false;
        if (self->state.logic)
          self->state.logic->flush_durable();
      },
      [self](sync_start_atom, const msg::Msg& m) {
        const auto* start = std::get_if<msg::FullSyncStartMsg>(&m);
        if (!start)
          return msg::Msg{msg::ErrorMsg{"expected FullSyncStartMsg"}};
        if (!self->state.logic || self->state.handed_off)
          return msg::Msg{msg::FullSyncStartRetMsg{
              start->sync_id, false,
              "Failed to start sync: the worker's controller node is changing; retry"}};
        return msg::Msg{self->state.logic->on_sync_start(*start)};
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
        if (!self->state.logic)
          return;
        self->state.logic->on_ack(stream, up_to);
        answer_drains(self);
        quit_if_finished(self);
      },
      [self](session_done_atom, const std::string& sync_id, bool completed,
             const std::vector<uint64_t>& sent_to) {
        if (self->state.logic)
          self->state.logic->on_session_ended(sync_id, completed,
                                              session_stream::from_words(sent_to));
      },
      [self, ensure_logic](reset_atom, uint64_t incarnation) {
        ensure_logic();
        end_reordering(self);
        stop_session(self);
        self->state.logic->on_reset(incarnation);
      },
      [self, ensure_logic](retire_atom) {
        if (self->state.handed_off) {
          self->quit(); // the worker lives on its new home; nothing of it is here
          return;
        }
        ensure_logic();
        end_reordering(self);
        stop_session(self);
        self->state.logic->on_retire();
        quit_if_finished(self);
      },
      [self](handoff_atom) -> caf::result<std::vector<location_mark>> {
        auto& st = self->state;
        if (st.waiting) {
          // Moved on before it started: whatever it parked goes on too.
          st.handed_off = true;
          pass_back(self, std::move(st.parked));
          st.parked.clear();
          self->delayed_send(self, std::chrono::seconds(30), retire_atom::value);
          return std::vector<location_mark>{};
        }
        end_reordering(self);
        // A running sync cannot move: its marks say "syncing" and the new
        // home asks for it again.
        stop_session(self);
        auto rp = self->make_response_promise<std::vector<location_mark>>();
        st.handoffs.push_back(rp);
        answer_drains(self);
        return rp;
      },
      [self](handoff_atom, const std::vector<location_mark>& marks) {
        start_taken_over(self, marks);
      },
      [self](ring_atom) {
        if (self->state.logic)
          self->state.logic->check_next_batches();
      },
      [self](drain_atom) -> caf::result<bool> {
        auto& st = self->state;
        auto rp = self->make_response_promise<bool>();
        auto own = [self, rp]() mutable {
          auto& st = self->state;
          if (st.logic)
            st.logic->flush_durable(/*only_if_quiet=*/false); // see answer_drains
          if (!st.logic || st.logic->stream().idle())
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
