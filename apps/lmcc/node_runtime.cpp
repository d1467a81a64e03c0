#include "apps/lmcc/node_runtime.hpp"

#include "actors/control_fanout.hpp"
#include "actors/directory.hpp"
#include "actors/kv_shard.hpp"
#include "actors/lookup_actor.hpp"
#include "actors/request_bridge.hpp"
#include "apps/lmcc/node_restore.hpp"
#include "gateway/control_channel.hpp"
#include "gateway/http_api.hpp"
#include "gateway/metrics.hpp"
#include "gateway/zmq_frontend.hpp"

#include <caf/all.hpp>
#include <spdlog/spdlog.h>
#include <zmq.hpp>

#include <atomic>
#include <chrono>
#include <random>
#include <thread>

namespace lmcc::apps {
namespace {

caf::actor_system_config& configure(caf::actor_system_config& cfg, const node_options& o) {
  size_t threads = o.scheduler_threads != 0 ? o.scheduler_threads
                                            : std::max(2U, std::thread::hardware_concurrency());
  // CAF's default of max(cores, 4) oversubscribes small machines; its
  // moderate polling phase adds ~50 us to every hop (shared/notes/caf-0.17.md).
  cfg.set("scheduler.max-threads", threads);
  cfg.set("work-stealing.moderate-poll-attempts", 0);
  return cfg;
}

template <class T>
std::future<T> ready_future(T value) {
  std::promise<T> p;
  p.set_value(std::move(value));
  return p.get_future();
}

} // namespace

class node_runtime::impl {
public:
  // -- construction ----------------------------------------------------------

  explicit impl(node_options opts)
    : options_(std::move(opts)), system_(configure(config_, options_)) {}

  // -- member variables (construction order = the order things start) --------

  node_options options_;
  zmq::context_t context_{1};
  caf::actor_system_config config_;
  caf::actor_system system_;
  gateway::node_metrics metrics_;
  /// Shared so that actors reach it through weak pointers: a directory still
  /// working through its mailbox while the node stops (a deregistration, the
  /// reaper) must find it gone, not freed.
  std::shared_ptr<gateway::control_channel> control_;
  std::unique_ptr<gateway::zmq_frontend> frontend_;
  std::unique_ptr<gateway::http_api> http_;
  std::vector<actors::kv_shard_actor> shards_;
  std::vector<actors::lookup_actor> lookups_;
  actors::control_fanout_actor fanout_;
  actors::directory_actor directory_;
  actors::request_bridge_actor bridge_;
  std::shared_ptr<persistence::store> store_;
  /// The actors exist (after loading): API calls may reach them.
  std::atomic<bool> serving_{false};
  std::atomic<bool> ready_{false};
  bool started_ = false;

  std::chrono::milliseconds orchestration_timeout() const {
    // The control channel gives each worker command one control timeout once it
    // reaches the head of that worker's queue; the caller waits that long plus
    // the internal bound. A command queued behind a silent worker's commands can
    // therefore come back as a timeout here while the worker's queue drains.
    return options_.control.request_timeout + options_.controller.internal_timeout;
  }

  void spawn_actors(node_state& state) {
    const auto& c = options_.controller;
    store_ = state.store;
    for (auto& init : state.shards)
      shards_.push_back(system_.spawn(actors::kv_shard, std::move(init)));
    for (uint32_t i = 0; i < std::max(1U, c.lookup_actors); ++i)
      lookups_.push_back(system_.spawn(
          actors::lookup_main,
          actors::lookup_config{shards_, c.slot_count, c.chunk_hashing, c.internal_timeout}));
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
    actors::directory_config dc;
    dc.options = c;
    dc.shards = shards_;
    dc.lookups = lookups_;
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
    dc.seed = std::random_device{}();
    dc.store = state.store;
    dc.restored = std::move(state.workers);
    dc.need_full_sync_all = state.need_full_sync_all;
    directory_ = system_.spawn(actors::directory_main, std::move(dc));
    bridge_ = system_.spawn(actors::request_bridge_main, directory_);
  }

