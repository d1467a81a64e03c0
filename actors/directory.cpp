#include "actors/directory.hpp"

#include "actors/cluster/worker_homes.hpp"
#include "actors/drain.hpp"
#include "actors/internal/directory_impl.hpp"
#include "clock/clock.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <vector>

namespace lmcc::actors {

worker_actor spawn_worker_actor(directory_self self, const worker_record& rec,
                                const restored_worker* restored, bool await_takeover) {
  auto& st = self->state;
  worker_env env{st.cfg.shards,
                 st.cfg.gate,
                 caf::actor_cast<directory_feedback_actor>(self),
                 st.homes ? caf::actor_cast<frame_return_actor>(self) : frame_return_actor{},
                 std::chrono::duration<double>(st.cfg.options.full_sync_timeout).count(),
                 st.cfg.durable_flush_delay};
  st.entity_incarnations[rec.uid] = rec.incarnation;
  worker_config wc;
  wc.uid = rec.uid;
  wc.instance_id = rec.instance_id;
  wc.worker_id = rec.worker_id;
  wc.incarnation = rec.incarnation;
  wc.slot_count = st.cfg.options.slot_count;
  wc.destinations = static_cast<uint32_t>(st.cfg.shards.size());
  wc.stream_base = st.rng() & ~uint64_t{0xffff}; // room for a stream per destination
  wc.placement = st.cfg.placement;
  // Every owner of the uid's slot keeps the watermarks: the one that takes
  // the worker over when its home dies finds them (handoff.hpp).
  wc.mark_mask = uint64_t{1} << st.cfg.home_destination;
  if (st.cfg.placement)
    wc.mark_slot = slot_of(rec.uid, st.cfg.options.slot_count);
  wc.await_takeover = await_takeover;
  wc.era_clock = [clock = st.cfg.clock] { return clock->wall_ms(); };
  wc.strict_after_reregistration = st.homes != nullptr;
  wc.registered_here = !await_takeover;
  if (restored) {
    wc.locations = rec.locations;
    wc.restored = true;
    wc.last_seq = restored->last_seq;
    wc.expected_next = restored->expected_next;
    wc.start_pos = restored->start_pos;
  }
  return self->spawn(worker_main, std::move(env), std::move(wc));
}

/// Publishes what changed: the view for lookups (lookup_reader), the routes for
/// the PULL thread. Before the handler's reply leaves, so a registered worker's
/// first batch finds its route.
void publish(directory_self self) {
  auto& st = self->state;
  publish_heartbeats(self);
  if (!st.logic->take_changed())
    return;
  if (st.cfg.reader)
    st.cfg.reader->publish(st.logic->reg().make_view());
  publish_routes(self);
}

void publish_heartbeats(directory_self self) {
  auto& st = self->state;
  if (!st.cfg.heartbeats)
    return;
  if (!st.cfg.heartbeats->current()->current())
    st.cfg.heartbeats->publish(st.logic->reg().make_heartbeat_view());
}

void publish_routes(directory_self self) {
  auto& st = self->state;
  auto table = std::make_shared<ingest_route_table>();
  for (const auto* rec : st.logic->reg().all_workers()) {
    auto it = st.workers.find(rec->uid);
    table->emplace(rec->uid, ingest_route{rec->instance_id, rec->worker_id, rec->incarnation,
                                          it != st.workers.end() ? it->second : worker_actor{}});
  }
  if (st.cfg.routes)
    st.cfg.routes->publish(std::move(table));
}

namespace {

node_stats collect_stats(directory_self self) {
  auto& st = self->state;
  const auto& reg = st.logic->reg();
  node_stats s;
  s.seq_discontinuities = st.logic->seq_discontinuities();
  s.workers_syncing = reg.workers_in(sync_phase::syncing);
  s.workers_completed = reg.workers_in(sync_phase::completed);
  s.global_progress = reg.global_progress();
  s.missing_batches_total = reg.missing_batches_total();
  if (st.cfg.shard_stats)
    s.shard = st.cfg.shard_stats->read();
  auto r = st.cfg.index->read();
  s.total_entries = r.entries();
  s.total_keys = r.keys();
  s.index_memory_bytes = r.memory_bytes();
  const auto& counts = r.entries_by_holder();
  for (const auto* rec : reg.all_workers()) {
    uint64_t keys = 0;
    std::vector<holder_id> holders;
    for (const auto& loc : rec->locations) {
      holders.push_back(rec->holder(loc));
      if (auto it = counts.find(rec->holder(loc)); it != counts.end())
        keys += it->second;
    }
    s.workers.push_back(worker_stats{rec->info(), keys, std::move(holders)});
  }
  return s;
}

} // namespace

directory_state::directory_state() = default;
directory_state::~directory_state() = default;

std::string directory_state::random_hex() {
  static constexpr char digits[] = "0123456789abcdef";
  std::string out(32, '0');
  for (auto& c : out)
    c = digits[rng() & 15];
  return out;
}

directory_actor::behavior_type
directory_main(directory_actor::stateful_pointer<directory_state> self, directory_config cfg) {
  auto& st = self->state;
  st.rng.seed(cfg.seed);
  st.cfg = std::move(cfg);
  st.effects = std::make_unique<directory_effects>(self);
  st.logic = std::make_unique<directory_logic>(st.cfg.options, *st.effects);
  if (auto board = st.cfg.cluster) {
    st.homes = std::make_unique<worker_homes_state>();
    st.logic->set_home_filter([board](uint64_t uid) {
      auto table = board->current();
      return table->home_of(uid) == table->self;
    });
  }
  // Worker actors may wait for acks; they do not end with the directory by themselves.
  self->set_exit_handler([self](caf::exit_msg& m) {
    for (const auto& [uid, worker] : self->state.workers)
      self->send_exit(worker, m.reason);
    if (self->state.homes)
      for (const auto& [when, worker] : self->state.homes->departed)
        self->send_exit(worker, m.reason);
    self->quit(m.reason);
  });
  st.logic->set_tombstone_ttl(st.cfg.tombstone_ttl);
  st.logic->restore(st.cfg.restored, st.cfg.need_full_sync_all, wall_ms(self), monotonic_s());
  st.cfg.restored.clear();
  st.cfg.restored.shrink_to_fit();
  publish(self);
  if (st.homes)
    on_ring_change(self);
  if (st.cfg.options.health_check_interval_s > 0)
    self->send(self, tick_atom::value);
  return {
      [self](push_atom, msg::Msg& m) {
        if (auto home = home_elsewhere(self, m)) {
          if (*home)
            self->send(**home, push_atom::value, std::move(m));
          else
            spdlog::warn("deregister-not-forwarded reason={}", home->error().message);
          return;
        }
        if (auto* d = std::get_if<msg::DeRegisterMsg>(&m)) {
          self->state.logic->on_deregister(d->instance_id, d->worker_id, "deregister-msg",
                                           wall_ms(self));
          publish(self);
        } else {
          spdlog::warn("push-unhandled type={}", msg::type_tag_of(m));
        }
      },
      [self](request_atom, msg::Msg& m) { return on_request(self, m); },
      [self](request_atom, msg::Msg& m, uint64_t deadline_ms) -> caf::result<msg::Msg> {
        if (wall_ms(self) > deadline_ms + home_request_deadline_slack_ms) {
          // Its sender answered the worker with a timeout long ago; applying
          // it now (a registration above all) would surprise everyone.
          spdlog::warn("forwarded-request-expired type={} late_ms={}", msg::type_tag_of(m),
                       wall_ms(self) - deadline_ms);
          self->state.cfg.hooks.count_event("forwarded_request_expired");
          return msg::Msg{msg::ErrorMsg{"the request expired before this node could answer it"}};
        }
        return on_request(self, m);
      },
      [self](heard_atom) {
        auto& st = self->state;
        if (!st.cfg.heartbeats)
          return;
        auto& logic = *st.logic;
        const double wall = wall_s(self);
        const double mono = monotonic_s();
        for (const auto& h : st.cfg.heartbeats->take_heard()) {
          // The wall time the socket thread answered at, on this node's clock.
          const double at = wall - std::max(0.0, mono - h.mono_s);
          const auto* rec = logic.on_heartbeat_heard(h.instance_id, h.worker_id, at, h.mono_s);
          if (!st.cfg.cluster || rec == nullptr)
            continue;
          // As an answered heartbeat: the replicas learn its time from the
          // home's row, and a home elsewhere from this node.
          if (logic.is_home(rec->uid))
            replicate_heartbeat(self, rec->uid);
          else
            tell_home_heard(self, rec->uid);
        }
      },
      [self](heard_atom, std::vector<uint64_t>& uids) { on_heard_elsewhere(self, uids); },
      [self](flush_atom) { flush_heartbeats(self); },
      [self](stats_atom) { return collect_stats(self); },
      [self](tick_atom) {
        self->state.logic->reap(monotonic_s(), wall_ms(self));
        self->state.cfg.hooks.count_event("reaper_passes");
        publish(self);
        auto period = std::chrono::milliseconds{
            static_cast<int64_t>(self->state.cfg.options.health_check_interval_s * 1000.0)};
        self->delayed_send(self, period, tick_atom::value);
      },
      [self](drain_atom) -> caf::result<bool> {
        std::vector<worker_actor> workers;
        for (const auto& [uid, worker] : self->state.workers)
          workers.push_back(worker);
        return drain_all(self, workers);
      },
      [self](sync_state_atom, uint64_t uid, sync_phase phase, uint64_t missing) {
        on_sync_state(self, uid, phase, missing);
      },
      [self](seq_gap_atom, uint64_t, uint64_t n) { self->state.logic->on_seq_gap(n); },
      [self](seq_start_atom, uint64_t uid, uint64_t incarnation) {
        if (self->state.homes)
          on_seq_start(self, uid, incarnation);
      },
      [self](resync_atom, uint64_t uid, const std::string& reason) {
        on_resync(self, uid, reason);
      },
      [self](location_atom, uint64_t uid, const std::string& location) {
        on_location(self, uid, location);
      },
      [self](row_put_atom, const persistence::worker_row& row) { apply_peer_row(self, row); },
      [self](row_put_atom, const std::vector<persistence::worker_row>& rows) {
        for (const auto& row : rows)
          apply_peer_row(self, row);
      },
      [](rows_applied_atom) { return true; },
      [self](row_delete_atom, uint64_t uid, uint64_t incarnation) {
        on_row_delete(self, uid, incarnation);
      },
      [self](peer_atom, const caf::actor& peer_directory) {
        send_directory_to(self, peer_directory);
      },
      [self](ring_atom) { on_ring_change(self); },
      [self](refill_atom) {
        self->state.logic->on_index_held_by_peers();
        publish_heartbeats(self);
      },
      [self](settled_atom) {
        if (!self->state.cfg.lists_complete)
          spdlog::info("directory-lists-complete reason=refill-settled");
        self->state.cfg.lists_complete = true;
      },
      [self](refill_atom, uint64_t lost_slots) { on_slots_lost(self, lost_slots); },
      [self](handoff_atom, uint64_t uid) { return answer_handoff(self, uid); },
      [self](forward_atom, pushed_msgs& msgs) { return_frames(self, std::move(msgs)); },
      [self](leave_atom) { return await_handoffs(self); },
      [self](row_put_atom, const directory_listing& listing) { on_directory_sync(self, listing); },
  };
}

} // namespace lmcc::actors
