#include "registry/handoff.hpp"

#include <algorithm>
#include <map>

namespace lmcc::actors {
namespace {

using persistence::seq_state;

int rank(const persistence::seq_mark& m) {
  switch (m.state) {
  case seq_state::syncing:
  case seq_state::gap:
    return 3;
  case seq_state::tracking:
    return 2;
  case seq_state::resynced:
    return 1;
  case seq_state::none:
    return 0;
  }
  return 0;
}

bool fresher(const location_mark& a, const location_mark& b) {
  if (a.incarnation != b.incarnation)
    return a.incarnation > b.incarnation;
  if (rank(a.mark) != rank(b.mark))
    return rank(a.mark) > rank(b.mark);
  return a.mark.state == seq_state::tracking && a.mark.seq > b.mark.seq;
}

} // namespace

std::vector<location_mark> merge_marks(const std::vector<std::vector<location_mark>>& sources) {
  std::map<std::string, location_mark> best;
  std::map<std::string, persistence::stream_pos> newest;
  for (const auto& source : sources)
    for (const auto& m : source) {
      auto [it, inserted] = best.try_emplace(m.location, m);
      if (!inserted && fresher(m, it->second))
        it->second = m;
      auto& pos = newest[m.location];
      pos = std::max(pos, m.pos);
    }
  // The stream's position is the newest any source had, whichever mark wins:
  // an owner that applied more tells the new entity where the stream is.
  for (auto& [name, m] : best)
    m.pos = newest[name];
  std::vector<location_mark> out;
  out.reserve(best.size());
  for (auto& [name, m] : best)
    out.push_back(std::move(m));
  return out;
}

std::vector<location_mark> takeover_marks(const std::vector<std::vector<location_mark>>& found,
                                          const std::vector<location_mark>& own) {
  if (found.empty())
    return own;
  auto marks = merge_marks(found);
  for (auto& m : marks)
    for (const auto& o : own)
      if (o.location == m.location && o.incarnation == m.incarnation && m.pos < o.pos)
        m.pos = o.pos;
  return marks;
}

restored_worker takeover_plan(const persistence::worker_row& row,
                              const std::vector<location_mark>& marks, double now) {
  holder_metas metas;
  for (const auto& m : marks) {
    holder_meta meta;
    meta.worker_uid = row.uid;
    meta.location = m.location;
    meta.incarnation = m.incarnation;
    meta.mark = m.mark;
    metas[make_holder_id(row.instance_id, row.worker_id, m.location)] = std::move(meta);
  }
  auto plan = plan_restore({row}, metas, shard_restore_report{}, now);
  return std::move(plan.workers.front());
}

} // namespace lmcc::actors
