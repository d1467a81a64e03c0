#include "actors/directory.hpp"

#include "actors/clock.hpp"
#include "actors/drain.hpp"
#include "actors/worker_homes.hpp"

#include <absl/container/flat_hash_set.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <span>

namespace lmcc::actors {

/// The directory logic's effects, as actors and hooks.
class directory_effects final : public directory_outbox {
public:
  explicit directory_effects(directory_self self) : self_(self) {}

  void spawn_worker(const worker_record& rec, const restored_worker* restored) override {
    auto& st = self_->state;
    if (!st.logic->is_home(rec.uid))
      return; // a replica: the entity lives on its home node
    // A restarted cluster node asks its peers first: one of them may have
    // hosted the worker while this node was down (worker_homes.hpp).
    if (restored && st.homes) {
      start_takeover(self_, rec);
      return;
    }
    st.workers[rec.uid] = spawn_worker_actor(self_, rec, restored, false);
  }
  void reset_worker(uint64_t uid, uint64_t incarnation) override {
    if (auto it = self_->state.workers.find(uid); it != self_->state.workers.end())
      self_->send(it->second, reset_atom::value, incarnation);
  }
  void retire_worker(uint64_t uid) override {
    auto& workers = self_->state.workers;
    if (auto it = workers.find(uid); it != workers.end()) {
      // It quits by itself once its drops are acknowledged.
      self_->send(it->second, retire_atom::value);
      workers.erase(it);
    }
  }
  void put_row(const persistence::worker_row& row) override {
    if (self_->state.cfg.hooks.put_row)
      self_->state.cfg.hooks.put_row(row);
    if (self_->state.logic->is_home(row.uid))
      replicate(self_, row_put_atom::value, row);
  }
  void delete_row(uint64_t uid, uint64_t incarnation) override {
    if (self_->state.cfg.hooks.delete_row)
      self_->state.cfg.hooks.delete_row(uid);
    if (self_->state.logic->is_home(uid))
      replicate(self_, row_delete_atom::value, uid, incarnation);
  }

