#include "apps/lmcc/node_runtime.hpp"

#include "actors/control_fanout.hpp"
#include "actors/credit_gate.hpp"
#include "actors/directory.hpp"
#include "actors/ingest_router.hpp"
#include "actors/ingest_routes.hpp"
#include "actors/kv_shard.hpp"
#include "actors/lookup_actor.hpp"
#include "actors/lookup_reader.hpp"
#include "actors/request_bridge.hpp"
#include "actors/row_writer.hpp"
#include "apps/lmcc/memory_releaser.hpp"
#include "apps/lmcc/node_cluster.hpp"
#include "apps/lmcc/node_restore.hpp"
#include "gateway/control_channel.hpp"
#include "gateway/http_api.hpp"
#include "gateway/metrics.hpp"
#include "gateway/zmq_frontend.hpp"

#include <absl/container/flat_hash_map.h>
#include <caf/all.hpp>
#include <caf/io/middleman.hpp>
#include <spdlog/spdlog.h>
#include <zmq.hpp>

#include <atomic>
#include <chrono>
#include <random>
#include <thread>
#include <unistd.h>

namespace lmcc::apps {
namespace {

caf::actor_system_config& configure(caf::actor_system_config& cfg, const node_options& o) {
  size_t threads = o.scheduler_threads != 0 ? o.scheduler_threads
                                            : std::max(2U, std::thread::hardware_concurrency());
  // CAF's default of max(cores, 4) oversubscribes small machines; its
  // moderate polling phase adds ~50 us to every hop (shared/notes/caf-0.17.md).
  cfg.set("scheduler.max-threads", threads);
  cfg.set("work-stealing.moderate-poll-attempts", 0);
  // CAF's default lets an actor keep its thread until its mailbox is empty; a
  // busy shard or worker actor would then hold a thread for a whole credit's
  // worth of ingest while a heartbeat waits. Yielding every 64 messages keeps
  // requests within milliseconds of arriving.
  cfg.set("scheduler.max-throughput", 64);
  if (o.cluster.enabled()) {
    // CAF's heartbeats and connection timeouts on every node (a timeout on one
    // side only drops healthy idle peers: shared/notes/caf-0.17.md).
    cfg.load<caf::io::middleman>();
    cfg.set("middleman.heartbeat-interval", caf::timespan{o.cluster.heartbeat_interval});
    cfg.set("middleman.connection-timeout", caf::timespan{o.cluster.failure_timeout * 2});
    cfg.set("middleman.workers", size_t{o.cluster.middleman_workers});
  }
  actors::register_message_types(cfg);
  return cfg;
}

template <class T>
std::future<T> ready_future(T value) {
  std::promise<T> p;
  p.set_value(std::move(value));
  return p.get_future();
}

/// The front end's view of the credit gate.
class gate_adapter final : public gateway::ingest_gate {
public:
  explicit gate_adapter(actors::credit_gate& gate) : gate_(gate) {}
  bool exhausted() const override { return gate_.exhausted(); }
  uint64_t room() const override {
    const uint64_t in_flight = gate_.in_flight();
    return in_flight >= gate_.limit() ? 0 : gate_.limit() - in_flight;
  }
  bool arm() override { return gate_.arm(); }
  void disarm() override { gate_.disarm(); }
  int wake_fd() const override { return gate_.wake_fd(); }

private:
  actors::credit_gate& gate_;
};

} // namespace

class node_runtime::impl {
public:
  // -- construction ----------------------------------------------------------

  explicit impl(node_options opts)
    : options_(std::move(opts)), system_(configure(config_, options_)),
      index_(std::make_shared<actors::kv_index>(options_.controller.slot_count)),
      gate_(std::make_shared<actors::credit_gate>(
          options_.controller.max_inflight_ops,
          std::max<uint64_t>(
              1, static_cast<uint64_t>(static_cast<double>(options_.controller.max_inflight_ops) *
                                       options_.controller.inflight_resume_ratio)))),
      gate_adapter_(*gate_) {}

  // -- member variables (construction order = the order things start) --------

