// node_cluster's figures: the cluster-wide entry counts per holder (each
// node counts its primary slots; a node that does not answer is counted by the
// next owner of its slots), the lmcc_cluster_* gauges and GET /cluster/status.
#include "apps/lmcc/node_cluster.hpp"
#include "clock/clock.hpp"

#ifndef LMCC_VERSION
#define LMCC_VERSION "unknown" // CMake passes the project's VERSION
#endif

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <unistd.h>

namespace lmcc::apps {
namespace {

/// Members (of the current record; standby nodes not counted) this node reaches.
size_t live_members(const actors::cluster_table& t) {
  size_t n = 0;
  for (size_t i = 0; i < t.peers.size(); ++i)
    n += t.members[i].member && t.reachable(static_cast<actors::node_index>(i)) ? 1 : 0;
  return n;
}

size_t member_count(const actors::cluster_table& t) {
  return static_cast<size_t>(
      std::count_if(t.members.begin(), t.members.end(), [](const auto& m) { return m.member; }));
}

/// Slots of the current record short of copies, as this node sees them.
struct copy_shortfall {
  uint64_t under = 0; ///< fewer live copies than the record places
  uint64_t none = 0;  ///< no live copy at all (lookups miss their keys)
};

/// A live copy: an owner this node reaches that holds the slot whole (not
/// refilling, not still copying a slot it gained in a membership change).
/// Ownership is static between membership changes (membership.hpp), so a
/// node down leaves each of its slots one copy short until it is back.
copy_shortfall live_copies(const actors::cluster_table& t) {
  copy_shortfall out;
  const auto& owners = *t.owners;
  const uint32_t want = owners.owners_per_slot();
  for (uint32_t slot = 0; slot < owners.slot_count(); ++slot) {
    uint32_t live = 0;
    for (auto n : owners.owner_indices(slot))
      live += t.reachable(n) && t.complete(n, slot) ? 1 : 0;
    out.under += live < want ? 1 : 0;
    out.none += live == 0 ? 1 : 0;
  }
  return out;
}

/// Workers whose entity (WorkerActor) lives on this node now.
size_t workers_homed(const actors::route_board& routes) {
  const auto table = routes.current();
  if (!table)
    return 0;
  return static_cast<size_t>(std::count_if(table->begin(), table->end(), [](const auto& r) {
    return static_cast<bool>(r.second.actor);
  }));
}

} // namespace

std::string node_cluster::home_of(uint64_t worker_uid) const {
  const auto table = board_->current();
  const auto home = table->home_of(worker_uid);
  if (home >= table->members.size())
    return {};
  return table->members[home].address.id;
}

actors::holder_counts node_cluster::counts() {
  auto table = board_->current();
  actors::holder_counts total;
  auto add = [&](const std::vector<cluster::holder_count>& counts) {
    for (const auto& c : counts)
      total[c.holder] += c.count;
  };
  add(actors::share_counts(*parts_.index));
  caf::scoped_actor self{parts_.system};
  bool complete = true;
  // A live peer answers its counts in milliseconds; one that has not within
  // the failure timeout (and a second) is stuck or cut off, whether or not
  // the detector has said so yet, and waiting the internal timeout for it
  // held /controller/workers for 10 s (seen in CI under load).
  const auto bound = std::min(options_.controller.internal_timeout,
                              options_.cluster.failure_timeout + std::chrono::milliseconds{1000});
  // A node that cannot answer: its primary slots are counted by the next
  // owner lookups would read them from (a scan of those slots, only while it
  // is away), by the liveness known after it failed.
  std::vector<std::vector<uint64_t>> orphan_slots(table->peers.size());
  for (size_t n = 0; n < table->peers.size(); ++n) {
    if (n == table->self)
      continue;
    const auto& service = table->peers[n].handles.service;
    bool answered = false;
    if (service && table->reachable(static_cast<actors::node_index>(n)))
      self->request(caf::actor_cast<actors::cluster_service_actor>(service), bound,
                    actors::stats_atom::value)
          .receive(
              [&](std::vector<cluster::holder_count>& counts) {
                add(counts);
                answered = true;
              },
              [&](caf::error&) {});
    if (answered)
      continue;
    const auto now_table = board_->current();
    const actors::node_index away[] = {static_cast<actors::node_index>(n)};
    for (uint32_t slot : table->owners->slots_of(table->members[n].address.id).primary) {
      const auto reader = now_table->read_owner(slot, away);
      if (reader == cluster::no_node)
        complete = false; // no other owner is reachable
      else
        orphan_slots[reader].push_back(slot);
    }
  }
  const auto readers = board_->current();
  for (size_t r = 0; r < orphan_slots.size(); ++r) {
    if (orphan_slots[r].empty())
      continue;
    if (r == table->self) {
      add(actors::slot_counts(*parts_.index, orphan_slots[r]));
      continue;
    }
    self->request(caf::actor_cast<actors::cluster_service_actor>(readers->peers[r].handles.service),
                  bound, actors::stats_atom::value, std::move(orphan_slots[r]))
        .receive([&](std::vector<cluster::holder_count>& counts) { add(counts); },
                 [&](caf::error&) { complete = false; });
  }
  // A node that did not answer leaves its primary slots' entries out.
  if (!complete)
    parts_.metrics.count_event("cluster_counts_incomplete");
  return total;
}

actors::node_stats node_cluster::cluster_wide(actors::node_stats s) {
  const auto totals = counts();
  s.total_entries = 0;
  for (auto& w : s.workers) {
    w.key_count = 0;
    for (auto h : w.holders)
      if (auto it = totals.find(h); it != totals.end())
        w.key_count += it->second;
  }
  for (const auto& [h, n] : totals)
    s.total_entries += n;
  return s;
}

uint64_t node_cluster::update_gauges() {
  auto table = board_->current();
  const auto& me = table->members[table->self];
  uint64_t queued = 0;
  uint64_t timeouts = 0;
  for (const auto& lc : link_counters_)
    if (lc) {
      queued += lc->queued_sub_batches;
      timeouts += lc->timeouts;
    }
  auto gauge = [this](std::string_view name, auto v) {
    parts_.metrics.set_gauge(name, static_cast<double>(v));
  };
  gauge("cluster_members", member_count(*table));
  gauge("cluster_member_epoch", table->record.epoch);
  gauge("cluster_live_members", live_members(*table));
  gauge("cluster_primary_slots", me.primary_slots);
  gauge("cluster_replica_slots", me.replica_slots);
  gauge("cluster_replication_lag_sub_batches", queued);
  gauge("cluster_replication_timeouts", timeouts);
  gauge("cluster_joins_refused", counters_->joins_refused.load());
  gauge("cluster_peer_reads_refused", read_server_ ? read_server_->unauthorized() : 0);
  gauge("cluster_peers_lost", counters_->peers_lost.load());
  gauge("cluster_tls_refused", counters_->tls_refused.load());
  // The entries of the slots this node is the primary of, so that
  // Prometheus' sum() over the nodes is the cluster's count (docs/cluster.md#metrics).
  return parts_.index->read().share_entries();
}

std::string node_cluster::status_json() const {
  using nlohmann::json;
  auto table = board_->current();
  json members = json::array();
  for (size_t i = 0; i < table->members.size(); ++i) {
    const auto& m = table->members[i];
    members.push_back(
        {{"id", m.address.id},
         {"host", m.address.host},
         {"port", m.address.port},
         {"http", table->peers[i].handles.http},
         // Joined and greeting; "presumed": not heard from since
         // this node started, within the failure timeout.
         {"live", table->reachable(static_cast<actors::node_index>(i))},
         {"presumed", m.live && !table->reachable(static_cast<actors::node_index>(i))},
         {"self", m.self},
         // Owns slots under the current record (else a standby or removed node).
         {"member", m.member},
         {"primary_slots", m.primary_slots},
         {"replica_slots", m.replica_slots},
         // Its wall clock minus this node's, from its greetings (0 for
         // this node, and for a peer not heard from).
         {"clock_offset_ms", m.self ? 0 : peer_clocks_->of(m.address.id)}});
  }
  json links = json::array();
  uint64_t queued = 0;
  for (size_t i = 0; i < link_counters_.size(); ++i) {
    const auto& lc = link_counters_[i];
    if (!lc)
      continue;
    queued += lc->queued_sub_batches;
    links.push_back({{"peer", table->members[i].address.id},
                     {"queued_sub_batches", lc->queued_sub_batches.load()},
                     {"queued_ops", lc->queued_ops.load()},
                     {"sent_sub_batches", lc->sent_sub_batches.load()},
                     {"sent_messages", lc->sent_messages.load()},
                     {"sent_mark_only_sub_batches", lc->sent_mark_only.load()},
                     {"resent_sub_batches", lc->resent_sub_batches.load()},
                     {"replication_timeouts", lc->timeouts.load()},
                     {"dropped_ops", lc->dropped_ops.load()}});
  }
  uint64_t uncertain_slots = 0;
  // The first few uncertain slots with their owners as this node places them:
  // what an operator (or a chaos log) needs to see whom a stuck node waits for.
  constexpr size_t uncertain_shown = 8;
  json uncertain_first = json::array();
  for (uint32_t s = 0; s < parts_.index->slot_count(); ++s) {
    if (!parts_.index->uncertain(s))
      continue;
    ++uncertain_slots;
    if (uncertain_first.size() < uncertain_shown) {
      json owners = json::array();
      for (auto n : table->owners->owner_indices(s))
        owners.push_back(table->members[n].address.id);
      uncertain_first.push_back({{"slot", s}, {"owners", std::move(owners)}});
    }
  }
  const auto& me = table->members[table->self];
  const auto shortfall = live_copies(*table);
  uint64_t keys = 0;
  uint64_t entries = 0;
  uint64_t primary_entries = 0;
  {
    const auto r = parts_.index->read();
    keys = r.keys();
    entries = r.entries();
    primary_entries = r.share_entries();
  }
  char version[17];
  std::snprintf(version, sizeof version, "%016llx",
                static_cast<unsigned long long>(table->ring_version));
  const auto uptime_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(steady_now() - started_).count();
  json out = {{"node", options_.controller.node_id},
              {"version", LMCC_VERSION},
              {"pid", static_cast<int64_t>(::getpid())},
              {"uptime_ms", uptime_ms},
              {"ring_version", version},
              {"replicas", options_.cluster.replicas},
              {"slots", table->owners->slot_count()},
              {"members", members},
              {"live_members", live_members(*table)},
              {"all_live", live_members(*table) == member_count(*table)},
              {"membership",
               {{"epoch", table->record.epoch},
                {"state", table->record.committed ? "committed" : "joint"},
                {"members", table->record.member_ids()},
                {"previous", table->record.previous},
                {"slots_to_copy", move_counters_->slots_to_copy.load()},
                {"slots_copied", move_counters_->slots_copied.load()},
                {"entries_copied", move_counters_->entries_copied.load()},
                {"copy_failures", move_counters_->copy_failures.load()},
                {"slots_dropped", move_counters_->slots_dropped.load()},
                {"records_refused", counters_->records_refused.load()}}},
              // Back with an empty store, copying its slots from the other
              // owners (cluster/refill_gate.hpp): until false, another node's
              // failure may take the only copy of some slots.
              {"refilling", table->peers[table->self].refilling},
              {"slots_primary", me.primary_slots},
              {"slots_replica", me.replica_slots},
              // Slots of the current record with fewer live copies than it
              // places (min(R, members)), and with none, as this node sees
              // the others (live_copies above).
              {"slots_under_replicated", shortfall.under},
              {"slots_without_live_copy", shortfall.none},
              // This node's index: distinct keys and (key, holder) entries of
              // every slot it holds, and the entries of its primary slots (the
              // sum over the nodes is the cluster's count, as kv_pool_keys_count).
              {"keys", keys},
              {"entries", entries},
              {"primary_entries", primary_entries},
              {"workers_homed", workers_homed(*parts_.routes)},
              {"replication", links},
              {"replication_lag_sub_batches", queued},
              {"ingest_inflight_ops", parts_.gate->in_flight()},
              {"joins_refused", counters_->joins_refused.load()},
              {"peer_reads_refused", read_server_ ? read_server_->unauthorized() : 0},
              {"joins_failed", counters_->joins_failed.load()},
              {"peers_lost", counters_->peers_lost.load()},
              {"tls",
               {{"enabled", tls_ != nullptr},
                {"refused", counters_->tls_refused.load()},
                {"refused_by_peer", counters_->tls_refused_by_peer.load()}}},
              {"anti_entropy",
               {{"interval_ms", options_.cluster.anti_entropy_interval.count()},
                {"rounds", ae_counters_->rounds.load()},
                {"comparisons_skipped", ae_counters_->comparisons_skipped.load()},
                {"slots_compared", ae_counters_->slots_compared.load()},
                {"slots_differing", ae_counters_->slots_differing.load()},
                {"slots_uncertain", uncertain_slots},
                {"uncertain_first", std::move(uncertain_first)},
                {"slots_repaired", ae_counters_->slots_repaired.load()},
                {"copies_taken", ae_counters_->copies_taken.load()},
                {"conflicts", ae_counters_->conflicts.load()},
                {"holders_lost", ae_counters_->holders_lost.load()},
                {"slots_blank_everywhere", ae_counters_->slots_blank_everywhere.load()}}}};
  return out.dump();
}
} // namespace lmcc::apps
