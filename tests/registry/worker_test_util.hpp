// Helpers for the worker_logic tests: a worker_outbox that records every
// effect, a worker's config (one destination, or a placement over several),
// and BatchedKVOperationMsg frames with consecutive seq numbers.
//
//   worker_test::recording_outbox out;
//   worker_logic w{worker_test::config(), out};
//   w.on_push(worker_test::batch("cpu", 0, 3));
//
// Context: test code, single-threaded.
#pragma once

#include "registry/worker_logic.hpp"

// The tests that include this link lmcc_registry only.
#if defined(CAF_VERSION)
#error "worker_logic pulls in CAF"
#endif

#include <memory>
#include <string>
#include <vector>

namespace lmcc::actors::worker_test {

using msg::wire_int;

struct recording_outbox : worker_outbox {
  std::vector<std::pair<uint32_t, kv_sub_batch>> sent;
  uint64_t credits = 0;
  struct gap {
    std::string location;
    uint64_t expected, got;
    friend bool operator==(const gap&, const gap&) = default;
  };
  std::vector<gap> gaps;
  std::vector<std::string> resyncs, locations;
  std::vector<uint64_t> seq_starts;
  std::vector<session_params> starts;
  int go = 0;
  std::vector<pushed_msg> inputs;
  int flushes_wanted = 0;

  void send(uint32_t d, kv_sub_batch&& sb) override { sent.emplace_back(d, std::move(sb)); }
  void give_credits(uint64_t n) override { credits += n; }
  void seq_gap(const std::string& l, uint64_t e, uint64_t g) override { gaps.push_back({l, e, g}); }
  void request_resync(const std::string& r) override { resyncs.push_back(r); }
  void seq_started(uint64_t incarnation) override { seq_starts.push_back(incarnation); }
  void new_location(const std::string& l) override { locations.push_back(l); }
  void session_start(const session_params& p) override { starts.push_back(p); }
  void session_go() override { ++go; }
  void session_input(pushed_msg&& m) override { inputs.push_back(std::move(m)); }
  void durable_flush_wanted() override { ++flushes_wanted; }
};

constexpr uint64_t base = 1000;

/// Slot s of 64 owned by destination s % destinations alone.
inline std::shared_ptr<placement_cell> round_robin_placement(uint32_t destinations) {
  std::vector<uint64_t> table(64);
  for (uint32_t s = 0; s < 64; ++s)
    table[s] = uint64_t{1} << (s % destinations);
  return std::make_shared<placement_cell>(std::move(table));
}

inline worker_config config(uint32_t destinations = 1) {
  worker_config c;
  c.uid = worker_uid("A", wire_int{0});
  c.instance_id = std::string(1, 'A'); // from a literal, GCC 12 -O2 warns falsely (-Wrestrict)
  c.worker_id = 0;
  c.incarnation = 77;
  c.slot_count = 64;
  c.destinations = destinations;
  c.stream_base = base;
  if (destinations > 1)
    c.placement = round_robin_placement(destinations);
  return c;
}

/// A batch of `location` with ops on keys 1.. carrying seq first, first+1, ...
/// A FullSyncStartMsg of worker (A, 0) for `location`: 4000 keys in 2 batches.
inline msg::FullSyncStartMsg sync_start(std::string sync_id, std::string location = "cpu") {
  return msg::FullSyncStartMsg{"A", 0, std::move(location), std::move(sync_id), 4000, 2};
}

inline pushed_msg batch(const std::string& location, uint64_t first, size_t n,
                        uint64_t credits = 0) {
  msg::BatchedKVOperationMsg b{"A", 0, location, {}};
  for (size_t i = 0; i < n; ++i)
    b.operations.push_back(msg::KVOpEvent{i % 2 ? msg::OpType::evict : msg::OpType::admit,
                                          wire_int::from_unsigned(first * 100 + i),
                                          wire_int::from_unsigned(first + i)});
  return pushed_msg{msg::Msg{std::move(b)}, credits ? credits : n};
}

} // namespace lmcc::actors::worker_test
