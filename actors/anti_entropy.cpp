#include "actors/anti_entropy.hpp"

#include <spdlog/spdlog.h>

namespace lmcc::actors {
namespace {

using ae_self = anti_entropy_actor::stateful_pointer<anti_entropy_state>;

void repair(ae_self self, const cluster_service_actor& peer, const std::string& peer_id,
            uint32_t slot) {
  self->request(peer, self->state.cfg.timeout, repair_atom::value, uint64_t{slot})
      .then(
          [self, slot, peer_id](std::vector<uint64_t>& flat) {
            auto& st = self->state;
            spdlog::info("anti-entropy-repair slot={} from={} entries={}", slot, peer_id,
                         flat.size() / 2);
            self->send(st.cfg.shard, repair_atom::value, uint64_t{slot}, std::move(flat));
            if (st.cfg.counters)
              ++st.cfg.counters->slots_repaired;
          },
          [slot, peer_id](caf::error& e) {
            spdlog::warn("anti-entropy-repair-failed slot={} from={} error={}", slot, peer_id,
                         caf::to_string(e));
          });
}

void compare_with(ae_self self, const cluster_table& table, node_index peer) {
  auto& st = self->state;
  std::vector<uint64_t> slots;
  const uint64_t both = (uint64_t{1} << table.self) | (uint64_t{1} << peer);
  for (uint32_t s = 0; s < table.owners->slot_count(); ++s)
    if ((cluster::owner_mask(*table.owners, s) & both) == both)
      slots.push_back(s);
  if (slots.empty())
    return;
  auto service = caf::actor_cast<cluster_service_actor>(table.peers[peer].handles.service);
  const std::string peer_id = table.members[peer].address.id;
  self->request(service, st.cfg.timeout, digest_atom::value, slots)
      .then(
          [self, peer, service, peer_id, slots,
           asked_at = std::chrono::steady_clock::now()](std::vector<uint64_t>& answer) {
            auto& st = self->state;
            // An answer slower than a round was queued (the peer or this node
            // stood still): a burst of them after a thaw would pass for two
            // rounds in a row. Start counting again from the next round.
            if (std::chrono::steady_clock::now() - asked_at > st.cfg.interval) {
              st.tracker.forget(peer);
              return;
            }
            // [uptime, digests..., suspect bit words..., hint bit words...]
            // (no suspect words: none suspect; no hint words: none hinted)
            if (answer.size() < slots.size() + 1)
              return;
            const size_t words = slot_suspects::word_count(slots.size());
            const size_t extra = answer.size() - slots.size() - 1;
            const std::span<const uint64_t> peer_suspect_bits{answer.data() + slots.size() + 1,
                                                              std::min(extra, words)};
            // The peer holds a home's hint that this node's copies lack writes.
            const std::span<const uint64_t> told_lagging_bits =
                extra >= 2 * words
                    ? std::span<const uint64_t>{answer.data() + slots.size() + 1 + words, words}
                    : std::span<const uint64_t>{};
            const auto table = st.cfg.board->current();
            const uint64_t own_uptime = st.cfg.uptime_ms ? st.cfg.uptime_ms() : 0;
            const bool senior = peer_is_senior(answer[0], peer, own_uptime, table->self);
            // Per slot, an owner that gained it in the last membership change
            // is the junior one whatever the uptimes (it may lack what came
            // before the change; the other saw every write).
            auto* suspects = st.cfg.suspects.get();
            if (suspects && suspects->stood_still(steady_now_ms()))
              spdlog::warn("cluster-own-stall-seen by=anti-entropy action=slots-suspect");
            std::vector<uint32_t> slot_ids;
            std::vector<uint64_t> remote;
            std::vector<uint32_t> settled; // suspect here, equal there
            auto* hints = st.cfg.hints.get();
            {
              auto r = st.cfg.index->read();
              for (size_t i = 0; i < slots.size(); ++i) {
                const auto s = static_cast<uint32_t>(slots[i]);
                const bool equal = r.slot(s).digest == answer[i + 1];
                const bool own_suspect =
                    (suspects && suspects->suspect(s)) || slot_suspects::bit(told_lagging_bits, i);
                if (own_suspect && equal)
                  settled.push_back(s);
                bool peer_hinted = hints && hints->lagging(peer_id, s);
                if (peer_hinted && equal) {
                  hints->clear(peer_id, s); // caught up (re-sent, or repaired)
                  peer_hinted = false;
                }
                const bool peer_suspect = slot_suspects::bit(peer_suspect_bits, i) || peer_hinted;
                if (peer_copy_wins(table->gained(table->self, s), table->gained(peer, s),
                                   own_suspect, peer_suspect, senior)) {
                  slot_ids.push_back(s);
                  remote.push_back(answer[i + 1]);
                }
              }
            }
            if (suspects)
              for (uint32_t s : settled)
                suspects->clear(s);
            if (slot_ids.empty()) {
              st.tracker.forget(peer); // it copies from this node, not the other way
              return;
            }
            std::vector<uint64_t> local(slot_ids.size());
            {
              auto r = st.cfg.index->read();
              for (size_t i = 0; i < slot_ids.size(); ++i)
                local[i] = r.slot(slot_ids[i]).digest;
            }
            auto todo = st.tracker.compare(peer, slot_ids, local, remote);
            if (st.cfg.counters) {
              st.cfg.counters->slots_compared += slots.size();
              st.cfg.counters->slots_differing = st.tracker.differing();
            }
            if (todo.size() > st.cfg.max_repairs_per_round)
              todo.resize(st.cfg.max_repairs_per_round); // the rest stays for next rounds
            for (uint32_t slot : todo)
              repair(self, service, peer_id, slot);
          },
          [self, peer](caf::error&) { self->state.tracker.forget(peer); });
}

} // namespace

anti_entropy_actor::behavior_type
anti_entropy_main(anti_entropy_actor::stateful_pointer<anti_entropy_state> self,
                  anti_entropy_config cfg) {
  self->state.cfg = std::move(cfg);
  if (self->state.cfg.interval.count() > 0)
    self->delayed_send(self, self->state.cfg.interval, tick_atom::value);
  return {
      [self](tick_atom) {
        auto& st = self->state;
        const auto table = st.cfg.board->current();
        for (node_index n = 0; n < table->peers.size(); ++n) {
          if (n == table->self)
            continue;
          if (table->reachable(n) && table->peers[n].handles.service)
            compare_with(self, *table, n);
          else
            st.tracker.forget(n);
        }
        if (st.cfg.counters)
          ++st.cfg.counters->rounds;
        self->delayed_send(self, st.cfg.interval, tick_atom::value);
      },
  };
}

} // namespace lmcc::actors
