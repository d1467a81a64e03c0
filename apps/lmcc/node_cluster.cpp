#include "apps/lmcc/node_cluster.hpp"

#include "apps/lmcc/node_config.hpp"
#include "clock/clock.hpp"
#include "cluster/handshake.hpp"
#include "faults/fault_injection.hpp"
#include "gateway/owner_reads.hpp"

#include <caf/io/middleman.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <fstream>
#include <random>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace lmcc::apps {

node_cluster::node_cluster(const node_options& options, node_parts parts)
  : options_(options), parts_(std::move(parts)) {
  auto secret = cluster::resolve_secret(options_.cluster, process_environment());
  if (!secret)
    throw std::runtime_error(secret.error().message);
  options_.cluster.secret = std::move(*secret);
  if (options_.cluster.tls()) {
    // Each refused connection, on any channel between nodes: one line, one count.
    auto* metrics = &parts_.metrics;
    tls_ = gateway::node_tls::load(
        {options_.cluster.tls_ca_file, options_.cluster.tls_cert_file,
         options_.cluster.tls_key_file},
        [metrics, counters = counters_,
         id = options_.controller.node_id](const gateway::tls_refusal& r) {
          if (r.by_peer()) {
            ++counters->tls_refused_by_peer;
            metrics->count_event("cluster_tls_refused_by_peer");
            spdlog::warn("cluster-tls-refused-by-peer node={} {}", id, gateway::describe(r));
          } else {
            ++counters->tls_refused;
            metrics->count_event("cluster_tls_refused");
            spdlog::warn("cluster-tls-refused node={} {}", id, gateway::describe(r));
          }
        });
    spdlog::info("cluster-tls node={} subject=\"{}\" ca={}", options_.controller.node_id,
                 tls_->subject(), options_.cluster.tls_ca_file);
  }
  // The member set this node last adopted, if any (membership_record.hpp).
  // Booting from a snapshot, the one the snapshot carries: the restore puts
  // that file in place of the data dir's (persistence/store.hpp).
  if (options_.persistence)
    record_path_ = options_.data_dir + "/" + record_file;
  if (!record_path_.empty()) {
    const std::string from =
        options_.restore_from.empty() ? record_path_ : options_.restore_from + "/" + record_file;
    auto loaded = cluster::load_record(from);
    if (!loaded)
      throw std::runtime_error("cluster membership: " + loaded.error().message);
    record_ = std::move(*loaded);
    if (record_)
      spdlog::info("cluster-members-restored node={} epoch={} state={} path={}",
                   options_.controller.node_id, record_->epoch,
                   record_->committed ? "committed" : "joint", from);
  }
  if (options_.persistence) // a file of an earlier lmcc: copies carry their positions now
    std::remove((options_.data_dir + "/lmcc-lag-hints.txt").c_str());
  auto table = actors::initial_cluster_table(options_.cluster, options_.controller.node_id,
                                             options_.controller.slot_count, record_);
  if (!table)
    throw std::runtime_error("cluster configuration: " + table.error().message);
  // This node's share of the counts: the slots it is the primary of.
  parts_.index->set_share_slots((*table)->owners->slots_of(options_.controller.node_id).primary);
  placement_ =
      std::make_shared<actors::placement_cell>((*table)->write_masks(), (*table)->record.epoch);
  board_->publish(std::move(*table));
}

node_cluster::~node_cluster() {
  stop();
}

