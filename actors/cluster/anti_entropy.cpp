#include "actors/cluster/anti_entropy.hpp"

#include "clock/clock.hpp"
#include "index/slot_copy.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>

namespace lmcc::actors {
namespace {

using ae_self = anti_entropy_actor::stateful_pointer<anti_entropy_state>;

/// Rounds during which a worker asked for a full sync is not asked again
/// (its sync replaces the entries meanwhile; the copies that disagreed may
/// still be compared before it starts).
constexpr uint64_t ask_cooldown_rounds = 2;

/// Asks the worker of `uid` for a full sync, unless it was asked lately; true
/// when it asked (the caller logs its finding only then: the log line is the
/// proof the chaos audit pairs with the ask).
bool ask_full_sync(ae_self self, uint64_t uid, const std::string& reason) {
  auto& st = self->state;
  if (uid == 0)
    return false; // a holder whose worker this node never heard of: nobody to ask
  if (auto it = st.asked.find(uid);
      it != st.asked.end() && st.round - it->second < ask_cooldown_rounds)
    return false;
  st.asked[uid] = st.round;
  self->send(st.cfg.directory, resync_atom::value, uid, reason);
  return true;
}

/// Takes `peer`'s copy of `slot` into this node's shard.
void take_copy(ae_self self, node_index peer_index, const cluster_service_actor& peer,
               const std::string& peer_id, uint32_t slot) {
  auto& st = self->state;
  const uint64_t round = st.round;
  if (!st.asking.emplace(peer_index, slot).second)
    return; // asked already, the answer is on its way
  self->request(peer, st.cfg.timeout, copy_atom::value, uint64_t{slot})
      .then(
          [self, slot, peer_id, round, peer_index](slot_copy& copy) {
            auto& st = self->state;
            st.asking.erase({peer_index, slot});
            if (st.cfg.counters)
              ++st.cfg.counters->copies_taken;
            self->request(st.cfg.shard, st.cfg.timeout, install_atom::value, std::move(copy))
                .then(
                    [self, slot, peer_id, round, peer_index](copy_outcome& outcome) {
                      auto& st = self->state;
                      if (outcome.changed > 0) {
                        spdlog::info("anti-entropy-repair slot={} from={} holders={} changed={}",
                                     slot, peer_id, outcome.installed, outcome.changed);
                        if (st.cfg.counters)
                          ++st.cfg.counters->slots_repaired;
                      }
                      for (const auto& [uid, holder] : outcome.conflicts) {
                        if (st.cfg.counters)
                          ++st.cfg.counters->conflicts;
                        if (ask_full_sync(self, uid, "slot_copies_conflict"))
                          spdlog::warn("slot-copies-conflict worker_uid={} holder={} slot={} "
                                       "from={} action=full-sync-requested",
                                       uid, holder, slot, peer_id);
                        else
                          spdlog::debug("slot-copies-conflict worker_uid={} holder={} slot={} "
                                        "from={} action=asked-lately",
                                        uid, holder, slot, peer_id);
                      }
                      st.ledger.after_copy(round, slot, outcome.unresolved);
                      st.blank_everywhere.after_copy(round, slot, peer_index, outcome.still_blank);
                    },
                    [slot](caf::error& e) {
                      spdlog::warn("anti-entropy-install-failed slot={} error={}", slot,
                                   caf::to_string(e));
                    });
          },
          [self, slot, peer_id, peer_index](caf::error& e) {
            self->state.asking.erase({peer_index, slot});
            spdlog::warn("anti-entropy-repair-failed slot={} from={} error={}", slot, peer_id,
                         caf::to_string(e));
          });
}

/// The slots this node shares with `peer` (owner of both).
std::vector<uint64_t> shared_slots(const cluster_table& table, node_index peer) {
  std::vector<uint64_t> slots;
  const uint64_t both = (uint64_t{1} << table.self) | (uint64_t{1} << peer);
  for (uint32_t s = 0; s < table.owners->slot_count(); ++s)
    if ((cluster::owner_mask(*table.owners, s) & both) == both)
      slots.push_back(s);
  return slots;
}

/// Whether `peer`'s last greeting, recent enough for this round, said its
/// copies of the shared slots equal ours.
bool vouched_by_greeting(const anti_entropy_state& st, node_index peer) {
  if (!st.cfg.agreement || peer >= st.cfg.agreement->agreed_at_ms.size())
    return false;
  const uint64_t at = st.cfg.agreement->agreed_at_ms[peer].load(std::memory_order_relaxed);
  const uint64_t now = monotonic_ms();
  const auto ttl = std::max(st.cfg.interval, st.cfg.agreement_ttl);
  return at != 0 && at <= now && now - at <= static_cast<uint64_t>(ttl.count());
}

/// Between rounds: asks `peer` for its copy of each shared slot this node's
/// copy is uncertain of; how many there are.
uint32_t fetch_uncertain(ae_self self, const cluster_table& table, node_index peer) {
  auto& st = self->state;
  auto service = caf::actor_cast<cluster_service_actor>(table.peers[peer].handles.service);
  const std::string& peer_id = table.members[peer].address.id;
  uint32_t uncertain = 0;
  const auto shared = shared_slots(table, peer);
  // From a cursor that moves on: past max_repairs_per_round uncertain slots,
  // the ones after the first would otherwise wait for those to resolve.
  const size_t start = shared.empty() ? 0 : st.fetch_cursor % shared.size();
  for (size_t k = 0; k < shared.size(); ++k) {
    const auto s = static_cast<uint32_t>(shared[(start + k) % shared.size()]);
    if (!st.cfg.index->uncertain(s))
      continue;
    if (++uncertain <= st.cfg.max_repairs_per_round) {
      take_copy(self, peer, service, peer_id, s);
      st.fetch_cursor = start + k + 1;
    }
  }
  return uncertain;
}

bool any_uncertain(const kv_index& index) {
  for (uint32_t s = 0; s < index.slot_count(); ++s)
    if (index.uncertain(s))
      return true;
  return false;
}

void arm_uncertain_tick(ae_self self) {
  auto& st = self->state;
  if (st.uncertain_tick_armed || st.cfg.uncertain_interval.count() <= 0)
    return;
  st.uncertain_tick_armed = true;
  self->delayed_send(self, st.cfg.uncertain_interval, tick_atom::value, true);
}

void compare_with(ae_self self, const cluster_table& table, node_index peer) {
  auto& st = self->state;
  const std::vector<uint64_t> slots = shared_slots(table, peer);
  if (slots.empty())
    return;
  auto service = caf::actor_cast<cluster_service_actor>(table.peers[peer].handles.service);
  const std::string peer_id = table.members[peer].address.id;
  self->request(service, st.cfg.timeout, digest_atom::value, slots)
      .then(
          [self, peer, service, peer_id, slots,
           asked_at = steady_now()](cluster::slot_digests& answer) {
            auto& st = self->state;
            // An answer slower than a round was queued (the peer or this node
            // stood still): a burst of them after a thaw would pass for two
            // rounds in a row. Start counting again from the next round.
            if (steady_now() - asked_at > st.cfg.interval) {
              st.tracker.forget(peer);
              return;
            }
            if (answer.digests.size() < slots.size())
              return; // malformed
            std::vector<uint32_t> fetch;
            std::vector<uint32_t> differing;
            std::vector<uint64_t> local;
            std::vector<uint64_t> remote;
            {
              auto r = st.cfg.index->read();
              for (size_t i = 0; i < slots.size(); ++i) {
                const auto s = static_cast<uint32_t>(slots[i]);
                if (st.cfg.index->uncertain(s)) {
                  fetch.push_back(s); // this node's copy waits for one that covers it
                  continue;
                }
                const uint64_t mine = r.slot(s).digest;
                if (mine != answer.digests[i]) {
                  differing.push_back(s);
                  local.push_back(mine);
                  remote.push_back(answer.digests[i]);
                }
              }
            }
            const auto drift = st.tracker.compare(peer, differing, local, remote);
            fetch.insert(fetch.end(), drift.begin(), drift.end());
            if (st.cfg.counters) {
              st.cfg.counters->slots_compared += slots.size();
              st.cfg.counters->slots_differing = st.tracker.differing();
            }
            if (fetch.size() > st.cfg.max_repairs_per_round) {
              // The rest stays for next rounds, each round starting elsewhere.
              const size_t start = (st.round * st.cfg.max_repairs_per_round) % fetch.size();
              std::rotate(fetch.begin(), fetch.begin() + static_cast<ptrdiff_t>(start),
                          fetch.end());
              fetch.resize(st.cfg.max_repairs_per_round);
            }
            for (uint32_t slot : fetch)
              take_copy(self, peer, service, peer_id, slot);
          },
          [self, peer](caf::error&) { self->state.tracker.forget(peer); });
}

/// Slots blank here whose every other owner answered with a blank copy for
/// rounds_for_loss rounds in a row (two nodes back empty, a slot gained from
/// owners that lost their disks): no owner knows every holder of them, so
/// only every worker's full sync can refill them, as when a refill finds a
/// slot lost on every owner. The directory marks every worker (index-lost);
/// the shard settles the slots, each holder's sync then replacing its part.
void close_blank_round(ae_self self, const std::function<bool(uint32_t)>& owners_answer) {
  auto& st = self->state;
  std::vector<uint64_t> lost;
  const auto table = st.cfg.board->current();
  auto other_owners = [&table](uint32_t slot) {
    uint64_t others = 0;
    for (node_index n : table->owners->owner_indices(slot))
      if (n != table->self)
        others |= uint64_t{1} << n;
    return others;
  };
  auto uncertain = [&st](uint32_t slot) { return st.cfg.index->uncertain(slot); };
  for (uint32_t slot : st.blank_everywhere.close_round(st.cfg.rounds_for_loss, other_owners,
                                                       owners_answer, uncertain))
    lost.push_back(slot);
  if (lost.empty())
    return;
  if (st.cfg.counters)
    st.cfg.counters->slots_blank_everywhere += lost.size();
  spdlog::warn("slot-copies-blank-everywhere slots={} first_slot={} rounds={} "
               "action=full-sync-all",
               lost.size(), lost.front(), st.cfg.rounds_for_loss);
  self->send(st.cfg.directory, refill_atom::value, uint64_t{lost.size()});
  self->send(st.cfg.shard, refill_atom::value, std::move(lost));
}

/// The last round's doubts: a (slot, holder) no owner could cover for
/// rounds_for_loss rounds, while every other owner answered, is lost
/// everywhere.
void close_round(ae_self self, const cluster_table& table) {
  auto& st = self->state;
  auto owners_answer = [&table](uint32_t slot) {
    for (node_index n : table.owners->owner_indices(slot))
      if (n != table.self && !(table.reachable(n) && table.peers[n].handles.service))
        return false;
    return true;
  };
  // One line and one ask per worker: its full sync rebuilds every slot of it.
  auto uncertain = [&st](uint32_t slot) { return st.cfg.index->uncertain(slot); };
  const auto by_worker = lost_by_worker(
      st.ledger.close_round(st.cfg.rounds_for_loss, owners_answer, uncertain), st.cfg.worker_of);
  for (const auto& [uid, lost] : by_worker) {
    if (st.cfg.counters)
      st.cfg.counters->holders_lost += lost.size();
    if (uid == 0) {
      // Nobody to ask: said, so that a slot that stays uncertain shows why.
      spdlog::warn("slot-copies-uncertain worker_uid=0 holder={} slots={} first_slot={} "
                   "rounds={} action=none reason=worker-unknown",
                   lost.front().holder, lost.size(), lost.front().slot, lost.front().rounds);
      continue;
    }
    if (ask_full_sync(self, uid, "slot_copies_uncertain"))
      spdlog::warn("slot-copies-uncertain worker_uid={} holder={} slots={} first_slot={} "
                   "rounds={} action=full-sync-requested",
                   uid, lost.front().holder, lost.size(), lost.front().slot, lost.front().rounds);
  }
  std::erase_if(st.asked,
                [&st](const auto& kv) { return st.round - kv.second >= ask_cooldown_rounds; });
  close_blank_round(self, owners_answer);
}

} // namespace

uint64_t shared_slots_summary(const cluster_table& table, node_index peer, const kv_index& index) {
  const uint64_t both = (uint64_t{1} << table.self) | (uint64_t{1} << peer);
  uint64_t sum = 0;
  auto r = index.read();
  for (uint32_t s = 0; s < table.owners->slot_count(); ++s) {
    if ((cluster::owner_mask(*table.owners, s) & both) != both)
      continue;
    // A sum of mixed (slot, digest) pairs: the order of the slots does not
    // matter, and a digest moved to another slot changes it.
    uint64_t x = r.slot(s).digest ^ (uint64_t{s} * 0x9E3779B97F4A7C15ULL);
    x ^= x >> 33;
    x *= 0xFF51AFD7ED558CCDULL;
    x ^= x >> 33;
    sum += x;
  }
  return sum == 0 ? 1 : sum;
}

anti_entropy_actor::behavior_type
anti_entropy_main(anti_entropy_actor::stateful_pointer<anti_entropy_state> self,
                  anti_entropy_config cfg) {
  self->state.cfg = std::move(cfg);
  if (self->state.cfg.interval.count() > 0)
    self->delayed_send(self, self->state.cfg.interval, tick_atom::value);
  if (any_uncertain(*self->state.cfg.index)) // a node back empty
    arm_uncertain_tick(self);
  return {
      [self](tick_atom) {
        auto& st = self->state;
        const auto table = st.cfg.board->current();
        if (st.round > 0)
          close_round(self, *table);
        ++st.round;
        const bool certain = !any_uncertain(*st.cfg.index);
        for (node_index n = 0; n < table->peers.size(); ++n) {
          if (n == table->self)
            continue;
          if (!table->reachable(n) || !table->peers[n].handles.service) {
            st.tracker.forget(n);
          } else if (certain && vouched_by_greeting(st, n)) {
            st.tracker.forget(n); // equal copies: nothing differs
            if (st.cfg.counters)
              ++st.cfg.counters->comparisons_skipped;
          } else {
            compare_with(self, *table, n);
          }
        }
        if (st.cfg.counters)
          ++st.cfg.counters->rounds;
        if (any_uncertain(*st.cfg.index))
          arm_uncertain_tick(self);
        self->delayed_send(self, st.cfg.interval, tick_atom::value);
      },
      [self](tick_atom, bool) {
        auto& st = self->state;
        st.uncertain_tick_armed = false;
        const auto table = st.cfg.board->current();
        uint32_t uncertain = 0;
        for (node_index n = 0; n < table->peers.size(); ++n)
          if (n != table->self && table->reachable(n) && table->peers[n].handles.service)
            uncertain += fetch_uncertain(self, *table, n);
        if (uncertain > 0 || any_uncertain(*st.cfg.index))
          arm_uncertain_tick(self);
      },
  };
}

} // namespace lmcc::actors
