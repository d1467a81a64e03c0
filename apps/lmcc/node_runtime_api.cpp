// node_runtime's controller_api: what the HTTP API asks of the node
// (orchestration, workers, stats, gauges, readiness, cluster status and
// members, fault injection, snapshots), answered through its actors and store.
#include "apps/lmcc/internal/node_runtime_impl.hpp"
#include "clock/clock.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <future>
#include <map>

namespace lmcc::apps {
namespace {

template <class T>
std::future<T> ready_future(T value) {
  std::promise<T> p;
  p.set_value(std::move(value));
  return p.get_future();
}

} // namespace

std::future<msg::Msg> node_runtime::orchestrate(msg::Msg request) {
  auto& d = *impl_;
  if (!d.serving_)
    return ready_future(msg::Msg{msg::ErrorMsg{"the node is loading its index; see /readyz"}});
  auto promise = std::make_shared<std::promise<msg::Msg>>();
  auto future = promise->get_future();
  actors::reply_callback done = [promise](msg::Msg r) { promise->set_value(std::move(r)); };
  if (std::holds_alternative<msg::LookupMsg>(request) && d.reader_) {
    done(d.reader_->answer(request)); // on this HTTP thread, as P2P lookups
    return future;
  }
  d.request(std::move(request), d.orchestration_timeout(), std::move(done));
  return future;
}

std::future<std::vector<gateway::worker_view>> node_runtime::workers() {
  if (!impl_->serving_)
    return ready_future(std::vector<gateway::worker_view>{});
  auto s = impl_->node_stats().get();
  if (s && impl_->cluster_)
    s = impl_->cluster_->cluster_wide(std::move(*s));
  std::vector<gateway::worker_view> out;
  if (s)
    for (auto& w : s->workers)
      out.push_back(gateway::worker_view{std::move(w.info), w.key_count});
  return ready_future(std::move(out));
}

std::future<gateway::workers_detail> node_runtime::worker_details() {
  auto& d = *impl_;
  gateway::workers_detail out;
  out.node = d.options_.controller.node_id;
  if (!d.serving_) {
    out.status = 503;
    out.error = "the node is loading its index; see /readyz";
    return ready_future(std::move(out));
  }
  auto s = d.node_stats().get();
  if (!s) {
    out.status = 503;
    out.error = "the directory did not answer in time";
    return ready_future(std::move(out));
  }
  if (d.cluster_)
    s = d.cluster_->cluster_wide(std::move(*s));
  out.syncing = s->workers_syncing;
  out.completed = s->workers_completed;
  out.missing_batches = s->missing_batches_total;
  // What a worker's next heartbeat is answered (registry/heartbeat_reader.hpp):
  // the registry's view of the full syncs owed, replicated to every node.
  const auto view = d.heartbeats_ ? d.heartbeats_->current() : nullptr;
  for (auto& w : s->workers) {
    const auto uid = actors::worker_uid(w.info.instance_id, w.info.worker_id);
    gateway::worker_detail detail;
    detail.locations = w.holders.size();
    detail.home = d.cluster_ ? d.cluster_->home_of(uid) : out.node;
    detail.full_sync = "unknown";
    if (view)
      if (auto it = view->workers.find(uid); it != view->workers.end()) {
        detail.full_sync = it->second.full_sync_reason ? "owed" : "none";
        detail.full_sync_reason = it->second.full_sync_reason.value_or("");
      }
    detail.view = gateway::worker_view{std::move(w.info), w.key_count};
    out.workers.push_back(std::move(detail));
  }
  return ready_future(std::move(out));
}

std::future<gateway::key_stats> node_runtime::stats() {
  if (!impl_->serving_)
    return ready_future(gateway::key_stats{});
  auto s = impl_->node_stats().get();
  if (s && impl_->cluster_)
    s = impl_->cluster_->cluster_wide(std::move(*s));
  gateway::key_stats out;
  if (!s)
    return ready_future(std::move(out));
  out.total_key_count = s->total_entries;
  out.total_worker_count = s->workers.size();
  for (const auto& w : s->workers) {
    auto it = std::find_if(out.instances.begin(), out.instances.end(),
                           [&](const auto& i) { return i.instance_id == w.info.instance_id; });
    if (it == out.instances.end())
      it = out.instances.insert(out.instances.end(), gateway::instance_stats{w.info.instance_id});
    it->key_count += w.key_count;
    it->worker_count += 1;
  }
  out.total_instance_count = out.instances.size();
  return ready_future(std::move(out));
}

std::future<gateway::controller_gauges> node_runtime::gauges() {
  auto& d = *impl_;
  gateway::controller_gauges g;
  if (!d.serving_)
    return ready_future(g);
  auto s = d.node_stats().get();
  if (!s)
    return ready_future(g);
  g.kv_pool_keys_count = s->total_entries;
  if (d.cluster_)
    g.kv_pool_keys_count =
        d.cluster_->update_gauges(); // this node's share (docs/cluster.md#metrics)
  g.registered_workers_count = s->workers.size();
  g.kv_op_seq_discontinuity_count = s->seq_discontinuities;
  g.full_sync_workers_syncing = s->workers_syncing;
  g.full_sync_workers_completed = s->workers_completed;
  g.full_sync_global_progress = s->global_progress;
  g.full_sync_missing_batches_total = s->missing_batches_total;
  auto gauge = [&](std::string_view name, double v) { d.metrics_.set_gauge(name, v); };
  gauge("index_keys", static_cast<double>(s->total_keys));
  gauge("index_memory_bytes", static_cast<double>(s->index_memory_bytes));
  gauge("ingest_inflight_ops", static_cast<double>(d.gate_->in_flight()));
  gauge("ingest_inflight_limit", static_cast<double>(d.gate_->limit()));
  gauge("ingest_inflight_peak", static_cast<double>(d.gate_->peak()));
  gauge("ingest_pull_stalls", static_cast<double>(d.gate_->stalls()));
  const auto& c = s->shard.counters;
  gauge("shard_sub_batches", static_cast<double>(c.sub_batches));
  gauge("shard_ops", static_cast<double>(c.ops));
  gauge("shard_fenced_sub_batches", static_cast<double>(c.fenced));
  gauge("shard_era_behind_sub_batches", static_cast<double>(c.era_behind));
  gauge("shard_implied_drops", static_cast<double>(c.implied_drops));
  if (d.store_) {
    gauge("store_commits", static_cast<double>(c.commits));
    gauge("store_commit_failures", static_cast<double>(c.commit_failures));
    gauge("store_records_given_up", static_cast<double>(c.records_given_up));
    gauge("store_commit_max_seconds", c.max_commit_ms / 1000.0);
    gauge("store_log_records", static_cast<double>(c.log_records));
    gauge("store_log_bytes", static_cast<double>(c.log_bytes));
    gauge("store_log_bytes_since_snapshot", static_cast<double>(s->shard.log_bytes_since_round));
    gauge("store_log_position", static_cast<double>(s->shard.next_position));
    gauge("store_snapshot_rounds", static_cast<double>(c.snapshot_rounds));
    gauge("store_snapshot_slots", static_cast<double>(c.snapshot_slots));
    gauge("store_snapshot_bytes", static_cast<double>(c.snapshot_bytes));
    gauge("store_snapshot_last_round_seconds", c.last_round_ms / 1000.0);
    if (auto bytes = d.store_->disk_bytes())
      gauge("store_disk_bytes", static_cast<double>(*bytes));
    const auto memory = d.store_->memory_usage();
    gauge("store_memtable_bytes", static_cast<double>(memory.memtable_bytes));
    gauge("store_block_cache_bytes", static_cast<double>(memory.block_cache_bytes));
  }
  return ready_future(g);
}

bool node_runtime::ready() const {
  return impl_->ready_;
}

std::optional<std::string> node_runtime::cluster_status_json() const {
  if (!impl_->cluster_ || !impl_->serving_)
    return std::nullopt;
  return impl_->cluster_->status_json();
}

gateway::members_outcome node_runtime::change_members(const std::vector<std::string>& ids) {
  if (!impl_->cluster_ || !impl_->serving_)
    return controller_api::change_members(ids);
  return impl_->cluster_->change_members(ids);
}

#if LMCC_FAULT_INJECTION
gateway::fault_outcome node_runtime::set_store_faults(const gateway::store_fault_settings& s) {
  if (!impl_->options_.fault_injection)
    return controller_api::set_store_faults(s); // refused
  auto& clock = *impl_->clock_;
  if (s.clock_jump_ms) {
    clock.injected().jump(std::chrono::milliseconds{*s.clock_jump_ms});
    spdlog::warn("clock-jumped by_ms={} offset_ms={}", *s.clock_jump_ms, clock.offset_ms());
  }
  auto store = impl_->store_;
  if (!store) {
    if (s.fail_commits || s.fail_all_commits || s.commit_delay_us)
      return gateway::fault_outcome{.status = 409, .error = "persistence is off on this node"};
    return gateway::fault_outcome{.clock_offset_ms = clock.offset_ms()};
  }
  auto& f = store->faults();
  if (s.fail_commits)
    f.fail_commits = *s.fail_commits;
  if (s.fail_all_commits)
    f.fail_all_commits = *s.fail_all_commits;
  if (s.commit_delay_us)
    f.commit_delay_us = *s.commit_delay_us;
  gateway::fault_outcome out;
  out.fail_commits = f.fail_commits.load();
  out.fail_all_commits = f.fail_all_commits.load();
  out.commit_delay_us = f.commit_delay_us.load();
  out.clock_offset_ms = clock.offset_ms();
  if (!s.fail_commits && !s.fail_all_commits && !s.commit_delay_us)
    return out;
  spdlog::warn("store-faults-set fail_commits={} fail_all_commits={} commit_delay_us={}",
               out.fail_commits, out.fail_all_commits, out.commit_delay_us);
  return out;
}
#endif

std::future<gateway::snapshot_outcome> node_runtime::snapshot(const std::string& dir) {
  gateway::snapshot_outcome out;
  auto store = impl_->store_;
  if (!impl_->serving_ || !store) {
    out.status = 409;
    out.error = store ? "the node is loading its index" : "persistence is off on this node";
    return ready_future(std::move(out));
  }
  auto start = steady_now();
  // A cluster node's member set lives beside the store: it goes with it.
  auto info = store->checkpoint(dir, impl_->cluster_ ? impl_->cluster_->snapshot_files()
                                                     : std::map<std::string, std::string>{});
  if (!info) {
    out.status = 500;
    out.error = info.error().message;
    spdlog::error("snapshot-failed dir={} error={}", dir, out.error);
    return ready_future(std::move(out));
  }
  out.dir = dir;
  out.sequence = info->sequence;
  out.workers = info->workers;
  out.holders = info->holders;
  out.slots = info->slots;
  out.log_records = info->log_records;
  out.files = info->files.size();
  for (const auto& f : info->files)
    out.bytes += f.size;
  out.seconds = std::chrono::duration<double>(steady_now() - start).count();
  spdlog::info("snapshot-written dir={} node={} workers={} holders={} slots={} log_records={} "
               "files={} bytes={} seconds={:.3f}",
               dir, info->node_id, out.workers, out.holders, out.slots, out.log_records, out.files,
               out.bytes, out.seconds);
  return ready_future(std::move(out));
}

} // namespace lmcc::apps
