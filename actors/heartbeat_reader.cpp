#include "actors/heartbeat_reader.hpp"

#include <spdlog/spdlog.h>

namespace lmcc::actors {

std::optional<msg::HeartbeatRetMsg> heartbeat_reader::answer(const msg::HeartbeatMsg& m) const {
  const auto view = view_.current();
  if (!view->current())
    return std::nullopt;
  const uint64_t uid = worker_uid(m.instance_id, m.worker_id);
  const auto it = view->workers.find(uid);
  if (it == view->workers.end() || it->second.instance_id != m.instance_id ||
      it->second.worker_id != m.worker_id)
    return std::nullopt;
  if (home_here_ && !home_here_(uid))
    return std::nullopt;
  msg::HeartbeatRetMsg ret;
  if (const auto& reason = it->second.full_sync_reason) {
    spdlog::info("full-sync-requested instance={} worker={} reason={}", m.instance_id,
                 m.worker_id.to_string(), *reason);
    ret.commands.emplace_back(msg::FullSyncCommand{*reason, std::nullopt});
  }
  return ret;
}

} // namespace lmcc::actors
