// directory: the node's entry point for worker traffic and its worker registry.
//
// Every message from the gateway comes here first. The directory owns the
// registry (registration order, addresses, heartbeats, the full-sync tracker's
// global view) and one worker_actor per registered worker; it forwards a
// worker's KV batches and full-sync messages to that worker's actor after
// interning the location, answers registration, heartbeats and registry queries
// itself, sends lookups to the lookup actors and control commands to the
// control fan-out. After every registry change it pushes a fresh
// directory_view to the lookup actors.
//
//   auto dir = sys.spawn(directory_main, directory_config{...});
//   self->request(dir, 5s, request_atom::value, msg::Msg{register_msg})...
//
// Context: a CAF actor; one per node.
#pragma once

#include "actors/control_fanout.hpp"
#include "actors/controller_options.hpp"
#include "actors/lookup_actor.hpp"
#include "actors/restore_plan.hpp"
#include "actors/worker_actor.hpp"
#include "persistence/store.hpp"

#include <functional>
#include <map>
#include <optional>
#include <random>
#include <string>

namespace lmcc::actors {

using directory_actor = directory_feedback_actor::extend<
    caf::reacts_to<push_atom, msg::Msg>, caf::replies_to<request_atom, msg::Msg>::with<msg::Msg>,
    caf::replies_to<stats_atom>::with<node_stats>, caf::reacts_to<tick_atom>,
    // Answers once every batch it received so far is committed by the shards.
    caf::replies_to<drain_atom>::with<bool>>;

/// Hooks into the rest of the node, so that actors stay free of sockets.
struct directory_hooks {
  /// The heartbeat URL to hand a worker registering from this IP (spec 2.3), if any.
  std::function<std::optional<std::string>(const std::string& worker_ip)> heartbeat_url_for;
  /// A worker left: drop its control socket.
  std::function<void(const std::string& endpoint)> forget_control;
  /// Counts a named event in the node's metrics.
  std::function<void(std::string_view event)> count_event;
};

struct directory_config {
  controller_options options;
  std::vector<kv_shard_actor> shards;
  std::vector<lookup_actor> lookups;
  control_fanout_actor fanout;
  directory_hooks hooks;
  uint64_t seed = 0; ///< for worker_event_id suffixes
  /// The node's store (null: in memory only). The directory writes worker rows
  /// (registration, new location, first heartbeat, reset, deregistration).
  std::shared_ptr<persistence::store> store;
  /// Workers taken back from the store, in registration order.
  std::vector<restored_worker> restored;
  /// LMCache's need_full_sync_all at start: true on a node that starts empty,
  /// false on one that restored its index.
  bool need_full_sync_all = true;
};

struct directory_state {
  static inline const char* name = "lmcc.directory";

  directory_config cfg;
  registry reg;
  std::map<uint32_t, worker_actor> workers;
  uint64_t seq_discontinuities = 0;
  /// Resets sent to a worker's actor and not yet acknowledged by every shard;
  /// its row says reset_pending while this is non-zero.
  std::map<uint32_t, uint32_t> pending_resets;
  size_t next_lookup = 0;
  std::mt19937_64 rng;

  std::string random_hex();
  void count(std::string_view event) const;

  /// Writes the worker's row (no-op without a store); failures are logged.
  void persist_row(uint32_t worker_num);
  /// Deletes the worker's row.
  void persist_removal(uint32_t worker_num);
};

directory_actor::behavior_type
directory_main(directory_actor::stateful_pointer<directory_state> self, directory_config cfg);

} // namespace lmcc::actors
