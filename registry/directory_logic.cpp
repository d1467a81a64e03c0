#include "registry/directory_logic.hpp"

#include <spdlog/spdlog.h>

namespace lmcc::actors {

directory_logic::directory_logic(controller_options options, directory_outbox& out)
  : options_(std::move(options)), out_(out) {}

void directory_logic::persist(uint64_t uid) {
  if (const auto* rec = reg_.record(uid))
    out_.put_row(to_row(*rec));
}

void directory_logic::restore(std::vector<restored_worker>& workers, bool need_full_sync_all,
                              uint64_t wall_ms, double mono_s) {
  reg_.set_need_full_sync_all(need_full_sync_all);
  for (auto& rw : workers) {
    clock_.observe(rw.record.registration_order, wall_ms);
    clock_.observe(rw.record.incarnation, wall_ms);
    const uint64_t uid = rw.record.uid;
    rw.record.heard_at = mono_s;
    reg_.restore_worker(rw.record);
    out_.spawn_worker(*reg_.record(uid), &rw);
    if (!rw.resync_reason.empty()) {
      reg_.request_full_sync(uid, rw.resync_reason);
      spdlog::info("full-sync-needed-after-restart instance={} worker={} reason={}",
                   rw.record.instance_id, rw.record.worker_id.to_string(), rw.resync_reason);
    }
  }
  if (!workers.empty()) {
    spdlog::info("directory-restored workers={} need_full_sync_all={}", workers.size(),
                 need_full_sync_all);
    changed_ = true;
  }
}

registry::registration directory_logic::do_register(const std::string& instance_id,
                                                    const msg::wire_int& worker_id,
                                                    const std::string& ip,
                                                    const msg::wire_int& port,
                                                    const std::optional<std::string>& peer_url,
                                                    double now_s, uint64_t wall_ms) {
  auto r =
      reg_.register_worker(instance_id, worker_id, ip, port, peer_url, now_s, clock_.now(wall_ms));
  if (!r.refused.empty()) {
    spdlog::error("worker-registration-refused instance={} worker={} reason={}", instance_id,
                  worker_id.to_string(), r.refused);
    out_.count("worker_registration_refused");
    return r;
  }
  changed_ = true;
  if (r.is_new) {
    out_.spawn_worker(*reg_.record(r.uid), nullptr);
    spdlog::info("worker-registered instance={} worker={} ip={} port={} peer_init_url={} uid={}",
                 instance_id, worker_id.to_string(), ip, port.to_string(),
                 peer_url.value_or("None"), r.uid);
    out_.count("worker_registered");
  } else {
    // LMCache clears the worker's KV state on a duplicate registration; the
    // worker's actor drops its holders under the new incarnation.
    out_.reset_worker(r.uid, r.incarnation);
    reg_.set_sync_state(r.uid, sync_phase::none, 0);
    spdlog::info("worker-reregistered instance={} worker={} ip={} port={} kv=cleared "
                 "incarnation={}",
                 instance_id, worker_id.to_string(), ip, port.to_string(), r.incarnation);
    out_.count("worker_reregistered");
  }
  persist(r.uid);
  return r;
}

msg::Msg directory_logic::on_register(const msg::RegisterMsg& m, double now_s, uint64_t wall_ms,
                                      const std::optional<std::string>& heartbeat_url) {
  auto r = do_register(m.instance_id, m.worker_id, m.ip, m.port, m.peer_init_url, now_s, wall_ms);
  if (!r.refused.empty())
    return msg::Msg{msg::ErrorMsg{r.refused}};
  msg::RegisterRetMsg ret;
  if (heartbeat_url)
    ret.extra_config.emplace_back("heartbeat_url", *heartbeat_url);
  return msg::Msg{std::move(ret)};
}

msg::Msg directory_logic::on_heartbeat(const msg::HeartbeatMsg& m, double now_s, uint64_t wall_ms,
                                       double mono_s) {
  msg::HeartbeatRetMsg ret;
  const auto* known = reg_.find(m.instance_id, m.worker_id);
  const bool first_heartbeat = known && !known->has_heartbeated;
  if (!reg_.heartbeat(m.instance_id, m.worker_id, now_s, mono_s)) {
    // Recovery path (spec 4.7.2): re-create the registration, ask for a full sync.
    auto r = do_register(m.instance_id, m.worker_id, m.ip, m.port, m.peer_init_url, now_s, wall_ms);
    if (!r.refused.empty())
      return msg::Msg{msg::ErrorMsg{r.refused}};
    reg_.heartbeat(m.instance_id, m.worker_id, now_s, mono_s);
    persist(r.uid); // has_heartbeated: the reaper may reap it after a restart too
    ret.commands.emplace_back(msg::FullSyncCommand{"worker_re_registered", std::nullopt});
    return msg::Msg{std::move(ret)};
  }
  const uint64_t uid = known->uid;
  if (first_heartbeat)
    persist(uid); // the reaper treats workers that heartbeat differently
  auto [ask, reason] = reg_.should_request_full_sync(uid);
  if (ask) {
    asks_.asked(uid, m.instance_id, m.worker_id, reason, reg_.answers_version(),
                static_cast<uint64_t>(mono_s * 1000.0));
    ret.commands.emplace_back(msg::FullSyncCommand{reason, std::nullopt});
  }
  return msg::Msg{std::move(ret)};
}

const worker_record* directory_logic::on_heartbeat_heard(const std::string& instance_id,
                                                         const msg::wire_int& worker_id,
                                                         double now_s, double mono_s) {
  if (reg_.heartbeat(instance_id, worker_id, now_s, mono_s))
    return reg_.find(instance_id, worker_id);
  spdlog::debug("heartbeat-heard-unknown instance={} worker={}", instance_id,
                worker_id.to_string());
  return nullptr;
}

const worker_record* directory_logic::on_heartbeat_heard_elsewhere(uint64_t uid, double now_s,
                                                                   double mono_s) {
  const auto* rec = reg_.record(uid);
  if (rec == nullptr || !rec->has_heartbeated)
    return nullptr;
  const std::string instance_id = rec->instance_id;
  const msg::wire_int worker_id = rec->worker_id;
  return on_heartbeat_heard(instance_id, worker_id, std::max(now_s, rec->last_heartbeat_time),
                            mono_s);
}

bool directory_logic::on_deregister(const std::string& instance_id, const msg::wire_int& worker_id,
                                    std::string_view why, uint64_t wall_ms) {
  auto rec = reg_.remove(instance_id, worker_id);
  if (!rec) {
    spdlog::warn("worker-deregister-unknown instance={} worker={} reason={}", instance_id,
                 worker_id.to_string(), why);
    return false;
  }
  bury(rec->uid, rec->incarnation, wall_ms);
  out_.retire_worker(rec->uid);
  out_.delete_row(rec->uid, rec->incarnation);
  out_.forget_control(rec->control_endpoint());
  spdlog::info("worker-deregistered instance={} worker={} reason={}", instance_id,
               worker_id.to_string(), why);
  out_.count("worker_deregistered");
  changed_ = true;
  return true;
}

void directory_logic::reap(double mono_s, uint64_t wall_ms) {
  const double timeout = std::chrono::duration<double>(options_.lmcache_worker_timeout).count();
  for (const auto& [instance, worker] : reg_.silent_workers(mono_s, timeout))
    if (is_home(worker_uid(instance, worker)))
      on_deregister(instance, worker, "heartbeat-timeout", wall_ms);
}

std::vector<uint64_t>
directory_logic::entities_behind(const std::map<uint64_t, uint64_t>& entity_incarnations) const {
  std::vector<uint64_t> out;
  for (const auto& [uid, incarnation] : entity_incarnations)
    if (const auto* rec = reg_.record(uid); rec && rec->incarnation > incarnation)
      out.push_back(uid);
  return out;
}

directory_logic::replica_applied directory_logic::apply_replica(const persistence::worker_row& row,
                                                                double now_s, uint64_t wall_ms,
                                                                double mono_s) {
  if (auto t = tombstones_.find(row.uid); t != tombstones_.end()) {
    if (row.incarnation <= t->second) {
      spdlog::info("worker-row-refused instance={} worker={} uid={} incarnation={} "
                   "reason=deregistered",
                   row.instance_id, row.worker_id.to_string(), row.uid, row.incarnation);
      return {};
    }
    tombstones_.erase(t); // registered again since
  }
  clock_.observe(row.registration_order, wall_ms);
  clock_.observe(row.incarnation, wall_ms);
  const auto* old = reg_.record(row.uid);
  if (old && row.incarnation < old->incarnation)
    return {}; // an older registration's row (a peer's copy that is late)
  // Whether the row says what this node's record says, but for the heartbeat time.
  bool same_but_time = false;
  if (old) {
    auto before = to_row(*old);
    before.last_heartbeat_time = row.last_heartbeat_time;
    same_but_time = before == row;
  }
  const double heard_at = old && row.last_heartbeat_time == old->last_heartbeat_time
                              ? old->heard_at // no newer heartbeat at the home
                              : mono_s;
  // The home sends the row with every heartbeat of the worker. When only the
  // time moved it is updated in place: marking the directory changed rebuilds
  // the lookup view and the routes, O(workers), so a fleet's heartbeats would
  // cost O(workers^2) on every node.
  if (same_but_time && reg_.refresh_heartbeat(row.uid, row.last_heartbeat_time, heard_at))
    return {.applied = true, .time_only = true};
  auto rec = to_record(row, now_s);
  rec.last_heartbeat_time = row.last_heartbeat_time;
  rec.heard_at = heard_at;
  if (old) {
    rec.locations = old->locations;
    rec.sync = old->sync;
    rec.missing_batches = old->missing_batches;
    if (row.incarnation == old->incarnation)
      rec.resync_reason = old->resync_reason; // a re-registration clears it
  }
  reg_.restore_worker(std::move(rec));
  if (!same_but_time)
    out_.put_row(row);
  changed_ = true;
  return {.applied = true};
}

void directory_logic::remove_replica(uint64_t uid, uint64_t incarnation, uint64_t wall_ms) {
  bury(uid, incarnation, wall_ms);
  const auto* rec = reg_.record(uid);
  if (!rec || rec->incarnation > incarnation)
    return; // unknown here, or registered again since
  forget_replica(uid);
}

void directory_logic::forget_replica(uint64_t uid) {
  const auto* rec = reg_.record(uid);
  if (!rec)
    return;
  const uint64_t incarnation = rec->incarnation;
  const std::string endpoint = rec->control_endpoint();
  const std::string instance = rec->instance_id;
  const msg::wire_int worker = rec->worker_id;
  reg_.remove(instance, worker);
  out_.delete_row(uid, incarnation);
  out_.forget_control(endpoint);
  spdlog::info("worker-deregistered-replica instance={} worker={} uid={}", instance,
               worker.to_string(), uid);
  changed_ = true;
}

bool directory_logic::apply_tombstone(const worker_tombstone& t, uint64_t wall_ms) {
  const auto* rec = reg_.record(t.uid);
  if (!rec || rec->incarnation > t.incarnation) {
    bury(t.uid, t.incarnation, wall_ms);
    return false;
  }
  if (!is_home(t.uid)) {
    remove_replica(t.uid, t.incarnation, wall_ms);
    return true;
  }
  // Its entity lives here (this node came back as its home): end it as a
  // deregistration would, so its holders are dropped everywhere.
  const std::string instance = rec->instance_id;
  const msg::wire_int worker = rec->worker_id;
  return on_deregister(instance, worker, "deregistered-while-away", wall_ms);
}

void directory_logic::bury(uint64_t uid, uint64_t incarnation, uint64_t wall_ms) {
  auto [it, inserted] = tombstones_.try_emplace(uid, incarnation);
  if (!inserted && it->second >= incarnation)
    return;
  it->second = incarnation;
  tombstone_order_.emplace_back(uid, incarnation, wall_ms);
  expire_tombstones(wall_ms);
}

void directory_logic::expire_tombstones(uint64_t wall_ms) {
  while (!tombstone_order_.empty()) {
    const auto& [uid, incarnation, buried_ms] = tombstone_order_.front();
    const bool expired = static_cast<int64_t>(wall_ms - buried_ms) > tombstone_ttl_ms_ ||
                         tombstone_order_.size() > max_tombstones;
    if (!expired)
      break;
    if (auto it = tombstones_.find(uid); it != tombstones_.end() && it->second == incarnation)
      tombstones_.erase(it);
    tombstone_order_.pop_front();
  }
}

std::vector<worker_tombstone> directory_logic::tombstones(uint64_t wall_ms) {
  expire_tombstones(wall_ms);
  std::vector<worker_tombstone> out;
  out.reserve(tombstones_.size());
  for (const auto& [uid, incarnation] : tombstones_)
    out.push_back(worker_tombstone{uid, incarnation});
  return out;
}

void directory_logic::on_sync_state(uint64_t uid, sync_phase phase, uint64_t missing) {
  reg_.set_sync_state(uid, phase, missing);
}

bool directory_logic::on_peer_sync_state(uint64_t uid, sync_phase phase, uint64_t missing) {
  const bool applied = !is_home(uid);
  if (applied)
    reg_.set_sync_state(uid, phase, missing);
  else
    spdlog::debug("peer-sync-state-ignored uid={} phase={} reason=home-here", uid,
                  to_string(phase));
  if (phase == sync_phase::completed)
    on_peer_sync_completed();
  return applied;
}

void directory_logic::on_taken_over(uint64_t uid) {
  const auto* rec = reg_.record(uid);
  if (rec && rec->sync == sync_phase::syncing)
    reg_.set_sync_state(uid, sync_phase::none, 0);
}

void directory_logic::on_peer_sync_completed() {
  if (reg_.need_full_sync_all() && reg_.can_exit_freeze(options_.full_sync_completion_threshold))
    spdlog::info("freeze-exited reason=peer-sync-completed workers={}", reg_.all_workers().size());
}

void directory_logic::on_index_held_by_peers() {
  if (!reg_.need_full_sync_all())
    return;
  reg_.set_need_full_sync_all(false);
  spdlog::info("freeze-exited reason=peers-hold-the-index workers={}", reg_.all_workers().size());
}

size_t directory_logic::on_slots_lost(uint64_t slots, bool replica) {
  std::vector<uint64_t> uids;
  for (const auto* rec : reg_.all_workers())
    uids.push_back(rec->uid);
  const std::string reason{slot_copies_lost_reason};
  for (uint64_t uid : uids)
    replica ? on_replicated_resync(uid, reason) : on_resync(uid, reason);
  spdlog::warn("index-lost slots={} workers={} from={} action=full-sync-all", slots, uids.size(),
               replica ? "peer" : "refill");
  return uids.size();
}

void directory_logic::on_resync(uint64_t uid, const std::string& reason) {
  reg_.request_full_sync(uid, reason);
  out_.count("full_sync_requested_" + reason);
}

void directory_logic::on_replicated_resync(uint64_t uid, const std::string& reason) {
  reg_.request_full_sync(uid, reason);
}

void directory_logic::on_location(uint64_t uid, const std::string& location) {
  if (!reg_.add_location(uid, location)) {
    const auto* rec = reg_.record(uid);
    spdlog::warn("worker-location-refused uid={} instance={} location={} reason={}", uid,
                 rec ? rec->instance_id : "?", location,
                 rec && rec->locations.size() >= registry::max_locations_per_worker
                     ? "too-many-locations"
                     : "holder-id-collision-or-unknown-worker");
    out_.count("worker_location_refused");
    return;
  }
  changed_ = true;
}

void directory_logic::complete_status(msg::FullSyncStatusRetMsg& ret) {
  ret.global_progress = reg_.global_progress();
  ret.can_exit_freeze = reg_.can_exit_freeze(options_.full_sync_completion_threshold);
}

} // namespace lmcc::actors