void node_cluster::add_destinations(actors::directory_config& dc,
                                    const actors::kv_shard_actor& shard) {
  auto table = board_->current();
  const auto& cl = options_.cluster;
  dc.shards.clear();
  for (size_t i = 0; i < table->peers.size(); ++i) {
    if (i == table->self) {
      links_.emplace_back();
      link_counters_.emplace_back();
      dc.shards.push_back(shard);
      continue;
    }
    auto counters = std::make_shared<actors::peer_link_counters>();
    actors::peer_link_config lc;
    lc.peer_id = table->members[i].address.id;
    lc.replication_timeout = cl.replication_timeout;
    lc.buffer_ops = cl.peer_buffer_ops;
    lc.counters = counters;
    lc.planted = faults::planted_bugs{options_.planted()};
    links_.push_back(parts_.system.spawn(actors::peer_link_main, std::move(lc)));
    link_counters_.push_back(counters);
    dc.shards.push_back(caf::actor_cast<actors::kv_shard_actor>(links_.back()));
  }
  dc.placement = placement_;
  dc.home_destination = table->self;
  dc.cluster = board_;
  dc.peer_clocks = peer_clocks_;
  // A takeover waits for a draining old home at most as long as a dead
  // owner's acks take (the replication timeout), plus the failure detector's
  // time to notice a peer that cannot answer at all.
  dc.takeover_timeout = cl.replication_timeout + cl.failure_timeout;
  dc.tombstone_ttl = cl.tombstone_ttl;
  dc.durable_flush_delay = cl.durable_flush_delay;
  dc.heartbeat_replication_delay = cl.heartbeat_replication_delay;
  // One attempt lasts as long as the failure detector takes to find a node
  // down, so the next one goes to the worker's new home.
  dc.home_request_timeout = cl.failure_timeout + std::chrono::milliseconds(500);
  dc.planted = faults::planted_bugs{options_.planted()};
  dc.hooks.forward_frames = [this](uint16_t node, actors::pushed_msgs msgs) {
    forward(node, std::move(msgs));
  };
}