  node_options options_;
  zmq::context_t context_{1};
  caf::actor_system_config config_;
  caf::actor_system system_;
  gateway::node_metrics metrics_;
  std::shared_ptr<actors::kv_index> index_;
  std::shared_ptr<actors::credit_gate> gate_;
  gate_adapter gate_adapter_;
  std::shared_ptr<actors::route_board> routes_ = std::make_shared<actors::route_board>();
  /// The node's wall clock (POST /admin/faults can jump it).
  std::shared_ptr<actors::node_clock> clock_ = std::make_shared<actors::node_clock>();
  std::shared_ptr<actors::shard_monitor> shard_monitor_ = std::make_shared<actors::shard_monitor>();
  /// Shared so that actors reach it through weak pointers: a directory still
  /// working through its mailbox while the node stops (a deregistration, the
  /// reaper) must find it gone, not freed.
  std::shared_ptr<gateway::control_channel> control_;
  std::unique_ptr<gateway::zmq_frontend> frontend_;
  std::unique_ptr<gateway::http_api> http_;
  actors::kv_shard_actor shard_;
  std::vector<actors::lookup_actor> lookups_;
  /// Answers /lookup and BatchedP2PLookupMsg on the thread they arrive on.
  std::shared_ptr<actors::lookup_reader> reader_;
  std::atomic<size_t> next_lookup_{0};
  actors::control_fanout_actor fanout_;
  actors::directory_actor directory_;
  actors::request_bridge_actor bridge_;
  actors::row_writer_actor rows_;
  actors::ingest_router_actor router_;
  std::shared_ptr<persistence::store> store_;

  /// This node's part in a cluster; null on a single node.
  std::unique_ptr<node_cluster> cluster_;
  /// The actors exist (after loading): API calls may reach them.
  std::atomic<bool> serving_{false};
  std::atomic<bool> ready_{false};
  bool started_ = false;

  std::chrono::milliseconds orchestration_timeout() const {
    // The control channel gives each worker command one control timeout once it
    // reaches the head of that worker's queue; the caller waits that long plus
    // the internal bound.
    return options_.control.request_timeout + options_.controller.internal_timeout;
  }

  const actors::lookup_actor& next_lookup() {
    return lookups_[next_lookup_.fetch_add(1, std::memory_order_relaxed) % lookups_.size()];
  }

  void spawn_actors(node_state& state) {
    const auto& c = options_.controller;
    store_ = state.store;
    auto init = std::make_shared<actors::shard_init>();
    init->options = c.shard;
    // More than one copy of a worker's entity can exist for a while only in a
    // cluster (a frozen or cut-off node): there the shard fences the stale one.
    init->options.fence_older_batches = options_.cluster.enabled();
    if (options_.planted() == planted_bug_kind::drop_acked_sub_batch)
      init->options.planted_drop_every = planted_bug_every;
    init->options.slot_count = c.slot_count;
    init->index = index_;
    init->store = state.store;
    init->start = std::move(state.shard);
    init->monitor = shard_monitor_;
    init->release_memory = [releaser = std::make_shared<memory_releaser>(
                                options_.memory_free_limit_bytes, std::chrono::seconds{10})] {
      releaser->request();
    };
    init->drop_at_start = std::move(state.drop_holders);
    init->remote_ack_delay = options_.cluster.replication_ack_delay;
    // Detached: the shard applies whole credit windows of ingest; on the
    // scheduler's threads it would hold one for 64 such messages while a
    // lookup or heartbeat waited for a thread (flood p99 38 -> 16 ms).
    shard_ = system_.spawn<caf::detached>(actors::kv_shard, std::move(init));
    actors::holder_source source;
    if (cluster_)
      source = [cluster = cluster_.get()](const std::vector<uint64_t>& keys) {
        return cluster->holders(keys);
      };
    reader_ = std::make_shared<actors::lookup_reader>(index_, c.chunk_hashing, std::move(source));
    for (uint32_t i = 0; i < std::max(1U, c.lookup_actors); ++i)
      lookups_.push_back(system_.spawn(actors::lookup_main,
                                       std::shared_ptr<const actors::lookup_reader>{reader_}));
    std::weak_ptr<gateway::control_channel> control = control_;
    fanout_ = system_.spawn(
        actors::control_fanout_main,
        actors::control_send_fn{
            [control](const std::string& endpoint, msg::Msg command, auto done) {
              if (auto channel = control.lock())
                channel->send(endpoint, std::move(command), std::move(done));
              else
                done(msg::codec_error{"the node is stopping: no command is sent to " + endpoint});
            }});
    if (state.store)
      rows_ = system_.spawn<caf::detached>(actors::row_writer_main, state.store);
    actors::directory_config dc;
    dc.options = c;
    dc.clock = clock_;
    dc.shards = {shard_};
    if (cluster_)
      cluster_->add_destinations(dc, shard_);
    dc.lookups = lookups_;
    dc.reader = reader_;
    dc.fanout = fanout_;
    auto* frontend = frontend_.get();
    auto* metrics = &metrics_;
    dc.hooks.heartbeat_url_for = [frontend](const std::string& ip) {
      return frontend->heartbeat_url_for(ip);
    };
    dc.hooks.forget_control = [control](const std::string& endpoint) {
      if (auto channel = control.lock())
        channel->forget(endpoint);
    };
    dc.hooks.count_event = [metrics](std::string_view e) { metrics->count_event(e); };
    if (rows_) {
      auto rows = rows_;
      dc.hooks.put_row = [rows](const persistence::worker_row& row) {
        caf::anon_send(rows, actors::row_put_atom::value, row);
      };
      dc.hooks.delete_row = [rows](uint64_t uid) {
        caf::anon_send(rows, actors::row_delete_atom::value, uid);
      };
    }
    dc.seed = std::random_device{}();
    dc.index = index_;
    dc.shard_stats = shard_monitor_;
    dc.gate = gate_;
    dc.routes = routes_;
    dc.restored = std::move(state.workers);
    // LMCache's need_full_sync_all: a controller that starts empty asks every
    // worker for its keys. A node that joins a running cluster (a standby
    // added later) starts empty too, but its peers hold the index and hand it
    // the slots and workers it takes: asking them would freeze them for nothing.
    dc.need_full_sync_all = state.need_full_sync_all && (!cluster_ || cluster_->founding_member());
    directory_ = system_.spawn(actors::directory_main, std::move(dc));
    bridge_ = system_.spawn(actors::request_bridge_main, directory_);
    router_ = system_.spawn(actors::ingest_router_main);
    if (cluster_)
      cluster_->start(shard_, directory_, http_->port());
  }

