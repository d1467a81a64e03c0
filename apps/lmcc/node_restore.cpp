#include "apps/lmcc/node_restore.hpp"

#include "clock/clock.hpp"
#include "index/shard_restore.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <thread>

namespace lmcc::apps {
namespace {

using clock_type = std::chrono::steady_clock;

double seconds_since(clock_type::time_point start) {
  return std::chrono::duration<double>(clock_type::now() - start).count();
}

std::shared_ptr<persistence::store> open_store(const node_options& options) {
  persistence::store_options so = options.store;
  so.path = options.data_dir;
  const auto& node_id = options.controller.node_id;
  if (!options.restore_from.empty()) {
    spdlog::info("store-restore-start snapshot={} data_dir={} node={}", options.restore_from,
                 options.data_dir, node_id);
    auto restored = persistence::store::restore(options.restore_from, so, node_id);
    if (!restored)
      throw std::runtime_error("cannot restore from snapshot: " + restored.error().message);
    return std::shared_ptr<persistence::store>(std::move(*restored));
  }
  auto opened = persistence::store::open(so, node_id);
  if (!opened)
    throw std::runtime_error("cannot open the data dir: " + opened.error().message);
  return std::shared_ptr<persistence::store>(std::move(*opened));
}

/// Holds the store's automatic compactions off for its lifetime: compactions
/// left from before the stop would take cores from the load.
class compaction_pause {
public:
  explicit compaction_pause(persistence::store& store) : store_(store) {
    if (auto r = store_.set_auto_compactions(false); !r)
      spdlog::warn("store-compactions-off-failed error={}", r.error().message);
  }
  ~compaction_pause() {
    if (auto r = store_.set_auto_compactions(true); !r)
      spdlog::error("store-compactions-on-failed error={}", r.error().message);
  }
  compaction_pause(const compaction_pause&) = delete;
  compaction_pause& operator=(const compaction_pause&) = delete;

private:
  persistence::store& store_;
};

} // namespace

node_state load_node_state(const node_options& options, actors::kv_index& index,
                           std::span<const uint64_t> ownership) {
  const auto& c = options.controller;
  node_state state;
  state.shard.slot_stamps.assign(c.slot_count, 0);
  state.shard.started_ms = monotonic_ms();
  state.shard.covers = std::make_shared<actors::coverage_book>(c.slot_count);
  if (!ownership.empty())
    state.shard.covers->set_ownership(ownership);
  if (!options.persistence) {
    if (!options.restore_from.empty())
      throw std::runtime_error("--restore-from needs persistence on");
    spdlog::info("store-off index=in-memory (a restart asks every worker for a full sync)");
    return state;
  }
  auto start = clock_type::now();
  state.store = open_store(options);
  auto dir = state.store->load_directory();
  if (!dir)
    throw std::runtime_error("cannot load the data dir: " + dir.error().message);
  actors::shard_restore_report report;
  {
    compaction_pause pause{*state.store};
    const uint32_t threads = std::clamp(std::thread::hardware_concurrency(), 1U, 8U);
    auto shard = actors::restore_shard(*state.store, index, *dir, threads, report, ownership);
    if (!shard)
      throw std::runtime_error("cannot load the data dir " + options.data_dir + ": " +
                               shard.error().message);
    state.shard = std::move(*shard);
  }
  state.shard.started_ms = monotonic_ms();
  for (const auto& problem : report.problems)
    spdlog::error("store-damage {} ", problem);
  auto plan = actors::plan_restore(dir->workers, state.shard.holders, report, wall_now());
  // Each location's stream goes on from where this node's copy stands.
  for (auto& w : plan.workers)
    for (const auto& location : w.record.locations)
      if (const auto* c = state.shard.covers->find(
              actors::make_holder_id(w.record.instance_id, w.record.worker_id, location)))
        w.start_pos[location] = c->applied;
  state.drop_holders = std::move(plan.drop_holders);
  size_t resync = 0;
  for (const auto& w : plan.workers)
    resync += w.resync_reason.empty() ? 0 : 1;
  state.workers = std::move(plan.workers);
  state.entries = report.entries;
  // A node that starts on an empty store knows nothing of the workers, as
  // LMCache after a restart; one that loaded its store asks only those with a gap.
  state.need_full_sync_all = state.store->created();
  state.seconds = seconds_since(start);
  spdlog::info("store-loaded path={} workers={} holders={} entries={} slots={} log_records={} "
               "stale_holders={} workers_to_resync={} damaged={} need_full_sync_all={} "
               "seconds={:.3f}",
               state.store->path(), state.workers.size(), state.shard.holders.size(), state.entries,
               report.slots, report.records, state.drop_holders.size(), resync,
               report.problems.size(), state.need_full_sync_all, state.seconds);
  return state;
}

} // namespace lmcc::apps
