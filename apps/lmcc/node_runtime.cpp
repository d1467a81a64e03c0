#include "apps/lmcc/node_runtime.hpp"

#include "apps/lmcc/internal/node_runtime_impl.hpp"
#include "apps/lmcc/memory_releaser.hpp"
#include "apps/lmcc/node_config.hpp"
#include "apps/lmcc/thread_priority.hpp"
#include "clock/clock.hpp"
#include "faults/fault_injection.hpp"
#include "gateway/http_access.hpp"

#include <absl/container/flat_hash_map.h>
#include <caf/io/middleman.hpp>
#include <spdlog/spdlog.h>

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
  // An idle scheduler thread wakes every relaxed-sleep-duration to try to
  // steal (CAF's default 10 ms: 100 wake-ups a second per thread). Work sent
  // to an idle thread from outside the scheduler wakes it at once whatever
  // this is; a longer sleep only delays stealing what a busy thread queued
  // for itself, which it runs after its current actor (at most
  // max-throughput messages) anyway. At 1 s an idle node's scheduler threads
  // wake once a second each; under load they do not sleep.
  cfg.set("work-stealing.relaxed-sleep-duration", caf::timespan{std::chrono::seconds{1}});
  // CAF's default lets an actor keep its thread until its mailbox is empty; a
  // busy shard or worker actor would then hold a thread for a whole credit's
  // worth of ingest while a heartbeat waits. Yielding every 64 messages keeps
  // requests within milliseconds of arriving.
  cfg.set("scheduler.max-throughput", 64);
  if (o.cluster.enabled()) {
    // CAF's heartbeats and connection timeouts on every node (a timeout on one
    // side only drops healthy idle peers: shared/notes/caf-0.17.md). The
    // greetings keep every connection busier than this heartbeat does, so it
    // is only a backstop and runs as seldom as the timeout allows.
    cfg.load<caf::io::middleman>();
    cfg.set("middleman.heartbeat-interval", caf::timespan{o.cluster.failure_timeout});
    cfg.set("middleman.connection-timeout", caf::timespan{o.cluster.failure_timeout * 2});
    cfg.set("middleman.workers", size_t{o.cluster.middleman_workers});
  }
  actors::register_message_types(cfg);
  return cfg;
}

} // namespace

node_runtime::impl::impl(node_options opts)
  : options_(std::move(opts)), system_(configure(config_, options_)),
    index_(std::make_shared<actors::kv_index>(options_.controller.slot_count)),
    gate_(std::make_shared<actors::credit_gate>(
        options_.controller.max_inflight_ops,
        std::max<uint64_t>(
            1, static_cast<uint64_t>(static_cast<double>(options_.controller.max_inflight_ops) *
                                     options_.controller.inflight_resume_ratio)))),
    gate_adapter_(*gate_) {}