void node_cluster::start(const actors::kv_shard_actor& shard,
                         const actors::directory_actor& directory, uint16_t http_port,
                         bool started_empty) {
  auto& system = parts_.system;
  const auto& c = options_.controller;
  auto* metrics = &parts_.metrics;
  auto count = [metrics](std::string_view e) { metrics->count_event(e); };
  const auto table = board_->current();
  const auto& me = table->members[table->self].address;
  // Detached: remote key reads and forwarded frames never wait for a
  // scheduler thread busy with ingest.
  actors::cluster_service_config sc{parts_.index, parts_.routes, directory, c.internal_timeout,
                                    count};
  sc.board = board_;
  sc.forward = [this](uint16_t node, actors::pushed_msgs msgs) { forward(node, std::move(msgs)); };
  sc.shard = shard;
  shard_ = shard;
  service_ = system.spawn<caf::detached>(actors::cluster_service_main, std::move(sc));
  actors::frame_forwarder_config fc;
  fc.board = board_;
  fc.gate = parts_.gate;
  fc.timeout = c.internal_timeout;
  fc.count_event = count;
  fc.frames_lost = [directory](uint64_t uid) {
    caf::anon_send(directory, actors::resync_atom::value, uid,
                   std::string{actors::frames_not_forwarded_reason});
  };
  forwarder_ = system.spawn(actors::frame_forwarder_main, std::move(fc));
  // The address peers and tools reach this node's HTTP API at.
  const auto& h = options_.http.host;
  const std::string http_host = !options_.zmq.advertise_host.empty() ? options_.zmq.advertise_host
                                : (h == "0.0.0.0" || h == "::")      ? me.host
                                                                     : h;
  const std::string http = http_host + ":" + std::to_string(http_port);
  // A fresh key at every start: a peer learns it in the handshake, so a
  // reader must have proved the cluster secret since this process began.
  std::random_device entropy;
  auto word = [&entropy] { return uint64_t{entropy()} << 32 | entropy(); };
  read_server_ = std::make_unique<gateway::peer_read_server>(
      options_.zmq.host, me.host, gateway::peer_read_key{word(), word()},
      [index = parts_.index](std::span<const uint64_t> keys) {
        // For each key its holder count, then its holders (peer_read.hpp's
        // reply); the count says which answers come from a copy this node is
        // uncertain of, so the reader asks another owner first (owner_reads.hpp).
        std::vector<actors::holder_list> holders(keys.size());
        index->lookup(keys, holders); // a peer's lookup: never behind this node's sub-batches
        std::vector<uint64_t> flat;
        flat.reserve(keys.size() * 2);
        for (size_t i = 0; i < keys.size(); ++i) {
          uint64_t count = holders[i].size();
          if (index->uncertain(actors::slot_of(keys[i], index->slot_count())))
            count |= gateway::peer_read_uncertain;
          flat.push_back(count);
          flat.insert(flat.end(), holders[i].begin(), holders[i].end());
        }
        return flat;
      },
      tls_);
  read_client_ =
      std::make_unique<gateway::peer_read_client>(options_.cluster.connect_timeout, tls_);
  if (tls_) {
    // The member at host:port, for refusals of connections this node dials.
    auto name = [members = options_.cluster.members](const std::string& host, uint16_t port) {
      for (const auto& m : members)
        if (m.host == host && m.port == port)
          return m.id;
      return std::string{};
    };
    transport_ = std::make_unique<actors::tls_transport>(
        system, actors::tls_transport_options{
                    tls_, std::move(name),
                    std::max<std::chrono::milliseconds>(options_.cluster.connect_timeout,
                                                        std::chrono::seconds{5})});
  }
  actors::cluster_node_config nc;
  nc.options = options_.cluster;
  nc.self_id = c.node_id;
  if (transport_)
    nc.connector = transport_->actor_handle();
  nc.slot_count = c.slot_count;
  nc.links = links_;
  nc.board = board_;
  nc.counters = counters_;
  nc.record = record_;
  nc.record_path = record_path_;
  actors::slot_mover_config mc;
  mc.board = board_;
  mc.shard = shard;
  mc.self_id = c.node_id;
  mc.timeout = c.internal_timeout;
  mc.drop_grace = 2 * options_.cluster.failure_timeout;
  mc.counters = move_counters_;
  mover_ = system.spawn(actors::slot_mover_main, std::move(mc));
  nc.mover = mover_;
  // A refill cut short by a restart goes on: the store then exists, but holds
  // only part of the slots (chaos with disk losses).
  const std::string marker = refill_marker_path();
  if (!started_empty && refill_pending()) {
    spdlog::warn("cluster-refill-resumed node={} reason=cut-short-by-a-restart", c.node_id);
    started_empty = true;
  }
  if (started_empty) {
    if (!marker.empty())
      std::ofstream{marker} << "refill pending\n";
    actors::slot_refill_config rc;
    rc.board = board_;
    rc.shard = shard;
    rc.self_id = c.node_id;
    rc.timeout = c.internal_timeout;
    rc.on_lost = [directory, shard](const std::vector<uint32_t>& slots) {
      // Only the workers' full syncs can refill these: this node's copy is
      // as complete as any, so they stop waiting for a peer's.
      caf::anon_send(shard, actors::refill_atom::value,
                     std::vector<uint64_t>(slots.begin(), slots.end()));
      caf::anon_send(directory, actors::refill_atom::value, uint64_t{slots.size()});
    };
    // The marker stays until every owned slot is copied or known lost; the
    // node greets as unsettled until then (refill_leftovers.hpp).
    auto settled = std::make_shared<std::atomic<bool>>(false);
    auto on_settled = [marker, settled, directory] {
      if (!marker.empty())
        std::remove(marker.c_str());
      settled->store(true);
      caf::anon_send(directory, actors::settled_atom::value);
    };
    // Settled, each owned slot was copied whole or found lost (and so
    // settled one by one); one copied from an owner blank itself stays blank
    // until anti-entropy finds it blank everywhere. Nothing is settled
    // wholesale: that would pass an empty copy for a whole one.
    rc.on_settled = on_settled;
    refill_ = system.spawn(actors::slot_refill_main, std::move(rc));
    nc.refill = refill_;
    // No peer holds an index: nothing existed before, every slot is whole.
    nc.on_refill_skipped = [on_settled, shard] {
      caf::anon_send(shard, actors::settled_atom::value);
      on_settled();
    };
    nc.refill_settled = settled;
  }
  nc.holds_index = [index = parts_.index] { return index->read().entries() > 0; };
  if (options_.cluster.anti_entropy_interval.count() > 0) {
    nc.shared_summary = [index = parts_.index](const actors::cluster_table& t,
                                               cluster::node_index peer) {
      return actors::shared_slots_summary(t, peer, *index);
    };
    nc.agreement = greeting_agreement_;
  }
  nc.clock = parts_.clock;
  nc.peer_clocks = peer_clocks_;
  nc.on_members_changed = [this, shard](const actors::cluster_table& t) {
    // The shard first: a slot this node gains waits for a copy from the
    // sub-batch on that the new placement sends it (coverage.hpp).
    caf::anon_send(shard, actors::members_atom::value, ownership_words(t));
    placement_->store(t.write_masks(), t.record.epoch);
    parts_.index->write().reshare(t.owners->slots_of(options_.controller.node_id).primary);
  };
  nc.local = actors::peer_handles{nullptr,
                                  caf::actor_cast<caf::actor>(shard),
                                  caf::actor_cast<caf::actor>(directory),
                                  caf::actor_cast<caf::actor>(service_),
                                  http,
                                  read_server_->access_endpoint()};
  node_ = system.spawn(actors::cluster_node_main, std::move(nc));
  // Peers get the node's handles from the gate, once they proved the secret.
  actors::peer_handles handles{caf::actor_cast<caf::actor>(node_),
                               caf::actor_cast<caf::actor>(shard),
                               caf::actor_cast<caf::actor>(directory),
                               caf::actor_cast<caf::actor>(service_),
                               http,
                               read_server_->access_endpoint()};
  actors::gate_config gc{c.node_id, options_.cluster.secret, std::move(handles), counters_};
  gc.tell_node = options_.cluster.tls(); // one connection per pair: peers that dial us join us
  gate_ = system.spawn(actors::cluster_gate_main, std::move(gc));
  if (options_.cluster.anti_entropy_interval.count() > 0) {
    actors::anti_entropy_config ac;
    ac.board = board_;
    ac.index = parts_.index;
    ac.shard = shard;
    ac.interval = options_.cluster.anti_entropy_interval;
    ac.timeout = c.internal_timeout;
    ac.directory = directory;
    ac.counters = ae_counters_;
    ac.worker_of = holder_workers_;
    ac.agreement = greeting_agreement_;
    ac.agreement_ttl = 2 * options_.cluster.quiet_heartbeat_interval;
    anti_entropy_ = system.spawn(actors::anti_entropy_main, std::move(ac));
  }
  auto port = transport_ ? transport_->publish(gate_, me.port, options_.zmq.host)
                         : system.middleman().publish(gate_, me.port, options_.zmq.host.c_str(),
                                                      /*reuse_addr=*/true);
  if (!port)
    throw std::runtime_error("cannot listen on the cluster port " + options_.zmq.host + ":" +
                             std::to_string(me.port) + ": " + system.render(port.error()));
  port_ = *port;
  spdlog::info("cluster-listening node={} host={} port={} members={} replicas={} tls={}", c.node_id,
               options_.zmq.host, port_, table->peers.size(), options_.cluster.replicas,
               tls_ != nullptr);
}

