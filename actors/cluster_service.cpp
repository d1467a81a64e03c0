#include "actors/cluster_service.hpp"

#include <absl/container/flat_hash_map.h>
#include <spdlog/spdlog.h>

namespace lmcc::actors {

std::vector<uint64_t> read_holders_flat(const kv_index& index, std::span<const uint64_t> keys) {
  std::vector<uint64_t> flat;
  flat.reserve(keys.size() * 2);
  holder_list holders;
  auto r = index.read();
  for (uint64_t key : keys) {
    holders.clear();
    r.holders(key, holders);
    flat.push_back(holders.size());
    flat.insert(flat.end(), holders.begin(), holders.end());
  }
  return flat;
}

std::vector<uint64_t> share_counts_flat(const kv_index& index) {
  auto r = index.read();
  std::vector<uint64_t> flat;
  flat.reserve(r.share_by_holder().size() * 2);
  for (const auto& [h, n] : r.share_by_holder()) {
    flat.push_back(h);
    flat.push_back(n);
  }
  return flat;
}

cluster_service_actor::behavior_type
cluster_service_main(cluster_service_actor::stateful_pointer<cluster_service_state> self,
                     cluster_service_config cfg) {
  self->state.cfg = std::move(cfg);
  return {
      [self](read_atom, const std::vector<uint64_t>& keys) {
        return read_holders_flat(*self->state.cfg.index, keys);
      },
      [self](stats_atom) { return share_counts_flat(*self->state.cfg.index); },
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
        for (auto& pm : msgs) {
          if (std::holds_alternative<msg::DeRegisterMsg>(pm.msg)) {
            flush();
            groups.clear();
            by_uid.clear();
            self->send(st.cfg.directory, push_atom::value, std::move(pm.msg));
            continue;
          }
          auto who = pushing_worker(pm.msg);
          const ingest_route* route = who ? find_route(*table, *who->first, *who->second) : nullptr;
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
        if (touched.empty())
          return true;
        auto rp = self->make_response_promise<bool>();
        auto left = std::make_shared<size_t>(touched.size());
        auto all = std::make_shared<bool>(true);
        for (const auto& w : touched)
          self->request(w, st.cfg.timeout, drain_atom::value)
              .then(
                  [rp, left, all](bool ok) mutable {
                    *all = *all && ok;
                    if (--*left == 0)
                      rp.deliver(*all);
                  },
                  [rp, left, all](caf::error&) mutable {
                    *all = false;
                    if (--*left == 0)
                      rp.deliver(false);
                  });
        return rp;
      },
  };
}

} // namespace lmcc::actors

#include "actors/credit_gate.hpp"

namespace lmcc::actors {

frame_forwarder_actor::behavior_type
frame_forwarder_main(frame_forwarder_actor::stateful_pointer<frame_forwarder_state> self,
                     frame_forwarder_config cfg) {
  self->state.cfg = std::move(cfg);
  return {
      [self](push_atom, uint16_t node, pushed_msgs& msgs) {
        auto& st = self->state;
        uint64_t credits = 0;
        for (const auto& pm : msgs)
          credits += pm.credits;
        auto table = st.cfg.board->current();
        const bool reachable = node < table->peers.size() && table->peers[node].live &&
                               table->peers[node].handles.service;
        auto drop = [self, credits, node, frames = msgs.size()](std::string_view why) {
          auto& st = self->state;
          st.cfg.gate->give(credits);
          if (st.cfg.count_event)
            st.cfg.count_event("forwarded_frames_dropped");
          // First and then every 100th: a long outage must not fill the log.
          if (st.dropped++ % 100 == 0)
            spdlog::warn("frames-not-forwarded node_index={} frames={} reason={} dropped_so_far={}",
                         node, frames, why, st.dropped);
        };
        if (!reachable) {
          drop("home-node-unreachable");
          return;
        }
        auto service = caf::actor_cast<cluster_service_actor>(table->peers[node].handles.service);
        self->request(service, st.cfg.timeout, push_atom::value, std::move(msgs))
            .then([self, credits](bool) { self->state.cfg.gate->give(credits); },
                  [drop](caf::error& e) { drop(caf::to_string(e)); });
      },
  };
}

} // namespace lmcc::actors
