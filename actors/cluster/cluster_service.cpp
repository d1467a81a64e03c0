#include "actors/cluster/cluster_service.hpp"

#include <absl/container/flat_hash_map.h>
#include <spdlog/spdlog.h>

#include <algorithm>

namespace lmcc::actors {
namespace {

/// The service and the forwarder keep their requests' timeouts in a
/// deadline_book: one tick per check interval while any is outstanding.
template <class Self>
void arm_expiry_tick(Self self) {
  auto& st = self->state;
  if (st.expiry_tick_armed || st.deadlines.empty())
    return;
  st.expiry_tick_armed = true;
  self->delayed_send(self, expiry_check_interval(st.cfg.timeout), tick_atom::value);
}

template <class Self>
void on_expiry_tick(Self self) {
  auto& st = self->state;
  st.expiry_tick_armed = false;
  for (auto& on_timeout : st.deadlines.expire(std::chrono::steady_clock::now()))
    on_timeout();
  arm_expiry_tick(self);
}

} // namespace

std::vector<uint64_t> read_holders_flat(const kv_index& index, std::span<const uint64_t> keys) {
  std::vector<uint64_t> flat;
  flat.reserve(keys.size() * 2);
  std::vector<holder_list> holders(keys.size());
  index.lookup(keys, holders); // a peer's lookup: never behind this node's sub-batches
  for (const auto& list : holders) {
    flat.push_back(list.size());
    flat.insert(flat.end(), list.begin(), list.end());
  }
  return flat;
}

std::vector<uint64_t> share_counts_flat(const kv_index& index) {
  auto r = index.read();
  std::vector<uint64_t> flat;
  flat.reserve(r.share_by_holder().size() * 2);
  for (const auto& [h, n] : r.share_by_holder()) {
    flat.push_back(h);
    flat.push_back(n);
  }
  return flat;
}

std::vector<uint64_t> slot_counts_flat(const kv_index& index, std::span<const uint64_t> slots) {
  absl::flat_hash_map<holder_id, uint64_t> counts;
  auto r = index.read();
  for (uint64_t slot : slots)
    if (slot < index.slot_count())
      r.for_each_key(static_cast<uint32_t>(slot), [&](uint64_t, std::span<const holder_id> hs) {
        for (holder_id h : hs)
          ++counts[h];
      });
  std::vector<uint64_t> flat;
  flat.reserve(counts.size() * 2);
  for (const auto& [h, n] : counts) {
    flat.push_back(h);
    flat.push_back(n);
  }
  return flat;
}

cluster_service_actor::behavior_type
cluster_service_main(cluster_service_actor::stateful_pointer<cluster_service_state> self,
                     cluster_service_config cfg) {
  self->state.cfg = std::move(cfg);
  return {
      [self](read_atom, const std::vector<uint64_t>& keys) {
        return read_holders_flat(*self->state.cfg.index, keys);
      },
      [self](stats_atom) { return share_counts_flat(*self->state.cfg.index); },
      [self](stats_atom, const std::vector<uint64_t>& slots) {
        return slot_counts_flat(*self->state.cfg.index, slots);
      },
      [self](digest_atom, const std::vector<uint64_t>& slots) {
        const auto& index = *self->state.cfg.index;
        std::vector<uint64_t> out;
        out.reserve(slots.size() + flag_word_count(slots.size()));
        {
          auto r = index.read();
          for (uint64_t s : slots)
            out.push_back(s < index.slot_count() ? r.slot(static_cast<uint32_t>(s)).digest : 0);
        }
        const auto uncertain = flag_words(slots, [&index](uint64_t s) {
          return s < index.slot_count() && index.uncertain(static_cast<uint32_t>(s));
        });
        out.insert(out.end(), uncertain.begin(), uncertain.end());
        return out;
      },
      [self](copy_atom, uint64_t slot) {
        return self->delegate(self->state.cfg.shard, copy_atom::value, slot);
      },
      [self](tick_atom) { on_expiry_tick(self); },
      [self](push_atom, pushed_msgs& msgs) -> caf::result<bool> {
        auto& st = self->state;
        auto table = st.cfg.routes->current();
        // Group per worker, in arrival order; a deregistration closes its group.
        std::vector<std::pair<worker_actor, pushed_msgs>> groups;
        absl::flat_hash_map<uint64_t, size_t> by_uid;
        auto flush = [&] {
          for (auto& [worker, group] : groups)
            self->send(worker, push_atom::value, std::move(group));
        };
        std::vector<worker_actor> touched;
        auto cluster = st.cfg.board ? st.cfg.board->current() : nullptr;
        absl::flat_hash_map<uint16_t, pushed_msgs> onward;
        for (auto& pm : msgs) {
          if (std::holds_alternative<msg::DeRegisterMsg>(pm.msg)) {
            flush();
            groups.clear();
            by_uid.clear();
            self->send(st.cfg.directory, push_atom::value, std::move(pm.msg));
            continue;
          }
          pm.forwarded = true; // read by another node, stamped with what it knew
          auto who = pushing_worker(pm.msg);
          const ingest_route* route = who ? find_route(*table, *who->first, *who->second) : nullptr;
          if (!route && who && cluster && st.cfg.forward) {
            const node_index home = cluster->home_of(worker_uid(*who->first, *who->second));
            if (home != cluster->self) {
              pm.credits = 0; // held by the node that read the frame
              onward[home].push_back(std::move(pm));
              continue;
            }
          }
          if (!route) {
            if (st.cfg.count_event)
              st.cfg.count_event("forwarded_frame_for_unknown_worker");
            continue;
          }
          // The credits belong to the node that read the frame.
          pm.credits = 0;
          const uint64_t uid = worker_uid(*who->first, *who->second);
          auto [it, inserted] = by_uid.try_emplace(uid, groups.size());
          if (inserted) {
            groups.emplace_back(route->actor, pushed_msgs{});
            touched.push_back(route->actor);
          }
          groups[it->second].second.push_back(std::move(pm));
        }
        flush();
        for (auto& [node, frames] : onward) {
          if (st.cfg.count_event)
            st.cfg.count_event("forwarded_frames_rerouted");
          st.cfg.forward(node, std::move(frames));
        }
        if (touched.empty())
          return true;
        auto rp = self->make_response_promise<bool>();
        auto left = std::make_shared<size_t>(touched.size());
        auto all = std::make_shared<bool>(true);
        // One deadline for the whole push, kept here rather than in CAF's
        // clock (deadline_book.hpp); past it the push is answered false.
        const auto id = st.deadlines.add(std::chrono::steady_clock::now() + st.cfg.timeout,
                                         [rp]() mutable { rp.deliver(false); });
        arm_expiry_tick(self);
        auto answered = [self, id, rp, left, all](bool ok) mutable {
          *all = *all && ok;
          if (--*left == 0 && self->state.deadlines.settle(id))
            rp.deliver(*all);
        };
        for (const auto& w : touched)
          self->request(w, caf::infinite, drain_atom::value)
              .then([answered](bool ok) mutable { answered(ok); },
                    [answered](caf::error&) mutable { answered(false); });
        return rp;
      },
  };
}

} // namespace lmcc::actors

#include "registry/credit_gate.hpp"

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
  const auto id = st.deadlines.add(std::chrono::steady_clock::now() + st.cfg.timeout, [drop, done] {
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
