#include "registry/heartbeat_reader.hpp"

#include <spdlog/spdlog.h>

namespace lmcc::actors {

std::optional<msg::HeartbeatRetMsg> heartbeat_reader::answer(const msg::HeartbeatMsg& m,
                                                             uint64_t now_ms) {
  const auto view = view_.current();
  if (!view->current())
    return std::nullopt;
  const uint64_t uid = worker_uid(m.instance_id, m.worker_id);
  const auto it = view->workers.find(uid);
  if (it == view->workers.end() || it->second.instance_id != m.instance_id ||
      it->second.worker_id != m.worker_id)
    return std::nullopt;
  const auto& reason = it->second.full_sync_reason;
  if (reason && home_here_ && !home_here_(uid))
    return std::nullopt; // only the worker's home asks (see the header)
  msg::HeartbeatRetMsg ret;
  if (reason) {
    asks_.asked(uid, m.instance_id, m.worker_id, *reason, view->version, now_ms);
    ret.commands.emplace_back(msg::FullSyncCommand{*reason, std::nullopt});
  }
  return ret;
}

bool heartbeat_reader::note_heard(const msg::HeartbeatMsg& m, double mono_s) {
  const uint64_t uid = worker_uid(m.instance_id, m.worker_id);
  std::lock_guard lock{heard_mutex_};
  const bool first = heard_.empty();
  auto [it, fresh] = heard_.try_emplace(uid);
  if (fresh) {
    it->second.instance_id = m.instance_id;
    it->second.worker_id = m.worker_id;
  }
  it->second.mono_s = mono_s;
  return first;
}

std::vector<heartbeat_reader::heard> heartbeat_reader::take_heard() {
  absl::flat_hash_map<uint64_t, heard> taken;
  {
    std::lock_guard lock{heard_mutex_};
    taken.swap(heard_);
  }
  std::vector<heard> out;
  out.reserve(taken.size());
  for (auto& [uid, h] : taken)
    out.push_back(std::move(h));
  return out;
}

} // namespace lmcc::actors
