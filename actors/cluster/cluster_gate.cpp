#include "actors/cluster/cluster_gate.hpp"

#include "actors/cluster/cluster_node.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>

namespace lmcc::actors {
namespace {

using gate_self = cluster_gate_actor::stateful_pointer<gate_state>;
using join_result = caf::result<std::string, peer_handles>;

/// Step 2: whether `client` proved the secret (its open handshake is closed
/// either way); a refusal is logged and counted.
bool proves_the_secret(gate_self self, const std::string& client, uint64_t client_nonce,
                       const std::string& mac, uint64_t& server_nonce) {
  auto& st = self->state;
  auto it = st.open.find(client);
  const bool known = it != st.open.end() && it->second.first == client_nonce;
  server_nonce = known ? it->second.second : 0;
  if (it != st.open.end())
    st.open.erase(it);
  const bool ok =
      known && cluster::mac_equal(
                   mac, cluster::handshake_mac(st.cfg.secret, cluster::handshake_role::join, client,
                                               st.cfg.self_id, client_nonce, server_nonce));
  if (!ok) {
    if (st.cfg.counters)
      ++st.cfg.counters->joins_refused;
    spdlog::error(
        "cluster-join-refused node={} peer={} from={} reason={}", st.cfg.self_id, client,
        caf::to_string(self->current_sender() ? self->current_sender()->node() : caf::node_id{}),
        known ? "wrong-secret" : "no-open-handshake");
    return false;
  }
  spdlog::info("cluster-join-accepted node={} peer={}", st.cfg.self_id, client);
  return true;
}

/// What a client that proved the secret gets: the MAC that proves this node
/// to it, and this node's handles and addresses.
join_result accepted(gate_self self, const std::string& client, uint64_t client_nonce,
                     uint64_t server_nonce) {
  auto& st = self->state;
  return {cluster::handshake_mac(st.cfg.secret, cluster::handshake_role::accept, client,
                                 st.cfg.self_id, client_nonce, server_nonce),
          st.cfg.handles};
}

join_result refused() {
  return caf::make_error(caf::sec::runtime_error,
                         "refused: this node's cluster secret does not match");
}

} // namespace

cluster_gate_actor::behavior_type
cluster_gate_main(cluster_gate_actor::stateful_pointer<gate_state> self, gate_config cfg) {
  self->state.cfg = std::move(cfg);
  return {
      [self](hello_atom, const std::string& client, uint64_t client_nonce,
             uint32_t version) -> caf::result<uint64_t, uint32_t> {
        auto& st = self->state;
        if (version != st.cfg.protocol_version) {
          if (st.cfg.counters)
            ++st.cfg.counters->joins_refused;
          spdlog::error("cluster-join-refused node={} peer={} reason=protocol-version "
                        "peer_version={} version={}",
                        st.cfg.self_id, client, version, st.cfg.protocol_version);
          return caf::make_error(caf::sec::runtime_error,
                                 "refused: cluster protocol version " + std::to_string(version) +
                                     " is not this node's " +
                                     std::to_string(st.cfg.protocol_version));
        }
        // At most one open handshake per client id; a bound on what strangers hold.
        if (st.open.size() >= 1024 && !st.open.count(client))
          st.open.erase(st.open.begin());
        const uint64_t server_nonce = st.rng();
        st.open[client] = {client_nonce, server_nonce};
        return {server_nonce, st.cfg.protocol_version};
      },
      [self](join_atom, const std::string& client, uint64_t client_nonce,
             const std::string& mac) -> join_result {
        uint64_t server_nonce = 0;
        if (!proves_the_secret(self, client, client_nonce, mac, server_nonce))
          return refused();
        return accepted(self, client, client_nonce, server_nonce);
      },
      [self](join_atom, const std::string& client, uint64_t client_nonce, const std::string& mac,
             peer_handles& client_handles) -> join_result {
        uint64_t server_nonce = 0;
        if (!proves_the_secret(self, client, client_nonce, mac, server_nonce))
          return refused();
        auto& st = self->state;
        // Sent before the answer: the client greets our node only after it.
        if (st.cfg.tell_node && client_handles.complete() && st.cfg.handles.node)
          self->send(caf::actor_cast<cluster_node_actor>(st.cfg.handles.node), join_atom::value,
                     client, std::move(client_handles));
        return accepted(self, client, client_nonce, server_nonce);
      },
  };
}

} // namespace lmcc::actors
