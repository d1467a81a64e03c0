// heartbeat_reader: answers HeartbeatMsg on the socket thread it arrives on,
// with no actor hop, for a worker whose answer the registry's latest
// heartbeat_view decides; every other heartbeat goes to the directory.
//
// A heartbeat's answer is a pure function of the registry (is a full sync
// owed, and why); its effect -- the worker's heartbeat time, which the reaper
// and the replicas read -- is not needed for the answer. So the socket thread
// answers from the published view and the directory records the time
// afterwards (heard_atom), off the request's path. Under a saturating flood
// the directory's hops cost a heartbeat 10-40 ms at p99 on two shared cores;
// a P2P lookup answered where it arrives costs 0.1 ms.
//
// The directory hears of the heartbeats answered here in batches: the socket
// thread keeps each worker's latest (note_heard) and asks the directory to take
// them (take_heard) heard_record_delay after the first, so a fleet's heartbeats
// cost the scheduler a wake-up per delay, not one per heartbeat. The time
// recorded is the one the socket thread read; the reaper (minutes) and the
// replicas (gathered for a second) do not notice the delay.
//
// The view is used only while it is current: every registry change that could
// alter an answer bumps the registry's answers version before it happens, and a
// stale view sends heartbeats to the directory until it publishes a fresh one.
// The directory answers a worker's first heartbeat (it is stored) and an
// unknown worker's (it re-registers).
//
// In a cluster a worker heartbeats to the node it registered through, which is
// its home for one worker in N. Only the home asks for a full sync: it alone
// knows that a start is on its way (registry::expect_sync_state), and an ask it
// would not make starts a second sync. But "nothing owed" is what the home's
// copies on the other nodes say too, almost always: every proof (resync_atom)
// and every sync state reaches every node. So a node answers a worker homed
// elsewhere here when its view owes the worker nothing, and sends the directory
// (hence the home) the heartbeat's time; a view that owes it a sync sends the
// heartbeat home. What a copy can miss is a proof made in the last few
// milliseconds, or one a partition holds back: the worker is then asked at a
// later heartbeat, once the copy has it -- from the proof's replication, from
// the home's resend when the link comes back, or, if both missed it, from the
// home, which answers the heartbeats it is told of with the full sync it owes
// (directory.cpp, tell_copy_what_is_owed). Forwarding each heartbeat home would
// cost the three nodes ~0.5 ms of CPU per heartbeat (`lmcc-bench heartbeats`
// measures it).
//
//   heartbeat_reader reader{home_here};      // null: a single node
//   reader.publish(registry.make_heartbeat_view());             // directory
//   if (auto ret = reader.answer(hb, now_ms)) {                 // socket thread
//     if (reader.note_heard(hb, mono_s)) tell directory after heard_record_delay;
//     reply;
//   }
//   for (auto& h : reader.take_heard()) record h;                // directory
//
// Thread-safety: thread-safe. CAF-free.
#pragma once

#include "messages/lmcache_msgs.hpp"
#include "registry/full_sync_ask_log.hpp"
#include "registry/published.hpp"
#include "registry/registry.hpp"

#include <absl/container/flat_hash_map.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace lmcc::actors {

class heartbeat_reader {
public:
  /// Whether worker `uid`'s home is this node (a cluster); null: always.
  using home_filter = std::function<bool(uint64_t uid)>;

  /// How long heartbeats answered here wait for the directory to record them.
  static constexpr std::chrono::milliseconds heard_record_delay{100};

  /// A heartbeat answered here, to be recorded by the directory.
  struct heard {
    std::string instance_id;
    msg::wire_int worker_id;
    double mono_s = 0; ///< monotonic time the socket thread answered it
  };

  explicit heartbeat_reader(home_filter home_here = {}) : home_here_(std::move(home_here)) {}

  /// Replaces the view heartbeats are answered from.
  void publish(std::shared_ptr<const heartbeat_view> view) { view_.publish(std::move(view)); }

  /// The view answers are read from (the directory republishes when stale).
  std::shared_ptr<const heartbeat_view> current() const { return view_.current(); }

  /// The answer to `m` when the view decides it; nullopt: the directory must.
  /// `now_ms` (a monotonic clock) paces the log lines of repeated asks.
  std::optional<msg::HeartbeatRetMsg> answer(const msg::HeartbeatMsg& m, uint64_t now_ms);

  /// Keeps `m` (answered here at monotonic `mono_s`) for the directory; a
  /// worker's later heartbeat replaces its earlier one. true: the first since
  /// the last take_heard, so the caller must have the directory take them.
  bool note_heard(const msg::HeartbeatMsg& m, double mono_s);

  /// The heartbeats noted since the last call, one per worker.
  std::vector<heard> take_heard();

private:
  home_filter home_here_;
  published<heartbeat_view> view_;
  full_sync_ask_log asks_;
  std::mutex heard_mutex_;
  absl::flat_hash_map<uint64_t, heard> heard_; ///< by worker uid
};

} // namespace lmcc::actors
