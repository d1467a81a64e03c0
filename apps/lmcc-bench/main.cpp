// lmcc-bench: an LMCache-protocol load generator. It simulates LMCache workers
// and routers against any controller that speaks the protocol (lmcc, or
// LMCache's Python controller), through its ZMQ sockets and HTTP API only.
//
//   lmcc-bench ingest --workers 4 --duration 10 --json ingest.json
//   lmcc-bench lookup --pull 127.0.0.1:8300 --reply 127.0.0.1:8400 --http 127.0.0.1:9000
//   lmcc-bench ingest --ops 20000000 --pid $(pgrep -d, -x lmcc)
//   lmcc-bench ingest --rate 100000 --nodes 127.0.0.1:9000,127.0.0.1:9010,127.0.0.1:9020
//   lmcc-bench flood --duration 30 --pid 1234 --nodes 127.0.0.1:8300/8400/9000
//   lmcc-bench floor --duration 2          (no controller needed)
//   lmcc-bench soak --nodes ... --rate 20000 --live-keys 3000000 --corpus c.json  (tests/soak)
//
// Exit status: 0 every check passed; 1 a check failed (see the table);
// 2 the target is unreachable or the arguments are unusable.
#include "apps/lmcc-bench/bench_options.hpp"
#include "apps/lmcc-bench/controller_nodes.hpp"
#include "apps/lmcc-bench/scenarios.hpp"
#include "apps/lmcc-bench/zmq_io.hpp"

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sys/resource.h>