  /// Commits every batch the directory has received (a clean stop loses none),
  /// bounded by the internal timeout.
  void drain() {
    if (!store_ || !directory_)
      return;
    auto start = std::chrono::steady_clock::now();
    caf::scoped_actor self{system_};
    bool ok = false;
    self->request(directory_, options_.controller.internal_timeout, actors::drain_atom::value)
        .receive(
            [&](bool all) { ok = all; },
            [&](caf::error& e) { spdlog::warn("node-drain-failed error={}", caf::to_string(e)); });
    spdlog::info("node-drained committed={} seconds={:.3f}", ok,
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
  auto state = load_node_state(d.options_);
  d.spawn_actors(state);
  d.serving_ = true;
  // Workers' PUSH sockets hold their messages until this binds, so nothing
  // they sent during the load is lost.
  d.frontend_->start();
  d.ready_ = true;
  const auto& z = d.options_.zmq;
  auto port_or_off = [](const std::optional<uint16_t>& p) {
    return p ? std::to_string(*p) : std::string("off");
  };
  spdlog::info("node-ready node={} http=http://{}:{} pull=tcp://{}:{} reply={} heartbeat={} "
               "shards={} store={} entries={} load_seconds={:.3f}",
               d.options_.controller.node_id, d.options_.http.host, d.http_->port(), z.host,
               z.pull_port, port_or_off(z.reply_port), port_or_off(z.heartbeat_port),
               d.options_.controller.shard_count, state.store ? state.store->path() : "off",
               state.entries, state.seconds);
}

void node_runtime::stop() {
  auto& d = *impl_;
  if (!d.started_)
    return;
  d.started_ = false;
  d.ready_ = false;
  spdlog::info("node-stopping node={}", d.options_.controller.node_id);
  // Inbound first: nothing new is accepted that could not be answered.
  d.http_->stop();
  d.frontend_->stop();
  // Fails queued worker commands; their callbacks still reach the live fan-out.
  d.control_.reset();
  d.drain();
  auto exit_all = [&](auto& handles) {
    for (auto& h : handles)
      caf::anon_send_exit(h, caf::exit_reason::user_shutdown);
  };
  exit_all(d.shards_);
  exit_all(d.lookups_);
  caf::anon_send_exit(d.fanout_, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(d.directory_, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(d.bridge_, caf::exit_reason::user_shutdown);
  d.shards_.clear();
  d.lookups_.clear();
  d.fanout_ = nullptr;
  d.directory_ = nullptr;
  d.bridge_ = nullptr;
  d.system_.await_all_actors_done();
  d.serving_ = false;
  d.store_.reset(); // the shards committed what they held when they exited
  spdlog::info("node-stopped node={}", d.options_.controller.node_id);
}

uint16_t node_runtime::http_port() const {
  return impl_->http_ ? impl_->http_->port() : 0;
}

void node_runtime::on_push(msg::Msg m) {
  auto& d = *impl_;
  if (!d.serving_)
    return; // the front end starts after the load; only reached while stopping
  if (msg::family_of(m) == msg::msg_family::orchestration) {
    // Fire-and-forget orchestration (e.g. a ClearMsg pushed by an external
    // system): handled like the HTTP call, the reply is dropped.
    d.request(std::move(m), d.orchestration_timeout(), [](msg::Msg) {});
    return;
  }
  caf::anon_send(d.directory_, actors::push_atom::value, std::move(m));
}

void node_runtime::on_request(gateway::request_socket, msg::Msg m, gateway::reply_fn reply) {
  auto& d = *impl_;
  auto started = std::chrono::steady_clock::now();
  std::string op{msg::type_tag_of(m)};
  auto* metrics = &d.metrics_;
  d.request(
      std::move(m), d.options_.controller.internal_timeout,
      [reply = std::move(reply), started, op, metrics](msg::Msg r) {
        metrics->observe_request(
            op, std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
        reply(std::move(r));
      });
}

std::future<msg::Msg> node_runtime::orchestrate(msg::Msg request) {
  auto& d = *impl_;
  if (!d.serving_)
    return ready_future(msg::Msg{msg::ErrorMsg{"the node is loading its index; see /readyz"}});
  auto promise = std::make_shared<std::promise<msg::Msg>>();
  auto future = promise->get_future();
  d.request(std::move(request), d.orchestration_timeout(),
            [promise](msg::Msg r) { promise->set_value(std::move(r)); });
  return future;
}

std::future<std::vector<gateway::worker_view>> node_runtime::workers() {
  if (!impl_->serving_)
    return ready_future(std::vector<gateway::worker_view>{});
  auto s = impl_->node_stats().get();
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
  gateway::controller_gauges g;
  if (!impl_->serving_)
    return ready_future(g);
  auto s = impl_->node_stats().get();
  if (!s)
    return ready_future(g);
  g.kv_pool_keys_count = s->total_entries;
  g.registered_workers_count = s->workers.size();
  g.kv_op_seq_discontinuity_count = s->seq_discontinuities;
  g.full_sync_workers_syncing = s->workers_syncing;
  g.full_sync_workers_completed = s->workers_completed;
  g.full_sync_global_progress = s->global_progress;
  g.full_sync_missing_batches_total = s->missing_batches_total;
  impl_->metrics_.set_gauge("index_keys", static_cast<double>(s->total_keys));
  impl_->metrics_.set_gauge("index_memory_bytes", static_cast<double>(s->index_memory_bytes));
  if (auto store = impl_->store_) {
    impl_->metrics_.set_gauge("store_commits", static_cast<double>(s->store_commits));
    impl_->metrics_.set_gauge("store_commit_failures",
                              static_cast<double>(s->store_commit_failures));
    if (auto bytes = store->disk_bytes())
      impl_->metrics_.set_gauge("store_disk_bytes", static_cast<double>(*bytes));
  }
  return ready_future(g);
}

bool node_runtime::ready() const {
  return impl_->ready_;
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
  auto info = store->checkpoint(dir);
  if (!info) {
    out.status = 500;
    out.error = info.error().message;
    spdlog::error("snapshot-failed dir={} error={}", dir, out.error);
    return ready_future(std::move(out));
  }
  out.dir = dir;
  out.sequence = info->sequence;
  out.workers = info->workers;
  out.watermarks = info->watermarks;
  out.entries = info->entries;
  out.files = info->files.size();
  for (const auto& f : info->files)
    out.bytes += f.size;
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  spdlog::info("snapshot-written dir={} node={} entries={} workers={} files={} bytes={} "
               "seconds={:.3f}",
               dir, info->node_id, out.entries, out.workers, out.files, out.bytes, out.seconds);
  return ready_future(std::move(out));
}

} // namespace lmcc::apps