void node_cluster::leave(const actors::directory_actor& directory) {
  if (!node_ || !directory)
    return;
  const auto started = steady_now();
  caf::scoped_actor self{parts_.system};
  // The board shows this node out of the live set before the directory is
  // asked, so that it counts every worker it must hand over.
  self->request(node_, options_.cluster.failure_timeout, actors::leave_atom::value)
      .receive([](bool) {}, [](caf::error&) {});
  // The directory answers once every worker is handed over; the failure
  // timeout bounds a clean stop's wait (a peer that never asks, say).
  uint64_t pending = 1;
  self->request(directory, options_.cluster.failure_timeout, actors::leave_atom::value)
      .receive([&](uint64_t n) { pending = n; }, [&](caf::error&) {});
  const auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(steady_now() - started).count();
  if (pending == 0)
    spdlog::info("cluster-left node={} ms={}", options_.controller.node_id, ms);
  else
    spdlog::warn("cluster-leave-incomplete node={} ms={} reason=timeout",
                 options_.controller.node_id, ms);
}

size_t node_cluster::await_joined() {
  // Also until every joined peer greeted and none has a newer member set
  // (a node back from downtime learns of a membership change first).
  auto presumed = [this] {
    const auto table = board_->current();
    size_t n = table->members_settled ? 0 : 1;
    for (size_t i = 0; i < table->peers.size(); ++i)
      if (table->peers[i].live && !table->reachable(static_cast<actors::node_index>(i)))
        ++n;
    return n;
  };
  // The joins arrive on the node actor's thread; the board has no waiters,
  // and this runs once per start, so a short poll is the simple way.
  const auto deadline =
      steady_now() + options_.cluster.connect_timeout + options_.cluster.failure_timeout;
  size_t left = presumed();
  while (left > 0 && steady_now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    left = presumed();
  }
  if (left > 0)
    spdlog::warn("cluster-join-incomplete node={} presumed_peers={} (serving anyway)",
                 options_.controller.node_id, left);
  return left;
}

