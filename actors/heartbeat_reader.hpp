// heartbeat_reader: answers HeartbeatMsg on the socket thread it arrives on,
// with no actor hop, for a worker whose answer the registry's latest
// heartbeat_view decides; every other heartbeat goes to the directory.
//
// A heartbeat's answer is a pure function of the registry (is a full sync
// owed, and why); its effect -- the worker's heartbeat time, which the reaper
// and the replicas read -- is not needed for the answer. So the socket thread
// answers from the published view and the directory records the time
// afterwards (heard_atom), off the request's path. Under a saturating flood
// the directory's hops cost a heartbeat 10-40 ms at p99 on two shared cores
// (bench/RESULTS.md); a P2P lookup answered where it arrives costs 0.1 ms.
//
// The view is used only while it is current: every registry change that
// could alter an answer bumps the registry's answers version before it
// happens, and a stale view sends heartbeats to the directory until it
// publishes a fresh one. The directory answers (as before) a worker's first
// heartbeat (it is stored), an unknown worker's (it re-registers), and in a
// cluster one whose home is another node.
//
//   heartbeat_reader reader{home_here};      // null: a single node
//   reader.publish(registry.make_heartbeat_view());             // directory
//   if (auto ret = reader.answer(hb)) { tell directory; reply } // socket thread
//
// Thread-safety: thread-safe. CAF-free.
#pragma once

#include "actors/published.hpp"
#include "actors/registry.hpp"
#include "messages/lmcache_msgs.hpp"

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>

namespace lmcc::actors {

class heartbeat_reader {
public:
  /// Whether worker `uid`'s home is this node (a cluster); null: always.
  using home_filter = std::function<bool(uint64_t uid)>;

  explicit heartbeat_reader(home_filter home_here = {}) : home_here_(std::move(home_here)) {}

  /// Replaces the view heartbeats are answered from.
  void publish(std::shared_ptr<const heartbeat_view> view) { view_.publish(std::move(view)); }

  /// The view answers are read from (the directory republishes when stale).
  std::shared_ptr<const heartbeat_view> current() const { return view_.current(); }

  /// The answer to `m` when the view decides it; nullopt: the directory must.
  std::optional<msg::HeartbeatRetMsg> answer(const msg::HeartbeatMsg& m) const;

private:
  home_filter home_here_;
  published<heartbeat_view> view_;
};

} // namespace lmcc::actors
