// node_options: everything `lmcc node` is configured with, gathered from
// LMCache's controller flags, YAML and LMCACHE_CONTROLLER_* environment
// variables plus lmcc's own options (see node_config.hpp for the sources and
// their precedence).
//
// Context: a plain options struct, built once in main().
#pragma once

#include "cluster/cluster_options.hpp"
#include "faults/fault_injection.hpp"
#include "gateway/gateway_options.hpp"
#include "persistence/store.hpp"
#include "registry/controller_options.hpp"

#include <chrono>
#include <string>

namespace lmcc::apps {

/// lmcc_planted_bug's values (faults/fault_injection.hpp lists them).
using planted_bug_kind = faults::planted_bug;

struct node_options {
  gateway::zmq_options zmq;
  gateway::control_options control;
  gateway::http_options http;
  actors::controller_options controller;
  /// The cluster this node belongs to (none when its member list is empty).
  cluster::cluster_options cluster;

  /// spdlog level: trace, debug, info, warn, error, critical, off. Default: "info"
  std::string log_level = "info";

  /// Where the node keeps its RocksDB. Default: "./lmcc-data"
  std::string data_dir = "./lmcc-data";

  /// Keep the index, Directory and seq watermarks in RocksDB under data_dir,
  /// so a restart does not need a full resync. Off: in memory only, and every
  /// worker is asked for a full sync after a restart, as LMCache does.
  /// Default: true
  bool persistence = true;

  /// Ingest's threads (PULL, its libzmq I/O thread, the shard, the row writer,
  /// RocksDB's) under SCHED_IDLE, so request threads preempt them at once
  /// (thread_priority.hpp). Off: every thread is ordinary. Default: false
  bool ingest_idle_priority = false;

  /// RocksDB settings (sync policy, block cache, memtables); store.path is
  /// set from data_dir at start.
  persistence::store_options store;

  /// A snapshot directory (lmcc snapshot) to boot from: verified, copied and
  /// swapped in as data_dir before the node loads. Empty: none. Default: ""
  std::string restore_from;

  /// Freed memory glibc may keep in its arenas before the node hands it back
  /// to the kernel (malloc_trim, checked every memory_check_interval;
  /// memory_releaser.hpp). 0: only after the index shrinks. Two costs pull
  /// against each other. Memory: during a flood the index's tables double in
  /// waves, each freeing the old tables; a 60 s flood peaked 212-214 MiB
  /// beyond the index at 128 MiB (0.5 s checks), 172 at 64 MiB, 297-353 at
  /// 128 MiB with 1 s checks. CPU: what is trimmed and then reused (the next
  /// tables, RocksDB's next memtables) is faulted in again, ~11 us a page on
  /// the VM measured; at 64 MiB, persistence on spent 1.31x the CPU per op of
  /// off unthrottled, at 128 MiB 1.17x.
  /// Default: 128 MiB
  size_t memory_free_limit_bytes = size_t{128} << 20;

  /// How often that is checked (mallinfo2: a walk of the arenas' bins, ~1 ms).
  /// An unthrottled load of 10 M entries leaves ~600 MiB freed but resident
  /// within seconds; at 10 s it stayed for up to 10 s after the load ended.
  /// Default: 500 ms
  std::chrono::milliseconds memory_check_interval{500};

  /// CAF scheduler threads; 0 = the machine's core count. Default: 0
  uint32_t scheduler_threads = 0;

  /// Accept POST /admin/faults (injected store failures, for crash and chaos
  /// tests). Never on in production: a build without fault injection (the
  /// default, faults/fault_injection.hpp) refuses it at start-up.
  /// Default: false
  bool fault_injection = false;

  /// A deliberate bug, for the chaos checker's negative tests only (requires
  /// fault_injection, and so a build with it). A number, not a name: GCC 12 misreports one more
  /// std::string in this struct as maybe-uninitialized (GCC bug 105562).
  /// Default: none
  uint8_t planted_bug = 0;

  planted_bug_kind planted() const noexcept { return static_cast<planted_bug_kind>(planted_bug); }
};

} // namespace lmcc::apps
