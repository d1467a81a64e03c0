#include "index/shard_restore.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

namespace lmcc::actors {
namespace {

using clock_type = std::chrono::steady_clock;

double seconds_since(clock_type::time_point t) {
  return std::chrono::duration<double>(clock_type::now() - t).count();
}

/// What one loader thread found.
struct loader_outcome {
  std::string error; ///< fatal
  /// The covers the slot snapshots stored (coverage_book is one thread's).
  std::vector<std::pair<uint32_t, persistence::slot_cover_record>> covers;
  std::vector<std::string> problems;
  holder_set damaged;
  std::vector<uint32_t> damaged_slots;
  bool damaged_unknown = false;
  uint64_t slots = 0;
};

void load_range(const persistence::store& store, kv_index& index, uint32_t lo, uint32_t hi,
                std::vector<uint64_t>& stamps, kv_index::bulk_loader& loader, loader_outcome& out) {
  const uint32_t slot_count = index.slot_count();
  auto r = store.for_each_slot(lo, hi, [&](uint32_t slot, std::string_view value) {
    if (!out.error.empty())
      return;
    if (slot >= slot_count) {
      out.error = "slot " + std::to_string(slot) + " exists on disk but --slots is " +
                  std::to_string(slot_count);
      return;
    }
    bool misplaced = false;
    auto read = persistence::read_slot_snapshot(
        value,
        [&](uint64_t key, std::span<const uint64_t> holders) {
          if (slot_of(key, slot_count) != slot) {
            misplaced = true;
            return;
          }
          loader.add(slot, key, holders);
        },
        [&](uint64_t keys) { loader.reserve(slot, keys); });
    if (misplaced) {
      out.error = "entries of slot " + std::to_string(slot) + " do not fall in it";
      return;
    }
    if (read.damage != persistence::slot_damage::none)
      out.damaged_slots.push_back(slot);
    if (read.damage == persistence::slot_damage::header) {
      out.damaged_unknown = true;
      out.problems.push_back("slot " + std::to_string(slot) + ": " + read.what +
                             " (its holders are unknown: every worker resyncs)");
      return;
    }
    if (read.damage == persistence::slot_damage::body) {
      out.damaged.insert(read.header.holders.begin(), read.header.holders.end());
      out.problems.push_back("slot " + std::to_string(slot) + ": " + read.what + " (" +
                             std::to_string(read.header.holders.size()) +
                             " holders lose their entries here and resync)");
      return;
    }
    if (read.header.slot != slot) {
      out.error = "the snapshot stored under slot " + std::to_string(slot) + " is of slot " +
                  std::to_string(read.header.slot);
      return;
    }
    stamps[slot] = read.header.position;
    for (const auto& c : read.header.covers)
      out.covers.emplace_back(slot, c);
    ++out.slots;
  });
  if (!r)
    out.error = r.error().message;
}

/// Replays one decoded record onto the slots its position is newer than.
///
/// No incarnation fencing here: the live shard logs only what it applied (a
/// fenced sub-batch is never logged), and the holder states replay starts from
/// may already carry a newer incarnation than the records after the floor.
/// A drop is applied at once, counted, to the slots older than it: a lazy drop
/// job would take the holder's whole count out, including entries admitted
/// after the drop that newer slot snapshots hold.
void replay(kv_index& index, holder_metas& holders, coverage_book& covers,
            const std::vector<uint64_t>& stamps, uint64_t position, persistence::log_record& rec,
            uint64_t& ops) {
  auto& meta = holders[rec.holder];
  if (rec.intro) {
    meta.worker_uid = rec.intro->worker_uid;
    meta.location = rec.intro->location;
    meta.intro_durable = true;
  }
  meta.changed = true; // the log it came from will be truncated: the next round writes it
  meta.incarnation = std::max(meta.incarnation, rec.incarnation);
  // The record through the live path's coverage rules, restricted to the
  // slots whose snapshot is older than it.
  kv_sub_batch sb;
  sb.holder = rec.holder;
  sb.drop = rec.drop;
  sb.prev = rec.prev;
  sb.end = rec.end;
  sb.placement_epoch = rec.placement_epoch;
  sb.placement_since = rec.placement_since;
  sb.ops = std::move(rec.ops);
  covers.set_replay(&stamps, position);
  const auto step = covers.begin(sb);
  auto newer = [&](uint32_t slot) { return stamps[slot] < position; };
  if (!step.stale) {
    auto w = index.write();
    if (step.reset) {
      const holder_set dropped{rec.holder};
      std::vector<bool> keep(stamps.size(), false);
      for (uint32_t slot : step.keep)
        keep[slot] = true;
      for (uint32_t slot = 0; slot < stamps.size(); ++slot)
        if (newer(slot) && !keep[slot])
          w.drop_now(slot, dropped);
    }
    if (step.ops == cover_step::ops_mode::all)
      w.apply_where(rec.holder, sb.ops, newer);
    else if (step.ops == cover_step::ops_mode::some)
      w.apply_where(rec.holder, sb.ops,
                    [&](uint32_t slot) { return newer(slot) && covers.wants(slot); });
    ops += sb.ops.size();
  }
  covers.finish(sb);
  covers.set_replay(nullptr, 0);
  rec.ops = std::move(sb.ops); // its capacity serves the next record
  if (rec.mark)
    meta.mark = *rec.mark;
  else if (rec.drop)
    meta.mark = seq_mark{};
}

} // namespace

persistence::expected<shard_start_state>
restore_shard(const persistence::store& store, kv_index& index,
              const persistence::directory_data& dir, uint32_t threads,
              shard_restore_report& report, std::span<const uint64_t> ownership) {
  const uint32_t slot_count = index.slot_count();
  shard_start_state start;
  start.slot_stamps.assign(slot_count, 0);
  start.covers = std::make_shared<coverage_book>(slot_count);
  auto& covers = *start.covers;
  for (const auto& h : dir.holders) {
    start.holders[h.holder] = holder_meta{.worker_uid = h.worker_uid,
                                          .location = h.location,
                                          .incarnation = h.incarnation,
                                          .mark = h.mark,
                                          .intro_durable = true,
                                          .changed = false};
    covers.restore_holder(h.holder, h.applied, h.hole, h.placement_epoch);
  }
  for (const auto& [h, why] : dir.damaged_holders) {
    report.damaged_holders.insert(h);
    report.problems.push_back("holder state " + std::to_string(h) + ": " + why);
  }

  // -- slot snapshots, one contiguous run of arena groups per thread ----------------
  auto t0 = clock_type::now();
  const uint32_t groups = std::min(kv_index::arena_groups, slot_count);
  threads = std::clamp<uint32_t>(threads, 1, groups);
  std::vector<loader_outcome> outcomes(threads);
  std::vector<kv_index::bulk_loader> loaders(threads, kv_index::bulk_loader{index});
  std::vector<std::thread> pool;
  for (uint32_t t = 0; t < threads; ++t) {
    // Groups [g0, g1) -> slots [g0 * span, g1 * span).
    const uint32_t g0 = groups * t / threads;
    const uint32_t g1 = groups * (t + 1) / threads;
    const uint32_t span = slot_count / groups;
    const uint32_t lo = g0 * span;
    const uint32_t hi = t + 1 == threads ? 0xffffffffU : g1 * span;
    pool.emplace_back([&, t, lo, hi] {
      load_range(store, index, lo, hi, start.slot_stamps, loaders[t], outcomes[t]);
    });
  }
  for (auto& th : pool)
    th.join();
  for (uint32_t t = 0; t < threads; ++t) {
    auto& o = outcomes[t];
    if (!o.error.empty())
      return persistence::error{"cannot load the slot snapshots: " + o.error +
                                " (was the data dir written with another --slots?)"};
    loaders[t].merge();
    for (const auto& [slot, c] : o.covers)
      if (c.state == coverage_book::blank_record_state)
        covers.restore_blank(slot);
      else if (c.state <= static_cast<uint8_t>(cover_state::pending))
        covers.restore_cover(c.holder, slot,
                             slot_cover{static_cast<cover_state>(c.state), c.uncovered, c.pos},
                             c.hole);
    report.slots += o.slots;
    report.damaged_holders.insert(o.damaged.begin(), o.damaged.end());
    report.damaged_unknown |= o.damaged_unknown;
    report.problems.insert(report.problems.end(), o.problems.begin(), o.problems.end());
  }
  {
    auto r = index.read();
    report.entries = r.entries();
    start.clean_versions.resize(slot_count);
    for (uint32_t s = 0; s < slot_count; ++s)
      start.clean_versions[s] = r.slot(s).version;
  }
  // A damaged slot is rewritten by the next snapshot round (its value on disk
  // would otherwise keep reporting the damage at every restart).
  for (const auto& o : outcomes)
    for (uint32_t slot : o.damaged_slots)
      start.clean_versions[slot] = UINT64_MAX;
  report.slot_seconds = seconds_since(t0);
  spdlog::info("store-slots-loaded slots={} entries={} threads={} seconds={:.3f}", report.slots,
               report.entries, threads, report.slot_seconds);

  if (!ownership.empty())
    covers.set_ownership(ownership);

  // -- the log suffix ------------------------------------------------------------------
  auto t1 = clock_type::now();
  uint64_t last_position = 0;
  bool stopped = false;
  persistence::log_record rec;
  auto r = store.for_each_log_record(dir.log_floor, [&](uint64_t position, std::string_view value) {
    if (stopped)
      return;
    if (auto d = persistence::decode_log_record(value, rec); !d) {
      stopped = true;
      report.damaged_unknown = true;
      report.problems.push_back("op-log record " + std::to_string(position) + ": " +
                                d.error().message + " (replay stops here: every worker resyncs)");
      return;
    }
    replay(index, start.holders, covers, start.slot_stamps, position, rec, report.replayed_ops);
    last_position = position;
    if (++report.records % 1'000'000 == 0)
      spdlog::info("store-log-replay-progress records={} seconds={:.1f}", report.records,
                   seconds_since(t1));
  });
  if (!r)
    return r.error();
  auto last = store.last_log_position();
  if (!last)
    return last.error();
  const uint64_t max_stamp = *std::max_element(start.slot_stamps.begin(), start.slot_stamps.end());
  start.next_position =
      std::max({last_position, *last, max_stamp, dir.log_floor > 0 ? dir.log_floor - 1 : 0}) + 1;
  // Slots whose coverage the replay changed are written by the next round.
  if (auto changed = covers.take_changed(); !changed.empty()) {
    auto w = index.write();
    for (uint32_t slot : changed)
      w.touch(slot);
  }
  report.log_seconds = seconds_since(t1);
  report.entries = index.read().entries();
  spdlog::info("store-log-replayed floor={} records={} ops={} next_position={} seconds={:.3f}",
               dir.log_floor, report.records, report.replayed_ops, start.next_position,
               report.log_seconds);
  return start;
}

} // namespace lmcc::actors
