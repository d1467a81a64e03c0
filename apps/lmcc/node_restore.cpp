#include "apps/lmcc/node_restore.hpp"

#include "actors/clock.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <set>
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

/// Deletes what the plan drops, in commits of at most `chunk` ops.
void commit_cleanup(persistence::store& store, node_state& state, const actors::restore_plan& plan,
                    uint32_t slot_count) {
  constexpr size_t chunk = 100'000;
  persistence::store::batch b;
  uint64_t entries = 0;
  auto flush = [&](bool force) {
    if (b.empty() || (!force && b.size() < chunk))
      return;
    if (auto r = store.commit(b); !r)
      throw std::runtime_error("cannot clean up the data dir: " + r.error().message);
    b = {};
  };
  std::set<uint32_t> kept;
  for (const auto& w : plan.workers)
    if (!w.reset_finished)
      kept.insert(w.record.worker_num);
  for (auto& shard : state.shards) {
    bool any_dropped = false;
    for (const auto& [holder, count] : shard->index.entries_by_holder())
      any_dropped |= !kept.contains(actors::worker_of(holder));
    if (!any_dropped)
      continue;
    entries += shard->index.erase_holders(
        [&](actors::holder_id h) { return !kept.contains(actors::worker_of(h)); },
        [&](uint64_t key, actors::holder_id h) {
          b.evict(actors::slot_of(key, slot_count), key, h);
          flush(false);
        });
  }
  for (const auto& w : plan.stale_watermarks) {
    b.delete_watermark(w.worker_num, w.location_index, w.shard);
    flush(false);
  }
  flush(true);
  if (entries > 0 || !plan.stale_watermarks.empty())
    spdlog::info("store-cleanup entries_dropped={} watermarks_dropped={} (workers deregistered "
                 "or reset when the node stopped)",
                 entries, plan.stale_watermarks.size());
}

/// Holds the store's automatic compactions off for its lifetime.
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

/// Streams the index into the shards' kv_index objects on several threads:
/// thread t reads the slots of the shards i with i % threads == t, so every
/// index is filled by one thread only. Refuses entries outside their slot
/// (the data was written with another --slots).
void load_index(const persistence::store& store, node_state& state, uint32_t shard_count,
                uint32_t slot_count, const std::string& data_dir) {
  const uint32_t threads =
      std::clamp<uint32_t>(std::thread::hardware_concurrency(), 1, std::min(shard_count, 8U));
  std::vector<std::vector<uint32_t>> slots(threads);
  for (uint32_t slot = 0; slot < slot_count; ++slot)
    slots[(slot % shard_count) % threads].push_back(slot);
  auto start = clock_type::now();
  std::atomic<uint64_t> loaded{0};
  std::atomic<uint64_t> misplaced{0};
  std::vector<std::string> errors(threads);
  std::vector<std::thread> pool;
  constexpr uint64_t progress_every = 1'000'000;
  for (uint32_t t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      auto r = store.load_slots(slots[t], [&](uint32_t slot, uint64_t key, uint32_t holder) {
        if (slot != actors::slot_of(key, slot_count)) {
          misplaced.fetch_add(1, std::memory_order_relaxed);
          return;
        }
        state.shards[slot % shard_count]->index.admit(key, holder);
        auto n = loaded.fetch_add(1, std::memory_order_relaxed) + 1;
        if (n % progress_every == 0)
          spdlog::info("store-load-progress entries={} seconds={:.1f}", n, seconds_since(start));
      });
      if (!r)
        errors[t] = r.error().message;
    });
  for (auto& th : pool)
    th.join();
  for (const auto& e : errors)
    if (!e.empty())
      throw std::runtime_error("cannot load the data dir: " + e);
  auto beyond = store.first_entry_from(slot_count);
  if (!beyond)
    throw std::runtime_error("cannot load the data dir: " + beyond.error().message);
  if (misplaced > 0 || beyond->has_value())
    throw std::runtime_error("the data dir " + data_dir +
                             " was written with a different --slots (entries do not fall in "
                             "their slot for --slots " +
                             std::to_string(slot_count) + "); start with the original --slots");
  spdlog::info("store-index-loaded entries={} threads={} seconds={:.3f}", loaded.load(), threads,
               seconds_since(start));
}

} // namespace

node_state load_node_state(const node_options& options) {
  const auto& c = options.controller;
  node_state state;
  for (uint32_t i = 0; i < c.shard_count; ++i) {
    auto init = std::make_shared<actors::shard_init>();
    init->durability.shard_index = i;
    init->durability.slot_count = c.slot_count;
    state.shards.push_back(std::move(init));
  }
  if (!options.persistence) {
    if (!options.restore_from.empty())
      throw std::runtime_error("--restore-from needs persistence on");
    spdlog::info("store-off index=in-memory (a restart asks every worker for a full sync)");
    return state;
  }
  if (c.slot_count > persistence::max_slot + 1)
    throw std::runtime_error("--slots " + std::to_string(c.slot_count) +
                             " exceeds what the store records (" +
                             std::to_string(persistence::max_slot + 1) + ")");
  auto start = clock_type::now();
  state.store = open_store(options);
  for (auto& shard : state.shards)
    shard->durability.store = state.store;

  auto loaded = state.store->load_directory();
  if (!loaded)
    throw std::runtime_error("cannot load the data dir: " + loaded.error().message);
  {
    // Compactions left over from before the stop wait until the index is in
    // memory: on a small machine they took half the cores from the load
    // (10 M entries: 7 s -> 4 s). Back on along every path, also a failed load.
    compaction_pause pause{*state.store};
    load_index(*state.store, state, c.shard_count, c.slot_count, options.data_dir);
  }

  auto plan =
      actors::plan_restore(loaded->workers, loaded->watermarks, c.shard_count, actors::wall_now());
  commit_cleanup(*state.store, state, plan, c.slot_count);
  for (uint32_t i = 0; i < c.shard_count; ++i)
    state.shards[i]->watermarks = std::move(plan.shard_watermarks[i]);
  size_t resync = 0;
  for (const auto& w : plan.workers)
    resync += w.resync_reason.empty() ? 0 : 1;
  for (const auto& shard : state.shards)
    state.entries += shard->index.entries();
  state.workers = std::move(plan.workers);
  // A node that starts on an empty store knows nothing of the workers, as
  // LMCache after a restart; one that loaded its store asks only those with a gap.
  state.need_full_sync_all = state.store->created();
  state.seconds = seconds_since(start);
  spdlog::info("store-loaded path={} workers={} entries={} watermarks={} workers_to_resync={} "
               "need_full_sync_all={} seconds={:.3f}",
               state.store->path(), state.workers.size(), state.entries, loaded->watermarks.size(),
               resync, state.need_full_sync_all, state.seconds);
  return state;
}

} // namespace lmcc::apps