void node_cluster::drain_forwards() {
  if (!forwarder_)
    return;
  caf::scoped_actor self{parts_.system};
  self->request(forwarder_, options_.cluster.failure_timeout, actors::drain_atom::value)
      .receive([](bool) {},
               [this](caf::error& e) {
                 spdlog::warn("forwards-not-drained node={} error={}", options_.controller.node_id,
                              caf::to_string(e));
               });
}

void node_cluster::stop() {
  auto exit = [](const auto& h) {
    if (h)
      caf::anon_send_exit(h, caf::exit_reason::user_shutdown);
  };
  exit(gate_);
  exit(node_);
  exit(service_);
  exit(forwarder_);
  exit(anti_entropy_);
  exit(mover_);
  exit(refill_);
  for (auto& l : links_)
    exit(l);
  links_.clear();
  gate_ = nullptr;
  node_ = nullptr;
  service_ = nullptr;
  forwarder_ = nullptr;
  anti_entropy_ = nullptr;
  mover_ = nullptr;
  refill_ = nullptr;
  // The TLS middleman actor is detached: it must be gone before the system ends.
  if (transport_)
    transport_->stop();
}

void node_cluster::close_reads() {
  read_server_.reset();
  read_client_.reset();
}

std::map<std::string, std::string> node_cluster::snapshot_files() const {
  std::map<std::string, std::string> files;
  if (record_path_.empty())
    return files;
  std::ifstream in(record_path_);
  if (!in)
    return files; // no change stored yet: the configured members
  std::stringstream text;
  text << in.rdbuf();
  files.emplace(record_file, text.str());
  return files;
}

