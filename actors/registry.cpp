#include "actors/registry.hpp"

#include <algorithm>

namespace lmcc::actors {

msg::WorkerInfo worker_record::info() const {
  return msg::WorkerInfo{instance_id,       worker_id,          ip, port, peer_init_url,
                         registration_time, last_heartbeat_time};
}

std::string worker_record::control_endpoint() const {
  return ip + ":" + port.to_string();
}

const directory_view::worker_entry* directory_view::find(uint32_t worker_num) const {
  auto it = workers.find(worker_num);
  return it == workers.end() ? nullptr : &it->second;
}

registry::registration registry::register_worker(const std::string& instance_id,
                                                 const msg::wire_int& worker_id,
                                                 const std::string& ip, const msg::wire_int& port,
                                                 const std::optional<std::string>& peer_init_url,
                                                 double now) {
  if (auto existing = find(instance_id, worker_id)) {
    auto& rec = records_.at(*existing);
    rec.ip = ip;
    rec.port = port;
    rec.peer_init_url = peer_init_url;
    rec.locations.clear();
    rec.resync_reason.clear();
    return {*existing, false};
  }
  uint32_t num = next_worker_num_++;
  worker_record rec;
  rec.worker_num = num;
  rec.instance_id = instance_id;
  rec.worker_id = worker_id;
  rec.ip = ip;
  rec.port = port;
  rec.peer_init_url = peer_init_url;
  rec.registration_time = now;
  rec.last_heartbeat_time = now;
  records_.emplace(num, std::move(rec));
  by_key_.emplace(std::make_pair(instance_id, worker_id), num);
  auto inst = std::find_if(instances_.begin(), instances_.end(),
                           [&](const instance_entry& e) { return e.instance_id == instance_id; });
  if (inst == instances_.end())
    instances_.push_back(instance_entry{instance_id, {num}});
  else
    inst->workers.push_back(num);
  return {num, true};
}

void registry::restore_worker(worker_record rec) {
  uint32_t num = rec.worker_num;
  next_worker_num_ = std::max(next_worker_num_, num + 1);
  by_key_[std::make_pair(rec.instance_id, rec.worker_id)] = num;
  auto inst = std::find_if(instances_.begin(), instances_.end(), [&](const instance_entry& e) {
    return e.instance_id == rec.instance_id;
  });
  if (inst == instances_.end())
    instances_.push_back(instance_entry{rec.instance_id, {num}});
  else
    inst->workers.push_back(num);
  records_[num] = std::move(rec);
}

std::optional<worker_record> registry::remove(const std::string& instance_id,
                                              const msg::wire_int& worker_id) {
  auto key = std::make_pair(instance_id, worker_id);
  auto it = by_key_.find(key);
  if (it == by_key_.end())
    return std::nullopt;
  uint32_t num = it->second;
  by_key_.erase(it);
  auto rec = std::move(records_.at(num));
  records_.erase(num);
  auto inst = std::find_if(instances_.begin(), instances_.end(),
                           [&](const instance_entry& e) { return e.instance_id == instance_id; });
  if (inst != instances_.end()) {
    std::erase(inst->workers, num);
    if (inst->workers.empty())
      instances_.erase(inst);
  }
  return rec;
}

bool registry::heartbeat(const std::string& instance_id, const msg::wire_int& worker_id,
                         double now) {
  auto num = find(instance_id, worker_id);
  if (!num)
    return false;
  auto& rec = records_.at(*num);
  rec.last_heartbeat_time = now;
  rec.has_heartbeated = true;
  return true;
}

std::vector<std::pair<std::string, msg::wire_int>>
registry::silent_workers(double now, double timeout_s) const {
  std::vector<std::pair<std::string, msg::wire_int>> out;
  for (const auto* rec : all_workers())
    if (rec->has_heartbeated && now - rec->last_heartbeat_time > timeout_s)
      out.emplace_back(rec->instance_id, rec->worker_id);
  return out;
}

std::optional<uint32_t> registry::find(const std::string& instance_id,
                                       const msg::wire_int& worker_id) const {
  auto it = by_key_.find(std::make_pair(instance_id, worker_id));
  if (it == by_key_.end())
    return std::nullopt;
  return it->second;
}

const worker_record* registry::record(uint32_t worker_num) const {
  auto it = records_.find(worker_num);
  return it == records_.end() ? nullptr : &it->second;
}

std::optional<uint32_t> registry::intern_location(uint32_t worker_num,
                                                  const std::string& location) {
  auto it = records_.find(worker_num);
  if (it == records_.end())
    return std::nullopt;
  auto& locs = it->second.locations;
  auto pos = std::find(locs.begin(), locs.end(), location);
  if (pos != locs.end())
    return static_cast<uint32_t>(pos - locs.begin());
  if (locs.size() >= max_locations_per_worker)
    return std::nullopt;
  locs.push_back(location);
  return static_cast<uint32_t>(locs.size() - 1);
}

std::optional<std::string> registry::instance_by_ip(const std::string& ip) const {
  for (const auto& inst : instances_)
    for (uint32_t num : inst.workers)
      if (records_.at(num).ip == ip)
        return inst.instance_id;
  return std::nullopt;
}

std::vector<control_target> registry::control_targets(const std::string& instance_id) const {
  std::vector<control_target> out;
  for (const auto& inst : instances_) {
    if (inst.instance_id != instance_id)
      continue;
    for (uint32_t num : inst.workers) {
      const auto& rec = records_.at(num);
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
      for (uint32_t num : inst.workers)
        recs.push_back(&records_.at(num));
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
    for (uint32_t num : inst.workers)
      out.push_back(&records_.at(num));
  return out;
}

void registry::set_sync_state(uint32_t worker_num, sync_phase phase, uint64_t missing_batches) {
  auto it = records_.find(worker_num);
  if (it == records_.end())
    return;
  it->second.sync = phase;
  it->second.missing_batches = missing_batches;
  if (phase == sync_phase::syncing)
    it->second.resync_reason.clear();
}

void registry::request_full_sync(uint32_t worker_num, std::string reason) {
  if (auto it = records_.find(worker_num); it != records_.end())
    it->second.resync_reason = std::move(reason);
}

double registry::global_progress() const {
  if (records_.empty())
    return 0.0;
  uint64_t ready = 0;
  for (const auto& [num, rec] : records_)
    if (rec.sync == sync_phase::none || rec.sync == sync_phase::completed)
      ++ready;
  return static_cast<double>(ready) / static_cast<double>(records_.size());
}

bool registry::can_exit_freeze(double completion_threshold) {
  bool can_exit = global_progress() >= completion_threshold;
  if (can_exit)
    need_full_sync_all_ = false;
  return can_exit;
}

std::pair<bool, std::string> registry::should_request_full_sync(uint32_t worker_num) const {
  const auto* rec = record(worker_num);
  if (!rec)
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
  for (const auto& [num, rec] : records_)
    n += rec.sync == phase ? 1 : 0;
  return n;
}

uint64_t registry::missing_batches_total() const {
  uint64_t n = 0;
  for (const auto& [num, rec] : records_)
    if (rec.sync == sync_phase::syncing)
      n += rec.missing_batches;
  return n;
}

std::shared_ptr<const directory_view> registry::make_view() const {
  auto view = std::make_shared<directory_view>();
  uint32_t instance_rank = 0;
  for (const auto& inst : instances_) {
    uint32_t worker_rank = 0;
    for (uint32_t num : inst.workers) {
      const auto& rec = records_.at(num);
      view->workers.emplace(num, directory_view::worker_entry{rec.instance_id, rec.worker_id,
                                                              instance_rank, worker_rank++,
                                                              rec.peer_init_url, rec.locations});
    }
    ++instance_rank;
  }
  return view;
}

} // namespace lmcc::actors
