#include "actors/cluster/cluster_service.hpp"

#include "actors/expiry_tick.hpp"
#include "clock/clock.hpp"

#include <absl/container/flat_hash_map.h>
#include <spdlog/spdlog.h>

#include <algorithm>

namespace lmcc::actors {

std::vector<cluster::holder_count> share_counts(const kv_index& index) {
  auto r = index.read();
  std::vector<cluster::holder_count> counts;
  counts.reserve(r.share_by_holder().size());
  for (const auto& [h, n] : r.share_by_holder())
    counts.push_back({h, n});
  return counts;
}

std::vector<cluster::holder_count> slot_counts(const kv_index& index,
                                               std::span<const uint64_t> slots) {
  absl::flat_hash_map<holder_id, uint64_t> by_holder;
  auto r = index.read();
  for (uint64_t slot : slots)
    if (slot < index.slot_count())
      r.for_each_key(static_cast<uint32_t>(slot), [&](uint64_t, std::span<const holder_id> hs) {
        for (holder_id h : hs)
          ++by_holder[h];
      });
  std::vector<cluster::holder_count> counts;
  counts.reserve(by_holder.size());
  for (const auto& [h, n] : by_holder)
    counts.push_back({h, n});
  return counts;
}

cluster::slot_digests digests_of(const kv_index& index, std::span<const uint64_t> slots) {
  cluster::slot_digests out;
  out.digests.reserve(slots.size());
  auto r = index.read();
  for (uint64_t s : slots)
    out.digests.push_back(s < index.slot_count() ? r.slot(static_cast<uint32_t>(s)).digest : 0);
  return out;
}

cluster_service_actor::behavior_type
cluster_service_main(cluster_service_actor::stateful_pointer<cluster_service_state> self,
                     cluster_service_config cfg) {
  self->state.cfg = std::move(cfg);
  return {
      [self](stats_atom) { return share_counts(*self->state.cfg.index); },
      [self](stats_atom, const std::vector<uint64_t>& slots) {
        return slot_counts(*self->state.cfg.index, slots);
      },
      [self](digest_atom, const std::vector<uint64_t>& slots) {
        return digests_of(*self->state.cfg.index, slots);
      },
      [self](copy_atom, uint64_t slot) {
        return self->delegate(self->state.cfg.shard, copy_atom::value, slot);
      },
      [self](tick_atom) { on_expiry_tick(self); },
      [self](push_atom, pushed_msgs& msgs) -> caf::result<bool> {
        auto& st = self->state;
        auto table = st.cfg.routes->current();
        // Group per worker, in arrival order; a deregistration closes its group.
        std::vector<std::pair<worker_actor, pushed_msgs>> groups;
        absl::flat_hash_map<uint64_t, size_t> by_uid;
        auto flush = [&] {
          for (auto& [worker, group] : groups)
            self->send(worker, push_atom::value, std::move(group));
        };
        std::vector<worker_actor> touched;
        auto cluster = st.cfg.board ? st.cfg.board->current() : nullptr;
        absl::flat_hash_map<uint16_t, pushed_msgs> onward;
        for (auto& pm : msgs) {
          if (std::holds_alternative<msg::DeRegisterMsg>(pm.msg)) {
            flush();
            groups.clear();
            by_uid.clear();
            self->send(st.cfg.directory, push_atom::value, std::move(pm.msg));
            continue;
          }
          pm.forwarded = true; // read by another node, stamped with what it knew
          auto who = pushing_worker(pm.msg);
          const ingest_route* route = who ? find_route(*table, *who->first, *who->second) : nullptr;
          if (!route && who && cluster && st.cfg.forward) {
            const node_index home = cluster->home_of(worker_uid(*who->first, *who->second));
            if (home != cluster->self) {
              pm.credits = 0; // held by the node that read the frame
              onward[home].push_back(std::move(pm));
              continue;
            }
          }
          if (!route) {
            if (st.cfg.count_event)
              st.cfg.count_event("forwarded_frame_for_unknown_worker");
            continue;
          }
          // The credits belong to the node that read the frame.
          pm.credits = 0;
          const uint64_t uid = worker_uid(*who->first, *who->second);
          auto [it, inserted] = by_uid.try_emplace(uid, groups.size());
          if (inserted) {
            groups.emplace_back(route->actor, pushed_msgs{});
            touched.push_back(route->actor);
          }
          groups[it->second].second.push_back(std::move(pm));
        }
        flush();
        for (auto& [node, frames] : onward) {
          if (st.cfg.count_event)
            st.cfg.count_event("forwarded_frames_rerouted");
          st.cfg.forward(node, std::move(frames));
        }
        if (touched.empty())
          return true;
        auto rp = self->make_response_promise<bool>();
        auto left = std::make_shared<size_t>(touched.size());
        auto all = std::make_shared<bool>(true);
        // One deadline for the whole push, kept here rather than in CAF's
        // clock (deadline_book.hpp); past it the push is answered false.
        const auto id =
            st.deadlines.add(steady_now() + st.cfg.timeout, [rp]() mutable { rp.deliver(false); });
        arm_expiry_tick(self);
        auto answered = [self, id, rp, left, all](bool ok) mutable {
          *all = *all && ok;
          if (--*left == 0 && self->state.deadlines.settle(id))
            rp.deliver(*all);
        };
        for (const auto& w : touched)
          self->request(w, caf::infinite, drain_atom::value)
              .then([answered](bool ok) mutable { answered(ok); },
                    [answered](caf::error&) mutable { answered(false); });
        return rp;
      },
  };
}

} // namespace lmcc::actors