actors::holder_reads node_cluster::holders(const std::vector<uint64_t>& keys) {
  auto table = board_->current();
  const uint32_t slots = table->owners->slot_count();
  std::vector<actors::holder_list> out(keys.size());
  gateway::owner_read_routes routes;
  routes.self = table->self;
  routes.owner = [&](uint32_t i, std::span<const gateway::owner_index> avoid, bool complete_only) {
    const uint32_t slot = actors::slot_of(keys[i], slots);
    const auto owner = table->read_owner(slot, avoid, complete_only);
    if (owner != table->self || !parts_.index->uncertain(slot))
      return owner;
    // This node's copy may lack ops another owner's holds (it missed a
    // sub-batch and waits for a copy: coverage.hpp): read that one when it
    // answers; this one joins if it is uncertain too (owner_reads.hpp).
    std::vector<gateway::owner_index> also_self(avoid.begin(), avoid.end());
    also_self.push_back(table->self);
    const auto other = table->read_owner(slot, also_self, complete_only);
    return other != cluster::no_node ? other : owner;
  };
  routes.endpoint = [&](gateway::owner_index n) { return table->peers[n].handles.read; };
  routes.refresh = [&] { table = board_->current(); };
  routes.reachable = [&](gateway::owner_index n) { return table->reachable(n); };
  auto add_holders = [&](uint32_t i, std::span<const actors::holder_id> holders) {
    for (actors::holder_id h : holders)
      if (std::find(out[i].begin(), out[i].end(), h) == out[i].end())
        out[i].push_back(h);
  };
  routes.read_local = [&](std::span<const uint32_t> items, bool add) {
    actors::holder_list mine;
    for (uint32_t i : items) {
      mine.clear();
      parts_.index->lookup(std::span<const uint64_t>{&keys[i], 1},
                           std::span<actors::holder_list>{&mine, 1});
      if (!add)
        out[i].clear();
      add_holders(i, mine);
    }
  };
  routes.fill = [&](uint32_t i, std::span<const uint64_t> holders, bool add) {
    if (!add)
      out[i].clear();
    add_holders(i, holders);
  };
  routes.local_uncertain = [&](uint32_t i) {
    return parts_.index->uncertain(actors::slot_of(keys[i], slots));
  };
  gateway::owner_read_options reads;
  reads.timeout = options_.controller.internal_timeout;
  reads.hedge_delay = options_.cluster.read_hedge_delay;
  const auto outcome = gateway::read_owners(keys, routes, *read_client_, reads);
  if (outcome.hedged > 0)
    parts_.metrics.count_event("lookup_read_hedged", outcome.hedged);
  if (outcome.rerouted > 0)
    parts_.metrics.count_event("lookup_read_rerouted", outcome.rerouted);
  if (outcome.uncertain > 0)
    parts_.metrics.count_event("lookup_read_uncertain", outcome.uncertain);
  // Every owner that answered was uncertain of its copy: the answer may be
  // short until a copy resolves it (docs/convergence.md).
  if (outcome.provisional > 0) {
    parts_.metrics.count_event("lookup_read_provisional", outcome.provisional);
    const uint64_t keys_since = provisional_since_log_ += outcome.provisional;
    const int64_t now =
        std::chrono::duration_cast<std::chrono::milliseconds>(steady_now().time_since_epoch())
            .count();
    int64_t last = provisional_logged_ms_.load();
    if (now - last >= 1000 && provisional_logged_ms_.compare_exchange_strong(last, now)) {
      provisional_since_log_ -= keys_since;
      spdlog::warn("lookup-read-provisional keys={} provisional={} first_unsure={} "
                   "keys_since_last_line={} reason=every-answering-owner-uncertain",
                   keys.size(), outcome.provisional, outcome.first_unsure, keys_since);
    }
  }
  if (outcome.unanswered > 0) {
    parts_.metrics.count_event("lookup_owner_unreachable");
    spdlog::warn("lookup-read-incomplete keys={} unanswered={} hedged={} rerouted={}", keys.size(),
                 outcome.unanswered, outcome.hedged, outcome.rerouted);
  }
  return actors::holder_reads{std::move(out), outcome.first_unsure};
}

std::string node_cluster::refill_marker_path() const {
  return options_.persistence ? options_.data_dir + "/" + refill_marker_file : std::string{};
}

bool node_cluster::refill_pending() const {
  const std::string marker = refill_marker_path();
  return !marker.empty() && std::ifstream{marker}.good();
}

bool node_cluster::founding_member() const {
  if (record_ && record_->epoch > 0)
    return false;
  const auto& self = options_.controller.node_id;
  return std::any_of(options_.cluster.members.begin(), options_.cluster.members.end(),
                     [&](const auto& m) { return m.id == self && !m.standby; });
}

gateway::members_outcome node_cluster::change_members(const std::vector<std::string>& ids) {
  for (const auto& id : ids)
    if (id.empty())
      return gateway::members_outcome{.status = 422, .error = "bad node id \"\""};
  gateway::members_outcome out;
  caf::scoped_actor self{parts_.system};
  self->request(node_, options_.controller.internal_timeout, actors::propose_atom::value, ids)
      .receive([&](std::string& record) { out.record = std::move(record); },
               [&](caf::error& e) {
                 out.status = 409;
                 // The refusal's reason, without CAF's error wrapping.
                 const auto& ctx = e.context();
                 out.error = ctx.match_elements<std::string>() ? ctx.get_as<std::string>(0)
                                                               : caf::to_string(e);
               });
  return out;
}

std::vector<uint64_t> node_cluster::ownership_words(const actors::cluster_table& t) {
  const uint32_t slots = t.owners->slot_count();
  std::vector<uint64_t> words(slots, actors::not_owned);
  for (uint32_t s = 0; s < slots; ++s)
    if (cluster::owns(*t.owners, t.self, s))
      words[s] = t.previous && t.gained(t.self, s) ? t.record.epoch : 0;
  return words;
}

void node_cluster::forward(uint16_t node, actors::pushed_msgs msgs) {
  caf::anon_send(forwarder_, actors::push_atom::value, node, std::move(msgs));
}

} // namespace lmcc::apps
