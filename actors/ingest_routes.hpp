// ingest_routes: which worker actor takes the PULL-socket frames of which
// worker, published by the directory for the front end's PULL thread.
//
// The PULL thread routes every frame of a registered worker straight to that
// worker's actor (one hop, no funnel through the directory); the directory
// publishes a fresh immutable table after every registration change, before
// it answers the RegisterMsg, so a worker's first batch (sent after its
// registration reply) always finds its route. In a cluster it also lists the
// workers homed on other nodes, with no actor: every frame is stamped with
// the registration this node knew when it read it (worker_logic::on_push
// drops a KV batch read under an older registration than its entity's).
//
//   auto table = board.current();              // PULL thread, once per round
//   if (auto* r = find_route(*table, instance, worker_id)) send to r->actor
//
// Thread-safety: route_board is thread-safe; tables are immutable.
#pragma once

#include "actors/worker_actor.hpp"
#include "index/ids.hpp"
#include "registry/published.hpp"

#include <absl/container/flat_hash_map.h>

#include <memory>
#include <optional>
#include <string>
#include <utility>

namespace lmcc::actors {

struct ingest_route {
  std::string instance_id;
  msg::wire_int worker_id;
  /// The registration this node knows; the PULL thread stamps every frame of
  /// the worker with it (pushed_msg::read_under).
  uint64_t incarnation = 0;
  /// The worker's actor; empty when it lives on another node (its home).
  worker_actor actor;
};

/// Every worker this node knows registered, by worker uid.
using ingest_route_table = absl::flat_hash_map<uint64_t, ingest_route>;

/// The entry of (instance_id, worker_id), or nullptr when this node knows no
/// registration of it.
inline const ingest_route* find_registration(const ingest_route_table& table,
                                             std::string_view instance_id,
                                             const msg::wire_int& worker_id) {
  auto it = table.find(worker_uid(instance_id, worker_id));
  if (it == table.end() || it->second.instance_id != instance_id ||
      it->second.worker_id != worker_id)
    return nullptr;
  return &it->second;
}

/// The route of (instance_id, worker_id) to its actor on this node, or
/// nullptr when it is not registered or lives on another node.
inline const ingest_route* find_route(const ingest_route_table& table, std::string_view instance_id,
                                      const msg::wire_int& worker_id) {
  const auto* r = find_registration(table, instance_id, worker_id);
  return r && r->actor ? r : nullptr;
}

/// The (instance_id, worker_id) of a PULL-socket message that goes to that
/// worker's actor (KV ops, full-sync batches and ends); nullopt for others.
inline std::optional<std::pair<const std::string*, const msg::wire_int*>>
pushing_worker(const msg::Msg& m) {
  return std::visit(
      [](const auto& x) -> std::optional<std::pair<const std::string*, const msg::wire_int*>> {
        using M = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<M, msg::BatchedKVOperationMsg> ||
                      std::is_same_v<M, msg::KVAdmitMsg> || std::is_same_v<M, msg::KVEvictMsg> ||
                      std::is_same_v<M, msg::FullSyncBatchMsg> ||
                      std::is_same_v<M, msg::FullSyncEndMsg>)
          return std::make_pair(&x.instance_id, &x.worker_id);
        else
          return std::nullopt;
      },
      m);
}

/// The routes the directory publishes for the PULL thread.
using route_board = published<ingest_route_table>;

} // namespace lmcc::actors
