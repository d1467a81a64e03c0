#include "actors/cluster/frame_forwarder.hpp"

#include "actors/cluster/cluster_service.hpp"
#include "actors/expiry_tick.hpp"
#include "clock/clock.hpp"
#include "registry/credit_gate.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>

namespace lmcc::actors {

namespace {

using forwarder_self = frame_forwarder_actor::stateful_pointer<frame_forwarder_state>;

void forward_frames(forwarder_self self, uint16_t node, pushed_msgs msgs, bool may_reroute);

/// The distinct workers whose frames `msgs` carries (a forward usually holds
/// runs of one worker's frames).
std::vector<uint64_t> workers_of(const pushed_msgs& msgs) {
  std::vector<uint64_t> uids;
  for (const auto& pm : msgs) {
    const auto who = pushing_worker(pm.msg);
    if (!who)
      continue;
    const uint64_t uid = worker_uid(*who->first, *who->second);
    if (std::find(uids.begin(), uids.end(), uid) == uids.end())
      uids.push_back(uid);
  }
  return uids;
}

/// Sends `msgs` to `node` now, or with the next answer from it (at most
/// max_wait later).
void enqueue_frames(forwarder_self self, uint16_t node, pushed_msgs msgs) {
  auto& st = self->state;
  if (st.sent_to[node] > 0) {
    auto& w = st.waiting[node];
    if (w.empty())
      ++st.in_flight; // a drain waits for the frames waiting, too
    w.insert(w.end(), std::make_move_iterator(msgs.begin()), std::make_move_iterator(msgs.end()));
    if (!st.tick_due[node]) {
      st.tick_due[node] = true;
      self->delayed_send(self, st.cfg.max_wait, tick_atom::value, node);
    }
    return;
  }
  forward_frames(self, node, std::move(msgs), true);
}

/// Sends the frames waiting for `node`, if any.
void send_waiting(forwarder_self self, uint16_t node) {
  auto& st = self->state;
  auto it = st.waiting.find(node);
  if (it == st.waiting.end())
    return;
  auto next = std::move(it->second);
  st.waiting.erase(it);
  forward_frames(self, node, std::move(next), true);
  --st.in_flight; // counted while it waited
}

/// Sends frames to member `node`'s service; credits come back on its answer.
/// When `node` is down by now and `may_reroute`, each frame goes to its
/// worker's home as the table places it now (the home died and was replaced).
void forward_frames(forwarder_self self, uint16_t node, pushed_msgs msgs, bool may_reroute) {
  auto& st = self->state;
  uint64_t credits = 0;
  for (const auto& pm : msgs)
    credits += pm.credits;
  auto table = st.cfg.board->current();
  const bool reachable =
      node < table->peers.size() && table->reachable(node) && table->peers[node].handles.service;
  auto drop = [self, credits, node, frames = msgs.size(),
               workers = st.cfg.frames_lost ? workers_of(msgs)
                                            : std::vector<uint64_t>{}](std::string_view why) {
    auto& st = self->state;
    for (const uint64_t uid : workers)
      st.cfg.frames_lost(uid);
    // Counted before the credits go back: whoever sees the credits return
    // (a test, /metrics after a drain) must also see the drop.
    if (st.cfg.count_event)
      st.cfg.count_event("forwarded_frames_dropped");
    // First and then every 100th: a long outage must not fill the log.
    if (st.dropped++ % 100 == 0)
      spdlog::warn("frames-not-forwarded node_index={} frames={} reason={} dropped_so_far={}", node,
                   frames, why, st.dropped);
    st.cfg.gate->give(credits);
  };
  auto reroute = [self, node](pushed_msgs frames) {
    auto table = self->state.cfg.board->current();
    absl::flat_hash_map<uint16_t, pushed_msgs> by_home;
    for (auto& pm : frames) {
      auto who = pushing_worker(pm.msg);
      const auto home = who ? table->home_of(worker_uid(*who->first, *who->second)) : node;
      by_home[home].push_back(std::move(pm));
    }
    for (auto& [home, part] : by_home)
      if (self->state.sent_to[home] > 0)
        enqueue_frames(self, home, std::move(part));
      else
        forward_frames(self, home, std::move(part), false);
  };
  if (!reachable) {
    if (may_reroute) {
      reroute(std::move(msgs));
      return;
    }
    drop("home-node-unreachable");
    return;
  }
  auto service = caf::actor_cast<cluster_service_actor>(table->peers[node].handles.service);
  // No second try once sent (that would need a copy of every frame): a home
  // that dies with frames in flight loses them, and the gap they leave makes
  // only that worker resync.
  ++st.in_flight;
  ++st.sent_to[node];
  auto done = [self, node] {
    auto& st = self->state;
    --st.sent_to[node];
    send_waiting(self, node);
    if (--st.in_flight == 0) {
      for (auto& rp : st.drains)
        rp.deliver(true);
      st.drains.clear();
    }
  };
  // The timeout is kept here, not in CAF's clock (deadline_book.hpp).
  const auto id = st.deadlines.add(steady_now() + st.cfg.timeout, [drop, done] {
    drop("forward-timeout");
    done();
  });
  arm_expiry_tick(self);
  // Forwarding volume: workers whose PUSH streams land away from their home.
  if (st.cfg.count_event)
    st.cfg.count_event("forwards_sent");
  self->request(service, caf::infinite, push_atom::value, std::move(msgs))
      .then(
          [self, id, credits, done](bool) {
            if (!self->state.deadlines.settle(id))
              return; // expired: its credits went back then
            self->state.cfg.gate->give(credits);
            done();
          },
          [self, id, drop, done](caf::error& e) {
            if (!self->state.deadlines.settle(id))
              return;
            drop(caf::to_string(e));
            done();
          });
}

} // namespace

frame_forwarder_actor::behavior_type
frame_forwarder_main(frame_forwarder_actor::stateful_pointer<frame_forwarder_state> self,
                     frame_forwarder_config cfg) {
  self->state.cfg = std::move(cfg);
  return {
      [self](push_atom, uint16_t node, pushed_msgs& msgs) {
        enqueue_frames(self, node, std::move(msgs));
      },
      [self](tick_atom, uint16_t node) {
        self->state.tick_due[node] = false;
        send_waiting(self, node);
      },
      [self](tick_atom) { on_expiry_tick(self); },
      [self](drain_atom) -> caf::result<bool> {
        auto& st = self->state;
        if (st.in_flight == 0)
          return true;
        auto rp = self->make_response_promise<bool>();
        st.drains.push_back(rp);
        return rp;
      },
  };
}

} // namespace lmcc::actors