namespace {

using lmcc::bench::bench_options;

struct endpoint_texts {
  std::string pull = "127.0.0.1:8300";
  std::string reply = "127.0.0.1:8400";
  std::string http = "127.0.0.1:9000";
  std::vector<std::string> nodes;
};

void add_flags(CLI::App& app, bench_options& o, endpoint_texts& ep, std::string& scenario_flag) {
  const auto& names = lmcc::bench::scenario_names();
  app.add_option("scenario", o.scenario, "scenario to run")->check(CLI::IsMember(names));
  app.add_option("--scenario", scenario_flag, "scenario to run (same as the positional)")
      ->check(CLI::IsMember(names));
  app.add_option("--json", o.json_path, "write the report as JSON to FILE");

  app.add_option("--pull", ep.pull, "controller PULL socket host:port")->capture_default_str();
  app.add_option("--reply", ep.reply, "controller reply ROUTER host:port")->capture_default_str();
  app.add_option("--http", ep.http, "controller HTTP API host:port")->capture_default_str();
  app.add_option("--api-token-file", o.api_token_file,
                 "file holding the controller's API token (else $LMCC_API_TOKEN)");
  app.add_option("--http-ca-file", o.http_access.ca_file,
                 "the controller serves HTTPS: verify it with this CA");
  app.add_option("--nodes", ep.nodes,
                 "a cluster's nodes as host:HTTP,... (pull HTTP+1, reply HTTP+2, as `lmcc cluster "
                 "up` assigns them) or host:PULL/REPLY/HTTP,... (replaces --pull/--reply/--http; "
                 "key counts are read from the first; figures per node)")
      ->delimiter(',');
  app.add_option("--node-spread", o.node_spread,
                 "how workers and clients use --nodes: round-robin (worker k: PUSH and DEALER to "
                 "node k mod N; client j: node j mod N) or rotated (per role from a --seed-chosen "
                 "node: a worker's PUSH and DEALER may reach different nodes)")
      ->check(CLI::IsMember({"round-robin", "rotated"}))
      ->capture_default_str();
  app.add_option("--key-source", o.key_source, "where the key count is read")
      ->check(CLI::IsMember({"auto", "key-stats", "metrics"}))
      ->capture_default_str();

  app.add_option("--workers", o.workers, "simulated LMCache instances")
      ->check(CLI::Range(1U, 4096U))
      ->capture_default_str();
  app.add_option("--tp", o.tp, "TP ranks (workers) per instance")
      ->check(CLI::Range(1U, 64U))
      ->capture_default_str();
  app.add_option("--instance-prefix", o.instance_prefix, "instance ids are <prefix>-<k>")
      ->capture_default_str();
  app.add_option("--location", o.location, "storage location in KV events")->capture_default_str();
  app.add_option("--batch-ops", o.batch_ops, "ops per BatchedKVOperationMsg")
      ->check(CLI::Range(1U, 100000U))
      ->capture_default_str();
  app.add_option("--msgs-per-multipart", o.msgs_per_multipart, "messages per PUSH multipart")
      ->check(CLI::Range(1U, 1000U))
      ->capture_default_str();
  app.add_option("--evict-ratio", o.evict_ratio, "fraction of ops that evict the oldest key")
      ->check(CLI::Range(0.0, 0.99))
      ->capture_default_str();
  app.add_option("--rate", o.rate, "total ops/s for ingest/memory (0 = as fast as possible)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--heartbeat-interval", o.heartbeat_interval_s,
                 "seconds between heartbeats (0 = none)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_flag("--full-sync-on-request", o.full_sync_on_request,
               "run a full sync when a heartbeat reply asks for one");

  auto* none =
      app.add_option("--none-hash", o.none_hash, "initial chunk-hash chain value (default 0)");
  app.add_option("--python-hash-seed", o.python_hash_seed,
                 "derive the initial hash from PYTHONHASHSEED as vLLM does")
      ->excludes(none);
  app.add_option("--chunk-size", o.chunk_size, "tokens per chunk")
      ->check(CLI::Range(1U, 1U << 16))
      ->capture_default_str();

  app.add_option("--duration", o.duration_s, "seconds of the timed part")
      ->check(CLI::Range(0.1, 86400.0))
      ->capture_default_str();
  app.add_option("--ops", o.ops,
                 "ingest/flood: push exactly N ops in total instead of for --duration (0 = off)")
      ->capture_default_str();
  app.add_option("--push-timeout", o.push_timeout_s, "longest push of an --ops run, s")
      ->check(CLI::Range(1.0, 86400.0))
      ->capture_default_str();
  app.add_option("--seed", o.seed, "seed of every random choice")->capture_default_str();
  app.add_option("--prompts", o.prompts, "prompts admitted per instance")
      ->check(CLI::Range(1U, 1000000U))
      ->capture_default_str();
  app.add_option("--prompt-chunks", o.prompt_chunks, "full chunks per prompt")
      ->check(CLI::Range(1U, 4096U))
      ->capture_default_str();
  app.add_option("--requests", o.requests, "lookups per phase")
      ->check(CLI::Range(1U, 100000000U))
      ->capture_default_str();
  app.add_option("--clients", o.clients, "concurrent lookup clients")
      ->check(CLI::Range(1U, 1024U))
      ->capture_default_str();
  app.add_option("--ingest-fraction", o.ingest_fraction,
                 "fraction of --peak-ops ingested during the loaded lookup phase (0 = skip)")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  app.add_option("--peak-ops", o.peak_ops, "the controller's peak ingest ops/s")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--keys", o.full_sync_keys, "keys each worker resends in fullsync")
      ->check(CLI::Range(uint64_t{0}, uint64_t{1} << 32))
      ->capture_default_str();
  app.add_option("--full-sync-batch", o.full_sync_batch_keys, "keys per FullSyncBatchMsg")
      ->check(CLI::Range(1U, 1000000U))
      ->capture_default_str();
  app.add_option("--poll-ms", o.full_sync_poll_ms, "ms between FullSyncStatusMsg polls")
      ->check(CLI::Range(1U, 60000U))
      ->capture_default_str();
  app.add_option("--pid,--pids", o.pids,
                 "controller pid(s) on this host, e.g. 1,2,3 (summed): CPU per op, RSS; with "
                 "--nodes one per node in their order (default: found through each node's "
                 "GET /threads)")
      ->delimiter(',');
  app.add_option("--post-seconds", o.post_seconds,
                 "controller CPU is also counted this long after convergence")
      ->check(CLI::Range(0.0, 3600.0))
      ->capture_default_str();
  app.add_option("--entries", o.entries, "entry counts for memory, e.g. 1000000,10000000")
      ->delimiter(',')
      ->capture_default_str();
  app.add_option("--live-keys", o.live_keys,
                 "soak: random keys the workers hold in total once grown (0 = no cap)")
      ->capture_default_str();
  app.add_option("--corpus", o.corpus_path, "soak: write the prompts (tokens, chunk keys) to FILE");
  app.add_option("--status-interval", o.status_interval_s, "soak: seconds between status lines")
      ->check(CLI::Range(0.1, 3600.0))
      ->capture_default_str();
  app.add_option("--restart-cmd", o.restart_cmd, "shell command that restarts the controller");
  app.add_option("--restart-sample", o.restart_sample, "lookups that must answer fully")
      ->check(CLI::Range(1U, 100000U))
      ->capture_default_str();
  app.add_flag("--with-floor", o.with_floor, "ingest: measure generator -> sink first");
  app.add_option("--settle-timeout", o.settle_timeout_s,
                 "max seconds for the key count to reach the ground truth")
      ->check(CLI::Range(0.1, 86400.0))
      ->capture_default_str();
  app.add_option("--full-sync-timeout", o.full_sync_timeout_s,
                 "max seconds a worker polls for its full sync (0: settle timeout + duration)")
      ->check(CLI::Range(0.0, 86400.0))
      ->capture_default_str();
  app.add_option("--request-timeout-ms", o.request_timeout_ms, "ZMQ/HTTP request timeout")
      ->check(CLI::Range(10U, 600000U))
      ->capture_default_str();
  app.add_option("--sample-timeout-ms", o.sample_timeout_ms,
                 "timeout of each key-count read (a late one is counted as a miss)")
      ->check(CLI::Range(10U, 600000U))
      ->capture_default_str();
  app.add_option("--lookup-rate", o.flood_lookup_rate, "flood: HTTP /lookup requests per s")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--p2p-rate", o.flood_p2p_rate, "flood: BatchedP2PLookupMsg requests per s")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--heartbeat-rate", o.flood_heartbeat_rate, "flood: HeartbeatMsg requests per s")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--probe-timeout-ms", o.flood_timeout_ms,
                 "flood: each probe request's timeout (later = unanswered)")
      ->check(CLI::Range(10U, 600000U))
      ->capture_default_str();
  app.add_option("--rss-settle", o.rss_settle_s,
                 "flood: seconds the RSS may settle after deregistration")
      ->check(CLI::Range(0.0, 3600.0))
      ->capture_default_str();
  app.add_option("--register-timeout", o.register_timeout_s, "seconds to wait for RegisterRetMsg")
      ->check(CLI::Range(0.1, 600.0))
      ->capture_default_str();
  app.add_flag("--keep-registered", o.keep_registered, "send no DeRegisterMsg at exit");
}

