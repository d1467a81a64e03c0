#include "registry/full_sync_ask_log.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>

namespace lmcc::actors {

bool full_sync_ask_log::asked(uint64_t uid, std::string_view instance_id,
                              const msg::wire_int& worker_id, std::string_view reason,
                              uint64_t version, uint64_t now_ms) {
  uint64_t unlogged = 0;
  {
    std::lock_guard lock{mutex_};
    auto [it, fresh] = lines_.try_emplace(uid);
    auto& line = it->second;
    const bool due = fresh || line.version != version || line.reason != reason ||
                     now_ms - line.at_ms >= static_cast<uint64_t>(every_.count());
    if (!due) {
      ++line.unlogged;
      return false;
    }
    unlogged = line.unlogged;
    line = last_line{std::string{reason}, version, now_ms, 0};
    if (fresh && lines_.size() > sweep_at_)
      sweep(now_ms);
  }
  if (unlogged == 0)
    spdlog::info("full-sync-requested instance={} worker={} reason={}", instance_id,
                 worker_id.to_string(), reason);
  else
    spdlog::info("full-sync-requested instance={} worker={} reason={} unlogged_asks={}",
                 instance_id, worker_id.to_string(), reason, unlogged);
  return true;
}

size_t full_sync_ask_log::tracked() const {
  std::lock_guard lock{mutex_};
  return lines_.size();
}

void full_sync_ask_log::sweep(uint64_t now_ms) {
  // Forgetting a worker costs at most one extra line (its next ask is logged).
  absl::erase_if(lines_, [&](const auto& entry) {
    return now_ms - entry.second.at_ms >= static_cast<uint64_t>(every_.count());
  });
  sweep_at_ = std::max(sweep_above, 2 * lines_.size());
}

} // namespace lmcc::actors
