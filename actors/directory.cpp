#include "actors/directory.hpp"

#include "actors/clock.hpp"
#include "actors/drain.hpp"

#include <spdlog/spdlog.h>

#include <chrono>

namespace lmcc::actors {
namespace {

using self_ptr = directory_actor::stateful_pointer<directory_state>;

void publish_view(self_ptr self) {
  auto view = self->state.reg.make_view();
  for (const auto& l : self->state.cfg.lookups)
    self->send(l, view_atom::value, view);
}

lookup_actor next_lookup(self_ptr self) {
  auto& st = self->state;
  return st.cfg.lookups[st.next_lookup++ % st.cfg.lookups.size()];
}

/// Spawns the actor of a registered (or restored) worker.
void spawn_worker(self_ptr self, uint32_t worker_num, const std::string& instance_id,
                  const msg::wire_int& worker_id, const restored_worker* restored) {
  auto& st = self->state;
  worker_config wc;
  wc.worker_num = worker_num;
  wc.instance_id = instance_id;
  wc.worker_id = worker_id;
  wc.shards = st.cfg.shards;
  wc.slot_count = st.cfg.options.slot_count;
  wc.full_sync_timeout_s = std::chrono::duration<double>(st.cfg.options.full_sync_timeout).count();
  wc.directory = self;
  wc.durable = st.cfg.store != nullptr;
  if (restored) {
    wc.restored = true;
    wc.initial_last_seq = restored->last_seq;
    wc.expected_next = restored->expected_next;
  }
  st.workers.emplace(worker_num, self->spawn(worker_main, std::move(wc)));
}

/// Registers (or re-registers) and makes sure the worker has its actor.
uint32_t register_worker(self_ptr self, const std::string& instance_id,
                         const msg::wire_int& worker_id, const std::string& ip,
                         const msg::wire_int& port, const std::optional<std::string>& peer_url) {
  auto& st = self->state;
  auto r = st.reg.register_worker(instance_id, worker_id, ip, port, peer_url, wall_now());
  if (r.is_new) {
    spawn_worker(self, r.worker_num, instance_id, worker_id, nullptr);
    st.persist_row(r.worker_num);
    spdlog::info("worker-registered instance={} worker={} ip={} port={} peer_init_url={} "
                 "worker_num={}",
                 instance_id, worker_id.to_string(), ip, port.to_string(),
                 peer_url.value_or("None"), r.worker_num);
    st.count("worker_registered");
  } else {
    // LMCache clears the worker's KV state on a duplicate registration. The
    // row says reset_pending until every shard has committed the clear.
    ++st.pending_resets[r.worker_num];
    st.persist_row(r.worker_num);
    self->send(st.workers.at(r.worker_num), reset_atom::value);
    st.reg.set_sync_state(r.worker_num, sync_phase::none, 0);
    spdlog::info("worker-reregistered instance={} worker={} ip={} port={} kv=cleared", instance_id,
                 worker_id.to_string(), ip, port.to_string());
    st.count("worker_reregistered");
  }
  publish_view(self);
  return r.worker_num;
}

/// Takes back the workers the node's store held (before any traffic).
void restore_workers(self_ptr self) {
  auto& st = self->state;
  st.reg.set_need_full_sync_all(st.cfg.need_full_sync_all);
  for (auto& rw : st.cfg.restored) {
    const uint32_t num = rw.record.worker_num;
    const std::string instance_id = rw.record.instance_id;
    const msg::wire_int worker_id = rw.record.worker_id;
    st.reg.restore_worker(rw.record);
    spawn_worker(self, num, instance_id, worker_id, &rw);
    if (!rw.resync_reason.empty()) {
      st.reg.request_full_sync(num, rw.resync_reason);
      spdlog::info("full-sync-needed-after-restart instance={} worker={} reason={}", instance_id,
                   worker_id.to_string(), rw.resync_reason);
    }
    if (rw.reset_finished)
      st.persist_row(num); // the reset is complete now: clear reset_pending
  }
  if (!st.cfg.restored.empty()) {
    spdlog::info("directory-restored workers={} need_full_sync_all={}", st.cfg.restored.size(),
                 st.cfg.need_full_sync_all);
    publish_view(self);
  }
  st.cfg.restored.clear();
  st.cfg.restored.shrink_to_fit();
}

void deregister_worker(self_ptr self, const std::string& instance_id,
                       const msg::wire_int& worker_id, std::string_view why) {
  auto& st = self->state;
  auto rec = st.reg.remove(instance_id, worker_id);
  if (!rec) {
    spdlog::warn("worker-deregister-unknown instance={} worker={} reason={}", instance_id,
                 worker_id.to_string(), why);
    return;
  }
  st.persist_removal(rec->worker_num);
  st.pending_resets.erase(rec->worker_num);
  if (auto it = st.workers.find(rec->worker_num); it != st.workers.end()) {
    self->send(it->second, retire_atom::value);
    st.workers.erase(it);
  }
  if (st.cfg.hooks.forget_control)
    st.cfg.hooks.forget_control(rec->control_endpoint());
  spdlog::info("worker-deregistered instance={} worker={} reason={}", instance_id,
               worker_id.to_string(), why);
  st.count("worker_deregistered");
  publish_view(self);
}

/// The worker's actor and the index of `location`, or nullopt (unknown worker).
std::optional<std::pair<worker_actor, uint32_t>> route(self_ptr self,
                                                       const std::string& instance_id,
                                                       const msg::wire_int& worker_id,
                                                       const std::string& location) {
  auto& st = self->state;
  auto num = st.reg.find(instance_id, worker_id);
  if (!num)
    return std::nullopt;
  auto before = st.reg.record(*num)->locations.size();
  auto loc = st.reg.intern_location(*num, location);
  if (!loc) {
    spdlog::warn("worker-too-many-locations instance={} worker={} location={}", instance_id,
                 worker_id.to_string(), location);
    return std::nullopt;
  }
  if (st.reg.record(*num)->locations.size() != before) {
    // Durable before any op of the location can reach a shard's disk.
    st.persist_row(*num);
    publish_view(self);
  }
  return std::make_pair(st.workers.at(*num), *loc);
}

void on_push(self_ptr self, msg::Msg& m) {
  auto& st = self->state;
  auto forward_batch = [&](msg::BatchedKVOperationMsg batch) {
    auto r = route(self, batch.instance_id, batch.worker_id, batch.location);
    if (!r) {
      st.count("batch_from_unknown_worker");
      return;
    }
    self->send(r->first, batch_atom::value, r->second, std::move(batch));
  };
  std::visit(
      [&](auto& x) {
        using M = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<M, msg::BatchedKVOperationMsg>) {
          forward_batch(std::move(x));
        } else if constexpr (std::is_same_v<M, msg::KVAdmitMsg> ||
                             std::is_same_v<M, msg::KVEvictMsg>) {
          // Legacy single-op messages are applied as one-op batches (spec 4.3.3).
          msg::BatchedKVOperationMsg b{x.instance_id, x.worker_id, x.location, {}};
          b.operations.push_back(msg::KVOpEvent{
              std::is_same_v<M, msg::KVAdmitMsg> ? msg::OpType::admit : msg::OpType::evict, x.key,
              x.seq_num});
          forward_batch(std::move(b));
        } else if constexpr (std::is_same_v<M, msg::DeRegisterMsg>) {
          deregister_worker(self, x.instance_id, x.worker_id, "deregister-msg");
        } else if constexpr (std::is_same_v<M, msg::FullSyncBatchMsg>) {
          auto r = route(self, x.instance_id, x.worker_id, x.location);
          if (r)
            self->send(r->first, sync_batch_atom::value, r->second, std::move(x));
          else
            st.count("sync_batch_from_unknown_worker");
        } else if constexpr (std::is_same_v<M, msg::FullSyncEndMsg>) {
          auto num = st.reg.find(x.instance_id, x.worker_id);
          if (num)
            self->send(st.workers.at(*num), sync_end_atom::value, std::move(x));
        } else {
          spdlog::warn("push-unhandled type={}", M::type_tag);
        }
      },
      m);
}

msg::Msg heartbeat(self_ptr self, const msg::HeartbeatMsg& m) {
  auto& st = self->state;
  msg::HeartbeatRetMsg ret;
  auto known = st.reg.find(m.instance_id, m.worker_id);
  bool first_heartbeat = known && !st.reg.record(*known)->has_heartbeated;
  if (!st.reg.heartbeat(m.instance_id, m.worker_id, wall_now())) {
    // Recovery path (spec 4.7.2): re-create the registration, ask for a full sync.
    register_worker(self, m.instance_id, m.worker_id, m.ip, m.port, m.peer_init_url);
    st.reg.heartbeat(m.instance_id, m.worker_id, wall_now());
    ret.commands.emplace_back(msg::FullSyncCommand{"worker_re_registered", std::nullopt});
    return ret;
  }
  if (first_heartbeat)
    st.persist_row(*known); // the reaper treats workers that heartbeat differently
  auto [ask, reason] = st.reg.should_request_full_sync(*known);
  if (ask) {
    spdlog::info("full-sync-requested instance={} worker={} reason={}", m.instance_id,
                 m.worker_id.to_string(), reason);
    ret.commands.emplace_back(msg::FullSyncCommand{reason, std::nullopt});
  }
  return ret;
}

/// The worker answers its own part first; global progress is computed only when
/// that answer is back, so it already includes the worker's latest sync state.
caf::result<msg::Msg> sync_status(self_ptr self, msg::FullSyncStatusMsg m) {
  auto& st = self->state;
  auto num = st.reg.find(m.instance_id, m.worker_id);
  if (!num) {
    double progress = st.reg.global_progress();
    bool can_exit = st.reg.can_exit_freeze(st.cfg.options.full_sync_completion_threshold);
    return msg::Msg{msg::FullSyncStatusRetMsg{m.sync_id, false, progress, can_exit, {}}};
  }
  auto rp = self->make_response_promise<msg::Msg>();
  auto sync_id = m.sync_id;
  self->request(st.workers.at(*num), st.cfg.options.internal_timeout, sync_status_atom::value,
                std::move(m))
      .then(
          [self, rp](msg::Msg& reply) mutable {
            if (auto* ret = std::get_if<msg::FullSyncStatusRetMsg>(&reply)) {
              auto& reg = self->state.reg;
              ret->global_progress = reg.global_progress();
              ret->can_exit_freeze =
                  reg.can_exit_freeze(self->state.cfg.options.full_sync_completion_threshold);
            }
            rp.deliver(std::move(reply));
          },
          [rp, sync_id](caf::error& e) mutable {
            rp.deliver(msg::Msg{msg::ErrorMsg{"full sync status for " + sync_id +
                                              " failed: " + caf::to_string(e)}});
          });
  return rp;
}

caf::result<msg::Msg> on_request(self_ptr self, msg::Msg& m) {
  auto& st = self->state;
  return std::visit(
      [&](auto& x) -> caf::result<msg::Msg> {
        using M = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<M, msg::RegisterMsg>) {
          register_worker(self, x.instance_id, x.worker_id, x.ip, x.port, x.peer_init_url);
          msg::RegisterRetMsg ret;
          if (st.cfg.hooks.heartbeat_url_for)
            if (auto url = st.cfg.hooks.heartbeat_url_for(x.ip))
              ret.extra_config.emplace_back("heartbeat_url", *url);
          return msg::Msg{std::move(ret)};
        } else if constexpr (std::is_same_v<M, msg::HeartbeatMsg>) {
          return heartbeat(self, x);
        } else if constexpr (std::is_same_v<M, msg::FullSyncStartMsg>) {
          auto r = route(self, x.instance_id, x.worker_id, x.location);
          if (!r)
            return msg::Msg{msg::FullSyncStartRetMsg{
                x.sync_id, false,
                "Failed to start sync: worker already syncing with different sync_id or worker not "
                "found"}};
          return self->delegate(r->first, sync_start_atom::value, r->second, std::move(x));
        } else if constexpr (std::is_same_v<M, msg::FullSyncStatusMsg>) {
          return sync_status(self, std::move(x));
        } else if constexpr (std::is_same_v<M, msg::BatchedP2PLookupMsg> ||
                             std::is_same_v<M, msg::LookupMsg>) {
          return self->delegate(next_lookup(self), request_atom::value, msg::Msg{std::move(x)});
        } else if constexpr (std::is_same_v<M, msg::QueryInstMsg>) {
          return msg::Msg{msg::QueryInstRetMsg{x.event_id, st.reg.instance_by_ip(x.ip)}};
        } else if constexpr (std::is_same_v<M, msg::QueryWorkerInfoMsg>) {
          return msg::Msg{msg::QueryWorkerInfoRetMsg{
              x.event_id, st.reg.worker_infos(x.instance_id, x.worker_ids)}};
        } else if constexpr (std::is_same_v<M, msg::ClearMsg> || std::is_same_v<M, msg::PinMsg> ||
                             std::is_same_v<M, msg::CompressMsg> ||
                             std::is_same_v<M, msg::DecompressMsg> ||
                             std::is_same_v<M, msg::MoveMsg> || std::is_same_v<M, msg::HealthMsg> ||
                             std::is_same_v<M, msg::CheckFinishMsg>) {
          auto plan = plan_control(m, st.reg, [self] { return self->state.random_hex(); });
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

caf::result<node_stats> collect_stats(self_ptr self) {
  auto& st = self->state;
  struct gather {
    node_stats stats;
    std::map<uint32_t, uint64_t> per_worker;
    size_t waiting;
    caf::typed_response_promise<node_stats> rp;
  };
  auto g = std::make_shared<gather>();
  g->waiting = st.cfg.shards.size();
  g->rp = self->make_response_promise<node_stats>();
  g->stats.seq_discontinuities = st.seq_discontinuities;
  g->stats.workers_syncing = st.reg.workers_in(sync_phase::syncing);
  g->stats.workers_completed = st.reg.workers_in(sync_phase::completed);
  g->stats.global_progress = st.reg.global_progress();
  g->stats.missing_batches_total = st.reg.missing_batches_total();
  // Snapshot the registry now; key counts are joined in when the shards answer.
  auto records = std::make_shared<std::vector<std::pair<uint32_t, msg::WorkerInfo>>>();
  for (const auto* rec : st.reg.all_workers())
    records->emplace_back(rec->worker_num, rec->info());
  auto finish = [g, records] {
    if (--g->waiting > 0)
      return;
    for (const auto& [num, info] : *records) {
      auto it = g->per_worker.find(num);
      g->stats.workers.push_back(worker_stats{info, it == g->per_worker.end() ? 0 : it->second});
    }
    g->rp.deliver(std::move(g->stats));
  };
  for (const auto& shard : st.cfg.shards) {
    self->request(shard, st.cfg.options.internal_timeout, stats_atom::value)
        .then(
            [g, finish](shard_stats& s) {
              g->stats.total_entries += s.entries;
              g->stats.total_keys += s.keys;
              g->stats.index_memory_bytes += s.memory_bytes;
              g->stats.store_commits += s.commits;
              g->stats.store_commit_failures += s.commit_failures;
              for (const auto& [h, n] : s.by_holder)
                g->per_worker[worker_of(h)] += n;
              finish();
            },
            [finish](caf::error&) { finish(); });
  }
  return g->rp;
}

void reap(self_ptr self) {
  auto& st = self->state;
  double timeout = std::chrono::duration<double>(st.cfg.options.lmcache_worker_timeout).count();
  for (const auto& [instance, worker] : st.reg.silent_workers(wall_now(), timeout))
    deregister_worker(self, instance, worker, "heartbeat-timeout");
  auto period = std::chrono::milliseconds{
      static_cast<int64_t>(st.cfg.options.health_check_interval_s * 1000.0)};
  self->delayed_send(self, period, tick_atom::value);
}

} // namespace

std::string directory_state::random_hex() {
  static constexpr char digits[] = "0123456789abcdef";
  std::string out(32, '0');
  for (auto& c : out)
    c = digits[rng() & 15];
  return out;
}

void directory_state::persist_row(uint32_t worker_num) {
  if (!cfg.store)
    return;
  const auto* rec = reg.record(worker_num);
  if (!rec)
    return;
  auto pending = pending_resets.find(worker_num);
  persistence::store::batch b;
  b.put_worker(to_row(*rec, pending != pending_resets.end() && pending->second > 0));
  if (auto r = cfg.store->commit(b); !r)
    spdlog::error("store-row-write-failed instance={} worker={} worker_num={} error={}",
                  rec->instance_id, rec->worker_id.to_string(), worker_num, r.error().message);
}

void directory_state::persist_removal(uint32_t worker_num) {
  if (!cfg.store)
    return;
  persistence::store::batch b;
  b.delete_worker(worker_num);
  if (auto r = cfg.store->commit(b); !r)
    spdlog::error("store-row-delete-failed worker_num={} error={}", worker_num, r.error().message);
}

void directory_state::count(std::string_view event) const {
  if (cfg.hooks.count_event)
    cfg.hooks.count_event(event);
}

directory_actor::behavior_type
directory_main(directory_actor::stateful_pointer<directory_state> self, directory_config cfg) {
  self->state.rng.seed(cfg.seed);
  self->state.cfg = std::move(cfg);
  // Worker actors may hold pending shard requests (whose timeouts keep them
  // referenced), so they do not end with the directory by themselves.
  self->set_exit_handler([self](caf::exit_msg& m) {
    for (const auto& [num, worker] : self->state.workers)
      self->send_exit(worker, m.reason);
    self->quit(m.reason);
  });
  restore_workers(self);
  if (self->state.cfg.options.health_check_interval_s > 0)
    self->send(self, tick_atom::value);
  return {
      [self](push_atom, msg::Msg& m) { on_push(self, m); },
      [self](request_atom, msg::Msg& m) { return on_request(self, m); },
      [self](stats_atom) { return collect_stats(self); },
      [self](tick_atom) { reap(self); },
      [self](drain_atom) -> caf::result<bool> {
        std::vector<worker_actor> workers;
        for (const auto& [num, worker] : self->state.workers)
          workers.push_back(worker);
        return drain_all(self, workers);
      },
      [self](sync_state_atom, uint32_t worker_num, sync_phase phase, uint64_t missing) {
        self->state.reg.set_sync_state(worker_num, phase, missing);
      },
      [self](seq_gap_atom, uint32_t, uint64_t n) { self->state.seq_discontinuities += n; },
      [self](resync_atom, uint32_t worker_num, const std::string& reason) {
        auto& st = self->state;
        st.reg.request_full_sync(worker_num, reason);
        st.count("full_sync_requested_" + reason);
      },
      [self](reset_done_atom, uint32_t worker_num, uint64_t erased) {
        auto& st = self->state;
        auto it = st.pending_resets.find(worker_num);
        if (it == st.pending_resets.end())
          return; // deregistered meanwhile
        if (--it->second == 0) {
          st.pending_resets.erase(it);
          st.persist_row(worker_num);
        }
        spdlog::debug("worker-reset-durable worker_num={} entries_erased={}", worker_num, erased);
      },
  };
}

} // namespace lmcc::actors
