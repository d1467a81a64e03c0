#include "registry/restore_plan.hpp"

#include <algorithm>
#include <tuple>

namespace lmcc::actors {

worker_record to_record(const persistence::worker_row& row, double now) {
  worker_record rec;
  rec.uid = row.uid;
  rec.instance_id = row.instance_id;
  rec.worker_id = row.worker_id;
  rec.ip = row.ip;
  rec.port = row.port;
  rec.peer_init_url = row.peer_init_url;
  rec.registration_time = row.registration_time;
  // The node was down, not the worker: the reaper counts silence from now.
  rec.last_heartbeat_time = now;
  rec.has_heartbeated = row.has_heartbeated;
  rec.registration_order = row.registration_order;
  rec.instance_order = row.instance_order;
  rec.incarnation = row.incarnation;
  return rec;
}

namespace {

/// The reason a holder's mark asks for a full sync, if it does.
std::string resync_reason_of(const seq_mark& mark) {
  switch (mark.state) {
  case seq_state::syncing:
    return "restart_during_full_sync";
  case seq_state::gap:
    return "store_commit_failed";
  default:
    return {};
  }
}

} // namespace

restore_plan plan_restore(const std::vector<persistence::worker_row>& rows,
                          const holder_metas& holders, const shard_restore_report& report,
                          double now) {
  restore_plan plan;
  std::map<uint64_t, size_t> by_uid;
  for (const auto& row : rows) {
    by_uid[row.uid] = plan.workers.size();
    plan.workers.push_back(restored_worker{to_record(row, now), {}, {}, {}, {}});
  }
  // Holders sorted by id so that the plan does not depend on hash-map order.
  std::vector<std::pair<holder_id, const holder_meta*>> sorted;
  sorted.reserve(holders.size());
  for (const auto& [h, meta] : holders)
    sorted.emplace_back(h, &meta);
  std::sort(sorted.begin(), sorted.end());
  // A worker's current incarnation is the newest its row or any of its
  // holders knows (a row written before its re-registration's drop reached
  // the log, or the other way round); holders older than it are stale.
  for (const auto& [h, meta] : sorted)
    if (auto it = by_uid.find(meta->worker_uid); it != by_uid.end()) {
      auto& rec = plan.workers[it->second].record;
      rec.incarnation = std::max(rec.incarnation, meta->incarnation);
    }
  for (const auto& [h, meta] : sorted) {
    if (meta->worker_uid == 0) {
      // Never introduced here: its entries came with slot copies, or with
      // sub-batches of an entity that had introduced the holder before this
      // node lost its store (chaos with disk losses). Not an orphan: dropped
      // with a fence, every later sub-batch of its live registration was
      // fenced too. Kept; its worker is unknown until an intro names it.
      continue;
    }
    auto it = by_uid.find(meta->worker_uid);
    if (it == by_uid.end()) {
      // No row: a deregistration cut short (its drop carries registration + 1).
      plan.drop_holders.emplace_back(h, meta->incarnation + 1);
      continue;
    }
    auto& w = plan.workers[it->second];
    if (meta->incarnation < w.record.incarnation) {
      // A re-registration whose drop never reached the log.
      plan.drop_holders.emplace_back(h, w.record.incarnation);
      continue;
    }
    if (make_holder_id(w.record.instance_id, w.record.worker_id, meta->location) != h) {
      plan.drop_holders.emplace_back(h, meta->incarnation); // not this worker's (a damaged intro)
      continue;
    }
    w.record.locations.push_back(meta->location);
    const auto& mark = meta->mark;
    if (mark.state == seq_state::tracking) {
      w.last_seq[meta->location] = mark.seq;
      w.expected_next[meta->location] = mark.seq + 1;
    } else if (mark.state == seq_state::resynced) {
      w.expected_next[meta->location] = std::nullopt;
    } else if (mark.state == seq_state::none) {
      w.expected_next[meta->location] = uint64_t{0};
    }
    if (auto reason = resync_reason_of(mark); !reason.empty() && w.resync_reason.empty())
      w.resync_reason = reason;
    if (report.damaged_holders.contains(h) && w.resync_reason.empty())
      w.resync_reason = "snapshot_damaged";
  }
  for (auto& w : plan.workers) {
    // The index keeps no order of a worker's locations; by name is stable.
    std::sort(w.record.locations.begin(), w.record.locations.end());
    if (report.damaged_unknown && w.resync_reason.empty())
      w.resync_reason = "snapshot_damaged";
  }
  std::sort(plan.workers.begin(), plan.workers.end(),
            [](const restored_worker& a, const restored_worker& b) {
              return std::tie(a.record.instance_order, a.record.registration_order, a.record.uid) <
                     std::tie(b.record.instance_order, b.record.registration_order, b.record.uid);
            });
  return plan;
}

persistence::worker_row to_row(const worker_record& rec) {
  persistence::worker_row row;
  row.uid = rec.uid;
  row.instance_id = rec.instance_id;
  row.worker_id = rec.worker_id;
  row.ip = rec.ip;
  row.port = rec.port;
  row.peer_init_url = rec.peer_init_url;
  row.registration_time = rec.registration_time;
  row.last_heartbeat_time = rec.last_heartbeat_time;
  row.has_heartbeated = rec.has_heartbeated;
  row.registration_order = rec.registration_order;
  row.instance_order = rec.instance_order;
  row.incarnation = rec.incarnation;
  return row;
}

} // namespace lmcc::actors