  /// Sends `xs` to every live peer's directory (a cluster; nothing otherwise).
  template <class... Ts>
  static void replicate(directory_self self, Ts&&... xs) {
    if (!self->state.cfg.cluster)
      return;
    auto table = self->state.cfg.cluster->current();
    for (size_t i = 0; i < table->peers.size(); ++i)
      if (i != table->self && table->peers[i].live && table->peers[i].handles.directory)
        self->send(caf::actor_cast<directory_actor>(table->peers[i].handles.directory), xs...);
  }
  void forget_control(const std::string& endpoint) override {
    if (self_->state.cfg.hooks.forget_control)
      self_->state.cfg.hooks.forget_control(endpoint);
  }
  void count(std::string_view event) override {
    if (self_->state.cfg.hooks.count_event)
      self_->state.cfg.hooks.count_event(event);
  }

private:
  directory_self self_;
};

worker_actor spawn_worker_actor(directory_self self, const worker_record& rec,
                                const restored_worker* restored, bool await_takeover) {
  auto& st = self->state;
  worker_env env{st.cfg.shards,
                 st.cfg.gate,
                 caf::actor_cast<directory_feedback_actor>(self),
                 st.homes ? caf::actor_cast<frame_return_actor>(self) : frame_return_actor{},
                 std::chrono::duration<double>(st.cfg.options.full_sync_timeout).count(),
                 st.cfg.durable_flush_delay};
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
  wc.strict_after_reregistration = st.homes != nullptr;
  if (restored) {
    wc.locations = rec.locations;
    wc.restored = true;
    wc.last_seq = restored->last_seq;
    wc.expected_next = restored->expected_next;
  }
  return self->spawn(worker_main, std::move(env), std::move(wc));
}

namespace {

double wall_s(directory_self self) {
  return self->state.cfg.clock->wall_s();
}

uint64_t wall_ms(directory_self self) {
  return self->state.cfg.clock->wall_ms();
}

/// How late (wall clock) a node may still apply a request forwarded to it:
/// covers the error of the measured clock offset between nodes (the one-way
/// delay of a greeting, a jump since the last one); beyond it the sender
/// stopped waiting.
constexpr uint64_t home_request_deadline_slack_ms = 1000;

/// Applies a peer's copy of a worker's row; true when it replaced an older
/// registration this node knew (an entity of that one must be renewed).
bool apply_row(directory_self self, const persistence::worker_row& row) {
  const auto* rec = self->state.logic->reg().record(row.uid);
  const uint64_t before = rec ? rec->incarnation : 0;
  return self->state.logic->apply_replica(row, wall_s(self), wall_ms(self), monotonic_s()) &&
         before != 0 && row.incarnation > before;
}

/// Tells this node's shard the registrations of `uids` as this node knows them
/// now (and `buried` deregistrations, as incarnation + 1): the shard drops its
/// holders of older ones (kv_shard_core::retire_older), the drops this copy
/// missed while it was down or cut off.
void retire_older_holders(directory_self self, std::span<const uint64_t> uids,
                          std::span<const worker_tombstone> buried = {}) {
  auto& st = self->state;
  if (!st.cfg.cluster || st.cfg.home_destination >= st.cfg.shards.size())
    return;
  std::vector<uint64_t> pairs;
  pairs.reserve(2 * (uids.size() + buried.size()));
  for (uint64_t uid : uids)
    if (const auto* rec = st.logic->reg().record(uid)) {
      pairs.push_back(uid);
      pairs.push_back(rec->incarnation);
    }
  for (const auto& t : buried) {
    pairs.push_back(t.uid);
    pairs.push_back(t.incarnation + 1);
  }
  if (!pairs.empty())
    self->send(st.cfg.shards[st.cfg.home_destination], retire_atom::value, std::move(pairs));
}

/// The message being handled came from another node's actor (a replica's
/// copy), not from this node's worker or session actors.
bool from_peer(directory_self self) {
  const auto& sender = self->current_sender();
  return sender && sender->node() != self->node();
}

/// Publishes what changed: the view for lookups (lookup_reader), the routes for
/// the PULL thread. Before the handler's reply leaves, so a registered worker's
/// first batch finds its route.
void publish(directory_self self) {
  auto& st = self->state;
  if (!st.logic->take_changed())
    return;
  if (st.cfg.reader)
    st.cfg.reader->publish(st.logic->reg().make_view());
  publish_routes(self);
}

} // namespace

void publish_routes(directory_self self) {
  auto& st = self->state;
  auto table = std::make_shared<ingest_route_table>();
  for (const auto* rec : st.logic->reg().all_workers())
    if (auto it = st.workers.find(rec->uid); it != st.workers.end())
      table->emplace(rec->uid, ingest_route{rec->instance_id, rec->worker_id, it->second});
  if (st.cfg.routes)
    st.cfg.routes->publish(std::move(table));
}

namespace {

lookup_actor next_lookup(directory_self self) {
  auto& st = self->state;
  return st.cfg.lookups[st.next_lookup++ % st.cfg.lookups.size()];
}

/// The worker answers its own part first; the global progress is filled in
/// when that answer is back, so it already counts the worker's latest state.
caf::result<msg::Msg> sync_status(directory_self self, msg::FullSyncStatusMsg m) {
  auto& st = self->state;
  const auto* rec = st.logic->reg().find(m.instance_id, m.worker_id);
  auto it = rec ? st.workers.find(rec->uid) : st.workers.end();
  if (it == st.workers.end()) {
    msg::FullSyncStatusRetMsg ret;
    ret.sync_id = m.sync_id;
    st.logic->complete_status(ret);
    return msg::Msg{std::move(ret)};
  }
  auto rp = self->make_response_promise<msg::Msg>();
  auto sync_id = m.sync_id;
  self->request(it->second, st.cfg.options.internal_timeout, sync_status_atom::value,
                msg::Msg{std::move(m)})
      .then(
          [self, rp](msg::Msg& reply) mutable {
            if (auto* ret = std::get_if<msg::FullSyncStatusRetMsg>(&reply))
              self->state.logic->complete_status(*ret);
            rp.deliver(std::move(reply));
          },
          [rp, sync_id](caf::error& e) mutable {
            rp.deliver(msg::Msg{msg::ErrorMsg{"full sync status for " + sync_id +
                                              " failed: " + caf::to_string(e)}});
          });
  return rp;
}

/// The worker a request is about, when it has one (its entity answers it).
std::optional<uint64_t> worker_in(const msg::Msg& m) {
  return std::visit(
      [](const auto& x) -> std::optional<uint64_t> {
        using M = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<M, msg::RegisterMsg> || std::is_same_v<M, msg::HeartbeatMsg> ||
                      std::is_same_v<M, msg::FullSyncStartMsg> ||
                      std::is_same_v<M, msg::FullSyncStatusMsg> ||
                      std::is_same_v<M, msg::DeRegisterMsg>)
          return worker_uid(x.instance_id, x.worker_id);
        else
          return std::nullopt;
      },
      m);
}

/// In a cluster, the directory of the worker's home node when that is another
/// node; nullopt when this node answers. An error when the home is down.
std::optional<msg::expected<directory_actor>> home_elsewhere(directory_self self,
                                                             const msg::Msg& m) {
  if (!self->state.cfg.cluster)
    return std::nullopt;
  auto uid = worker_in(m);
  if (!uid)
    return std::nullopt;
  auto table = self->state.cfg.cluster->current();
  const node_index home = table->home_of(*uid);
  if (home == table->self)
    return std::nullopt;
  const auto& peer = table->peers[home];
  if (!peer.live || !peer.handles.directory)
    return msg::expected<directory_actor>{msg::codec_error{"the node that keeps this worker (" +
                                                           table->members[home].address.id +
                                                           ") is unreachable; retry later"}};
  return msg::expected<directory_actor>{caf::actor_cast<directory_actor>(peer.handles.directory)};
}

/// A registration answered by the worker's home elsewhere names the heartbeat
/// URL of this node, the one the worker reached: its home may move
/// (worker_homes.hpp), and any node forwards heartbeats home.
void rewrite_heartbeat_url(msg::Msg& reply, const std::optional<std::string>& url) {
  auto* ret = std::get_if<msg::RegisterRetMsg>(&reply);
  if (!ret)
    return;
  auto& extra = ret->extra_config;
  auto it = std::find_if(extra.begin(), extra.end(),
                         [](const auto& kv) { return kv.first == "heartbeat_url"; });
  if (it != extra.end() && url)
    it->second = *url; // in place: the answer keeps LMCache's key order
  else if (it != extra.end())
    extra.erase(it);
  else if (url)
    extra.emplace_back("heartbeat_url", *url);
}

/// The handler of a reply to deliver to `rp`, with this node's heartbeat URL.
auto deliver_to(caf::response_promise rp, std::optional<std::string> url) {
  return [rp, url = std::move(url)](msg::Msg& reply) mutable {
    rewrite_heartbeat_url(reply, url);
    rp.deliver(std::move(reply));
  };
}

/// `home`'s wall clock minus this node's (0 when unknown).
uint64_t home_clock_offset(directory_self self, const directory_actor& home) {
  auto table = self->state.cfg.cluster->current();
  for (size_t i = 0; i < table->peers.size() && i < table->members.size(); ++i)
    if (table->peers[i].handles.directory == caf::actor_cast<caf::actor>(home))
      return static_cast<uint64_t>(self->state.cfg.peer_clocks->of(table->members[i].address.id));
  return 0;
}

/// Asks the worker's home (another node) and delivers its answer to `rp`. A
/// home that does not answer within one failure-detection period died or
/// froze before the detector said so; the request is then asked again
/// through this directory, which by then routes it to the worker's new home
/// (possibly this node) -- until the internal timeout is spent. A failed
/// registration kills an LMCache worker's start, so it is worth the retry.
/// Every attempt carries a deadline the home enforces: a frozen or cut-off
/// home that thaws does not apply the first attempt late (two registrations
/// of one worker on both sides would be two incarnations clearing each
/// other's entries; chaos seed 10 before the deadline). A sync start is
/// asked once: the worker retries it itself (3 x 1 s).
void ask_home(directory_self self, const directory_actor& home, msg::Msg m,
              std::optional<std::string> url, caf::response_promise rp,
              std::chrono::steady_clock::time_point deadline) {
  const auto now = std::chrono::steady_clock::now();
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now);
  const bool may_repeat = !std::holds_alternative<msg::FullSyncStartMsg>(m);
  const auto attempt = may_repeat ? std::min(left, self->state.cfg.home_request_timeout) : left;
  auto again = m; // kept for a retry; requests are small
  // The home refuses it past `expires` + the slack, i.e. by the time this
  // attempt times out: a retry never meets a late first try. In the home's
  // clock, as measured from its greetings (clock.hpp).
  const uint64_t expires = wall_ms(self) + home_clock_offset(self, home) +
                           static_cast<uint64_t>(attempt.count()) -
                           std::min<uint64_t>(home_request_deadline_slack_ms, attempt.count());
  self->request(home, attempt, request_atom::value, std::move(m), expires)
      .then(deliver_to(rp, url),
            [self, rp, url, deadline, again = std::move(again)](caf::error& e) mutable {
              const bool time_left =
                  std::chrono::steady_clock::now() + std::chrono::milliseconds(50) < deadline;
              if (e != caf::sec::request_timeout || !time_left) {
                rp.deliver(msg::Msg{
                    msg::ErrorMsg{"the worker's home node did not answer: " + caf::to_string(e)}});
                return;
              }
              self->state.cfg.hooks.count_event("request_home_retried");
              auto next = home_elsewhere(self, again);
              if (next && *next) {
                spdlog::info("home-request-retry reason=no-answer");
                ask_home(self, **next, std::move(again), std::move(url), std::move(rp), deadline);
                return;
              }
              if (next) { // unreachable now: say so
                rp.deliver(msg::Msg{msg::ErrorMsg{next->error().message}});
                return;
              }
              // The worker's home is this node now: answer here.
              const auto rest = std::chrono::duration_cast<std::chrono::milliseconds>(
                  deadline - std::chrono::steady_clock::now());
              self->request(caf::actor_cast<directory_actor>(self), rest, request_atom::value,
                            std::move(again))
                  .then(deliver_to(rp, std::move(url)), [rp](caf::error& e2) mutable {
                    rp.deliver(msg::Msg{msg::ErrorMsg{caf::to_string(e2)}});
                  });
            });
}

