// node_runtime_impl: one node's parts, shared by the files of node_runtime:
// its members in start-up order and the calls into its actors.
// node_runtime.cpp builds, starts and stops them and is the front end's
// handler; node_runtime_api.cpp answers the HTTP API (controller_api).
//
// Private to apps/lmcc/: included by node_runtime.cpp and node_runtime_api.cpp only.
#pragma once

#include "actors/control_fanout.hpp"
#include "actors/directory.hpp"
#include "actors/ingest_router.hpp"
#include "actors/ingest_routes.hpp"
#include "actors/kv_shard.hpp"
#include "actors/lookup_actor.hpp"
#include "actors/request_bridge.hpp"
#include "actors/row_writer.hpp"
#include "apps/lmcc/node_cluster.hpp"
#include "apps/lmcc/node_restore.hpp"
#include "apps/lmcc/node_runtime.hpp"
#include "clock/clock.hpp"
#include "gateway/control_channel.hpp"
#include "gateway/http_api.hpp"
#include "gateway/io_lanes.hpp"
#include "gateway/metrics.hpp"
#include "gateway/zmq_frontend.hpp"
#include "registry/credit_gate.hpp"
#include "registry/heartbeat_reader.hpp"
#include "registry/lookup_reader.hpp"

#include <caf/all.hpp>
#include <zmq.hpp>

#include <atomic>
#include <chrono>

namespace lmcc::apps {

/// The front end's view of the credit gate.
class gate_adapter final : public gateway::ingest_gate {
public:
  explicit gate_adapter(actors::credit_gate& gate) : gate_(gate) {}
  bool exhausted() const override { return gate_.exhausted(); }
  uint64_t room() const override {
    const uint64_t in_flight = gate_.in_flight();
    return in_flight >= gate_.limit() ? 0 : gate_.limit() - in_flight;
  }
  bool arm() override { return gate_.arm(); }
  void disarm() override { gate_.disarm(); }
  int wake_fd() const override { return gate_.wake_fd(); }

private:
  actors::credit_gate& gate_;
};

class node_runtime::impl {
public:
  // -- construction ----------------------------------------------------------

  explicit impl(node_options opts);

  // -- member variables (construction order = the order things start) --------

  node_options options_;
  zmq::context_t context_{gateway::zmq_io_threads};
  caf::actor_system_config config_;
  caf::actor_system system_;
  gateway::node_metrics metrics_;
  std::shared_ptr<actors::kv_index> index_;
  std::shared_ptr<actors::credit_gate> gate_;
  gate_adapter gate_adapter_;
  std::shared_ptr<actors::route_board> routes_ = std::make_shared<actors::route_board>();
  /// The node's wall clock (POST /admin/faults can jump it, in a build with
  /// fault injection).
  std::shared_ptr<node_clock> clock_ = std::make_shared<node_clock>();
  std::shared_ptr<actors::shard_monitor> shard_monitor_ = std::make_shared<actors::shard_monitor>();
  /// Shared so that actors reach it through weak pointers: a directory still
  /// working through its mailbox while the node stops (a deregistration, the
  /// reaper) must find it gone, not freed.
  std::shared_ptr<gateway::control_channel> control_;
  std::unique_ptr<gateway::zmq_frontend> frontend_;
  std::unique_ptr<gateway::http_api> http_;
  actors::kv_shard_actor shard_;
  std::vector<actors::lookup_actor> lookups_;
  /// Answers /lookup and BatchedP2PLookupMsg on the thread they arrive on.
  std::shared_ptr<actors::lookup_reader> reader_;
  /// Answers HeartbeatMsg on the thread it arrives on when it can.
  std::shared_ptr<actors::heartbeat_reader> heartbeats_;
  std::atomic<size_t> next_lookup_{0};
  actors::control_fanout_actor fanout_;
  actors::directory_actor directory_;
  actors::request_bridge_actor bridge_;
  actors::row_writer_actor rows_;
  actors::ingest_router_actor router_;
  std::shared_ptr<persistence::store> store_;

  /// This node's part in a cluster; null on a single node.
  std::unique_ptr<node_cluster> cluster_;
  /// The actors exist (after loading): API calls may reach them.
  std::atomic<bool> serving_{false};
  std::atomic<bool> ready_{false};
  bool started_ = false;

  std::chrono::milliseconds orchestration_timeout() const {
    // The control channel gives each worker command one control timeout once it
    // reaches the head of that worker's queue; the caller waits that long plus
    // the internal bound.
    return options_.control.request_timeout + options_.controller.internal_timeout;
  }

  const actors::lookup_actor& next_lookup() {
    return lookups_[next_lookup_.fetch_add(1, std::memory_order_relaxed) % lookups_.size()];
  }

  void spawn_actors(node_state& state);

  /// Waits (bounded) for one drain answer.
  template <class Handle>
  bool drain_one(const Handle& h, std::string_view what);

  /// Everything the front end handed over is applied and, with persistence,
  /// committed: worker actors wait for their acks, which come after commits.
  void drain();

  void request(msg::Msg m, std::chrono::milliseconds timeout, actors::reply_callback done) {
    caf::anon_send(bridge_, actors::request_atom::value, std::move(m),
                   static_cast<uint32_t>(timeout.count()), std::move(done));
  }

  std::future<std::optional<actors::node_stats>> node_stats() {
    auto promise = std::make_shared<std::promise<std::optional<actors::node_stats>>>();
    auto future = promise->get_future();
    caf::anon_send(bridge_, actors::stats_atom::value,
                   static_cast<uint32_t>(options_.controller.internal_timeout.count()),
                   actors::stats_callback{[promise](std::optional<actors::node_stats> s) {
                     promise->set_value(std::move(s));
                   }});
    return future;
  }

  /// Routes one drain round of the PULL socket: each worker's frames go to
  /// its actor in one message, holding their ingest credits.
  void route_round(std::vector<msg::Msg>& frames);
};

} // namespace lmcc::apps
