#include "actors/cluster/cluster_node.hpp"

#include "actors/directory.hpp"
#include "cluster/handshake.hpp"
#include "cluster/membership_change.hpp"

#include <caf/io/middleman.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <tuple>

namespace lmcc::actors {

// -- node ------------------------------------------------------------------------------

namespace {

using node_self = cluster_node_actor::stateful_pointer<cluster_node_state>;
using clock_type = std::chrono::steady_clock;

/// What the member set says; publish() adds what this node learnt of each peer.
std::shared_ptr<cluster_table> make_table(const cluster::membership& m,
                                          std::shared_ptr<const cluster::placement> owners) {
  auto t = std::make_shared<cluster_table>();
  t->owners = std::move(owners);
  t->previous = std::make_shared<const cluster::placement>(m.previous());
  t->record = m.record();
  t->live_owners = std::make_shared<const cluster::placement>(m.live_placement());
  t->self = m.self();
  t->peers.resize(m.size());
  for (size_t i = 0; i < m.size(); ++i) {
    t->peers[i].live = m.live(static_cast<node_index>(i));
    t->peers[i].leaving = m.leaving(static_cast<node_index>(i));
  }
  t->members = m.view();
  t->ring_version = m.ring_version();
  t->all_live = m.all_live();
  return t;
}

/// This node came back empty and its copies are not all its own yet.
bool unsettled(const cluster_node_state& st) {
  return st.refill.refilling() || (st.cfg.refill_settled && !st.cfg.refill_settled->load());
}

void pace_ticks(node_self self);

void publish(node_self self) {
  auto& st = self->state;
  auto table = make_table(*st.members, st.owners);
  const node_index me = st.members->self();
  for (size_t i = 0; i < table->peers.size(); ++i) {
    auto& p = table->peers[i];
    p.handles = i == me ? st.cfg.local : st.peers[i].handles;
    p.copying = i == me ? !st.self_ready : !st.peer_ready[i];
    p.refilling = i == me ? st.refill.refilling() : st.peer_refilling[i] != 0;
    p.unsettled = i == me ? unsettled(st) : st.peer_unsettled[i] != 0;
    p.greeted = i == me || st.greeted[i] != 0;
  }
  table->members_settled = true;
  for (size_t i = 0; i < st.peers.size(); ++i)
    if (st.peers[i].handles.node && (!st.greeted[i] || st.ahead[i]))
      table->members_settled = false;
  // The directory hears of every change of which peers are reachable, not
  // only of ring changes: worker homes follow liveness (it hands off or takes
  // over), and a peer that joined (a presumed-live one, the ring unchanged)
  // must count as reachable before its loss can arm the workers' seq checks.
  bool moved = !st.last_published || st.last_published->ring_version != table->ring_version ||
               st.last_published->record != table->record;
  for (size_t i = 0; !moved && i < table->peers.size(); ++i)
    moved = st.last_published->reachable(static_cast<node_index>(i)) !=
            table->reachable(static_cast<node_index>(i));
  st.last_published = table;
  st.cfg.board->publish(std::move(table));
  if (moved && st.cfg.local.directory)
    self->send(caf::actor_cast<directory_actor>(st.cfg.local.directory), ring_atom::value);
  pace_ticks(self); // what changed may need the fast pace now
}

void greet(node_self self, size_t i) {
  auto& st = self->state;
  const caf::actor& peer_node = st.peers[i].handles.node;
  st.peers[i].last_greeted = clock_type::now();
  const auto& r = st.members->record();
  cluster::greeting g;
  g.node_id = st.cfg.self_id;
  g.leaving = st.members->leaving();
  g.epoch = r.epoch;
  g.identity = r.identity();
  g.committed = r.committed;
  g.ready = st.self_ready;
  g.refilling = st.refill.refilling();
  g.holds_index = st.cfg.holds_index && st.cfg.holds_index();
  g.unsettled = unsettled(st);
  g.wall_ms = st.cfg.clock->wall_ms();
  if (st.cfg.shared_summary && st.last_published)
    g.shared_summary = st.cfg.shared_summary(*st.last_published, static_cast<node_index>(i));
  self->send(caf::actor_cast<cluster_node_actor>(peer_node), greet_atom::value, std::move(g));
}

/// Greets every connected peer now: what this node says in a greeting changed.
void greet_all(node_self self) {
  for (size_t i = 0; i < self->state.peers.size(); ++i)
    if (self->state.peers[i].handles.node)
      greet(self, i);
}

void adopt(node_self self, const cluster::membership_record& r, std::string_view source);

/// Commits a joint change once this node and every live new member copied
/// their slots (a dead one catches up when it returns, as after any failure).
void maybe_commit(node_self self) {
  auto& st = self->state;
  if (!st.members->joint() || !st.self_ready)
    return;
  for (size_t i = 0; i < st.peers.size(); ++i) {
    const auto n = static_cast<node_index>(i);
    if (n != st.members->self() && st.members->member(n) && st.members->live(n) &&
        !st.peer_ready[i])
      return;
  }
  auto committed = st.members->record();
  committed.committed = true;
  adopt(self, committed, "commit");
}

/// Takes `r` as this node's member set: stores it, republishes the table,
/// and starts (joint) or finishes (committed) moving slots.
void adopt(node_self self, const cluster::membership_record& r, std::string_view source) {
  auto& st = self->state;
  const bool same_change =
      r.epoch == st.members->record().epoch && r.identity() == st.members->record().identity();
  if (auto ok = st.members->adopt(r); !ok) {
    if (st.cfg.counters)
      ++st.cfg.counters->records_refused;
    spdlog::error("cluster-members-refused node={} epoch={} source={} reason={}", st.cfg.self_id,
                  r.epoch, source, ok.error().message);
    return;
  }
  if (!st.cfg.record_path.empty())
    if (auto stored = cluster::store_record(st.cfg.record_path, r); !stored)
      spdlog::error("cluster-members-not-stored node={} epoch={} reason={}", st.cfg.self_id,
                    r.epoch, stored.error().message);
  st.owners = std::make_shared<const cluster::placement>(st.members->owners());
  std::fill(st.ahead.begin(), st.ahead.end(), uint8_t{0}); // re-learnt from the next greetings
  if (!same_change) {
    // Everyone copies the slots it gains in this change; a node that missed
    // the joint phase (it was down) copies them once it hears of the commit.
    std::fill(st.peer_ready.begin(), st.peer_ready.end(), uint8_t{0});
    st.self_ready = false;
  }
  std::string ids;
  for (const auto& id : r.member_ids())
    ids += (ids.empty() ? "" : ",") + id;
  spdlog::info("cluster-members node={} epoch={} state={} members={} source={}", st.cfg.self_id,
               r.epoch, r.committed ? "committed" : "joint", ids, source);
  publish(self);
  if (st.cfg.on_members_changed)
    st.cfg.on_members_changed(*st.last_published);
  // Peers hear of it at once (and again with every greeting until they have it).
  const std::string text = cluster::to_json(r);
  for (const auto& p : st.peers)
    if (p.handles.node)
      self->send(caf::actor_cast<cluster_node_actor>(p.handles.node), members_atom::value, text);
  if (!st.cfg.mover)
    return;
  if (!st.self_ready) {
    self->request(st.cfg.mover, caf::infinite, members_atom::value, r.epoch, r.identity())
        .then([self, epoch = r.epoch, identity = r.identity()](bool) {
          auto& st = self->state;
          const auto& now = st.members->record();
          if (now.epoch != epoch || now.identity() != identity || st.self_ready)
            return;
          st.self_ready = true;
          spdlog::info("cluster-members-ready node={} epoch={}", st.cfg.self_id, epoch);
          publish(self); // lookups may read this node's gained slots now
          greet_all(self);
          maybe_commit(self);
        });
  }
  if (r.committed)
    self->send(st.cfg.mover, retire_atom::value, r.epoch, r.identity());
}

/// A peer greeted a node that came back empty (refill_gate.hpp): copy every
/// owned slot once a peer holds an index; stop refilling when none does.
void on_refill_greeting(node_self self, bool peer_holds_index) {
  auto& st = self->state;
  bool every_live_peer_greeted = true;
  for (size_t n = 0; n < st.peers.size(); ++n)
    if (n != st.members->self() && st.members->live(static_cast<node_index>(n)) && !st.greeted[n])
      every_live_peer_greeted = false;
  auto ended = [self](std::string_view how) {
    auto& st = self->state;
    spdlog::info("cluster-refill-ended node={} how={}", st.cfg.self_id, how);
    publish(self); // lookups may read this node's slots again
    greet_all(self);
  };
  switch (st.refill.on_greeting(peer_holds_index, every_live_peer_greeted)) {
  case refill_gate::step::none:
    return;
  case refill_gate::step::skip:
    if (st.cfg.on_refill_skipped)
      st.cfg.on_refill_skipped();
    ended("no-peer-holds-an-index");
    return;
  case refill_gate::step::start:
    // The index survives on the peers: no worker need resync because this
    // node's store is empty.
    self->send(caf::actor_cast<directory_actor>(st.cfg.local.directory), refill_atom::value);
    self->request(st.cfg.refill, caf::infinite, repair_atom::value).then([self, ended](uint64_t) {
      self->state.refill.done();
      ended("copied");
    });
  }
}

void lost(node_self self, size_t i, std::string_view why) {
  auto& st = self->state;
  auto& p = st.peers[i];
  const auto& id = st.members->address(static_cast<node_index>(i)).id;
  if (p.handles.node)
    self->demonitor(p.handles.node);
  p.handles = {};
  p.next_attempt = clock_type::now();
  const bool was_live = st.members->on_lost(id);
  if ((was_live || why == "silent") && st.cfg.counters)
    ++st.cfg.counters->peers_lost;
  if (i < st.cfg.links.size() && st.cfg.links[i])
    self->send(st.cfg.links[i], peer_atom::value, caf::actor{});
  spdlog::warn("cluster-peer-lost node={} peer={} reason={} ring={:016x} live={}", st.cfg.self_id,
               id, why, st.members->ring_version(), st.members->live_count());
  publish(self);
}

void failed(node_self self, size_t i, const caf::error& e) {
  auto& st = self->state;
  auto& p = st.peers[i];
  p.connecting = false;
  ++p.failures;
  // 1x, 2x, 4x, 8x the connect timeout, with jitter so peers do not retry in step.
  const auto base = st.cfg.options.connect_timeout;
  const auto backoff = base * (1U << std::min<uint32_t>(p.failures - 1, 3));
  const auto jitter = std::chrono::milliseconds(st.rng() % (base.count() / 4 + 1));
  p.next_attempt = clock_type::now() + backoff / 4 + jitter;
  const auto& id = st.members->address(static_cast<node_index>(i)).id;
  if (st.cfg.counters)
    ++st.cfg.counters->joins_failed;
  // A peer presumed live at start is down once it cannot be reached.
  if (st.members->on_lost(id)) {
    spdlog::info("cluster-peer-unreachable node={} peer={} ring={:016x} live={}", st.cfg.self_id,
                 id, st.members->ring_version(), st.members->live_count());
    publish(self);
  }
  // The first failure and then every 20th: a peer that is down for long must
  // not fill the log.
  if (p.failures == 1 || p.failures % 20 == 0)
    spdlog::info("cluster-connect-failed node={} peer={} attempts={} error={}", st.cfg.self_id, id,
                 p.failures, caf::to_string(e));
}

void joined(node_self self, size_t i, peer_handles handles) {
  auto& st = self->state;
  auto& p = st.peers[i];
  p.connecting = false;
  p.failures = 0;
  if (p.handles.node) // joined again (a new process, or its rejoin): the old ones are done
    self->demonitor(p.handles.node);
  p.handles = std::move(handles);
  self->monitor(p.handles.node);
  const auto& id = st.members->address(static_cast<node_index>(i)).id;
  st.members->on_greeting(id, clock_type::now());
  // Until it greets (with its record) this node cannot tell whether its own
  // member set is current; greeting first makes it answer at once.
  st.greeted[i] = 0;
  st.ahead[i] = 0;
  // Nor whether it came back empty: its slots are read elsewhere until its
  // greeting says (refill_gate.hpp).
  st.peer_refilling[i] = 1;
  greet(self, i);
  if (i < st.cfg.links.size() && st.cfg.links[i])
    self->send(st.cfg.links[i], peer_atom::value, p.handles.shard);
  // The peer's copy of the Directory may lack what changed while it was away.
  if (st.cfg.local.directory)
    self->send(caf::actor_cast<directory_actor>(st.cfg.local.directory), peer_atom::value,
               p.handles.directory);
  spdlog::info("cluster-peer-joined node={} peer={} ring={:016x} live={}/{}", st.cfg.self_id, id,
               st.members->ring_version(), st.members->live_count(), st.members->size());
  publish(self);
}

void connect(node_self self, size_t i) {
  auto& st = self->state;
  auto& p = st.peers[i];
  p.connecting = true;
  if (st.cfg.counters)
    ++st.cfg.counters->connect_attempts;
  const auto& addr = st.members->address(static_cast<node_index>(i));
  const auto timeout = st.cfg.options.connect_timeout;
  // Through the TLS transport when the node has one (tls_transport.hpp).
  auto mm = st.cfg.connector ? st.cfg.connector : self->system().middleman().actor_handle();
  self->request(mm, timeout, caf::connect_atom::value, addr.host, addr.port)
      .then(
          [self, i, timeout](const caf::node_id&, caf::strong_actor_ptr& ptr,
                             const std::set<std::string>& ifs) {
            auto& st = self->state;
            // Only the first step's interface is the same in every version:
            // a gate of another one is refused at its answer, below.
            if (!ptr || !self->system().assignable<cluster_hello_actor>(ifs)) {
              // Before versions were exchanged (an lmcc of 2026-12-01 or
              // older), or not an lmcc gate at all.
              spdlog::error("cluster-peer-refused node={} peer={} reason=protocol-version "
                            "detail=its-gate-predates-versioned-handshakes version={}",
                            st.cfg.self_id, st.members->address(static_cast<node_index>(i)).id,
                            cluster::cluster_protocol_version);
              failed(self, i, caf::make_error(caf::sec::unexpected_actor_messaging_interface));
              return;
            }
            auto gate = caf::actor_cast<cluster_gate_actor>(ptr);
            const uint64_t client_nonce = st.rng();
            self->request(caf::actor_cast<cluster_hello_actor>(ptr), timeout, hello_atom::value,
                          st.cfg.self_id, client_nonce, cluster::cluster_protocol_version)
                .then(
                    [self, i, gate, timeout, client_nonce](uint64_t server_nonce,
                                                           uint32_t version) {
                      auto& st = self->state;
                      const auto& peer_id = st.members->address(static_cast<node_index>(i)).id;
                      if (version != cluster::cluster_protocol_version) {
                        spdlog::error(
                            "cluster-peer-refused node={} peer={} reason=protocol-version "
                            "peer_version={} version={}",
                            st.cfg.self_id, peer_id, version, cluster::cluster_protocol_version);
                        failed(self, i, caf::make_error(caf::sec::runtime_error));
                        return;
                      }
                      auto mac = cluster::handshake_mac(
                          st.cfg.options.secret, cluster::handshake_role::join, st.cfg.self_id,
                          peer_id, client_nonce, server_nonce);
                      auto on_accept = [self, i, client_nonce, server_nonce](std::string& accept,
                                                                             peer_handles& hs) {
                        auto& st = self->state;
                        const auto& peer = st.members->address(static_cast<node_index>(i)).id;
                        auto expected = cluster::handshake_mac(
                            st.cfg.options.secret, cluster::handshake_role::accept, st.cfg.self_id,
                            peer, client_nonce, server_nonce);
                        if (!cluster::mac_equal(accept, expected) || !hs.complete()) {
                          spdlog::error("cluster-peer-refused node={} peer={} "
                                        "reason=peer-does-not-prove-the-secret",
                                        st.cfg.self_id, peer);
                          failed(self, i, caf::make_error(caf::sec::runtime_error));
                          return;
                        }
                        joined(self, i, std::move(hs));
                      };
                      auto on_error = [self, i](caf::error& e) { failed(self, i, e); };
                      if (!st.cfg.options.tls()) {
                        self->request(gate, timeout, join_atom::value, st.cfg.self_id, client_nonce,
                                      mac)
                            .then(std::move(on_accept), std::move(on_error));
                        return;
                      }
                      // With TLS our own handles too: the peer takes us as
                      // joined from them instead of dialling back.
                      auto own = st.cfg.local;
                      own.node = caf::actor_cast<caf::actor>(self);
                      self->request(gate, timeout, join_atom::value, st.cfg.self_id, client_nonce,
                                    mac, std::move(own))
                          .then(std::move(on_accept), std::move(on_error));
                    },
                    [self, i](caf::error& e) { failed(self, i, e); });
          },
          [self, i](caf::error& e) { failed(self, i, e); });
}

/// Whether this node dials peer `i`: always over plain TCP; with TLS only a
/// peer whose id sorts after this node's (one connection per pair: the other
/// peer dials us, and our gate passes its handles on).
bool dials(const cluster_node_state& st, size_t i) {
  return !st.cfg.options.tls() ||
         st.cfg.self_id < st.members->address(static_cast<node_index>(i)).id;
}

/// Whether the cluster is changing as this node sees it: a peer to connect
/// to, or anything a greeting tells not agreed yet (the member set, a copy
/// or a refill). Greetings then go out every heartbeat_interval, else every
/// quiet_heartbeat_interval.
bool changing(const cluster_node_state& st) {
  if (unsettled(st) || !st.self_ready || st.members->joint())
    return true;
  for (size_t i = 0; i < st.peers.size(); ++i) {
    if (i == st.members->self())
      continue;
    if (!st.peers[i].handles.node) {
      if (dials(st, i))
        return true; // connect attempts follow their own backoff
      continue;
    }
    if (!st.greeted[i] || st.ahead[i] || !st.peer_ready[i] || st.peer_refilling[i] ||
        st.peer_unsettled[i])
      return true;
  }
  return false;
}

/// The delay to the next tick: the greeting interval, or sooner when a live
/// peer's silence would pass the failure timeout before it (so that a frozen
/// peer is found down on time however seldom the ticks come).
std::chrono::milliseconds next_tick_delay(const cluster_node_state& st, bool fast) {
  const auto& o = st.cfg.options;
  auto delay = fast ? o.heartbeat_interval : o.quiet_heartbeat_interval;
  if (auto deadline = st.members->next_silence_deadline()) {
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(*deadline - clock_type::now());
    delay = std::clamp(left + std::chrono::milliseconds{1}, std::chrono::milliseconds{1}, delay);
  }
  return delay;
}

/// A quiet node's next tick may be a whole quiet interval away: once the
/// cluster changes (a peer lost, a new member set) it comes at the fast pace.
void pace_ticks(node_self self) {
  if (changing(self->state))
    arm_sooner_tick(self, self->state.tick, self->state.cfg.options.heartbeat_interval);
}

/// One round of the failure detector: greets the peers that are due, dials
/// the unconnected ones that are due, and takes silent peers for down.
/// Returns whether the cluster is changing (the next round's pace).
bool tick(node_self self) {
  auto& st = self->state;
  const auto now = clock_type::now();
  const bool fast = changing(st);
  // A quiet peer is greeted once per quiet interval, even when a tick comes
  // sooner (a silence deadline); a little early rather than a round late.
  const auto greet_after =
      fast ? std::chrono::milliseconds{0}
           : st.cfg.options.quiet_heartbeat_interval - st.cfg.options.quiet_heartbeat_interval / 8;
  for (size_t i = 0; i < st.peers.size(); ++i) {
    if (i == st.members->self())
      continue;
    auto& p = st.peers[i];
    if (p.handles.node) {
      if (now - p.last_greeted >= greet_after)
        greet(self, i);
    } else if (!p.connecting && now >= p.next_attempt && dials(st, i)) {
      connect(self, i);
    }
  }
  // Silent peers: the greetings stopped although the connection is up.
  std::vector<size_t> was_live;
  for (size_t i = 0; i < st.peers.size(); ++i)
    if (i != st.members->self() && st.members->live(static_cast<node_index>(i)))
      was_live.push_back(i);
  const uint64_t stalls = st.members->stalls();
  const bool changed = st.members->tick(now);
  if (st.members->stalls() != stalls) {
    // Peers took this node for down meanwhile and wrote around it; what they
    // queued for it may be gone (a peer restarted): the next sub-batch of
    // each holder says so by its `prev` (coverage.hpp), and anti-entropy
    // copies what a quiet holder's copies here lack.
    spdlog::warn("cluster-own-stall node={} ms={}", st.cfg.self_id,
                 st.members->last_stall().count());
  }
  if (changed)
    for (size_t i : was_live)
      if (!st.members->live(static_cast<node_index>(i)))
        lost(self, i, "silent");
  return fast || changing(st);
}

} // namespace

cluster::expected<std::shared_ptr<const cluster_table>>
initial_cluster_table(const cluster::cluster_options& options, const std::string& self_id,
                      uint32_t slot_count, std::optional<cluster::membership_record> record) {
  auto m = cluster::membership::make(options, self_id, slot_count, std::move(record));
  if (!m)
    return m.error();
  m->presume_live(clock_type::now());
  return std::shared_ptr<const cluster_table>{
      make_table(*m, std::make_shared<const cluster::placement>(m->owners()))};
}

cluster_node_actor::behavior_type
cluster_node_main(cluster_node_actor::stateful_pointer<cluster_node_state> self,
                  cluster_node_config cfg) {
  auto& st = self->state;
  st.cfg = std::move(cfg);
  // The runtime checked the options with initial_cluster_table() already.
  st.members = std::make_unique<cluster::membership>(std::move(*cluster::membership::make(
      st.cfg.options, st.cfg.self_id, st.cfg.slot_count, st.cfg.record)));
  st.members->presume_live(clock_type::now());
  st.owners = std::make_shared<const cluster::placement>(st.members->owners());
  st.peers.resize(st.members->size());
  st.peer_ready.assign(st.members->size(), 0);
  st.peer_refilling.assign(st.members->size(), 0);
  st.peer_unsettled.assign(st.members->size(), 0);
  st.refill = refill_gate{static_cast<bool>(st.cfg.refill)};
  if (st.cfg.refill)
    spdlog::info("cluster-refill-waiting node={} reason=empty-store", st.cfg.self_id);
  st.greeted.assign(st.members->size(), 0);
  st.ahead.assign(st.members->size(), 0);
  publish(self);
  // Back during a change (a restart while joint): copy the gained slots again.
  if (st.members->joint() && st.cfg.mover) {
    st.self_ready = false;
    adopt(self, st.members->record(), "restart");
  }
  self->set_down_handler([self](caf::down_msg& dm) {
    auto& st = self->state;
    for (size_t i = 0; i < st.peers.size(); ++i)
      if (st.peers[i].handles.node && st.peers[i].handles.node.address() == dm.source) {
        st.peers[i].handles.node = nullptr; // already gone: no demonitor
        lost(self, i, "connection-lost");
        return;
      }
  });
  st.tick = {}; // the first tick now, whatever publish() armed
  self->send(self, tick_atom::value);
  return {
      [self](greet_atom, const cluster::greeting& g) {
        auto& st = self->state;
        const std::string& peer = g.node_id;
        const int64_t offset =
            static_cast<int64_t>(g.wall_ms) - static_cast<int64_t>(st.cfg.clock->wall_ms());
        if (st.cfg.peer_clocks->add_sample(peer, offset))
          spdlog::warn("peer-clock-offset node={} peer={} offset_ms={} sample_ms={}",
                       st.cfg.self_id, peer, st.cfg.peer_clocks->of(peer), offset);
        auto i = st.members->index_of(peer);
        // Only a joined peer counts: before our own join we lack its handles.
        if (!i || !st.peers[*i].handles.node)
          return;
        const auto& mine = st.members->record();
        const auto their_key = std::tuple{g.epoch, g.identity, g.committed};
        const auto my_key = std::tuple{mine.epoch, mine.identity(), mine.committed};
        if (their_key < my_key) // it lacks our record: send it (again)
          self->send(caf::actor_cast<cluster_node_actor>(st.peers[*i].handles.node),
                     members_atom::value, cluster::to_json(mine));
        const bool was_settled = st.greeted[*i] && !st.ahead[*i];
        st.greeted[*i] = 1;
        st.ahead[*i] = my_key < their_key ? 1 : 0;
        if (st.ahead[*i]) // ours is older: greet back at once, it answers with its record
          greet(self, *i);
        if (was_settled != (st.greeted[*i] && !st.ahead[*i]))
          publish(self);
        const bool ready = g.epoch == mine.epoch && g.identity == mine.identity() && g.ready;
        if (ready != (st.peer_ready[*i] != 0)) {
          st.peer_ready[*i] = ready ? 1 : 0;
          publish(self); // reads go to it (or no longer) for the slots it gained
          if (ready)
            maybe_commit(self);
        }
        if (g.refilling != (st.peer_refilling[*i] != 0)) {
          st.peer_refilling[*i] = g.refilling ? 1 : 0;
          publish(self); // reads of its slots go elsewhere (or back)
        }
        if (g.unsettled != (st.peer_unsettled[*i] != 0)) {
          st.peer_unsettled[*i] = g.unsettled ? 1 : 0;
          publish(self); // a refill here must not take its copies for its own
        }
        if (st.cfg.agreement && *i < st.cfg.agreement->agreed_at_ms.size()) {
          const bool agreed = g.shared_summary != 0 && st.cfg.shared_summary && st.last_published &&
                              g.shared_summary == st.cfg.shared_summary(*st.last_published, *i);
          st.cfg.agreement->agreed_at_ms[*i].store(agreed ? monotonic_ms() : 0,
                                                   std::memory_order_relaxed);
        }
        if (st.refill.refilling())
          on_refill_greeting(self, g.holds_index);
        if (st.members->on_greeting(peer, clock_type::now(), g.leaving)) {
          spdlog::info("cluster-peer-{} node={} peer={} ring={:016x}",
                       g.leaving ? "leaving" : "back", st.cfg.self_id, peer,
                       st.members->ring_version());
          publish(self);
        }
      },
      [self](leave_atom) {
        auto& st = self->state;
        st.members->leave();
        spdlog::info("cluster-leaving node={} ring={:016x}", st.cfg.self_id,
                     st.members->ring_version());
        publish(self);
        greet_all(self);
        return true;
      },
      [self](members_atom, const std::string& text) {
        auto& st = self->state;
        auto r = cluster::record_from_json(text);
        if (!r) {
          if (st.cfg.counters)
            ++st.cfg.counters->records_refused;
          spdlog::error("cluster-members-refused node={} reason={}", st.cfg.self_id,
                        r.error().message);
          return;
        }
        if (cluster::supersedes(*r, st.members->record()))
          adopt(self, *r, "peer");
      },
      [self](propose_atom, const std::vector<std::string>& ids) -> caf::result<std::string> {
        auto& st = self->state;
        auto next = cluster::propose_members(*st.members, ids, st.cfg.options.replicas);
        if (!next) {
          spdlog::warn("cluster-members-change-refused node={} members={} reason={}",
                       st.cfg.self_id, fmt::join(ids, ","), next.error().message);
          return caf::make_error(caf::sec::runtime_error, next.error().message);
        }
        adopt(self, *next, "operator");
        return cluster::to_json(st.members->record());
      },
      [self](join_atom, const std::string& peer, peer_handles& hs) {
        // A peer dialled us and proved the secret (our gate checked it).
        auto& st = self->state;
        auto i = st.members->index_of(peer);
        if (!i || *i == st.members->self() || dials(st, *i)) {
          // Not a member we know, or one we dial ourselves (its config
          // orders the ids otherwise): our own join stands.
          if (!i || *i == st.members->self())
            spdlog::warn("cluster-join-ignored node={} peer={} reason=not-a-member", st.cfg.self_id,
                         peer);
          return;
        }
        if (st.peers[*i].handles.node == hs.node)
          return; // the same join again
        joined(self, *i, std::move(hs));
      },
      [self](tick_atom) {
        auto& st = self->state;
        if (!st.tick.fire(steady_now()))
          return; // superseded by a sooner tick
        const bool fast = tick(self);
        arm_sooner_tick(self, st.tick, next_tick_delay(st, fast));
      },
  };
}

} // namespace lmcc::actors
