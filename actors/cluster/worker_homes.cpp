#include "actors/cluster/worker_homes.hpp"

#include "clock/clock.hpp"
#include "registry/restore_plan.hpp"

#include <spdlog/spdlog.h>

namespace lmcc::actors {
namespace {

using takeover = worker_homes_state::takeover;

void answer_leave_waiters(directory_self self);

/// How long a handed-off worker's marks are kept for peers that ask late.
constexpr uint64_t handed_keep_ms = 60'000;
/// How soon a peer that answered "retry" is asked again.
constexpr uint64_t retry_after_ms = 50;

const std::string& node_id(const cluster_table& t, node_index i) {
  return t.members[i].address.id;
}

/// A handed-off entity whose home has not come for its marks after a while:
/// the home kept an entity of its own meanwhile (a partition or a freeze let
/// both sides host the worker, each applying the frames that reached it).
/// Two entities' seq marks cannot be merged into a proof that nothing was
/// lost or reordered, so the home is told to ask the worker for a full sync.
void tell_split_entities(directory_self self, const cluster_table& table, uint64_t now) {
  auto& st = self->state;
  auto& h = *st.homes;
  const auto wait = static_cast<uint64_t>(2 * st.cfg.home_request_timeout.count());
  for (uint64_t uid : h.unserved) {
    auto it = h.handed.find(uid);
    if (it == h.handed.end() || now - it->second.first < wait || h.split_told.contains(uid))
      continue;
    const node_index home = table.home_of(uid);
    if (home == table.self || !table.reachable(home) || !table.peers[home].handles.directory)
      continue;
    h.split_told.insert(uid);
    spdlog::warn("worker-entity-split uid={} home={} action=full-sync-requested", uid,
                 node_id(table, home));
    // Through this node's own handler, which tells every peer, the home too.
    self->send(self, resync_atom::value, uid, std::string{"entity_split"});
    // The entity here may have taken a re-registration the home never heard
    // of (a partition): the home applies this row if it is newer and renews
    // its entity, or else the sync it asks for runs under the replaced
    // registration and every owner fences it. directory_logic_test's
    // an_entity_older_than_a_registration_taken_elsewhere_is_behind guards the
    // renewal.
    if (const auto* rec = st.logic->reg().record(uid))
      self->send(caf::actor_cast<directory_actor>(table.peers[home].handles.directory),
                 row_put_atom::value, to_row(*rec));
  }
}

/// A handoff's answer: its marks, or "none" without any (no trackers to hand
/// over: an actor that never started, a worker that never pushed, a takeover
/// whose marks were of an older registration); the new home's own marks do.
/// This node's answer to a takeover's question, with the full sync it knows
/// the worker owes.
worker_handoff handoff_answer(directory_self self, uint64_t uid, std::vector<location_mark> marks) {
  const auto status = marks.empty() ? worker_handoff::answer::none : worker_handoff::answer::found;
  worker_handoff answer{uid, status, std::move(marks), {}};
  if (const auto* rec = self->state.logic->reg().record(uid))
    answer.resync_reason = rec->resync_reason;
  return answer;
}

/// Renews the entities hosted here whose worker registered again elsewhere
/// while the renewal could not reach them (the registration taken by another
/// node's entity during a partition, then only the row arrived). Guarded by
/// directory_logic_test's an_entity_older_than_a_registration_taken_elsewhere_is_behind.
void renew_entities_behind(directory_self self) {
  auto& st = self->state;
  std::erase_if(st.entity_incarnations,
                [&st](const auto& kv) { return !st.workers.contains(kv.first); });
  for (uint64_t uid : st.logic->entities_behind(st.entity_incarnations)) {
    const auto* rec = st.logic->reg().record(uid);
    spdlog::warn("worker-entity-behind uid={} entity_incarnation={} registration={} "
                 "action=renew",
                 uid, st.entity_incarnations[uid], rec ? rec->incarnation : 0);
    renew_entity(self, uid);
  }
}

void schedule_tick(directory_self self) {
  auto& h = *self->state.homes;
  if (h.tick_scheduled || (h.takeovers.empty() && h.handed.empty()))
    return;
  h.tick_scheduled = true;
  self->delayed_send(self, std::chrono::milliseconds(retry_after_ms), ring_atom::value);
}

void begin_handoff(directory_self self, uint64_t uid, node_index to) {
  auto& st = self->state;
  auto it = st.workers.find(uid);
  if (it == st.workers.end())
    return;
  auto actor = it->second;
  st.workers.erase(it);
  auto& departed = st.homes->departed;
  const uint64_t now = monotonic_ms();
  std::erase_if(departed, [now](const auto& d) { return now - d.first > handed_keep_ms; });
  departed.emplace_back(now, actor);
  st.homes->takeovers.erase(uid);
  st.homes->handed.erase(uid);
  st.homes->split_told.erase(uid);
  st.homes->handing[uid]; // peers asking meanwhile wait for the marks
  const auto table = st.cfg.cluster->current();
  const auto* rec = st.logic->reg().record(uid);
  spdlog::info("worker-handoff-start instance={} worker={} uid={} to={}",
               rec ? rec->instance_id : std::string{}, rec ? rec->worker_id.to_string() : "", uid,
               node_id(*table, to));
  // Generous: the actor waits for every owner's ack, a dead one's included
  // (its link acks on the replication timeout).
  self->request(actor, st.cfg.takeover_timeout * 2, handoff_atom::value)
      .then(
          [self, uid](std::vector<location_mark>& marks) {
            auto& h = *self->state.homes;
            ++h.handed_off_total;
            spdlog::info("worker-handoff-done uid={} locations={}", uid, marks.size());
            const auto answer = handoff_answer(self, uid, marks);
            for (auto& rp : h.handing[uid])
              rp.deliver(answer);
            const bool served = !h.handing[uid].empty();
            h.handing.erase(uid);
            // Kept even without marks: a new home that never comes to ask kept
            // an entity of its own meanwhile, and that split is told the same
            // way whatever this entity tracked (tell_split_entities): it may
            // have taken the worker's registration while the other side
            // applied its frames (the chaos suite's convergence invariant
            // catches the entries so lost).
            if (!served)
              h.unserved.insert(uid); // a stopping node waits for the new home to ask
            h.handed[uid] = {monotonic_ms(), std::move(marks)};
            on_ring_change(self); // it may be homed here again by now
          },
          [self, uid](caf::error& e) {
            auto& h = *self->state.homes;
            spdlog::warn("worker-handoff-failed uid={} error={}", uid, caf::to_string(e));
            for (auto& rp : h.handing[uid])
              rp.deliver(worker_handoff{uid, worker_handoff::answer::none, {}});
            h.handing.erase(uid);
          });
}

void finish_takeover(directory_self self, uint64_t uid) {
  auto& st = self->state;
  auto node = st.homes->takeovers.extract(uid);
  if (node.empty())
    return;
  auto tk = std::move(node.mapped());
  auto local = st.cfg.shards.at(st.cfg.home_destination);
  self->request(local, st.cfg.options.internal_timeout, marks_atom::value, uid)
      .then(
          [self, uid, tk](std::vector<location_mark>& own) {
            auto& st = self->state;
            auto it = st.workers.find(uid);
            const auto* rec = st.logic->reg().record(uid);
            if (it == st.workers.end() || !rec)
              return; // retired or moved on meanwhile
            // A peer that hosted the worker drained it: its seq marks are
            // exact. Nobody did (its home died): this node's shard has the
            // marks. Either way the stream continues from the furthest
            // position this node's copy saw (a later home's era).
            const bool from_peer = !tk.found.empty();
            auto marks = takeover_marks(tk.found, own);
            if (st.cfg.planted.is(faults::planted_bug::forget_watermark))
              for (auto& m : marks) // planted bug: the first op after it is not checked
                m.mark.state = persistence::seq_state::resynced;
            auto plan = takeover_plan(to_row(*rec), marks, self->state.cfg.clock->wall_s());
            st.logic->on_taken_over(uid);
            self->send(it->second, handoff_atom::value, marks);
            ++st.homes->taken_over_total;
            std::string sources;
            for (const auto& s : tk.found_at)
              sources += (sources.empty() ? "" : ",") + s;
            spdlog::info("worker-taken-over instance={} worker={} uid={} marks_from={} "
                         "locations={} resync={}",
                         rec->instance_id, rec->worker_id.to_string(), uid,
                         from_peer ? sources : std::string{"local-shard"}, marks.size(),
                         plan.resync_reason.empty() ? "no" : plan.resync_reason);
            // Through the directory's own handler: the request is replicated
            // like one a worker actor makes. A full sync a peer said the
            // worker owes is asked here too, unless this node knows of it.
            if (!plan.resync_reason.empty())
              self->send(self, resync_atom::value, uid, plan.resync_reason);
            else if (!tk.resync_reason.empty() && rec->resync_reason.empty())
              self->send(self, resync_atom::value, uid, tk.resync_reason);
            if (st.cfg.hooks.count_event)
              st.cfg.hooks.count_event("worker_taken_over");
          },
          [self, uid](caf::error& e) {
            auto& st = self->state;
            spdlog::warn("worker-takeover-marks-failed uid={} error={}", uid, caf::to_string(e));
            if (auto it = st.workers.find(uid); it != st.workers.end())
              self->send(it->second, handoff_atom::value, std::vector<location_mark>{});
          });
}

void ask_peer(directory_self self, uint64_t uid, node_index n, const cluster_table& table) {
  auto peer = caf::actor_cast<directory_actor>(table.peers[n].handles.directory);
  self->request(peer, self->state.cfg.options.internal_timeout, handoff_atom::value, uid)
      .then(
          [self, uid, n, id = node_id(table, n)](worker_handoff& h) {
            auto& tks = self->state.homes->takeovers;
            auto it = tks.find(uid);
            if (it == tks.end())
              return;
            auto& tk = it->second;
            if (h.status == worker_handoff::answer::retry) {
              tk.peers[n] = takeover::peer::retry;
              tk.retry_at_ms = monotonic_ms() + retry_after_ms;
              schedule_tick(self);
              return;
            }
            tk.peers[n] = takeover::peer::done;
            if (!h.resync_reason.empty())
              tk.resync_reason = std::move(h.resync_reason);
            if (h.status == worker_handoff::answer::found) {
              tk.found.push_back(std::move(h.marks));
              tk.found_at.push_back(id);
            }
            on_ring_change(self);
          },
          [self, uid, n](caf::error&) {
            auto& tks = self->state.homes->takeovers;
            if (auto it = tks.find(uid); it != tks.end())
              it->second.peers[n] = takeover::peer::done;
            on_ring_change(self);
          });
}

/// Asks the peers a takeover still needs; finishes it when none is left.
void advance(directory_self self, const cluster_table& table) {
  auto& st = self->state;
  const uint64_t now = monotonic_ms();
  std::vector<uint64_t> finished;
  for (auto& [uid, tk] : st.homes->takeovers) {
    if (!st.workers.contains(uid)) {
      finished.push_back(uid); // retired meanwhile; finish_takeover ignores it
      continue;
    }
    bool waiting = false;
    for (node_index n = 0; n < tk.peers.size(); ++n) {
      auto& p = tk.peers[n];
      if (n == table.self || p == takeover::peer::done)
        continue;
      // A leaving peer (a clean stop) hands its workers over before it goes.
      const bool leaving = table.peers[n].leaving && table.peers[n].handles.directory;
      if (!table.peers[n].live && !leaving) {
        p = takeover::peer::done; // down: it hosts nothing anyone can reach
        continue;
      }
      waiting = true;
      if ((!table.reachable(n) && !leaving) || p == takeover::peer::asking)
        continue; // presumed live, not joined yet; or its answer is on the way
      if (p == takeover::peer::unasked || now >= tk.retry_at_ms) {
        p = takeover::peer::asking;
        ask_peer(self, uid, n, table);
      }
    }
    if (!waiting || now >= tk.deadline_ms)
      finished.push_back(uid);
  }
  for (uint64_t uid : finished)
    finish_takeover(self, uid);
}

} // namespace

void start_takeover(directory_self self, const worker_record& rec) {
  auto& st = self->state;
  const auto table = st.cfg.cluster->current();
  if (st.workers.contains(rec.uid))
    return;
  st.workers[rec.uid] = spawn_worker_actor(self, rec, nullptr, true);
  takeover tk;
  tk.deadline_ms = monotonic_ms() + static_cast<uint64_t>(st.cfg.takeover_timeout.count());
  tk.peers.assign(table->peers.size(), takeover::peer::unasked);
  // Back here after this node handed it off: its own marks count as found.
  if (auto it = st.homes->handed.find(rec.uid); it != st.homes->handed.end()) {
    if (!it->second.second.empty()) { // none: the shard's marks or a peer's do
      tk.found.push_back(std::move(it->second.second));
      tk.found_at.push_back(node_id(*table, table->self));
    }
    st.homes->handed.erase(it);
  }
  st.homes->takeovers[rec.uid] = std::move(tk);
  spdlog::info("worker-takeover-start instance={} worker={} uid={} ring={:016x}", rec.instance_id,
               rec.worker_id.to_string(), rec.uid, table->ring_version);
}

void on_ring_change(directory_self self) {
  auto& st = self->state;
  if (!st.homes)
    return;
  auto& h = *st.homes;
  h.tick_scheduled = false;
  const auto table = st.cfg.cluster->current();
  // A peer lost: frames of workers hosted here may have died in it (read by
  // its PULL socket, or forwarded through it).
  bool lost = false;
  h.was_live.resize(table->peers.size(), 0);
  for (size_t n = 0; n < table->peers.size(); ++n) {
    const uint8_t live = table->reachable(static_cast<node_index>(n)) ? 1 : 0;
    lost = lost || (h.was_live[n] && !live);
    h.was_live[n] = live;
  }
  if (lost)
    for (const auto& [uid, actor] : st.workers)
      self->send(actor, ring_atom::value);
  // Both scans run on every call, not only on a new table: a worker whose
  // handoff was still draining when its home came back here is taken over
  // once the drain ends.
  bool moved = false;
  std::vector<std::pair<uint64_t, node_index>> away;
  for (const auto& [uid, actor] : st.workers)
    if (auto home = table->home_of(uid); home != table->self)
      away.emplace_back(uid, home);
  for (auto [uid, to] : away) {
    begin_handoff(self, uid, to);
    moved = true;
  }
  for (const auto* rec : st.logic->reg().all_workers())
    if (table->home_of(rec->uid) == table->self && !st.workers.contains(rec->uid) &&
        !h.handing.contains(rec->uid)) {
      start_takeover(self, *rec);
      moved = true;
    }
  if (moved)
    publish_routes(self);
  advance(self, *table);
  const uint64_t now = monotonic_ms();
  std::erase_if(h.handed, [now](const auto& kv) { return now - kv.second.first > handed_keep_ms; });
  std::erase_if(h.unserved, [&h](uint64_t uid) { return !h.handed.contains(uid); });
  tell_split_entities(self, *table, now);
  renew_entities_behind(self);
  std::erase_if(h.split_told, [&h](uint64_t uid) { return !h.unserved.contains(uid); });
  answer_leave_waiters(self);
  schedule_tick(self);
}

namespace {

/// The worker's new process had frames applied by its old entity: ask it for
/// a full sync (through the directory's handler, replicated like any ask).
void ask_frames_before_registration(directory_self self, uint64_t uid) {
  const auto* rec = self->state.logic->reg().record(uid);
  if (!rec)
    return;
  spdlog::warn("seq-gap-proven instance={} worker={} uid={} incarnation={} "
               "reason=frames_before_registration action=full-sync-requested",
               rec->instance_id, rec->worker_id.to_string(), uid, rec->incarnation);
  self->send(self, resync_atom::value, uid, std::string{"frames_before_registration"});
}

} // namespace

void on_seq_start(directory_self self, uint64_t uid, uint64_t incarnation) {
  if (self->state.homes->race.on_seq_start(uid, incarnation, monotonic_ms()))
    ask_frames_before_registration(self, uid);
}

void renew_entity(directory_self self, uint64_t uid) {
  auto& st = self->state;
  auto it = st.workers.find(uid);
  if (it == st.workers.end()) {
    // Nothing to renew here now; said, because an entity made later from an
    // older record would send under a replaced registration.
    spdlog::debug("worker-entity-renew-skipped uid={} reason=no-entity-here", uid);
    return;
  }
  const auto* rec = st.logic->reg().record(uid);
  const bool race =
      rec && st.homes && st.homes->race.on_renewed(uid, rec->incarnation, monotonic_ms());
  spdlog::info("worker-entity-renewed instance={} worker={} uid={} incarnation={} "
               "reason=registered-again-elsewhere",
               rec ? rec->instance_id : "?", rec ? rec->worker_id.to_string() : "?", uid,
               rec ? rec->incarnation : 0);
  self->send_exit(it->second, caf::exit_reason::user_shutdown);
  st.workers.erase(it);
  if (st.homes)
    st.homes->takeovers.erase(uid);
  publish_routes(self);
  adopt_if_home(self, uid);
  if (race)
    ask_frames_before_registration(self, uid);
}

void adopt_if_home(directory_self self, uint64_t uid) {
  auto& st = self->state;
  if (!st.homes || st.workers.contains(uid) || st.homes->handing.contains(uid) ||
      !st.logic->reg().record(uid))
    return;
  const auto table = st.cfg.cluster->current();
  if (table->home_of(uid) == table->self)
    on_ring_change(self); // rare: the full scan starts it and asks the peers
}

caf::result<worker_handoff> answer_handoff(directory_self self, uint64_t uid) {
  auto& st = self->state;
  if (!st.homes)
    return worker_handoff{uid, worker_handoff::answer::none, {}};
  auto& h = *st.homes;
  const auto table = st.cfg.cluster->current();
  if (st.workers.contains(uid)) {
    const node_index home = table->home_of(uid);
    if (home == table->self)
      return worker_handoff{uid, worker_handoff::answer::retry, {}};
    begin_handoff(self, uid, home); // the ring change is still on its way here
    publish_routes(self);
  }
  if (auto it = h.handing.find(uid); it != h.handing.end()) {
    auto rp = self->make_response_promise<worker_handoff>();
    it->second.push_back(rp);
    return rp;
  }
  if (auto it = h.handed.find(uid); it != h.handed.end()) {
    h.unserved.erase(uid);
    auto answer = handoff_answer(self, uid, it->second.second);
    answer_leave_waiters(self);
    return answer;
  }
  return handoff_answer(self, uid, {}); // not hosted here; it may know of a full sync owed
}

uint64_t handoffs_pending(directory_self self) {
  auto& st = self->state;
  if (!st.homes)
    return 0;
  const auto table = st.cfg.cluster->current();
  uint64_t n = st.homes->handing.size() + st.homes->unserved.size();
  for (const auto& [uid, actor] : st.workers)
    n += table->home_of(uid) != table->self ? 1 : 0;
  return n;
}

caf::result<uint64_t> await_handoffs(directory_self self) {
  if (!self->state.homes || handoffs_pending(self) == 0)
    return uint64_t{0};
  auto rp = self->make_response_promise<uint64_t>();
  self->state.homes->leave_waiters.push_back(rp);
  return rp;
}

namespace {

void answer_leave_waiters(directory_self self) {
  auto& h = *self->state.homes;
  if (h.leave_waiters.empty() || handoffs_pending(self) != 0)
    return;
  for (auto& rp : h.leave_waiters)
    rp.deliver(uint64_t{0});
  h.leave_waiters.clear();
}

} // namespace

void return_frames(directory_self self, pushed_msgs&& msgs) {
  auto& st = self->state;
  const auto table = st.cfg.cluster ? st.cfg.cluster->current() : nullptr;
  std::map<node_index, pushed_msgs> by_node;
  for (auto& m : msgs) {
    auto who = pushing_worker(m.msg);
    if (!who || !table) {
      if (st.cfg.gate)
        st.cfg.gate->give(m.credits);
      continue;
    }
    const uint64_t uid = worker_uid(*who->first, *who->second);
    const node_index home = table->home_of(uid);
    if (home == table->self) {
      if (auto it = st.workers.find(uid); it != st.workers.end()) {
        pushed_msgs one;
        one.push_back(std::move(m));
        self->send(it->second, push_atom::value, std::move(one));
        continue;
      }
      if (st.cfg.gate)
        st.cfg.gate->give(m.credits);
      if (st.cfg.hooks.count_event)
        st.cfg.hooks.count_event("returned_frame_for_unknown_worker");
      continue;
    }
    by_node[home].push_back(std::move(m));
  }
  for (auto& [node, frames] : by_node) {
    if (st.cfg.hooks.count_event)
      st.cfg.hooks.count_event("frames_returned_after_handoff");
    if (st.cfg.hooks.forward_frames)
      st.cfg.hooks.forward_frames(node, std::move(frames));
    else if (st.cfg.gate)
      for (const auto& m : frames)
        st.cfg.gate->give(m.credits);
  }
}

} // namespace lmcc::actors
