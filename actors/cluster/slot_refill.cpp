// slot_refill: see slot_refill.hpp.
#include "actors/cluster/slot_refill.hpp"

#include "clock/clock.hpp"
#include "index/slot_copy.hpp"

#include <spdlog/spdlog.h>

#include <optional>

namespace lmcc::actors {
namespace {

using refill_self = slot_refill_actor::stateful_pointer<slot_refill_state>;

/// Where `slot`'s copy comes from: another owner that is reachable, greeted
/// this node, and neither refilling nor seen unsettled (its copy may be as
/// empty as ours, or ours), one not still copying the slot (gained in a
/// membership change) first; or wait, while another owner is live but has
/// not joined or greeted yet; or nowhere (every other owner is down, or came
/// back empty too).
struct source {
  std::optional<node_index> from;
  bool wait = false;
};

bool can_give(const cluster_table& t, node_index n) {
  const auto& p = t.peers[n];
  return t.reachable(n) && p.handles.service && p.greeted && !p.refilling;
}

/// Peers whose copies are not all their own are remembered: one that came
/// back empty may settle before this node looks again.
void note_unsettled(refill_leftovers& left, const cluster_table& t) {
  for (node_index n = 0; n < t.peers.size(); ++n)
    if (n != t.self && t.peers[n].unsettled)
      left.seen_unsettled(n);
}

std::vector<node_index> other_owners(const cluster_table& t, uint32_t slot) {
  std::vector<node_index> others;
  for (node_index n : t.owners->owner_indices(slot))
    if (n != t.self)
      others.push_back(n);
  return others;
}

source source_of(const cluster_table& t, uint32_t slot, const refill_leftovers& left) {
  source s;
  std::optional<node_index> copying; // still copying the slot: taken only if no other
  for (node_index n : t.owners->owner_indices(slot)) {
    if (n == t.self)
      continue;
    const auto& p = t.peers[n];
    // note_unsettled ran first; a left-over slot comes only from the owners
    // it was left with (refill_leftovers.hpp).
    if ((p.greeted && p.refilling) || left.seen(n) || !left.may_give(slot, n))
      continue;
    const bool gives = can_give(t, n);
    if (gives && t.complete(n, slot))
      return source{n, false};
    if (!gives)
      s.wait = s.wait || p.live;
    else if (!copying)
      copying = n;
  }
  return copying ? source{copying, false} : s;
}

void pump(refill_self self);
void arm_retry(refill_self self, std::chrono::milliseconds delay);

/// Once the copy is done: copies what an owner can give now, reports what no
/// owner holds any more, and waits for the rest (refill_leftovers.hpp).
void settle(refill_self self) {
  auto& st = self->state;
  if (!st.done || st.settled || st.in_flight > 0 || !st.queue.empty())
    return;
  const auto table = st.cfg.board->current();
  note_unsettled(st.leftovers, *table);
  const auto step = st.leftovers.take([&](uint32_t slot) { return other_owners(*table, slot); },
                                      [&](node_index n) { return can_give(*table, n); });
  if (!step.lost.empty()) {
    st.lost += step.lost.size();
    spdlog::warn("slot-refill-lost node={} slots={} first={} action=full-sync-all", st.cfg.self_id,
                 step.lost.size(), step.lost.front());
    if (st.cfg.on_lost)
      st.cfg.on_lost(step.lost);
  }
  if (!step.copy.empty()) {
    for (const auto& [slot, from] : step.copy)
      st.queue.push_back({slot, 0});
    pump(self);
    return;
  }
  if (!st.leftovers.empty()) {
    arm_retry(self, st.cfg.leftover_recheck);
    return;
  }
  if (st.leftover_copied) { // durable before a restart may skip the copy
    st.leftover_copied = false;
    self->request(st.cfg.shard, caf::infinite, snapshot_atom::value, true).then([self](bool) {
      settle(self);
    });
    return;
  }
  st.settled = true;
  spdlog::info("slot-refill-settled node={} copied={} lost={}", st.cfg.self_id, st.copied, st.lost);
  if (st.cfg.on_settled)
    st.cfg.on_settled();
}

void finish(refill_self self) {
  auto& st = self->state;
  // The copies are in the shard's mailbox ahead of this request: its answer
  // says they are applied, so a reader that trusts this node finds them. And
  // durable: a copy reaches the disk only with its slot's next snapshot, and
  // a node killed before that came back with part of its slots and no
  // reason to copy them again -- then, the senior owner by uptime, it won
  // anti-entropy over the complete copies (chaos with disk losses). The
  // round runs in the shard's bounded background steps: ingest goes on.
  self->request(st.cfg.shard, caf::infinite, snapshot_atom::value, true).then([self](bool durable) {
    auto& st = self->state;
    st.done = true;
    const auto ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(steady_now() - st.began).count();
    spdlog::info("slot-refill-done node={} slots={} copied={} entries={} skipped={} left={} "
                 "durable={} ms={}",
                 st.cfg.self_id, st.total, st.copied, st.entries, st.skipped, st.leftovers.size(),
                 durable, ms);
    for (auto& p : st.waiting)
      p.deliver(st.copied);
    st.waiting.clear();
    settle(self);
  });
}

void arm_retry(refill_self self, std::chrono::milliseconds delay) {
  auto& st = self->state;
  if (st.retry_armed)
    return;
  st.retry_armed = true;
  self->delayed_send(self, delay, tick_atom::value);
}

void pump(refill_self self) {
  auto& st = self->state;
  const auto table = st.cfg.board->current();
  note_unsettled(st.leftovers, *table);
  std::vector<slot_refill_state::pending> later;
  while (st.in_flight < st.cfg.in_flight && !st.queue.empty()) {
    const auto item = st.queue.front();
    st.queue.pop_front();
    const auto [from, wait] = source_of(*table, item.slot, st.leftovers);
    if (!from) {
      if (wait) {
        later.push_back(item); // an owner that is up has not joined this node yet
      } else {
        ++st.skipped; // copied once another owner is back with it
        st.leftovers.leave(item.slot, other_owners(*table, item.slot));
      }
      continue;
    }
    ++st.in_flight;
    auto service = caf::actor_cast<cluster_service_actor>(table->peers[*from].handles.service);
    const std::string peer = table->members[*from].address.id;
    self->request(service, st.cfg.timeout, copy_atom::value, uint64_t{item.slot})
        .then(
            [self, slot = item.slot](slot_copy& copy) {
              auto& st = self->state;
              --st.in_flight;
              ++st.copied;
              st.entries += copy.key_count();
              st.leftover_copied = st.leftover_copied || st.done;
              st.leftovers.copied(slot);
              if (st.copied % 1024 == 0)
                spdlog::info("slot-refill-progress node={} copied={} of={} entries={}",
                             st.cfg.self_id, st.copied, st.total, st.entries);
              // Holder by holder, where newer: writes reach this node meanwhile.
              self->request(st.cfg.shard, caf::infinite, install_atom::value, std::move(copy))
                  .then([](copy_outcome&) {}, [](caf::error&) {});
              pump(self);
            },
            [self, item, peer](caf::error& e) {
              auto& st = self->state;
              --st.in_flight;
              spdlog::warn("slot-refill-failed node={} slot={} from={} attempt={} error={}",
                           st.cfg.self_id, item.slot, peer, item.failures + 1, caf::to_string(e));
              if (item.failures + 1 < st.cfg.attempts) {
                st.queue.push_back({item.slot, item.failures + 1});
                arm_retry(self, st.cfg.retry_delay);
              } else {
                ++st.skipped;
                st.leftovers.leave(item.slot, other_owners(*st.cfg.board->current(), item.slot));
                pump(self);
              }
            });
  }
  for (const auto& item : later)
    st.queue.push_back(item);
  if (!later.empty())
    arm_retry(self, st.cfg.retry_delay);
  else if (st.queue.empty() && st.in_flight == 0 && st.done)
    settle(self);
  else if (st.queue.empty() && st.in_flight == 0 && !st.finishing) {
    st.finishing = true;
    finish(self);
  }
}

void start(refill_self self) {
  auto& st = self->state;
  st.started = true;
  st.began = steady_now();
  const auto table = st.cfg.board->current();
  for (uint32_t s = 0; s < table->owners->slot_count(); ++s)
    if (cluster::owns(*table->owners, table->self, s))
      st.queue.push_back({s, 0});
  st.total = st.queue.size();
  // What decides each slot's source, per peer (a log reader's first question
  // when slots are skipped).
  std::string peers;
  for (node_index n = 0; n < table->peers.size(); ++n) {
    if (n == table->self)
      continue;
    const auto& p = table->peers[n];
    peers += (peers.empty() ? "" : ",") + table->members[n].address.id + ":" +
             (p.live ? "live" : "down") + (p.handles.service ? "" : "+unjoined") +
             (p.greeted ? "+greeted" : "") + (p.refilling ? "+refilling" : "");
  }
  spdlog::info("slot-refill-start node={} slots={} peers={}", st.cfg.self_id, st.total, peers);
  pump(self);
}

} // namespace

slot_refill_actor::behavior_type
slot_refill_main(slot_refill_actor::stateful_pointer<slot_refill_state> self,
                 slot_refill_config cfg) {
  self->state.cfg = std::move(cfg);
  return {
      [self](repair_atom) -> caf::result<uint64_t> {
        auto& st = self->state;
        if (!st.started)
          start(self);
        if (st.done)
          return st.copied;
        auto p = self->make_response_promise<uint64_t>();
        st.waiting.push_back(p);
        return p;
      },
      [self](tick_atom) {
        auto& st = self->state;
        st.retry_armed = false;
        if (!st.finishing || st.done)
          pump(self);
      },
  };
}

} // namespace lmcc::actors
