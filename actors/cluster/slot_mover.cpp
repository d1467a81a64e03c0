// slot_mover: see slot_mover.hpp.
#include "actors/cluster/slot_mover.hpp"

#include "clock/clock.hpp"
#include "index/slot_copy.hpp"

#include <spdlog/spdlog.h>

namespace lmcc::actors {
namespace {

using mover_self = slot_mover_actor::stateful_pointer<slot_mover_state>;

/// The owner to copy `slot` from (cluster_table::move_source); nullopt when
/// no previous owner is reachable now.
std::optional<node_index> source_of(const cluster_table& t, uint32_t slot) {
  return t.move_source(slot, [&](node_index n) {
    return t.reachable(n) && static_cast<bool>(t.peers[n].handles.service);
  });
}

void finish(mover_self self) {
  auto& st = self->state;
  // The repairs are in the shard's mailbox ahead of this request: its answer
  // says they are applied, so a reader that trusts this node finds them.
  self->request(st.cfg.shard, caf::infinite, marks_atom::value, uint64_t{0})
      .then([self, epoch = st.epoch, identity = st.identity](std::vector<location_mark>&) {
        auto& st = self->state;
        if (st.epoch != epoch || st.identity != identity || !st.queue.empty())
          return;
        st.done = true;
        spdlog::info("slot-move-done node={} epoch={} slots={} entries={}", st.cfg.self_id, epoch,
                     st.cfg.counters ? st.cfg.counters->slots_copied.load() : 0,
                     st.cfg.counters ? st.cfg.counters->entries_copied.load() : 0);
        for (auto& p : st.waiting)
          p.deliver(true);
        st.waiting.clear();
      });
}

void arm_retry(mover_self self) {
  auto& st = self->state;
  if (st.retry_armed)
    return;
  st.retry_armed = true;
  self->delayed_send(self, st.cfg.retry_delay, tick_atom::value);
}

void pump(mover_self self) {
  auto& st = self->state;
  const auto table = st.cfg.board->current();
  std::deque<uint32_t> later;
  while (st.in_flight < st.cfg.in_flight && !st.queue.empty()) {
    const uint32_t slot = st.queue.front();
    st.queue.pop_front();
    auto from = source_of(*table, slot);
    if (!from) {
      later.push_back(slot);
      continue;
    }
    ++st.in_flight;
    auto service = caf::actor_cast<cluster_service_actor>(table->peers[*from].handles.service);
    const std::string peer = table->members[*from].address.id;
    self->request(service, st.cfg.timeout, copy_atom::value, uint64_t{slot})
        .then(
            [self, slot, epoch = st.epoch](slot_copy& copy) {
              auto& st = self->state;
              --st.in_flight;
              if (epoch == st.epoch) {
                if (st.cfg.counters) {
                  ++st.cfg.counters->slots_copied;
                  st.cfg.counters->entries_copied += copy.key_count();
                }
                // Holder by holder, where newer: writes already reach this
                // node, and the shard keeps what the copy does not cover.
                self->request(st.cfg.shard, caf::infinite, install_atom::value, std::move(copy))
                    .then([](copy_outcome&) {}, [](caf::error&) {});
              }
              pump(self);
            },
            [self, slot, peer, epoch = st.epoch](caf::error& e) {
              auto& st = self->state;
              --st.in_flight;
              if (st.cfg.counters)
                ++st.cfg.counters->copy_failures;
              spdlog::warn("slot-move-failed node={} slot={} from={} error={}", st.cfg.self_id,
                           slot, peer, caf::to_string(e));
              if (epoch == st.epoch)
                st.queue.push_back(slot);
              arm_retry(self);
            });
  }
  for (uint32_t slot : later)
    st.queue.push_back(slot);
  if (!later.empty())
    arm_retry(self);
  else if (st.queue.empty() && st.in_flight == 0 && !st.done)
    finish(self);
}

void start(mover_self self, uint64_t epoch, uint64_t identity) {
  auto& st = self->state;
  st.epoch = epoch;
  st.identity = identity;
  st.queue.clear();
  st.done = false;
  const auto table = st.cfg.board->current();
  // Joint, or committed while this node was down: either way what it
  // gained came from before it owned the slot.
  for (uint32_t s = 0; s < table->owners->slot_count(); ++s)
    if (table->gained(table->self, s))
      st.queue.push_back(s);
  if (st.cfg.counters) {
    st.cfg.counters->epoch = epoch;
    st.cfg.counters->slots_to_copy = st.queue.size();
    st.cfg.counters->slots_copied = 0;
    st.cfg.counters->entries_copied = 0;
  }
  spdlog::info("slot-move-start node={} epoch={} slots={}", st.cfg.self_id, epoch, st.queue.size());
  pump(self);
}

} // namespace

slot_mover_actor::behavior_type
slot_mover_main(slot_mover_actor::stateful_pointer<slot_mover_state> self, slot_mover_config cfg) {
  self->state.cfg = std::move(cfg);
  return {
      [self](members_atom, uint64_t epoch, uint64_t identity) -> caf::result<bool> {
        auto& st = self->state;
        if (epoch != st.epoch || identity != st.identity)
          start(self, epoch, identity);
        if (st.done)
          return true;
        auto p = self->make_response_promise<bool>();
        st.waiting.push_back(p);
        return p;
      },
      [self](retire_atom, uint64_t epoch, uint64_t identity) {
        auto& st = self->state;
        // The drop itself runs on a tick once the grace is over, against the
        // table of then: a newer change in between may give the slots back.
        st.retire_pending =
            slot_mover_state::retirement{epoch, identity, steady_now() + st.cfg.drop_grace};
        self->delayed_send(self, st.cfg.drop_grace, tick_atom::value);
      },
      [self](tick_atom) {
        auto& st = self->state;
        st.retry_armed = false;
        if (st.retire_pending && steady_now() >= st.retire_pending->at) {
          const uint64_t epoch = st.retire_pending->epoch;
          const uint64_t identity = st.retire_pending->identity;
          const auto table = st.cfg.board->current();
          if (!table->joint() && table->record.epoch == epoch &&
              table->record.identity() == identity) {
            uint64_t dropped = 0;
            for (uint32_t s = 0; s < table->owners->slot_count(); ++s) {
              if (cluster::owns(*table->previous, table->self, s) &&
                  !cluster::owns(*table->owners, table->self, s)) {
                self->send(st.cfg.shard, repair_atom::value, uint64_t{s});
                ++dropped;
              }
            }
            if (st.cfg.counters)
              st.cfg.counters->slots_dropped += dropped;
            spdlog::info("slots-dropped node={} epoch={} slots={}", st.cfg.self_id, epoch, dropped);
            st.retire_pending.reset();
          } else if (table->record.epoch != epoch || table->record.identity() != identity) {
            st.retire_pending.reset(); // superseded
          }
        } else if (st.retire_pending) {
          // Early (a retry's tick, or the timer a hair before `at`): again later.
          self->delayed_send(self,
                             std::chrono::duration_cast<std::chrono::milliseconds>(
                                 st.retire_pending->at - steady_now()) +
                                 std::chrono::milliseconds(1),
                             tick_atom::value);
        }
        if (!st.done)
          pump(self);
      },
  };
}

} // namespace lmcc::actors