void node_runtime::impl::spawn_actors(node_state& state) {
  const auto& c = options_.controller;
  store_ = state.store;
  auto init = std::make_shared<actors::shard_init>();
  init->options = c.shard;
  init->options.planted = faults::planted_bugs{options_.planted()};
  init->options.slot_count = c.slot_count;
  init->index = index_;
  init->store = state.store;
  // A cluster node back with an empty store (or one whose copy from its
  // peers was cut short) knows nothing of what any slot held: each owned one
  // waits for a peer's copy (coverage.hpp; the refill settles what none
  // holds), and none is offered whole to a peer.
  if (cluster_ && (state.need_full_sync_all || cluster_->refill_pending()))
    state.shard.covers->blank_all();
  init->start = std::move(state.shard);
  init->monitor = shard_monitor_;
  init->release_memory = [releaser = std::make_shared<memory_releaser>(
                              options_.memory_free_limit_bytes, options_.memory_check_interval)] {
    releaser->request();
  };
  init->drop_at_start = std::move(state.drop_holders);
  init->on_thread_start = idle_at_start(options_.ingest_idle_priority, "lmcc-shard");
  init->remote_ack_delay = options_.cluster.replication_ack_delay;
  router_ = system_.spawn(actors::ingest_router_main);
  init->ack_relay = router_;
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
    lookups_.push_back(
        system_.spawn(actors::lookup_main, std::shared_ptr<const actors::lookup_reader>{reader_}));
  std::weak_ptr<gateway::control_channel> control = control_;
  fanout_ = system_.spawn(
      actors::control_fanout_main,
      actors::control_send_fn{[control](const std::string& endpoint, msg::Msg command, auto done) {
        if (auto channel = control.lock())
          channel->send(endpoint, std::move(command), std::move(done));
        else
          done(msg::codec_error{"the node is stopping: no command is sent to " + endpoint});
      }});
  if (state.store)
    rows_ = system_.spawn<caf::detached>(actors::row_writer_main, state.store,
                                         idle_at_start(options_.ingest_idle_priority, "lmcc-rows"));
  actors::directory_config dc;
  dc.options = c;
  dc.clock = clock_;
  dc.shards = {shard_};
  if (cluster_)
    cluster_->add_destinations(dc, shard_);
  actors::heartbeat_reader::home_filter home_here;
  if (cluster_)
    home_here = [board = cluster_->board()](uint64_t uid) {
      const auto table = board->current();
      return table->home_of(uid) == table->self;
    };
  heartbeats_ = std::make_shared<actors::heartbeat_reader>(std::move(home_here));
  dc.lookups = lookups_;
  dc.reader = reader_;
  dc.heartbeats = heartbeats_;
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
  // A founding member back with an empty disk learns the same from the first
  // peer that greets holding an index (directory_logic::on_index_held_by_peers).
  dc.need_full_sync_all = state.need_full_sync_all && (!cluster_ || cluster_->founding_member());
  // A registry that came from the peers (an empty start, or a refill cut
  // short) is not this node's own record of who deregistered here.
  dc.lists_complete = !state.need_full_sync_all && !(cluster_ && cluster_->refill_pending());
  directory_ = system_.spawn(actors::directory_main, std::move(dc));
  caf::anon_send(shard_, actors::resync_atom::value, caf::actor_cast<caf::actor>(directory_));
  bridge_ = system_.spawn(actors::request_bridge_main, directory_);
  if (cluster_) {
    cluster_->set_holder_workers([reader = std::shared_ptr<const actors::lookup_reader>{reader_}](
                                     uint64_t holder) { return reader->worker_of(holder); });
    cluster_->start(shard_, directory_, http_->port(), state.need_full_sync_all);
  }
}

template <class Handle>
bool node_runtime::impl::drain_one(const Handle& h, std::string_view what) {
  caf::scoped_actor self{system_};
  bool ok = false;
  self->request(h, options_.controller.internal_timeout, actors::drain_atom::value)
      .receive([&](bool all) { ok = all; },
               [&](caf::error& e) {
                 spdlog::warn("node-drain-failed what={} error={}", what, caf::to_string(e));
               });
  return ok;
}

void node_runtime::impl::drain() {
  if (!directory_)
    return;
  auto start = steady_now();
  bool ok = drain_one(router_, "ingest router");
  ok = drain_one(directory_, "workers") && ok;
  ok = drain_one(shard_, "shard") && ok;
  if (rows_)
    ok = drain_one(rows_, "rows") && ok;
  spdlog::info("node-drained committed={} inflight_ops={} seconds={:.3f}", ok, gate_->in_flight(),
               std::chrono::duration<double>(steady_now() - start).count());
}