/// With --nodes: each node's process, from --pid (one per node, in order) or
/// found through its GET /threads; all of them are then the processes whose
/// CPU and RSS are summed. Without --nodes nothing changes.
void find_node_processes(bench_options& o) {
  if (o.nodes.empty() || o.scenario == "floor")
    return;
  if (!o.pids.empty()) {
    if (o.pids.size() == o.nodes.size())
      o.node_pids = o.pids;
    else
      spdlog::warn("{} --pid for {} --nodes: CPU and RSS are summed, not given per node",
                   o.pids.size(), o.nodes.size());
    return;
  }
  std::vector<int> found;
  for (const auto& n : o.nodes) {
    bool answered = false;
    auto pid =
        lmcc::bench::discover_node_pid(n.http, o.request_timeout_ms, &answered, o.http_access);
    if (!pid) {
      if (!answered)
        return; // the scenario says that the node cannot be reached
      spdlog::warn("no process on this host found for the node at {} (GET /threads): no CPU or "
                   "RSS figures unless --pid names one per node",
                   n.http.str());
      return;
    }
    found.push_back(*pid);
  }
  std::string text;
  for (size_t i = 0; i < found.size(); ++i)
    text += fmt::format("{}{}={}", i == 0 ? "" : " ", o.nodes[i].http.str(), found[i]);
  spdlog::info("node processes (from GET /threads): {}", text);
  o.pids = found;
  o.node_pids = std::move(found);
}

/// Raises this process's soft limit on open descriptors to `wanted` (at most
/// the hard limit); says so when the hard limit is lower.
void raise_descriptor_limit(uint64_t wanted) {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur >= wanted)
    return;
  limit.rlim_cur = std::min<rlim_t>(wanted, limit.rlim_max);
  if (setrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur < wanted)
    spdlog::warn("open-descriptor limit {} is below the {} this run may need (ulimit -n)",
                 limit.rlim_cur, wanted);
}

} // namespace

