// bench_options: every knob of lmcc-bench, filled in by main.cpp from the CLI.
//
// The tool speaks only the public LMCache protocol (ZMQ sockets of spec
// section 2, the HTTP API of section 5.1), so the same options drive lmcc and
// LMCache's Python controller alike.
//
// Context: a plain options struct, thread-compatible.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace lmcc::bench {

/// A `host:port` pair, the spelling LMCache uses for every address (no scheme).
struct host_port {
  std::string host;
  uint16_t port = 0;

  std::string str() const { return host + ":" + std::to_string(port); }
  std::string tcp() const { return "tcp://" + str(); }
};

/// Parses `host:port` (the port after the last colon); throws std::invalid_argument.
host_port parse_host_port(const std::string& text);

/// One controller node's public endpoints.
struct node_endpoints {
  host_port pull;
  host_port reply;
  host_port http;
};

/// Parses one --nodes element: `host:HTTP` (e.g. `127.0.0.1:9010`: pull HTTP+1,
/// reply HTTP+2, the ports `lmcc cluster up` gives every node) or
/// `host:PULL/REPLY/HTTP` (e.g. `127.0.0.1:8300/8400/9000`, any ports); throws
/// std::invalid_argument.
node_endpoints parse_node_endpoints(const std::string& text);

/// What a socket or client is for, when choosing the node it talks to.
enum class node_role : uint64_t { push = 1, reply = 2, lookup = 3, p2p = 4 };

struct bench_options {
  // -- what to run -------------------------------------------------------------

  /// ingest | lookup | p2p | fullsync | memory | restart | flood | floor | heartbeats | soak
  std::string scenario;

  /// Where to write the scenario's JSON report (empty: nowhere).
  std::string json_path;

  // -- the controller ----------------------------------------------------------

  /// The controller's PULL socket (S1). Default: 127.0.0.1:8300
  host_port pull{"127.0.0.1", 8300};

  /// The controller's reply ROUTER (S2). Default: 127.0.0.1:8400
  host_port reply{"127.0.0.1", 8400};

  /// The controller's HTTP API. Default: 127.0.0.1:9000
  host_port http{"127.0.0.1", 9000};

  /// A secured API (docs/security.md): the bearer token every request bears
  /// (--api-token-file, else $LMCC_API_TOKEN) and the CA its HTTPS
  /// certificate is verified with (--http-ca-file; empty: plain HTTP).
  struct http_access_settings {
    std::string token;
    std::string ca_file;
  } http_access;
  std::string api_token_file;

  /// Where the key count is read: auto (key-stats, else /metrics), key-stats, metrics.
  std::string key_source = "auto";

  /// The nodes of a cluster (--nodes); when empty, the one node above. Workers'
  /// sockets and lookup clients are spread over them (--node-spread); key
  /// counts come from the first (GET /controller/key-stats of any node counts
  /// the whole cluster); each node's own counters, CPU and RSS are reported
  /// per node (controller_nodes).
  std::vector<node_endpoints> nodes;

  /// How workers and clients are spread over --nodes: "round-robin" (worker k's
  /// PUSH and DEALER both reach node k mod N, lookup/P2P client j node j mod N,
  /// as LMCache workers configured with one node's URLs do) or "rotated" (per
  /// role a rotation from a --seed-chosen node, so a worker's PUSH and DEALER
  /// may reach different nodes, as behind a Kubernetes Service).
  std::string node_spread = "round-robin";

  /// Timeout of each key-count sample, ms: a busy controller costs a counted
  /// miss, never a stalled run. Default: 500
  uint32_t sample_timeout_ms = 500;

  // -- the simulated cluster ---------------------------------------------------

  /// Simulated LMCache instances ("<prefix>-<k>"); each runs `tp` workers.
  uint32_t workers = 4;

  /// TP ranks per instance (worker_id = rank).
  uint32_t tp = 1;

  std::string instance_prefix = "bench-inst";

  /// The storage location named in KV events (str(backend) in LMCache).
  std::string location = "LocalCPUBackend";

  /// Ops per BatchedKVOperationMsg (LMCache kv_msg_batch_size). Default: 50
  uint32_t batch_ops = 50;

  /// BatchedKVOperationMsgs per PUSH multipart (LMCache's push loop drains 50). Default: 50
  uint32_t msgs_per_multipart = 50;

  /// Fraction of generated ops that evict the oldest live key (FIFO, like LRU).
  double evict_ratio = 0.0;

  /// Total ops/s for ingest and memory loading; 0 = as fast as possible.
  double rate = 0;

  /// Seconds between heartbeats; 0 = none (LMCache's default).
  double heartbeat_interval_s = 0;

  /// Run a full sync when a heartbeat reply carries FullSyncCommand.
  bool full_sync_on_request = false;

  // -- hashing (spec 4.4): must match the controller's NONE_HASH ------------------

