// full_sync_ask_log: which of a node's full-sync asks get a log line.
//
// A worker owed a full sync is asked on every heartbeat until it starts one,
// and a worker that never does (it cannot, or its syncs keep failing) is asked
// on every heartbeat for as long as it lives: 200 such workers heartbeating
// every 0.5 s wrote 400 identical lines a second. So a worker's first ask under
// each state of the registry's answers is logged -- a new reason, a new proof,
// a registration all move that state (registry::answers_version), and the chaos
// checker needs the ask that follows each proof (tests/chaos/audit.py,
// invariant 4) -- and after that one line per `every` while the same asks go
// on, with the number of asks it did not log.
//
//   full_sync_ask_log asks{std::chrono::seconds{60}};
//   asks.asked(uid, m.instance_id, m.worker_id, reason, reg.answers_version(), now_ms);
//
// Thread-safety: thread-safe. CAF-free; time passed in.
#pragma once

#include "messages/wire_int.hpp"

#include <absl/container/flat_hash_map.h>

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>

namespace lmcc::actors {

class full_sync_ask_log {
public:
  /// Default: one line a minute for asks that repeat unchanged.
  static constexpr std::chrono::milliseconds default_every{60'000};

  /// Workers remembered before the ones quiet for `every` are forgotten.
  static constexpr size_t sweep_above = 4096;

  explicit full_sync_ask_log(std::chrono::milliseconds every = default_every) : every_(every) {}

  /// Worker `uid` (instance_id, worker_id) is asked for a full sync for
  /// `reason` while the registry's answers version is `version`, at monotonic
  /// time `now_ms`. Logs `full-sync-requested` when due; true when it did.
  bool asked(uint64_t uid, std::string_view instance_id, const msg::wire_int& worker_id,
             std::string_view reason, uint64_t version, uint64_t now_ms);

  /// Workers currently remembered (for tests).
  size_t tracked() const;

private:
  struct last_line {
    std::string reason;
    uint64_t version = 0;
    uint64_t at_ms = 0;
    uint64_t unlogged = 0; ///< asks since `at_ms` that were not logged
  };

  void sweep(uint64_t now_ms);

  std::chrono::milliseconds every_;
  mutable std::mutex mutex_;
  absl::flat_hash_map<uint64_t, last_line> lines_;
  /// Sweeps when the map grows past this (doubles what a sweep leaves, so a
  /// fleet of more than sweep_above workers all asked does not sweep per ask).
  size_t sweep_at_ = sweep_above;
};

} // namespace lmcc::actors