int main(int argc, char** argv) {
  // A peer that closes its connection mid-write must cost an error on that
  // connection, not the process: OpenSSL writes HTTPS with write(2), which
  // raises SIGPIPE (libzmq and plain httplib pass MSG_NOSIGNAL themselves).
  std::signal(SIGPIPE, SIG_IGN);
  // Progress and warnings go to stderr; the report table alone to stdout.
  auto logger = spdlog::stderr_color_st("lmcc-bench");
  logger->set_pattern("[%H:%M:%S.%e] %^%l%$ %v");
  spdlog::set_default_logger(logger);

  CLI::App app{"lmcc-bench: an LMCache-protocol load generator (ZMQ + HTTP only)"};
  bench_options o;
  endpoint_texts ep;
  std::string scenario_flag;
  add_flags(app, o, ep, scenario_flag);
  CLI11_PARSE(app, argc, argv);

  try {
    if (!scenario_flag.empty()) {
      if (!o.scenario.empty() && o.scenario != scenario_flag)
        throw std::invalid_argument("two different scenarios given");
      o.scenario = scenario_flag;
    }
    if (o.scenario.empty())
      throw std::invalid_argument(fmt::format("no scenario given (one of: {})",
                                              fmt::join(lmcc::bench::scenario_names(), " ")));
    o.pull = lmcc::bench::parse_host_port(ep.pull);
    o.reply = lmcc::bench::parse_host_port(ep.reply);
    o.http = lmcc::bench::parse_host_port(ep.http);
    if (!o.api_token_file.empty()) {
      std::ifstream in(o.api_token_file, std::ios::binary);
      if (!in)
        throw std::invalid_argument("cannot read --api-token-file " + o.api_token_file);
      std::getline(in, o.http_access.token);
    } else if (const char* env = std::getenv("LMCC_API_TOKEN"); env != nullptr) {
      o.http_access.token = env;
    }
    for (const auto& text : ep.nodes)
      o.nodes.push_back(lmcc::bench::parse_node_endpoints(text));
    if (!o.nodes.empty()) { // the first node is the one every single-node read uses
      o.pull = o.nodes[0].pull;
      o.reply = o.nodes[0].reply;
      o.http = o.nodes[0].http;
    }
    if (o.nodes.size() > 1 && o.key_source == "metrics")
      throw std::invalid_argument(
          "--key-source metrics with several --nodes: a cluster node's kv_pool_keys_count "
          "counts only its primary slots; use key-stats (any node counts the whole cluster)");
  } catch (const std::invalid_argument& e) {
    fmt::print(stderr, "lmcc-bench: {}\n", e.what());
    return 2;
  }

  lmcc::msg::chunk_hash_options hashing;
  hashing.chunk_size = o.chunk_size;
  if (o.none_hash)
    hashing.none_hash = *o.none_hash;
  else if (o.python_hash_seed)
    hashing.none_hash = lmcc::msg::none_hash_from_python_hash_seed(*o.python_hash_seed);

  find_node_processes(o);
  // Each simulated worker holds a PUSH, a REP and up to two DEALER sockets: libzmq's
  // default of 1023 sockets per context, or a soft limit of 1024 descriptors,
  // ended runs of a few hundred workers with "Too many open files".
  const uint64_t sockets = 4 * uint64_t{o.workers} * o.tp + 1024;
  raise_descriptor_limit(sockets + 1024);
  zmq::context_t ctx{2, static_cast<int>(std::min<uint64_t>(sockets, INT32_MAX))};
  lmcc::bench::scenario_env env{o, ctx, lmcc::msg::chunk_hasher{hashing}};
  try {
    const lmcc::bench::report r = lmcc::bench::run_scenario(env);
    r.print(std::cout);
    if (!o.json_path.empty())
      r.write_json(o.json_path);
    return r.passed() ? 0 : 1;
  } catch (const lmcc::bench::unreachable_error& e) {
    fmt::print(stderr, "lmcc-bench: {}\n", e.what());
  } catch (const std::exception& e) {
    fmt::print(stderr, "lmcc-bench: {} failed: {}\n", o.scenario, e.what());
  }
  return 2;
}
