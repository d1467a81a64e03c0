// controller_options: how one node's actors behave (index layout, full sync,
// reaping, lookups).
//
// Field names in comments give the LMCache config key where one exists.
//
// Context: a plain options struct, filled by apps/lmcc/node_config and handed
// to the actors at spawn time.
#pragma once

#include "index/kv_shard_core.hpp"
#include "messages/chunk_hash.hpp"

#include <chrono>
#include <cstdint>
#include <string>

namespace lmcc::actors {

struct controller_options {
  /// This node's id in logs (and, later, in the cluster ring). Default: "n1"
  std::string node_id = "n1";

  /// Ingest in flight (KV ops and full-sync keys) between the PULL socket and
  /// the store: past it the node stops reading its PULL socket, so ZMQ and TCP
  /// push back on the workers. Bounds the node's ingest memory (about 70
  /// bytes an op in flight) and must cover the pipeline's latency at full
  /// speed (a few ms of ops). Default: 262144
  uint64_t max_inflight_ops = 262'144;

  /// Reading resumes once in-flight ingest falls below this share of
  /// max_inflight_ops. Default: 0.5
  double inflight_resume_ratio = 0.5;

  /// Op-log snapshot cadence and the shard's background work (slot_count is
  /// taken from slot_count below). Defaults: see shard_options.
  shard_options shard;

  /// Slots the key space is cut into (slot = mix64(key) mod slot_count); a
  /// power of two. Slots are the unit of ownership and, later, handoff.
  /// Default: 4096
  uint32_t slot_count = 4096;

  /// Share of workers that must be synced (or never asked) before
  /// FullSyncStatusRetMsg.can_exit_freeze turns true (LMCache constructor
  /// `full_sync_completion_threshold`). Default: 0.8
  double full_sync_completion_threshold = 0.8;

  /// A SYNCING session idle longer than this becomes FAILED and the worker's
  /// next heartbeat asks for `sync_failed_retry` (LMCache `full_sync_timeout_s`,
  /// which LMCache never enforces; lmcc does). Default: 300 s
  std::chrono::milliseconds full_sync_timeout{300'000};

  /// Period of the silent-worker reaper in seconds; -1 disables it (LMCache
  /// `health_check_interval`, must be -1 or >= 1). Default: -1
  double health_check_interval_s = -1;

  /// A worker that has heartbeated at least once and then stays silent this
  /// long is reaped (LMCache `lmcache_worker_timeout`; LMCache also reaps
  /// workers that never heartbeat, lmcc keeps them). Default: 300 s
  std::chrono::milliseconds lmcache_worker_timeout{300'000};

  /// How /lookup and LookupMsg turn tokens into chunk keys; must match the
  /// workers' (chunk size 256, NONE_HASH from their PYTHONHASHSEED).
  msg::chunk_hash_options chunk_hashing;

  /// Bound on any actor-to-actor request inside the node. Default: 10 s
  std::chrono::milliseconds internal_timeout{10'000};

  /// Lookup coordinator actors (hash tokens and fan out to shards).
  /// Default: 2
  uint32_t lookup_actors = 2;
};

} // namespace lmcc::actors