  std::optional<int64_t> none_hash;
  std::optional<uint32_t> python_hash_seed;
  uint32_t chunk_size = 256;

  // -- workload sizes ----------------------------------------------------------

  /// Run length of the timed part of a scenario, seconds. Default: 10
  double duration_s = 10;

  /// ingest/flood: push exactly this many ops in total instead of pushing for
  /// --duration (0 = use --duration): equal work for every controller.
  uint64_t ops = 0;

  /// Longest push of an --ops run, s (the run fails if it is not done by then).
  double push_timeout_s = 900;

  /// Seed of every random choice (keys, tokens, query mix). Default: 1
  uint64_t seed = 1;

  /// Prompts admitted per instance for lookup/p2p/restart. Default: 64
  uint32_t prompts = 64;

  /// Full chunks per prompt. Default: 8 (2048 tokens)
  uint32_t prompt_chunks = 8;

  /// Lookup / P2P requests per phase. Default: 2000
  uint32_t requests = 2000;

  /// Concurrent lookup clients. Default: 1
  uint32_t clients = 1;

  /// Fraction of --peak-ops ingested during the loaded lookup phase; 0 = skip it.
  double ingest_fraction = 0.5;

  /// The controller's peak ingest rate (ops/s), measured with `ingest`.
  double peak_ops = 50000;

  /// Keys each worker resends in `fullsync`. Default: 100000
  uint64_t full_sync_keys = 100000;

  /// Keys per FullSyncBatchMsg (LMCache full_sync_batch_size). Default: 2000
  uint32_t full_sync_batch_keys = 2000;

  /// Interval between FullSyncStatusMsg polls, ms. Default: 10
  uint32_t full_sync_poll_ms = 10;

  /// The controller's processes on this host (several for a cluster): CPU time
  /// from /proc/<pid>/stat and RSS from /proc/<pid>/status, summed. With
  /// --nodes and no --pid, found through each node's GET /threads.
  std::vector<int> pids;

  /// With --nodes: node i's process (--pid in --nodes order when it names one
  /// per node, else found through GET /threads); empty when not known.
  std::vector<int> node_pids;

  /// Seconds after convergence whose controller CPU (flushes, compactions) is
  /// also charged to the load. Default: 5
  double post_seconds = 5;

  /// Entry counts at which `memory` samples the RSS. Default: 1000000, 10000000
  std::vector<uint64_t> entries{1000000, 10000000};

  /// Shell command `restart` runs.
  std::string restart_cmd;

  /// Lookups that must answer fully after a restart. Default: 16
  uint32_t restart_sample = 16;

  /// Also measure generator->sink ops/s before `ingest`.
  bool with_floor = false;

  // -- flood: probes next to an unthrottled ingest --------------------------------

  /// HTTP /lookup requests per second. Default: 20
  double flood_lookup_rate = 20;

  /// BatchedP2PLookupMsg requests per second. Default: 20
  double flood_p2p_rate = 20;

  /// HeartbeatMsg requests per second. Default: 10
  double flood_heartbeat_rate = 10;

  /// Each probe request's timeout, ms; a later reply counts as unanswered. Default: 1000
  uint32_t flood_timeout_ms = 1000;

  /// Seconds the RSS may settle after deregistration before it is judged. Default: 5
  double rss_settle_s = 5;

  // -- soak: a long steady load driven by a harness -------------------------------

  /// Random keys the workers hold in total once grown (evicts hold it there);
  /// 0: no cap.
  uint64_t live_keys = 0;

  /// soak: where the prompts' tokens and chunk keys are written as JSON.
  std::string corpus_path;

  /// soak: seconds between the status lines on stdout. Default: 5
  double status_interval_s = 5;

  // -- timeouts ----------------------------------------------------------------

  /// Longest wait for the controller's key count to reach the ground truth, s.
  double settle_timeout_s = 15;

  /// How long a worker polls for its full sync to complete before it gives
  /// up and goes on, s. 0: the settle timeout plus the duration (a sync may
  /// run for the whole measured stretch); soak: the settle timeout.
  double full_sync_timeout_s = 0;

  /// Every ZMQ request's receive timeout and every send timeout, ms. Default: 5000
  uint32_t request_timeout_ms = 5000;

  /// Wait for RegisterRetMsg, s. Default: 5
  double register_timeout_s = 5;

  /// Keep the workers registered at exit (no DeRegisterMsg).
  bool keep_registered = false;
};

/// The position in --nodes of the node that socket or client number `index`
/// of `role` talks to: `index mod N` (--node-spread round-robin), or the nodes
/// in a rotation that starts at a --seed-chosen node per role (rotated). 0
/// without --nodes.
size_t pick_node_index(const bench_options& o, node_role role, size_t index);

/// That node's endpoints; without --nodes, the one node of --pull/--reply/--http.
node_endpoints pick_node(const bench_options& o, node_role role, size_t index);

} // namespace lmcc::bench