caf::result<msg::Msg> on_request(directory_self self, msg::Msg& m) {
  auto& st = self->state;
  auto& logic = *st.logic;
  if (auto home = home_elsewhere(self, m)) {
    if (!*home) {
      st.cfg.hooks.count_event("request_home_unreachable");
      return msg::Msg{msg::ErrorMsg{home->error().message}};
    }
    std::optional<std::string> url;
    if (const auto* reg = std::get_if<msg::RegisterMsg>(&m); reg && st.cfg.hooks.heartbeat_url_for)
      url = st.cfg.hooks.heartbeat_url_for(reg->ip);
    auto rp = self->make_response_promise<msg::Msg>();
    ask_home(self, **home, std::move(m), std::move(url), rp,
             std::chrono::steady_clock::now() + st.cfg.options.internal_timeout);
    return rp;
  }
  return std::visit(
      [&](auto& x) -> caf::result<msg::Msg> {
        using M = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<M, msg::RegisterMsg>) {
          std::optional<std::string> url;
          if (st.cfg.hooks.heartbeat_url_for)
            url = st.cfg.hooks.heartbeat_url_for(x.ip);
          auto reply = logic.on_register(x, wall_s(self), wall_ms(self), url);
          publish(self);
          return reply;
        } else if constexpr (std::is_same_v<M, msg::HeartbeatMsg>) {
          auto reply = logic.on_heartbeat(x, wall_s(self), wall_ms(self), monotonic_s());
          publish(self);
          if (st.cfg.cluster)
            if (const auto* rec = logic.reg().find(x.instance_id, x.worker_id))
              directory_effects::replicate(self, row_put_atom::value, to_row(*rec));
          return reply;
        } else if constexpr (std::is_same_v<M, msg::FullSyncStartMsg>) {
          const auto* rec = logic.reg().find(x.instance_id, x.worker_id);
          auto it = rec ? st.workers.find(rec->uid) : st.workers.end();
          if (it == st.workers.end())
            return msg::Msg{msg::FullSyncStartRetMsg{
                x.sync_id, false,
                "Failed to start sync: worker already syncing with different sync_id or worker not "
                "found"}};
          return self->delegate(it->second, sync_start_atom::value, msg::Msg{std::move(x)});
        } else if constexpr (std::is_same_v<M, msg::FullSyncStatusMsg>) {
          return sync_status(self, std::move(x));
        } else if constexpr (std::is_same_v<M, msg::BatchedP2PLookupMsg> ||
                             std::is_same_v<M, msg::LookupMsg>) {
          return self->delegate(next_lookup(self), request_atom::value, msg::Msg{std::move(x)});
        } else if constexpr (std::is_same_v<M, msg::QueryInstMsg>) {
          return msg::Msg{msg::QueryInstRetMsg{x.event_id, logic.reg().instance_by_ip(x.ip)}};
        } else if constexpr (std::is_same_v<M, msg::QueryWorkerInfoMsg>) {
          return msg::Msg{msg::QueryWorkerInfoRetMsg{
              x.event_id, logic.reg().worker_infos(x.instance_id, x.worker_ids)}};
        } else if constexpr (std::is_same_v<M, msg::ClearMsg> || std::is_same_v<M, msg::PinMsg> ||
                             std::is_same_v<M, msg::CompressMsg> ||
                             std::is_same_v<M, msg::DecompressMsg> ||
                             std::is_same_v<M, msg::MoveMsg> || std::is_same_v<M, msg::HealthMsg> ||
                             std::is_same_v<M, msg::CheckFinishMsg>) {
          auto plan = plan_control(m, logic.reg(), [self] { return self->state.random_hex(); });
          if (auto* err = std::get_if<msg::ErrorMsg>(&plan))
            return msg::Msg{std::move(*err)};
          return self->delegate(st.cfg.fanout, fanout_atom::value,
                                std::move(std::get<control_plan>(plan)));
        } else {
          return msg::Msg{msg::ErrorMsg{"Unknown message type: " + std::string(M::type_tag)}};
        }
      },
      m);
}

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
      // The worker's state as its entity reports it (from a local worker or
      // session actor), replicated to the peers; a peer's copy is applied and
      // not passed on (two nodes that both see themselves as the home for a
      // moment would otherwise bounce it between them).
      [self](sync_state_atom, uint64_t uid, sync_phase phase, uint64_t missing) {
        self->state.logic->on_sync_state(uid, phase, missing);
        if (self->state.logic->is_home(uid) && !from_peer(self))
          directory_effects::replicate(self, sync_state_atom::value, uid, phase, missing);
      },
      [self](seq_gap_atom, uint64_t, uint64_t n) { self->state.logic->on_seq_gap(n); },
      [self](seq_start_atom, uint64_t uid, uint64_t incarnation) {
        if (self->state.homes)
          on_seq_start(self, uid, incarnation);
      },
      [self](resync_atom, uint64_t uid, const std::string& reason) {
        // A full sync owed by the worker moves with its entity: whichever node
        // is its home when it next heartbeats asks for it. Every node hears of
        // a proof made here, home or not: the home may be dying as it is
        // told (chaos seed 436: an entity split told to a frozen home was
        // lost), and the node that proved it may be the next home.
        const bool replica = from_peer(self);
        const bool home = self->state.logic->is_home(uid);
        spdlog::info("worker-resync-owed uid={} reason={} from={} home_here={}", uid, reason,
                     replica ? "peer" : "entity", home);
        if (replica) {
          self->state.logic->on_replicated_resync(uid, reason);
          return;
        }
        self->state.logic->on_resync(uid, reason);
        directory_effects::replicate(self, resync_atom::value, uid, reason);
      },
      [self](location_atom, uint64_t uid, const std::string& location) {
        self->state.logic->on_location(uid, location);
        publish(self);
        if (self->state.logic->is_home(uid) && !from_peer(self))
          directory_effects::replicate(self, location_atom::value, uid, location);
      },
      [self](row_put_atom, const persistence::worker_row& row) {
        const bool renew = apply_row(self, row);
        retire_older_holders(self, std::span{&row.uid, 1});
        publish(self);
        if (renew)
          renew_entity(self, row.uid);
        adopt_if_home(self, row.uid);
      },
      [self](row_delete_atom, uint64_t uid, uint64_t incarnation) {
        self->state.logic->remove_replica(uid, incarnation, wall_ms(self));
        const worker_tombstone gone{uid, incarnation};
        retire_older_holders(self, {}, std::span{&gone, 1});
        publish(self);
      },
      [self](peer_atom, const caf::actor& peer_directory) {
        auto& st = self->state;
        if (!st.cfg.cluster || !peer_directory)
          return;
        auto peer = caf::actor_cast<directory_actor>(peer_directory);
        const auto table = st.cfg.cluster->current();
        std::optional<node_index> peer_index;
        for (size_t i = 0; i < table->peers.size(); ++i)
          if (table->peers[i].handles.directory == peer_directory)
            peer_index = static_cast<node_index>(i);
        // The rows of the workers homed here, and of those homed at the peer
        // now: registered while it was away, their home moved to it when it
        // came back, so nobody else would tell it of them.
        std::vector<persistence::worker_row> rows;
        std::vector<const worker_record*> home;
        for (const auto* rec : st.logic->reg().all_workers())
          if (st.logic->is_home(rec->uid) ||
              (peer_index && table->home_of(rec->uid) == *peer_index)) {
            rows.push_back(to_row(*rec));
            home.push_back(rec);
          }
        const std::string self_id = table->members[table->self].address.id;
        auto tombstones = st.logic->tombstones(wall_ms(self));
        spdlog::info("directory-sync-sent node={} workers={} tombstones={}", self_id, rows.size(),
                     tombstones.size());
        self->send(peer, row_put_atom::value, self_id, table->ring_version, std::move(rows),
                   std::move(tombstones));
        for (const auto* rec : home) {
          for (const auto& loc : rec->locations)
            self->send(peer, location_atom::value, rec->uid, loc);
          if (rec->sync != sync_phase::none)
            self->send(peer, sync_state_atom::value, rec->uid, rec->sync, rec->missing_batches);
          if (!rec->resync_reason.empty())
            self->send(peer, resync_atom::value, rec->uid, rec->resync_reason);
        }
      },
      [self](ring_atom) { on_ring_change(self); },
      [self](handoff_atom, uint64_t uid) { return answer_handoff(self, uid); },
      [self](forward_atom, pushed_msgs& msgs) { return_frames(self, std::move(msgs)); },
      [self](leave_atom) { return await_handoffs(self); },
      [self](row_put_atom, const std::string& from, uint64_t ring_version,
             const std::vector<persistence::worker_row>& rows,
             const std::vector<worker_tombstone>& tombstones) {
        auto& st = self->state;
        if (!st.cfg.cluster)
          return;
        const auto table = st.cfg.cluster->current();
        std::optional<node_index> from_index;
        for (size_t i = 0; i < table->members.size(); ++i)
          if (table->members[i].address.id == from)
            from_index = static_cast<node_index>(i);
        if (!from_index || *from_index == table->self)
          return;
        // Deregistrations first: a row this node restored of a registration
        // that ended while it was away goes, entity included.
        size_t buried = 0;
        for (const auto& t : tombstones)
          buried += st.logic->apply_tombstone(t, wall_ms(self)) ? 1 : 0;
        absl::flat_hash_set<uint64_t> listed;
        std::vector<uint64_t> renewed;
        std::vector<uint64_t> uids;
        for (const auto& row : rows) {
          listed.insert(row.uid);
          uids.push_back(row.uid);
          if (apply_row(self, row))
            renewed.push_back(row.uid);
        }
        retire_older_holders(self, uids, tombstones);
        for (uint64_t uid : renewed)
          renew_entity(self, uid);
        // A worker the sender's list lacks was deregistered there -- if both
        // nodes place homes alike; otherwise the list means nothing about it.
        std::vector<uint64_t> gone;
        if (ring_version == table->ring_version)
          for (const auto* rec : st.logic->reg().all_workers())
            if (table->home_of(rec->uid) == *from_index && !listed.contains(rec->uid))
              gone.push_back(rec->uid);
        for (uint64_t uid : gone)
          st.logic->forget_replica(uid);
        spdlog::info("directory-sync-received from={} workers={} removed={} tombstones={} "
                     "deregistered={}",
                     from, rows.size(), gone.size(), tombstones.size(), buried);
        publish(self);
        for (const auto& row : rows)
          adopt_if_home(self, row.uid);
      },
  };
}

} // namespace lmcc::actors