  /// Waits (bounded) for one drain answer.
  template <class Handle>
  bool drain_one(const Handle& h, std::string_view what) {
    caf::scoped_actor self{system_};
    bool ok = false;
    self->request(h, options_.controller.internal_timeout, actors::drain_atom::value)
        .receive([&](bool all) { ok = all; },
                 [&](caf::error& e) {
                   spdlog::warn("node-drain-failed what={} error={}", what, caf::to_string(e));
                 });
    return ok;
  }

  /// Everything the front end handed over is applied and, with persistence,
  /// committed: worker actors wait for their acks, which come after commits.
  void drain() {
    if (!directory_)
      return;
    auto start = std::chrono::steady_clock::now();
    bool ok = drain_one(router_, "ingest router");
    ok = drain_one(directory_, "workers") && ok;
    ok = drain_one(shard_, "shard") && ok;
    if (rows_)
      ok = drain_one(rows_, "rows") && ok;
    spdlog::info("node-drained committed={} inflight_ops={} seconds={:.3f}", ok, gate_->in_flight(),
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }

  void request(msg::Msg m, std::chrono::milliseconds timeout, actors::reply_callback done) {
    caf::anon_send(bridge_, actors::request_atom::value, std::move(m),
                   static_cast<uint32_t>(timeout.count()), std::move(done));
  }

  std::future<std::optional<actors::node_stats>> node_stats() {
    auto promise = std::make_shared<std::promise<std::optional<actors::node_stats>>>();
    auto future = promise->get_future();
    caf::anon_send(bridge_, actors::stats_atom::value,
                   static_cast<uint32_t>(options_.controller.internal_timeout.count()),
                   actors::stats_callback{[promise](std::optional<actors::node_stats> s) {
                     promise->set_value(std::move(s));
                   }});
    return future;
  }

  /// Routes one drain round of the PULL socket: each worker's frames go to
  /// its actor in one message, holding their ingest credits.
  void route_round(std::vector<msg::Msg>& frames) {
    auto table = routes_->current();
    auto cluster = cluster_ ? cluster_->board()->current() : nullptr;
    actors::ingest_round groups;
    absl::flat_hash_map<uint64_t, size_t> by_uid;
    // Frames of workers whose entity lives on another node, per node.
    absl::flat_hash_map<uint16_t, actors::pushed_msgs> forward;
    auto home_elsewhere = [&](const std::string& instance,
                              const msg::wire_int& worker) -> std::optional<uint16_t> {
      if (!cluster)
        return std::nullopt;
      const auto home = cluster->home_of(actors::worker_uid(instance, worker));
      return home == cluster->self ? std::nullopt : std::optional<uint16_t>{home};
    };
    auto flush_groups = [&] {
      if (groups.empty())
        return;
      // One message into the scheduler per round (ingest_router.hpp).
      caf::anon_send(router_, actors::push_atom::value, std::move(groups));
      groups = {};
      by_uid.clear();
    };
    for (auto& m : frames) {
      if (msg::family_of(m) == msg::msg_family::orchestration) {
        // Fire-and-forget orchestration (e.g. a ClearMsg pushed by an external
        // system): handled like the HTTP call, the reply is dropped.
        request(std::move(m), orchestration_timeout(), [](msg::Msg) {});
        continue;
      }
      if (const auto* d = std::get_if<msg::DeRegisterMsg>(&m)) {
        if (auto home = home_elsewhere(d->instance_id, d->worker_id)) {
          forward[*home].push_back(actors::pushed_msg{std::move(m), 0});
          continue; // behind the worker's earlier frames to the same node
        }
        // After this worker's earlier frames: they reach its actor before the
        // directory's retire does.
        flush_groups();
        caf::anon_send(directory_, actors::push_atom::value, std::move(m));
        continue;
      }
      auto who = actors::pushing_worker(m);
      if (!who)
        continue;
      const auto* route = actors::find_route(*table, *who->first, *who->second);
      if (!route) {
        if (auto home = home_elsewhere(*who->first, *who->second)) {
          const uint64_t credits = gateway::ingest_credits(m);
          gate_->take(credits);
          forward[*home].push_back(actors::pushed_msg{std::move(m), credits});
          continue;
        }
        metrics_.count_event(std::holds_alternative<msg::BatchedKVOperationMsg>(m)
                                 ? "batch_from_unknown_worker"
                                 : "push_from_unknown_worker");
        continue;
      }
      const uint64_t credits = gateway::ingest_credits(m);
      gate_->take(credits);
      const uint64_t uid = actors::worker_uid(*who->first, *who->second);
      auto [it, inserted] = by_uid.try_emplace(uid, groups.size());
      if (inserted)
        groups.push_back(actors::ingest_group{route->actor, {}});
      groups[it->second].msgs.push_back(actors::pushed_msg{std::move(m), credits});
    }
    flush_groups();
    for (auto& [node, msgs] : forward)
      cluster_->forward(node, std::move(msgs));
  }
};

node_runtime::node_runtime(node_options options)
  : impl_(std::make_unique<impl>(std::move(options))) {}

node_runtime::~node_runtime() {
  stop();
}

void node_runtime::start() {
  auto& d = *impl_;
  d.control_ = std::make_shared<gateway::control_channel>(d.context_, d.options_.control);
  d.frontend_ = std::make_unique<gateway::zmq_frontend>(d.context_, d.options_.zmq, *this);
  d.http_ = std::make_unique<gateway::http_api>(d.options_.http, *this, d.metrics_,
                                                d.frontend_->counters());
  // HTTP first: /healthz answers and /readyz says 503 while the index loads.
  d.http_->start();
  d.started_ = true;
  if (d.options_.cluster.enabled())
    d.cluster_ = std::make_unique<node_cluster>(
        d.options_, node_cluster::node_parts{d.system_, d.context_, d.metrics_, d.index_, d.gate_,
                                             d.routes_, d.clock_});
  auto state = load_node_state(d.options_, *d.index_);
  const auto entries = state.entries;
  const auto seconds = state.seconds;
  d.spawn_actors(state);
  // The directory's first answer comes after it published the routes of the
  // restored (or taken-over) workers: frames read from now on find them.
  d.drain_one(d.directory_, "directory");
  if (d.cluster_)
    d.cluster_->await_joined();
  d.serving_ = true;
  // Workers' PUSH sockets hold their messages until this binds, so nothing
  // they sent during the load is lost.
  d.frontend_->start();
  d.ready_ = true;
  const auto& z = d.options_.zmq;
  auto port_or_off = [](const std::optional<uint16_t>& p) {
    return p ? std::to_string(*p) : std::string("off");
  };
  spdlog::info("node-ready node={} pid={} http=http://{}:{} pull=tcp://{}:{} reply={} "
               "heartbeat={} cluster={} store={} entries={} load_seconds={:.3f} "
               "max_inflight_ops={}",
               d.options_.controller.node_id, ::getpid(), d.options_.http.host, d.http_->port(),
               z.host, z.pull_port, port_or_off(z.reply_port), port_or_off(z.heartbeat_port),
               d.cluster_ ? z.host + ":" + std::to_string(d.cluster_->port()) : std::string("off"),
               d.store_ ? d.store_->path() : "off", entries, seconds,
               d.options_.controller.max_inflight_ops);
}

void node_runtime::stop() {
  auto& d = *impl_;
  if (!d.started_)
    return;
  d.started_ = false;
  d.ready_ = false;
  spdlog::info("node-stopping node={}", d.options_.controller.node_id);
  // A cluster member hands its workers to the other nodes first, while its
  // sockets still take (and forward) what the workers send.
  if (d.cluster_)
    d.cluster_->leave(d.directory_);
  // Inbound next: nothing new is accepted that could not be answered.
  d.http_->stop();
  d.frontend_->stop();
  // Fails queued worker commands; their callbacks still reach the live fan-out.
  d.control_.reset();
  d.drain();
  // What the front end handed over last for workers homed elsewhere reached
  // their homes before the cluster's actors go.
  if (d.cluster_)
    d.cluster_->drain_forwards();
  auto exit = [](const auto& h) {
    if (h)
      caf::anon_send_exit(h, caf::exit_reason::user_shutdown);
  };
  for (auto& l : d.lookups_)
    exit(l);
  exit(d.fanout_);
  exit(d.directory_);
  exit(d.bridge_);
  exit(d.shard_);
  exit(d.rows_);
  exit(d.router_);
  if (d.cluster_)
    d.cluster_->stop();
  d.lookups_.clear();
  d.fanout_ = nullptr;
  d.directory_ = nullptr;
  d.bridge_ = nullptr;
  d.shard_ = nullptr;
  d.rows_ = nullptr;
  d.router_ = nullptr;
  d.system_.await_all_actors_done();
  d.serving_ = false;
  d.store_.reset(); // the shard and the row writer committed what they held when they exited
  spdlog::info("node-stopped node={}", d.options_.controller.node_id);
}

uint16_t node_runtime::http_port() const {
  return impl_->http_ ? impl_->http_->port() : 0;
}

void node_runtime::on_push_round(std::vector<msg::Msg>& frames) {
  if (!impl_->serving_)
    return; // the front end starts after the load; only reached while stopping
  impl_->route_round(frames);
}

gateway::ingest_gate* node_runtime::gate() {
  return &impl_->gate_adapter_;
}

void node_runtime::on_request(gateway::request_socket, msg::Msg m, gateway::reply_fn reply) {
  auto& d = *impl_;
  auto started = std::chrono::steady_clock::now();
  std::string op{msg::type_tag_of(m)};
  auto* metrics = &d.metrics_;
  actors::reply_callback done = [reply = std::move(reply), started, op, metrics](msg::Msg r) {
    metrics->observe_request(
        op, std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
    reply(std::move(r));
  };
  if (std::holds_alternative<msg::BatchedP2PLookupMsg>(m) && d.reader_) {
    // No hop: read the index on this socket thread (lookup_reader.hpp says why).
    done(d.reader_->answer(m));
    return;
  }
  d.request(std::move(m), d.options_.controller.internal_timeout, std::move(done));
}

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
    g.kv_pool_keys_count = d.cluster_->update_gauges(); // this node's share (README)
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

gateway::fault_outcome node_runtime::set_store_faults(const gateway::store_fault_settings& s) {
  if (!impl_->options_.fault_injection)
    return controller_api::set_store_faults(s); // refused
  auto& clock = *impl_->clock_;
  if (s.clock_jump_ms) {
    clock.jump(std::chrono::milliseconds{*s.clock_jump_ms});
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

std::future<gateway::snapshot_outcome> node_runtime::snapshot(const std::string& dir) {
  gateway::snapshot_outcome out;
  auto store = impl_->store_;
  if (!impl_->serving_ || !store) {
    out.status = 409;
    out.error = store ? "the node is loading its index" : "persistence is off on this node";
    return ready_future(std::move(out));
  }
  auto start = std::chrono::steady_clock::now();
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
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  spdlog::info("snapshot-written dir={} node={} workers={} holders={} slots={} log_records={} "
               "files={} bytes={} seconds={:.3f}",
               dir, info->node_id, out.workers, out.holders, out.slots, out.log_records, out.files,
               out.bytes, out.seconds);
  return ready_future(std::move(out));
}

} // namespace lmcc::apps
