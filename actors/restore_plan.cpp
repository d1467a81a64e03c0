#include "actors/restore_plan.hpp"

#include <algorithm>
#include <utility>

namespace lmcc::actors {
namespace {

worker_record to_record(const persistence::worker_row& row, double now) {
  worker_record rec;
  rec.worker_num = row.worker_num;
  rec.instance_id = row.instance_id;
  rec.worker_id = row.worker_id;
  rec.ip = row.ip;
  rec.port = row.port;
  rec.peer_init_url = row.peer_init_url;
  rec.registration_time = row.registration_time;
  // The node was down, not the worker: the reaper counts silence from now.
  rec.last_heartbeat_time = now;
  rec.has_heartbeated = row.has_heartbeated;
  rec.locations = row.locations;
  return rec;
}

/// What the shards' values for one (worker, location) say.
struct location_verdict {
  std::optional<uint64_t> watermark; ///< agreed last durable seq, if any
  bool check = true;                 ///< false: resynced, no check
  std::string resync_reason;         ///< non-empty: full sync needed
};

location_verdict judge(const std::vector<std::optional<uint64_t>>& per_shard) {
  location_verdict v;
  bool any_syncing = false;
  size_t resynced = 0;
  for (const auto& value : per_shard) {
    any_syncing |= value == persistence::watermark_syncing;
    resynced += value == persistence::watermark_resynced ? 1 : 0;
  }
  if (any_syncing) {
    v.resync_reason = "restart_during_full_sync";
    return v;
  }
  if (resynced == per_shard.size()) {
    v.check = false;
    return v;
  }
  if (resynced > 0) {
    v.resync_reason = "watermarks_diverged";
    return v;
  }
  // The minimum over shards; one shard with nothing means nothing is agreed.
  for (const auto& value : per_shard) {
    if (!value) {
      v.watermark.reset();
      return v;
    }
    v.watermark = v.watermark ? std::min(*v.watermark, *value) : *value;
  }
  return v;
}

} // namespace

restore_plan plan_restore(const std::vector<persistence::worker_row>& rows,
                          const std::vector<persistence::watermark>& watermarks,
                          uint32_t shard_count, double now) {
  restore_plan plan;
  plan.shard_watermarks.resize(shard_count);
  std::map<uint32_t, const persistence::worker_row*> by_num;
  for (const auto& row : rows)
    by_num.emplace(row.worker_num, &row);

  // (worker, location) -> value per shard; stale ones are set aside.
  std::map<std::pair<uint32_t, uint32_t>, std::vector<std::optional<uint64_t>>> marks;
  for (const auto& w : watermarks) {
    auto row = by_num.find(w.worker_num);
    bool stale = row == by_num.end() || row->second->reset_pending || w.shard >= shard_count ||
                 w.location_index >= row->second->locations.size();
    if (stale) {
      plan.stale_watermarks.push_back(w);
      if (row == by_num.end())
        plan.dropped_workers.insert(w.worker_num);
      continue;
    }
    auto& per_shard = marks[{w.worker_num, w.location_index}];
    per_shard.resize(shard_count);
    per_shard[w.shard] = w.seq;
    plan.shard_watermarks[w.shard][make_holder(w.worker_num, w.location_index)] = w.seq;
  }

  for (const auto& row : rows) {
    restored_worker rw;
    rw.record = to_record(row, now);
    if (row.reset_pending) {
      rw.reset_finished = true;
      plan.dropped_workers.insert(row.worker_num);
      for (uint32_t loc = 0; loc < row.locations.size(); ++loc)
        rw.expected_next[loc] = 0;
      plan.workers.push_back(std::move(rw));
      continue;
    }
    for (uint32_t loc = 0; loc < row.locations.size(); ++loc) {
      auto it = marks.find({row.worker_num, loc});
      std::vector<std::optional<uint64_t>> per_shard(shard_count);
      if (it != marks.end())
        per_shard = it->second;
      auto verdict = judge(per_shard);
      if (!verdict.resync_reason.empty()) {
        if (rw.resync_reason.empty())
          rw.resync_reason = verdict.resync_reason;
        rw.expected_next[loc] = std::nullopt; // the sync rebuilds it
        continue;
      }
      if (!verdict.check) {
        rw.expected_next[loc] = std::nullopt;
        continue;
      }
      if (verdict.watermark) {
        rw.last_seq[loc] = *verdict.watermark;
        rw.expected_next[loc] = *verdict.watermark + 1;
      } else {
        rw.expected_next[loc] = 0;
      }
    }
    plan.workers.push_back(std::move(rw));
  }
  return plan;
}

persistence::worker_row to_row(const worker_record& rec, bool reset_pending) {
  persistence::worker_row row;
  row.worker_num = rec.worker_num;
  row.instance_id = rec.instance_id;
  row.worker_id = rec.worker_id;
  row.ip = rec.ip;
  row.port = rec.port;
  row.peer_init_url = rec.peer_init_url;
  row.registration_time = rec.registration_time;
  row.last_heartbeat_time = rec.last_heartbeat_time;
  row.has_heartbeated = rec.has_heartbeated;
  row.locations = rec.locations;
  row.reset_pending = reset_pending;
  return row;
}

} // namespace lmcc::actors
