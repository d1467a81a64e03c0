// shard_restore: how a starting node rebuilds its index from the store: the
// slot snapshots (on several threads, one range of arena groups each), then the
// op log from the floor, each record applied only to the slots whose snapshot
// is older than it (schema.hpp explains why that is exact and why replaying
// more would be harmless). The result is the shard's starting state.
//
// Damage is reported, not fatal: a slot whose body fails its checksum names
// its holders (their workers must resync), one whose header fails names no one
// (every worker must resync); a holder state that fails names its holder; a
// log record that fails stops the replay there (the holders it would have
// touched are unknown: every worker must resync). Refused (an error): entries
// that do not fall in their slot (the data was written with another --slots).
//
//   shard_restore_report report;
//   auto start = restore_shard(store, index, dir, threads, report);
//
// Context: runs once at start-up, before any actor reads the index. CAF-free.
#pragma once

#include "index/kv_index.hpp"
#include "index/kv_shard_core.hpp"
#include "persistence/store.hpp"

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace lmcc::actors {

struct shard_restore_report {
  uint64_t slots = 0;
  uint64_t entries = 0;
  uint64_t records = 0;
  uint64_t replayed_ops = 0;
  double slot_seconds = 0;
  double log_seconds = 0;
  /// Holders whose entries or watermark were lost: their workers must resync.
  holder_set damaged_holders;
  /// Something unreadable named no holder: every worker must resync.
  bool damaged_unknown = false;
  /// One line per problem, naming the slot, holder or position.
  std::vector<std::string> problems;
};

/// Loads the slots and replays the log into `index` (empty, unread).
/// `threads` loader threads (at least 1). An error only for what must stop
/// the node (unreadable store, another --slots).
/// `ownership`: the slots this node owns, one word per slot
/// (coverage_book::set_ownership); empty: every slot (a single node).
persistence::expected<shard_start_state>
restore_shard(const persistence::store& store, kv_index& index,
              const persistence::directory_data& dir, uint32_t threads,
              shard_restore_report& report, std::span<const uint64_t> ownership = {});

} // namespace lmcc::actors
