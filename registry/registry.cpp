#include "registry/registry.hpp"

#include <algorithm>
#include <tuple>

namespace lmcc::actors {

msg::WorkerInfo worker_record::info() const {
  return msg::WorkerInfo{instance_id,       worker_id,          ip, port, peer_init_url,
                         registration_time, last_heartbeat_time};
}

std::string worker_record::control_endpoint() const {
  return ip + ":" + port.to_string();
}

std::pair<const directory_view::worker_entry*, const directory_view::holder_entry*>
directory_view::find(holder_id h) const {
  auto it = holders.find(h);
  if (it == holders.end())
    return {nullptr, nullptr};
  return {&workers[it->second.worker], &it->second};
}

// -- placement in registration order ---------------------------------------------

void registry::place(const worker_record& rec) {
  auto inst = std::find_if(instances_.begin(), instances_.end(), [&](const instance_entry& e) {
    return e.instance_id == rec.instance_id;
  });
  if (inst == instances_.end()) {
    instance_entry e{rec.instance_id, rec.instance_order, {}};
    auto at = std::upper_bound(instances_.begin(), instances_.end(), e,
                               [](const instance_entry& a, const instance_entry& b) {
                                 return std::tie(a.order, a.instance_id) <
                                        std::tie(b.order, b.instance_id);
                               });
    inst = instances_.insert(at, std::move(e));
  }
  auto before = [this](uint64_t a, uint64_t b) {
    const auto& ra = records_.at(a);
    const auto& rb = records_.at(b);
    return std::tie(ra.registration_order, ra.uid) < std::tie(rb.registration_order, rb.uid);
  };
  auto at = std::upper_bound(inst->workers.begin(), inst->workers.end(), rec.uid, before);
  inst->workers.insert(at, rec.uid);
}

void registry::unplace(const worker_record& rec) {
  auto inst = std::find_if(instances_.begin(), instances_.end(), [&](const instance_entry& e) {
    return e.instance_id == rec.instance_id;
  });
  if (inst == instances_.end())
    return;
  std::erase(inst->workers, rec.uid);
  if (inst->workers.empty())
    instances_.erase(inst);
}

// -- registration ----------------------------------------------------------------

registry::registration registry::register_worker(const std::string& instance_id,
                                                 const msg::wire_int& worker_id,
                                                 const std::string& ip, const msg::wire_int& port,
                                                 const std::optional<std::string>& peer_init_url,
                                                 double now, uint64_t stamp) {
  const uint64_t uid = worker_uid(instance_id, worker_id);
  if (auto it = records_.find(uid); it != records_.end()) {
    auto& rec = it->second;
    if (rec.instance_id != instance_id || rec.worker_id != worker_id)
      return {uid, false, 0,
              "worker identity hash collision: (" + instance_id + ", " + worker_id.to_string() +
                  ") has the same uid as the registered (" + rec.instance_id + ", " +
                  rec.worker_id.to_string() + ")"};
    answers_changing();
    sync_state_expected_.erase(uid);
    rec.ip = ip;
    rec.port = port;
    rec.peer_init_url = peer_init_url;
    for (const auto& loc : rec.locations)
      holder_owner_.erase(rec.holder(loc));
    rec.locations.clear();
    rec.resync_reason.clear();
    rec.incarnation = stamp;
    return {uid, false, stamp, {}};
  }
  answers_changing();
  worker_record rec;
  rec.uid = uid;
  rec.instance_id = instance_id;
  rec.worker_id = worker_id;
  rec.ip = ip;
  rec.port = port;
  rec.peer_init_url = peer_init_url;
  rec.registration_time = now;
  rec.last_heartbeat_time = now;
  rec.registration_order = stamp;
  rec.incarnation = stamp;
  auto inst = std::find_if(instances_.begin(), instances_.end(),
                           [&](const instance_entry& e) { return e.instance_id == instance_id; });
  rec.instance_order = inst == instances_.end() ? stamp : inst->order;
  const auto& stored = records_.emplace(uid, std::move(rec)).first->second;
  place(stored);
  return {uid, true, stamp, {}};
}

void registry::restore_worker(worker_record rec) {
  const uint64_t uid = rec.uid;
  // A replica's row arrives with every heartbeat at the worker's home: only
  // a change of what a heartbeat's answer depends on makes views stale.
  const auto same_answers = [&](const worker_record& old) {
    return old.instance_id == rec.instance_id && old.worker_id == rec.worker_id &&
           old.has_heartbeated == rec.has_heartbeated && old.sync == rec.sync &&
           old.resync_reason == rec.resync_reason && !sync_state_expected_.contains(uid);
  };
  const auto it = records_.find(uid);
  if (it == records_.end() || !same_answers(it->second))
    answers_changing();
  sync_state_expected_.erase(uid);
  if (it != records_.end()) {
    unplace(it->second);
    for (const auto& loc : it->second.locations)
      holder_owner_.erase(it->second.holder(loc));
    records_.erase(it);
  }
  // An instance takes the earliest order any of its rows remembers.
  auto inst = std::find_if(instances_.begin(), instances_.end(), [&](const instance_entry& e) {
    return e.instance_id == rec.instance_id;
  });
  if (inst != instances_.end() && inst->order > rec.instance_order) {
    instance_entry moved = std::move(*inst);
    instances_.erase(inst);
    moved.order = rec.instance_order;
    auto at = std::upper_bound(instances_.begin(), instances_.end(), moved,
                               [](const instance_entry& a, const instance_entry& b) {
                                 return std::tie(a.order, a.instance_id) <
                                        std::tie(b.order, b.instance_id);
                               });
    instances_.insert(at, std::move(moved));
  }
  for (const auto& loc : rec.locations)
    holder_owner_[rec.holder(loc)] = uid;
  const auto& stored = records_.emplace(uid, std::move(rec)).first->second;
  place(stored);
}

std::optional<worker_record> registry::remove(const std::string& instance_id,
                                              const msg::wire_int& worker_id) {
  const auto* found = find(instance_id, worker_id);
  if (!found)
    return std::nullopt;
  answers_changing();
  sync_state_expected_.erase(found->uid);
  auto node = records_.extract(found->uid);
  unplace(node.mapped());
  for (const auto& loc : node.mapped().locations)
    holder_owner_.erase(node.mapped().holder(loc));
  return std::move(node.mapped());
}

bool registry::refresh_heartbeat(uint64_t uid, double last_heartbeat_time, double heard_at) {
  const auto it = records_.find(uid);
  if (it == records_.end() || sync_state_expected_.contains(uid))
    return false;
  it->second.last_heartbeat_time = last_heartbeat_time;
  it->second.heard_at = heard_at;
  return true;
}

bool registry::heartbeat(const std::string& instance_id, const msg::wire_int& worker_id, double now,
                         double heard_at) {
  const auto* found = find(instance_id, worker_id);
  if (!found)
    return false;
  auto& rec = records_.at(found->uid);
  if (!rec.has_heartbeated)
    answers_changing(); // answered from a heartbeat_view from now on
  rec.last_heartbeat_time = now;
  rec.heard_at = heard_at;
  rec.has_heartbeated = true;
  return true;
}

std::vector<std::pair<std::string, msg::wire_int>>
registry::silent_workers(double mono_now, double timeout_s) const {
  std::vector<std::pair<std::string, msg::wire_int>> out;
  for (const auto* rec : all_workers())
    if (rec->has_heartbeated && mono_now - rec->heard_at > timeout_s)
      out.emplace_back(rec->instance_id, rec->worker_id);
  return out;
}

bool registry::add_location(uint64_t uid, const std::string& location) {
  auto it = records_.find(uid);
  if (it == records_.end())
    return false;
  auto& rec = it->second;
  if (std::find(rec.locations.begin(), rec.locations.end(), location) != rec.locations.end())
    return true;
  if (rec.locations.size() >= max_locations_per_worker)
    return false;
  const holder_id h = rec.holder(location);
  auto [owner, inserted] = holder_owner_.try_emplace(h, uid);
  if (!inserted && owner->second != uid)
    return false;
  rec.locations.push_back(location);
  return true;
}

// -- lookups -----------------------------------------------------------------------

const worker_record* registry::find(const std::string& instance_id,
                                    const msg::wire_int& worker_id) const {
  auto it = records_.find(worker_uid(instance_id, worker_id));
  if (it == records_.end() || it->second.instance_id != instance_id ||
      it->second.worker_id != worker_id)
    return nullptr;
  return &it->second;
}

const worker_record* registry::record(uint64_t uid) const {
  auto it = records_.find(uid);
  return it == records_.end() ? nullptr : &it->second;
}

std::optional<std::string> registry::instance_by_ip(const std::string& ip) const {
  for (const auto& inst : instances_)
    for (uint64_t uid : inst.workers)
      if (records_.at(uid).ip == ip)
        return inst.instance_id;
  return std::nullopt;
}

std::vector<control_target> registry::control_targets(const std::string& instance_id) const {
  std::vector<control_target> out;
  for (const auto& inst : instances_) {
    if (inst.instance_id != instance_id)
      continue;
    for (uint64_t uid : inst.workers) {
      const auto& rec = records_.at(uid);
      out.push_back(control_target{rec.worker_id, rec.control_endpoint(), rec.peer_init_url});
    }
  }
  std::sort(out.begin(), out.end(), [](const control_target& a, const control_target& b) {
    return a.worker_id < b.worker_id;
  });
  return out;
}

std::vector<msg::WorkerInfo>
registry::worker_infos(const std::string& instance_id,
                       const std::optional<std::vector<msg::wire_int>>& ids) const {
  std::vector<msg::WorkerInfo> out;
  bool filter = ids && !ids->empty();
  auto wanted = [&](const msg::wire_int& id) {
    return !filter || std::find(ids->begin(), ids->end(), id) != ids->end();
  };
  if (instance_id == "all") {
    for (const auto* rec : all_workers())
      if (wanted(rec->worker_id))
        out.push_back(rec->info());
    return out;
  }
  std::vector<const worker_record*> recs;
  for (const auto& inst : instances_)
    if (inst.instance_id == instance_id)
      for (uint64_t uid : inst.workers)
        recs.push_back(&records_.at(uid));
  std::sort(recs.begin(), recs.end(), [](const worker_record* a, const worker_record* b) {
    return a->worker_id < b->worker_id;
  });
  if (!filter) {
    for (const auto* rec : recs)
      out.push_back(rec->info());
    return out;
  }
  // Explicit ids: in the order asked for, unknown ones skipped (LMCache warns).
  for (const auto& id : *ids)
    for (const auto* rec : recs)
      if (rec->worker_id == id)
        out.push_back(rec->info());
  return out;
}

std::vector<const worker_record*> registry::all_workers() const {
  std::vector<const worker_record*> out;
  out.reserve(records_.size());
  for (const auto& inst : instances_)
    for (uint64_t uid : inst.workers)
      out.push_back(&records_.at(uid));
  return out;
}

// -- full sync ------------------------------------------------------------------------

void registry::set_sync_state(uint64_t uid, sync_phase phase, uint64_t missing_batches) {
  auto it = records_.find(uid);
  if (it == records_.end())
    return;
  // A sync's start answers every reason owed until then; its progress
  // reports (also `syncing`) must not clear a reason proven after it started,
  // which the next heartbeat after it asks for (guarded by registry_test's
  // a_resync_owed_during_a_sync_survives_its_progress_and_is_asked_after_it).
  const bool starts = phase == sync_phase::syncing && it->second.sync != sync_phase::syncing;
  if (phase != it->second.sync || sync_state_expected_.contains(uid))
    answers_changing();
  sync_state_expected_.erase(uid);
  it->second.sync = phase;
  it->second.missing_batches = missing_batches;
  if (starts)
    it->second.resync_reason.clear();
}

void registry::request_full_sync(uint64_t uid, std::string reason) {
  if (auto it = records_.find(uid); it != records_.end()) {
    answers_changing();
    it->second.resync_reason = std::move(reason);
  }
}

void registry::forget_expected_sync_state(uint64_t uid) {
  if (sync_state_expected_.contains(uid)) {
    answers_changing();
    sync_state_expected_.erase(uid);
  }
}

void registry::expect_sync_state(uint64_t uid) {
  if (records_.contains(uid)) {
    answers_changing();
    sync_state_expected_.insert(uid);
  }
}

double registry::global_progress() const {
  if (records_.empty())
    return 0.0;
  uint64_t ready = 0;
  for (const auto& [uid, rec] : records_)
    if (rec.sync == sync_phase::none || rec.sync == sync_phase::completed)
      ++ready;
  return static_cast<double>(ready) / static_cast<double>(records_.size());
}

bool registry::can_exit_freeze(double completion_threshold) {
  bool can_exit = global_progress() >= completion_threshold;
  if (can_exit)
    set_need_full_sync_all(false);
  return can_exit;
}

std::pair<bool, std::string> registry::should_request_full_sync(uint64_t uid) const {
  const auto* rec = record(uid);
  if (!rec || sync_state_expected_.contains(uid))
    return {false, {}};
  if (need_full_sync_all_ && rec->sync != sync_phase::syncing && rec->sync != sync_phase::completed)
    return {true, "controller_restart"};
  if (rec->sync == sync_phase::failed)
    return {true, "sync_failed_retry"};
  if (!rec->resync_reason.empty() && rec->sync != sync_phase::syncing)
    return {true, rec->resync_reason};
  return {false, {}};
}

uint64_t registry::workers_in(sync_phase phase) const {
  uint64_t n = 0;
  for (const auto& [uid, rec] : records_)
    n += rec.sync == phase ? 1 : 0;
  return n;
}

uint64_t registry::missing_batches_total() const {
  uint64_t n = 0;
  for (const auto& [uid, rec] : records_)
    if (rec.sync == sync_phase::syncing)
      n += rec.missing_batches;
  return n;
}

// -- views -----------------------------------------------------------------------------

std::shared_ptr<const heartbeat_view> registry::make_heartbeat_view() const {
  auto view = std::make_shared<heartbeat_view>();
  view->version = answers_version_->load();
  view->live = answers_version_;
  view->workers.reserve(records_.size());
  for (const auto& [uid, rec] : records_) {
    // A first heartbeat is stored (the reaper treats the worker differently
    // from then on): the directory answers it.
    if (!rec.has_heartbeated)
      continue;
    auto [ask, reason] = should_request_full_sync(uid);
    view->workers.emplace(
        uid, heartbeat_view::entry{rec.instance_id, rec.worker_id,
                                   ask ? std::optional{std::move(reason)} : std::nullopt});
  }
  return view;
}

std::shared_ptr<const directory_view> registry::make_view() const {
  auto view = std::make_shared<directory_view>();
  view->workers.reserve(records_.size());
  uint32_t instance_rank = 0;
  for (const auto& inst : instances_) {
    uint32_t worker_rank = 0;
    for (uint64_t uid : inst.workers) {
      const auto& rec = records_.at(uid);
      const auto index = static_cast<uint32_t>(view->workers.size());
      view->workers.push_back(directory_view::worker_entry{
          uid, rec.instance_id, rec.worker_id, instance_rank, worker_rank++, rec.peer_init_url});
      for (uint32_t rank = 0; rank < rec.locations.size(); ++rank)
        view->holders.emplace(rec.holder(rec.locations[rank]),
                              directory_view::holder_entry{index, rec.locations[rank], rank});
    }
    ++instance_rank;
  }
  return view;
}

} // namespace lmcc::actors