void node_runtime::impl::route_round(std::vector<msg::Msg>& frames) {
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
    const auto* known = actors::find_registration(*table, *who->first, *who->second);
    const uint64_t read_under = known ? known->incarnation : 0;
    const auto* route = known && known->actor ? known : nullptr;
    if (!route) {
      if (auto home = home_elsewhere(*who->first, *who->second)) {
        const uint64_t credits = gateway::ingest_credits(m);
        gate_->take(credits);
        forward[*home].push_back(actors::pushed_msg{std::move(m), credits, read_under});
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
    groups[it->second].msgs.push_back(actors::pushed_msg{std::move(m), credits, read_under});
  }
  flush_groups();
  for (auto& [node, msgs] : forward)
    cluster_->forward(node, std::move(msgs));
}

node_runtime::node_runtime(node_options options)
  : impl_(std::make_unique<impl>(std::move(options))) {}

node_runtime::~node_runtime() {
  stop();
}

void node_runtime::start() {
  auto& d = *impl_;
  d.control_ = std::make_shared<gateway::control_channel>(d.context_, d.options_.control);
  d.frontend_ = std::make_unique<gateway::zmq_frontend>(d.context_, d.options_.zmq, *this);
  d.options_.http.security.token =
      gateway::resolve_api_token(d.options_.http.security, process_environment());
  d.http_ = std::make_unique<gateway::http_api>(d.options_.http, *this, d.metrics_,
                                                d.frontend_->counters());
  // HTTP first: /healthz answers and /readyz says 503 while the index loads.
  d.http_->start();
  d.started_ = true;
  if (d.options_.cluster.enabled())
    d.cluster_ = std::make_unique<node_cluster>(
        d.options_, node_cluster::node_parts{d.system_, d.context_, d.metrics_, d.index_, d.gate_,
                                             d.routes_, d.clock_});
  d.options_.store.idle_background_threads = d.options_.ingest_idle_priority;
  auto state = load_node_state(d.options_, *d.index_,
                               d.cluster_ ? d.cluster_->ownership() : std::vector<uint64_t>{});
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
  if (d.options_.ingest_idle_priority) {
    // S1's libzmq I/O thread (io_lanes.hpp: the ingest lane is the first).
    // It names itself when it first runs, which on a loaded machine can be
    // after the sockets are bound: look again for up to a second.
    size_t io = 0;
    for (int attempt = 0; attempt < 100 && io == 0; ++attempt) {
      if (attempt > 0)
        std::this_thread::sleep_for(std::chrono::milliseconds{10});
      io = make_threads_idle("ZMQbg/IO/0");
    }
    spdlog::info("ingest-priority policy=idle threads=lmcc-pull,lmcc-shard,lmcc-rows,rocksdb "
                 "zmq_io_threads={}",
                 io);
  }
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
  // Each phase says when it starts: a stop that hangs (a supervisor's kill
  // after its timeout) leaves in the log where it hung.
  const auto phase_started = steady_now();
  auto phase = [&, last = phase_started](const char* name) mutable {
    const auto now = steady_now();
    spdlog::debug("node-stop-phase phase={} after_ms={}", name,
                  std::chrono::duration_cast<std::chrono::milliseconds>(now - last).count());
    last = now;
  };
  phase("cluster");
  if (d.cluster_)
    d.cluster_->stop();
  d.lookups_.clear();
  d.fanout_ = nullptr;
  d.directory_ = nullptr;
  d.bridge_ = nullptr;
  d.shard_ = nullptr;
  d.rows_ = nullptr;
  d.router_ = nullptr;
  phase("actors");
  d.system_.await_all_actors_done();
  d.serving_ = false;
  if (d.cluster_)
    d.cluster_->close_reads();
  phase("store");
  d.store_.reset(); // the shard and the row writer committed what they held when they exited
  spdlog::info(
      "node-stopped node={} ms={}", d.options_.controller.node_id,
      std::chrono::duration_cast<std::chrono::milliseconds>(steady_now() - phase_started).count());
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

void node_runtime::on_pull_thread_start() {
  if (impl_->options_.ingest_idle_priority)
    make_this_thread_idle("lmcc-pull");
}

void node_runtime::on_request(gateway::request_socket, msg::Msg m, gateway::reply_fn reply) {
  auto& d = *impl_;
  auto started = steady_now();
  std::string op{msg::type_tag_of(m)};
  auto* metrics = &d.metrics_;
  actors::reply_callback done = [reply = std::move(reply), started, op, metrics](msg::Msg r) {
    metrics->observe_request(op, std::chrono::duration<double>(steady_now() - started).count());
    reply(std::move(r));
  };
  if (std::holds_alternative<msg::BatchedP2PLookupMsg>(m) && d.reader_) {
    // No hop: read the index on this socket thread (lookup_reader.hpp says why).
    done(d.reader_->answer(m));
    return;
  }
  if (const auto* hb = std::get_if<msg::HeartbeatMsg>(&m); hb && d.heartbeats_) {
    const auto now_ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(started.time_since_epoch()).count();
    if (auto ret = d.heartbeats_->answer(*hb, static_cast<uint64_t>(now_ms))) {
      // The directory records the heartbeats answered here in batches.
      const double mono_s = std::chrono::duration<double>(started.time_since_epoch()).count();
      if (d.heartbeats_->note_heard(*hb, mono_s))
        caf::delayed_anon_send(d.directory_, actors::heartbeat_reader::heard_record_delay,
                               actors::heard_atom::value);
      metrics->count_event("heartbeat_answered_in_place");
      done(msg::Msg{std::move(*ret)});
      return;
    }
  }
  d.request(std::move(m), d.options_.controller.internal_timeout, std::move(done));
}

} // namespace lmcc::apps
