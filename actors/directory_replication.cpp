// directory_replication: the directory's part in keeping every node's copy
// of the registry alike — the rows, phases, owed full syncs and locations a
// worker's home replicates to its peers and applies from them, the whole
// directory a node sends a peer that (re)joins, and heartbeat times gathered
// for the peers and for workers' homes elsewhere. directory.cpp is the actor
// and its local work; worker_homes.cpp (actors/cluster/) moves entities.
#include "actors/internal/directory_impl.hpp"
#include "clock/clock.hpp"

#include <absl/container/flat_hash_set.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <span>
#include <vector>

namespace lmcc::actors {

namespace {

/// What applying a peer's copy of a worker's row did.
struct row_applied {
  /// It replaced an older registration this node knew: an entity of that one
  /// must be renewed.
  bool renew = false;
  /// Only the heartbeat time moved (directory_logic::replica_applied).
  bool time_only = false;
};

row_applied apply_row(directory_self self, const persistence::worker_row& row) {
  const auto* rec = self->state.logic->reg().record(row.uid);
  const uint64_t before = rec ? rec->incarnation : 0;
  const auto applied =
      self->state.logic->apply_replica(row, wall_s(self), wall_ms(self), monotonic_s());
  return {.renew = applied && before != 0 && row.incarnation > before,
          .time_only = applied.time_only};
}

void retire_older_holders(directory_self self, std::span<const uint64_t> uids,
                          std::span<const worker_tombstone> buried = {});

/// Tells this node's shard the registrations of `uids` as this node knows them
/// now (and `buried` deregistrations, as incarnation + 1): the shard drops its
/// holders of older ones (kv_shard_core::retire_older), the drops this copy
/// missed while it was down or cut off.
void retire_older_holders(directory_self self, std::span<const uint64_t> uids,
                          std::span<const worker_tombstone> buried) {
  auto& st = self->state;
  if (!st.cfg.cluster || st.cfg.home_destination >= st.cfg.shards.size())
    return;
  std::vector<cluster::registration_ref> known;
  known.reserve(uids.size() + buried.size());
  for (uint64_t uid : uids)
    if (const auto* rec = st.logic->reg().record(uid))
      known.push_back({uid, rec->incarnation});
  for (const auto& t : buried)
    known.push_back({t.uid, t.incarnation + 1});
  if (!known.empty())
    self->send(st.cfg.shards[st.cfg.home_destination], retire_atom::value, std::move(known));
}

/// The message being handled came from another node's actor (a replica's
/// copy), not from this node's worker or session actors.
bool from_peer(directory_self self) {
  const auto& sender = self->current_sender();
  return sender && sender->node() != self->node();
}

/// Gathered for heartbeat_replication_delay, but never for more than a quarter
/// of the reaper's timeout: the home reaps a worker whose heartbeats it does
/// not hear of (a test may set that timeout to a second).
std::chrono::milliseconds heartbeat_flush_delay(const directory_config& cfg) {
  return std::min(cfg.heartbeat_replication_delay, cfg.options.lmcache_worker_timeout / 4);
}

/// Sends the workers homed elsewhere that heartbeated here to their homes.
void send_heard_to_homes(directory_self self) {
  auto& st = self->state;
  if (st.heartbeats_for_homes.empty())
    return;
  const auto table = st.cfg.cluster->current();
  std::map<node_index, std::vector<uint64_t>> by_home;
  for (uint64_t uid : st.heartbeats_for_homes)
    by_home[table->home_of(uid)].push_back(uid);
  st.heartbeats_for_homes.clear();
  for (auto& [home, uids] : by_home) {
    if (home == table->self) {
      // Its home moved here meanwhile: this node's copy has the time.
      for (uint64_t uid : uids)
        replicate_heartbeat(self, uid);
      continue;
    }
    const auto& peer = table->peers[home];
    // An unreachable home hears the next ones, or a node taking its workers
    // over counts their silence from its own copies, which have the times.
    if (peer.live && peer.handles.directory)
      self->send(caf::actor_cast<directory_actor>(peer.handles.directory), heard_atom::value,
                 std::move(uids));
  }
}

/// The node that sent heard_atom answered worker `uid` (homed here) in place:
/// its copy owes the worker nothing. If this node owes it a full sync,
/// that copy missed what this one has -- a proof replicated while the link
/// was down, whose resend on the link's return (peer_atom) came from a node
/// that had not heard of it yet -- and would answer the worker "nothing" for
/// as long as it lives. The proof goes to that node, which then sends the
/// worker's heartbeats here, where it is asked. The home's sync phase goes
/// first: a copy that still says `syncing` (a session that ran elsewhere for
/// a moment, or this node's own before a takeover) answers "nothing owed"
/// whatever the reason, and only the home can say that no session runs.
void tell_copy_what_is_owed(directory_self self, uint64_t uid) {
  auto [ask, reason] = self->state.logic->reg().should_request_full_sync(uid);
  const auto& sender = self->current_sender();
  if (!ask || !sender)
    return;
  if (const auto* rec = self->state.logic->reg().record(uid))
    self->send(caf::actor_cast<directory_actor>(sender), sync_state_atom::value, uid, rec->sync,
               rec->missing_batches);
  const auto table = self->state.cfg.cluster->current();
  const auto peer = table->peer_with_directory(caf::actor_cast<caf::actor>(sender));
  const std::string to = peer ? table->members[*peer].address.id : std::string{"?"};
  spdlog::info("worker-resync-told uid={} reason={} node={} action=copy-owes-it-too", uid, reason,
               to);
  self->send(caf::actor_cast<directory_actor>(sender), resync_atom::value, uid, reason);
}

} // namespace

void replicate_heartbeat(directory_self self, uint64_t uid) {
  auto& st = self->state;
  if (!st.cfg.cluster)
    return;
  st.heartbeats_unsent.insert(uid);
  schedule_heartbeat_flush(self);
}

void tell_home_heard(directory_self self, uint64_t uid) {
  auto& st = self->state;
  st.heartbeats_for_homes.insert(uid);
  schedule_heartbeat_flush(self);
}

void schedule_heartbeat_flush(directory_self self) {
  auto& st = self->state;
  if (st.heartbeat_flush_scheduled)
    return;
  st.heartbeat_flush_scheduled = true;
  if (const auto delay = heartbeat_flush_delay(st.cfg); delay.count() > 0)
    self->delayed_send(self, delay, flush_atom::value);
  else
    self->send(self, flush_atom::value);
}

/// A row from the worker's home, on its own or among gathered heartbeat rows.
void apply_peer_row(directory_self self, const persistence::worker_row& row) {
  const auto applied = apply_row(self, row);
  if (!applied.time_only) {
    // A heartbeat's row (most rows) tells the shard nothing new: it heard of
    // this registration with its first row.
    retire_older_holders(self, std::span{&row.uid, 1});
    publish(self);
  }
  if (applied.renew)
    renew_entity(self, row.uid);
  adopt_if_home(self, row.uid);
}

void on_heard_elsewhere(directory_self self, std::vector<uint64_t>& uids) {
  auto& logic = *self->state.logic;
  const double wall = wall_s(self);
  const double mono = monotonic_s();
  for (uint64_t uid : uids) {
    const bool taken = logic.on_heartbeat_heard_elsewhere(uid, wall, mono) != nullptr;
    if (!logic.is_home(uid))
      continue; // homed elsewhere now: its new home replicates the times
    if (taken)
      replicate_heartbeat(self, uid);
    tell_copy_what_is_owed(self, uid);
  }
}

void flush_heartbeats(directory_self self) {
  auto& st = self->state;
  st.heartbeat_flush_scheduled = false;
  std::vector<persistence::worker_row> rows;
  rows.reserve(st.heartbeats_unsent.size());
  for (uint64_t uid : st.heartbeats_unsent)
    if (const auto* rec = st.logic->reg().record(uid); rec && st.logic->is_home(uid))
      rows.push_back(to_row(*rec));
  st.heartbeats_unsent.clear();
  if (!rows.empty())
    directory_effects::replicate(self, row_put_atom::value, std::move(rows));
  if (st.cfg.cluster)
    send_heard_to_homes(self);
}

/// The worker's state as its entity reports it (from a local worker or
/// session actor), replicated to the peers; a peer's copy is applied
/// where the worker is not homed (on_peer_sync_state) and not passed on
/// (two nodes that both see themselves as the home for a moment would
/// otherwise bounce it between them). A state changes the heartbeats'
/// answers: a peer's `completed` is often the last change before a
/// worker's heartbeats can be answered where they arrive, and no other
/// message may follow to publish.
void on_sync_state(directory_self self, uint64_t uid, sync_phase phase, uint64_t missing) {
  if (from_peer(self)) {
    self->state.logic->on_peer_sync_state(uid, phase, missing);
    publish_heartbeats(self);
    return;
  }
  self->state.logic->on_sync_state(uid, phase, missing);
  publish_heartbeats(self);
  if (self->state.logic->is_home(uid))
    directory_effects::replicate(self, sync_state_atom::value, uid, phase, missing);
}

void on_resync(directory_self self, uint64_t uid, const std::string& reason) {
  // A full sync owed by the worker moves with its entity: whichever node
  // is its home when it next heartbeats asks for it. Every node hears of
  // a proof made here, home or not: the home may be dying as it is
  // told (an entity split told only to a frozen home is lost, which the
  // chaos suite's invariant 4, every proof answered by an ask, catches),
  // and the node that proved it may be the next home.
  const bool replica = from_peer(self);
  const bool home = self->state.logic->is_home(uid);
  if (!replica && reason == frames_not_forwarded_reason) {
    // The proof itself (this node's forwarder gave the frames up): said
    // once, here, for a worker still registered (frames of one that has
    // left need nobody's sync).
    const auto* rec = self->state.logic->reg().record(uid);
    if (rec == nullptr) {
      spdlog::debug("worker-frames-not-forwarded uid={} action=none reason=not-registered", uid);
      return;
    }
    spdlog::warn("worker-frames-not-forwarded instance={} worker={} uid={} "
                 "action=full-sync-owed",
                 rec->instance_id, rec->worker_id.to_string(), uid);
  }
  spdlog::info("worker-resync-owed uid={} reason={} from={} home_here={}", uid, reason,
               replica ? "peer" : "entity", home);
  if (replica) {
    self->state.logic->on_replicated_resync(uid, reason);
    return;
  }
  self->state.logic->on_resync(uid, reason);
  directory_effects::replicate(self, resync_atom::value, uid, reason);
}

void on_location(directory_self self, uint64_t uid, const std::string& location) {
  self->state.logic->on_location(uid, location);
  publish(self);
  if (self->state.logic->is_home(uid) && !from_peer(self))
    directory_effects::replicate(self, location_atom::value, uid, location);
}

void on_row_delete(directory_self self, uint64_t uid, uint64_t incarnation) {
  self->state.logic->remove_replica(uid, incarnation, wall_ms(self));
  const worker_tombstone gone{uid, incarnation};
  retire_older_holders(self, {}, std::span{&gone, 1});
  publish(self);
}

void send_directory_to(directory_self self, const caf::actor& peer_directory) {
  auto& st = self->state;
  if (!st.cfg.cluster || !peer_directory)
    return;
  auto peer = caf::actor_cast<directory_actor>(peer_directory);
  const auto table = st.cfg.cluster->current();
  const auto peer_index = table->peer_with_directory(peer_directory);
  // The rows of the workers homed here, and of those homed at the peer
  // now: registered while it was away, their home moved to it when it
  // came back, so nobody else would tell it of them.
  directory_listing listing;
  std::vector<const worker_record*> home;
  for (const auto* rec : st.logic->reg().all_workers())
    if (st.logic->is_home(rec->uid) || (peer_index && table->home_of(rec->uid) == *peer_index)) {
      listing.rows.push_back(to_row(*rec));
      home.push_back(rec);
    }
  listing.node_id = table->members[table->self].address.id;
  listing.ring_version = table->ring_version;
  listing.tombstones = st.logic->tombstones(wall_ms(self));
  listing.complete = st.cfg.lists_complete;
  spdlog::info("directory-sync-sent node={} workers={} tombstones={}", listing.node_id,
               listing.rows.size(), listing.tombstones.size());
  self->send(peer, row_put_atom::value, std::move(listing));
  for (const auto* rec : home) {
    for (const auto& loc : rec->locations)
      self->send(peer, location_atom::value, rec->uid, loc);
    if (rec->sync != sync_phase::none)
      self->send(peer, sync_state_atom::value, rec->uid, rec->sync, rec->missing_batches);
    if (!rec->resync_reason.empty() && !st.cfg.planted.is(faults::planted_bug::no_owed_resend))
      self->send(peer, resync_atom::value, rec->uid, rec->resync_reason);
  }
}

void on_slots_lost(directory_self self, uint64_t lost_slots) {
  // Every node hears of it and marks every worker it knows: this node,
  // back from empty, may not have heard of every registration yet, but
  // each worker's home knows it.
  const bool replica = from_peer(self);
  self->state.logic->on_slots_lost(lost_slots, replica);
  if (!replica)
    directory_effects::replicate(self, refill_atom::value, lost_slots);
  publish_heartbeats(self);
}

void on_directory_sync(directory_self self, const directory_listing& listing) {
  auto& st = self->state;
  if (!st.cfg.cluster)
    return;
  const auto table = st.cfg.cluster->current();
  std::optional<node_index> from_index;
  for (size_t i = 0; i < table->members.size(); ++i)
    if (table->members[i].address.id == listing.node_id)
      from_index = static_cast<node_index>(i);
  if (!from_index || *from_index == table->self)
    return;
  // Deregistrations first: a row this node restored of a registration
  // that ended while it was away goes, entity included.
  size_t buried = 0;
  for (const auto& t : listing.tombstones)
    buried += st.logic->apply_tombstone(t, wall_ms(self)) ? 1 : 0;
  absl::flat_hash_set<uint64_t> listed;
  std::vector<uint64_t> renewed;
  std::vector<uint64_t> uids;
  for (const auto& row : listing.rows) {
    listed.insert(row.uid);
    uids.push_back(row.uid);
    if (apply_row(self, row).renew)
      renewed.push_back(row.uid);
  }
  retire_older_holders(self, uids, listing.tombstones);
  for (uint64_t uid : renewed)
    renew_entity(self, uid);
  // A worker the sender's list lacks was deregistered there -- if the
  // list is complete and both nodes place homes alike; otherwise the
  // list means nothing about it.
  std::vector<uint64_t> gone;
  if (listing.complete && listing.ring_version == table->ring_version)
    for (const auto* rec : st.logic->reg().all_workers())
      if (table->home_of(rec->uid) == *from_index && !listed.contains(rec->uid))
        gone.push_back(rec->uid);
  for (uint64_t uid : gone)
    st.logic->forget_replica(uid);
  spdlog::info("directory-sync-received from={} workers={} complete={} removed={} "
               "tombstones={} deregistered={}",
               listing.node_id, listing.rows.size(), listing.complete, gone.size(),
               listing.tombstones.size(), buried);
  publish(self);
  for (const auto& row : listing.rows)
    adopt_if_home(self, row.uid);
}

} // namespace lmcc::actors
