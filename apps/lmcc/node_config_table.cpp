// The table of `lmcc node`'s options; node_config_table.hpp says how to add one.
#include "apps/lmcc/node_config_table.hpp"

#include "messages/chunk_hash.hpp"

#include <algorithm>
#include <array>
#include <cctype>

namespace lmcc::apps::config {
namespace {

using namespace std::chrono_literals;

// -- values no kind fits ----------------------------------------------------------

const integer_kind<uint16_t> port_kind{.min = 1, .max = 65535};

/// controller_monitor_ports: a JSON object (JSON text in the environment and on
/// the command line, a mapping or JSON text in YAML) with `pull` and `reply`,
/// both required as in LMCache, and an optional `heartbeat`; null is LMCache's
/// legacy mode (see apply_cross_option_rules).
refusal apply_monitor_ports(const json& in, resolve_state& s) {
  constexpr std::string_view expected =
      R"(a JSON object like {"pull": 8300, "reply": 8400, "heartbeat": 8082})";
  json ports = in;
  // LMCache's converter: `json.loads(x) if x else None`.
  if (in.is_string() && trim(in.get_ref<const std::string&>()).empty())
    ports = nullptr;
  else if (auto why = json_from_text(in, expected, ports))
    return why;
  if (ports.is_null()) {
    s.monitor_ports_null = true;
    return std::nullopt;
  }
  if (!ports.is_object())
    return "expected " + std::string(expected) + ", got " + describe(ports);

  // LMCache indexes ports['pull'] and ports['reply'] unconditionally.
  for (const char* required : {"pull", "reply"})
    if (!ports.contains(required))
      return std::string("\"") + required + "\" is missing (pull and reply are both required)";
  uint16_t pull = 0;
  uint16_t reply = 0;
  if (auto why = port_kind.parse(ports["pull"], pull))
    return "\"pull\": " + *why;
  if (auto why = port_kind.parse(ports["reply"], reply))
    return "\"reply\": " + *why;
  // LMCache opens S3 only when ports.get("heartbeat") is truthy, so an absent,
  // null or 0 heartbeat means no heartbeat socket. lmcc's default has one,
  // but ports given explicitly are taken literally.
  std::optional<uint16_t> heartbeat;
  if (ports.contains("heartbeat")) {
    const json& hb = ports["heartbeat"];
    bool off = hb.is_null() || (hb.is_number_integer() && hb.get<int64_t>() == 0) ||
               (hb.is_string() && trim(hb.get_ref<const std::string&>()) == "0");
    if (!off) {
      uint16_t port = 0;
      if (auto why = port_kind.parse(hb, port))
        return "\"heartbeat\": " + *why + " (null or 0 turns the heartbeat socket off)";
      heartbeat = port;
    }
  }
  for (const auto& [name, ignored] : ports.items())
    if (name != "pull" && name != "reply" && name != "heartbeat")
      s.warnings.push_back(s.current_label + ": unknown monitor port \"" + name + "\" ignored");
  s.monitor_ports_null = false;
  s.options.zmq.pull_port = pull;
  s.options.zmq.reply_port = reply;
  s.options.zmq.heartbeat_port = heartbeat;
  return std::nullopt;
}

void emit_monitor_ports(YAML::Emitter& out, const node_options& o) {
  const auto& zmq = o.zmq;
  if (!zmq.reply_port) {
    out << YAML::Null; // legacy mode; dump_config's header names the pull port
    return;
  }
  out << YAML::BeginMap;
  out << YAML::Key << "pull" << YAML::Value << zmq.pull_port;
  out << YAML::Key << "reply" << YAML::Value << *zmq.reply_port;
  out << YAML::Key << "heartbeat" << YAML::Value;
  if (zmq.heartbeat_port)
    out << *zmq.heartbeat_port;
  else
    out << YAML::Null;
  out << YAML::EndMap;
}

/// extra_config: free-form in LMCache and read by nothing in its controller;
/// accepted so that existing configuration files keep working.
refusal apply_extra_config(const json& in, resolve_state& s) {
  bool empty = in.is_null() || (in.is_string() && trim(in.get_ref<const std::string&>()).empty());
  if (!empty)
    s.warnings.push_back(s.current_label + ": extra_config is accepted but not used by lmcc");
  return std::nullopt;
}

constexpr std::array<std::string_view, 7> log_levels = {"trace", "debug",    "info", "warn",
                                                        "error", "critical", "off"};
constexpr std::array<std::pair<std::string_view, std::string_view>, 1> log_level_aliases = {
    {{"warning", "warn"}}}; // Python's name for it

/// One of the two ways to set the initial chunk hash, for apply_cross_option_rules.
resolve_state::hash_setting hash_setting_here(const resolve_state& s, int64_t none_hash) {
  return {none_hash, s.current, s.current_label};
}

// The table. One option per block; clang-format is off because it cannot keep
// a table looking like one. Fields of option_names must keep their declared
// order: key, flag, value_name, origin, sources, excludes, help.
std::vector<option_spec> make_table() {
  using enum option_origin;
  // clang-format off
  return {
    // -- LMCache's controller options (spec section 6.1) ---------------------------------
    // No apply: resolve_node_options reads the file itself, before every other source.
    custom_option({.key = "config_file", .flag = "--config", .value_name = "FILE",
                   .origin = lmcache, .sources = from_flag | from_env,
                   .help = "YAML file of config keys"},
                  "a file path", "", nullptr, nullptr),
    make_option({.key = "controller_host", .flag = "--host", .value_name = "HOST",
                 .origin = lmcache,
                 .help = "bind host of HTTP and of every ZMQ socket"},
                text_kind{.non_empty = true},
                members([](auto& o) -> auto& { return o.http.host; },
                        [](auto& o) -> auto& { return o.zmq.host; }),
                std::string("0.0.0.0")),
    make_option({.key = "controller_port", .flag = "--port", .value_name = "PORT",
                 .origin = lmcache,
                 .help = "HTTP port"},
                port_kind,
                member([](auto& o) -> auto& { return o.http.port; }),
                uint16_t{9000}),
    custom_option({.key = "controller_monitor_ports", .flag = "--monitor-ports",
                   .value_name = "JSON", .origin = lmcache,
                   .help = "ZMQ ports; a heartbeat that is absent, null or 0 means no heartbeat "
                           "socket; null: legacy mode (--monitor-port)"},
                  R"(a JSON object {"pull": PORT, "reply": PORT, "heartbeat": PORT} or null)",
                  R"({"pull": 8300, "reply": 8400, "heartbeat": 8082})",
                  apply_monitor_ports, emit_monitor_ports),
    make_option({.flag = "--monitor-port", .value_name = "PORT",
                 .origin = lmcache, .sources = from_flag,
                 .help = "LMCache's legacy pull-only port, used only when "
                         "controller_monitor_ports is null (no reply and no heartbeat socket)"},
                port_kind,
                into_state([](resolve_state& s, uint16_t port) { s.legacy_monitor_port = port; }),
                legacy_default_monitor_port),
    make_option({.key = "health_check_interval", .flag = "--health-check-interval",
                 .value_name = "SECONDS", .origin = lmcache,
                 .help = "period of the silent-worker reaper; -1 turns it off"},
                seconds_or_off_kind{},
                member([](auto& o) -> auto& { return o.controller.health_check_interval_s; }),
                -1.0),
    make_option({.key = "lmcache_worker_timeout", .flag = "--lmcache-worker-timeout",
                 .value_name = "SECONDS", .origin = lmcache,
                 .help = "reap a worker that heartbeated and then stayed silent this long"},
                seconds_kind{},
                member([](auto& o) -> auto& { return o.controller.lmcache_worker_timeout; }),
                300s),
    make_option({.key = "controller_advertise_host", .flag = "--advertise-host",
                 .value_name = "HOST", .origin = lmcache,
                 .help = "host put into the heartbeat URL handed to workers; empty: this "
                         "host's outbound IP"},
                text_kind{.trim_blanks = true, .null_is_empty = true},
                member([](auto& o) -> auto& { return o.zmq.advertise_host; }),
                std::string()),
    custom_option({.key = "extra_config",
                   .origin = lmcache, .sources = from_yaml | from_env | from_extra,
                   .help = "accepted and ignored, as LMCache's controller does"},
                  "anything", "null", apply_extra_config, nullptr),

    // -- lmcc's options ------------------------------------------------------------------
    make_option({.key = "lmcc_node_id", .flag = "--node-id", .value_name = "ID",
                 .help = "this node's id"},
                text_kind{.non_empty = true},
                member([](auto& o) -> auto& { return o.controller.node_id; }),
                std::string("n1")),
    make_option({.key = "lmcc_slots", .flag = "--slots", .value_name = "N",
                 .help = "key-space slots; fixed for a data dir"},
                integer_kind<uint32_t>{.min = 1, .max = int64_t{1} << 31, .power_of_two = true},
                member([](auto& o) -> auto& { return o.controller.slot_count; }),
                uint32_t{4096}),
    make_option({.key = "lmcc_cluster_members", .flag = "--cluster-members",
                 .value_name = "JSON",
                 .help = "every node of the cluster as {id, host, port} (port: the cluster "
                         "port; standby: true for a node known but owning nothing until a "
                         "membership change adds it); the same list on every node; empty: a "
                         "single node"},
                list_kind<record_kind<cluster::member_address>>{.element = {.fields = {
                    field_of("id", &cluster::member_address::id, text_kind{.non_empty = true}),
                    field_of("host", &cluster::member_address::host,
                             text_kind{.non_empty = true}),
                    field_of("port", &cluster::member_address::port, port_kind),
                    field_of("standby", &cluster::member_address::standby, switch_kind{},
                             /*required=*/false)}},
                    .max_items = 64},
                member([](auto& o) -> auto& { return o.cluster.members; }),
                std::vector<cluster::member_address>{}),
    make_option({.key = "lmcc_replicas", .flag = "--replicas", .value_name = "R",
                 .help = "owners per slot: the primary and R-1 replicas (at most the member "
                         "count)"},
                integer_kind<uint32_t>{.min = 1, .max = 64},
                member([](auto& o) -> auto& { return o.cluster.replicas; }),
                uint32_t{2}),
    make_option({.key = "lmcc_cluster_secret_file", .flag = "--cluster-secret-file",
                 .value_name = "FILE",
                 .help = "file holding the cluster secret; empty: the variable named by "
                         "lmcc_cluster_secret_env"},
                text_kind{},
                member([](auto& o) -> auto& { return o.cluster.secret_file; }),
                std::string()),
    make_option({.key = "lmcc_cluster_secret_env", .value_name = "NAME",
                 .help = "environment variable holding the cluster secret when no file is "
                         "given"},
                text_kind{.non_empty = true},
                member([](auto& o) -> auto& { return o.cluster.secret_env; }),
                std::string("LMCC_CLUSTER_SECRET")),
    make_option({.key = "lmcc_cluster_tls_ca_file", .flag = "--cluster-tls-ca-file",
                 .value_name = "FILE",
                 .help = "PEM CA that must have signed every peer's certificate: mutual TLS "
                         "between nodes, on the cluster port and the peer reads (with "
                         "lmcc_cluster_tls_cert_file and lmcc_cluster_tls_key_file); empty: "
                         "plain TCP"},
                text_kind{},
                member([](auto& o) -> auto& { return o.cluster.tls_ca_file; }),
                std::string()),
    make_option({.key = "lmcc_cluster_tls_cert_file", .flag = "--cluster-tls-cert-file",
                 .value_name = "FILE",
                 .help = "PEM certificate (chain) this node shows its peers, signed by "
                         "lmcc_cluster_tls_ca_file"},
                text_kind{},
                member([](auto& o) -> auto& { return o.cluster.tls_cert_file; }),
                std::string()),
    make_option({.key = "lmcc_cluster_tls_key_file", .flag = "--cluster-tls-key-file",
                 .value_name = "FILE",
                 .help = "PEM private key of lmcc_cluster_tls_cert_file"},
                text_kind{},
                member([](auto& o) -> auto& { return o.cluster.tls_key_file; }),
                std::string()),
    make_option({.key = "lmcc_cluster_heartbeat_ms", .value_name = "MS",
                 .help = "how often a node greets each peer while the cluster is changing (a "
                         "peer not connected, or not agreeing yet)"},
                milliseconds_kind{.min = 10, .max = 60'000},
                member([](auto& o) -> auto& { return o.cluster.heartbeat_interval; }),
                250ms),
    make_option({.key = "lmcc_cluster_quiet_heartbeat_ms", .value_name = "MS",
                 .help = "how often a node greets each peer once every peer is connected and "
                         "agrees (below lmcc_cluster_failure_timeout_ms)"},
                milliseconds_kind{.min = 10, .max = 60'000},
                member([](auto& o) -> auto& { return o.cluster.quiet_heartbeat_interval; }),
                1'000ms),
    make_option({.key = "lmcc_cluster_failure_timeout_ms", .value_name = "MS",
                 .help = "a peer silent this long is taken as down"},
                milliseconds_kind{.min = 50, .max = 600'000},
                member([](auto& o) -> auto& { return o.cluster.failure_timeout; }),
                2'000ms),
    make_option({.key = "lmcc_cluster_connect_timeout_ms", .value_name = "MS",
                 .help = "bound of one connect attempt to a peer (retries back off to 8x)"},
                milliseconds_kind{.min = 10, .max = 600'000},
                member([](auto& o) -> auto& { return o.cluster.connect_timeout; }),
                1'000ms),
    make_option({.key = "lmcc_replication_timeout_ms", .value_name = "MS",
                 .help = "a sub-batch another owner has not acknowledged in this long counts "
                         "as held (and stays queued for it)"},
                milliseconds_kind{.min = 10, .max = 600'000},
                member([](auto& o) -> auto& { return o.cluster.replication_timeout; }),
                5'000ms),
    make_option({.key = "lmcc_replication_ack_delay_ms", .value_name = "MS",
                 .help = "how long a node may hold its acks to another node so they go as one "
                         "message (fewer inter-node messages, less CPU; delays credits and "
                         "durable marks, never data); 0: at once"},
                milliseconds_kind{.min = 0, .max = 1'000},
                member([](auto& o) -> auto& { return o.cluster.replication_ack_delay; }),
                20ms),
    make_option({.key = "lmcc_middleman_workers", .value_name = "N",
                 .help = "threads that decode messages from other nodes (CAF's "
                         "middleman.workers); 0: the middleman's own thread, one wake-up "
                         "fewer per message"},
                integer_kind<uint32_t>{.min = 0, .max = 64},
                member([](auto& o) -> auto& { return o.cluster.middleman_workers; }),
                uint32_t{0}),
    make_option({.key = "lmcc_durable_flush_ms", .value_name = "MS",
                 .help = "how long after a quiet worker's last batch became durable its "
                         "owners are told so (a sending worker's next batch tells them)"},
                milliseconds_kind{.min = 1, .max = 60'000},
                member([](auto& o) -> auto& { return o.cluster.durable_flush_delay; }),
                50ms),
    make_option({.key = "lmcc_heartbeat_replication_ms", .value_name = "MS",
                 .help = "how long a worker's home gathers heartbeat times before it sends "
                         "them to the other nodes in one message each (their copies, kept "
                         "for a takeover's reaper, lag by up to this), and a node the "
                         "heartbeats it answered for workers homed elsewhere before it tells "
                         "their homes; 0: at once"},
                milliseconds_kind{.min = 0, .max = 60'000},
                member([](auto& o) -> auto& { return o.cluster.heartbeat_replication_delay; }),
                1000ms),
    make_option({.key = "lmcc_read_hedge_ms", .value_name = "MS",
                 .help = "how long a lookup waits for another owner's read before it also "
                         "asks the next owner of those slots (a stuck owner costs about this, "
                         "never a partial answer); 0: never"},
                milliseconds_kind{.min = 0, .max = 600'000},
                member([](auto& o) -> auto& { return o.cluster.read_hedge_delay; }),
                250ms),
    make_option({.key = "lmcc_peer_buffer_ops", .value_name = "N",
                 .help = "ops kept for re-sending to one unreachable peer"},
                integer_kind<uint64_t>{.min = 1024, .max = int64_t{1} << 34},
                member([](auto& o) -> auto& { return o.cluster.peer_buffer_ops; }),
                uint64_t{1} << 22),
    make_option({.key = "lmcc_anti_entropy_interval_ms", .value_name = "MS",
                 .help = "how often owners compare slot digests and take another owner's copy "
                         "of a slot that stays different, holder by holder by stream position "
                         "(docs/convergence.md); 0: off"},
                milliseconds_kind{.min = 0, .max = 3'600'000},
                member([](auto& o) -> auto& { return o.cluster.anti_entropy_interval; }),
                5'000ms),
    make_option({.key = "lmcc_tombstone_ttl_ms", .value_name = "MS",
                 .help = "how long a deregistration is remembered, so a node that was down "
                         "meanwhile cannot bring the worker's row back"},
                milliseconds_kind{.min = 1'000, .max = int64_t{7} * 86'400'000},
                member([](auto& o) -> auto& { return o.cluster.tombstone_ttl; }),
                3'600'000ms),
    make_option({.key = "lmcc_data_dir", .flag = "--data-dir", .value_name = "DIR",
                 .help = "directory of the node's RocksDB"},
                text_kind{.non_empty = true},
                members([](auto& o) -> auto& { return o.data_dir; },
                        [](auto& o) -> auto& { return o.store.path; }),
                std::string("./lmcc-data")),
    make_option({.key = "lmcc_persistence", .flag = "--persistence", .value_name = "on|off",
                 .help = "keep the index in RocksDB under the data dir; off: in memory, a "
                         "restart asks every worker for a full sync"},
                switch_kind{},
                member([](auto& o) -> auto& { return o.persistence; }),
                true),
    make_option({.key = "lmcc_persist_sync", .flag = "--persist-sync", .value_name = "on|off",
                 .help = "fsync the WAL on every commit (a process crash loses nothing either "
                         "way; this covers machine crashes)"},
                switch_kind{},
                member([](auto& o) -> auto& { return o.store.sync; }),
                false),
    make_option({.key = "lmcc_rocksdb_block_cache_mb", .flag = "--rocksdb-block-cache-mb",
                 .value_name = "MIB",
                 .help = "RocksDB block cache"},
                mebibytes_kind{.max_mib = int64_t{1} << 20},
                member([](auto& o) -> auto& { return o.store.block_cache_bytes; }),
                size_t{32} << 20),
    make_option({.key = "lmcc_rocksdb_write_buffer_mb", .flag = "--rocksdb-write-buffer-mb",
                 .value_name = "MIB",
                 .help = "RocksDB memtable size; two are kept"},
                mebibytes_kind{.max_mib = int64_t{1} << 16},
                member([](auto& o) -> auto& { return o.store.write_buffer_bytes; }),
                size_t{32} << 20),
    make_option({.key = "lmcc_rocksdb_max_wal_mb", .flag = "--rocksdb-max-wal-mb",
                 .value_name = "MIB",
                 .help = "bound on RocksDB's write-ahead log files: past it the oldest "
                         "memtables are flushed (0: RocksDB's default, 4x all memtables)"},
                mebibytes_kind{.min_mib = 0, .max_mib = int64_t{1} << 20},
                member([](auto& o) -> auto& { return o.store.max_wal_bytes; }),
                size_t{64} << 20),
    make_option({.key = "lmcc_memory_free_limit_mb", .flag = "--memory-free-limit-mb",
                 .value_name = "MIB",
                 .help = "freed memory the allocator may keep before the node gives it back to "
                         "the kernel (0: only after the index shrinks)"},
                mebibytes_kind{.min_mib = 0, .max_mib = int64_t{1} << 20},
                member([](auto& o) -> auto& { return o.memory_free_limit_bytes; }),
                size_t{128} << 20),
    make_option({.key = "lmcc_memory_check_interval_ms", .flag = "--memory-check-interval-ms",
                 .value_name = "MS",
                 .help = "how often the node compares its resident memory with what the "
                         "allocator has handed out (lmcc_memory_free_limit_mb)"},
                milliseconds_kind{.min = 100, .max = 600'000},
                member([](auto& o) -> auto& { return o.memory_check_interval; }),
                500ms),
    make_option({.key = "lmcc_max_inflight_ops", .flag = "--max-inflight-ops", .value_name = "N",
                 .help = "ingest ops in flight from the PULL socket to the store; past it the "
                         "node stops reading the socket and the workers feel the push-back"},
                integer_kind<uint64_t>{.min = 1024, .max = int64_t{1} << 32},
                member([](auto& o) -> auto& { return o.controller.max_inflight_ops; }),
                uint64_t{262'144}),
    make_option({.key = "lmcc_pull_coalesce_ms", .flag = "--pull-coalesce-ms", .value_name = "MS",
                 .help = "how long the PULL thread waits for more frames before it hands a small "
                         "round to the actors, and how often held busy connections are read "
                         "(0: never wait, never hold); trades a few ms of apply delay for CPU"},
                milliseconds_kind{.min = 0},
                member([](auto& o) -> auto& { return o.zmq.pull_coalesce; }),
                10ms),
    make_option({.key = "lmcc_pull_coalesce_ops", .flag = "--pull-coalesce-ops", .value_name = "N",
                 .help = "a PULL round this large (ops) is handed over without waiting"},
                integer_kind<uint64_t>{.min = 1, .max = int64_t{1} << 32},
                member([](auto& o) -> auto& { return o.zmq.pull_coalesce_ops; }),
                uint64_t{4096}),
    make_option({.key = "lmcc_pull_queue_messages",
                 .flag = "--pull-queue-messages",
                 .value_name = "N",
                 .help = "multipart messages libzmq queues per worker connection on the PULL "
                         "socket before TCP pushes back on that worker (ZMQ_RCVHWM)"},
                integer_kind<uint32_t>{.min = 1, .max = 1'000'000},
                member([](auto& o) -> auto& { return o.zmq.pull_queue_messages; }),
                uint32_t{16}),
    make_option({.key = "lmcc_pull_hold_bytes",
                 .flag = "--pull-hold-bytes",
                 .value_name = "BYTES",
                 .help = "busy worker connections wait in the kernel between PULL rounds "
                         "(SO_RCVLOWAT) up to this many bytes, so libzmq does not wake per "
                         "message (0: never)"},
                integer_kind<uint32_t>{.min = 0, .max = 16u << 20},
                member([](auto& o) -> auto& { return o.zmq.pull_hold_bytes; }),
                uint32_t{64 * 1024}),
    make_option({.key = "lmcc_ingest_idle_priority", .flag = "--ingest-idle-priority",
                 .value_name = "on|off",
                 .help = "run ingest's threads (PULL, its libzmq I/O thread, the shard, the row "
                         "writer, RocksDB's) under SCHED_IDLE: request threads preempt them at "
                         "once, but on a host whose cores other processes keep busy ingest "
                         "falls behind"},
                switch_kind{},
                member([](auto& o) -> auto& { return o.ingest_idle_priority; }),
                false),
    make_option({.key = "lmcc_pull_stop_drain_ms", .flag = "--pull-stop-drain-ms",
                 .value_name = "MS",
                 .help = "on a clean stop, how long the PULL socket is read after the workers' "
                         "connections are half-closed, so frames on the wire are not lost"},
                milliseconds_kind{.min = 0, .max = 60'000},
                member([](auto& o) -> auto& { return o.zmq.pull_stop_drain; }),
                1000ms),
    make_option({.key = "lmcc_snapshot_log_mb", .flag = "--snapshot-log-mb", .value_name = "MIB",
                 .help = "start a slot-snapshot round once the op log grew this much (bounds "
                         "what a restart replays)"},
                mebibytes_kind{.max_mib = int64_t{1} << 20},
                member([](auto& o) -> auto& { return o.controller.shard.snapshot_log_bytes; }),
                size_t{32} << 20),
    make_option({.key = "lmcc_snapshot_log_percent", .flag = "--snapshot-log-percent",
                 .value_name = "PERCENT",
                 .help = "a round also waits until the op log grew by this percentage of what "
                         "the last round wrote, so snapshot work per op stays flat as the index "
                         "grows (0: off)"},
                integer_kind<uint32_t>{.min = 0, .max = 10000},
                member([](auto& o) -> auto& { return o.controller.shard.snapshot_log_percent; }),
                uint32_t{50}),
    make_option({.key = "lmcc_snapshot_interval_s", .flag = "--snapshot-interval",
                 .value_name = "SECONDS",
                 .help = "start a slot-snapshot round at least this often when slots are dirty"},
                seconds_kind{},
                member([](auto& o) -> auto& { return o.controller.shard.snapshot_interval; }),
                60s),
    make_option({.key = "lmcc_snapshot_min_interval_s", .flag = "--snapshot-min-interval",
                 .value_name = "SECONDS",
                 .help = "never start slot-snapshot rounds closer together than this"},
                seconds_kind{},
                member([](auto& o) -> auto& { return o.controller.shard.snapshot_min_interval; }),
                2s),
    make_option({.key = "lmcc_store_idle_flush_ms", .flag = "--store-idle-flush-ms",
                 .value_name = "MS",
                 .help = "flush the store's memtables, giving their memory back, once the "
                         "shard has logged nothing for this long (0: never)"},
                milliseconds_kind{.min = 0, .max = 3'600'000},
                member([](auto& o) -> auto& { return o.controller.shard.idle_flush; }),
                2'000ms),
    make_option({.key = "lmcc_commit_failure_grace_ms", .flag = "--commit-failure-grace-ms",
                 .value_name = "MS",
                 .help = "how long op-log commits may keep failing before their records are "
                         "given up (their workers resync after a restart)"},
                milliseconds_kind{},
                member([](auto& o) -> auto& { return o.controller.shard.commit_failure_grace; }),
                5'000ms),
    make_option({.key = "lmcc_fault_injection", .flag = "--fault-injection", .value_name = "on|off",
                 .help = "accept POST /admin/faults (injected store failures and clock "
                         "jumps, for crash and chaos tests only); only a build with "
                         "-DLMCC_FAULT_INJECTION=ON accepts on"},
                switch_kind{},
                member([](auto& o) -> auto& { return o.fault_injection; }),
                false),
    make_option({.key = "lmcc_planted_bug", .value_name = "N",
                 .help = "a deliberate bug for the chaos checker's negative tests and for tests "
                         "of the backstops behind a mechanism (needs "
                         "lmcc_fault_injection; never in production): 0 none, 1 the shard "
                         "acks every 10th sub-batch unapplied, 2 a peer link acks every 10th "
                         "unsent, 3 takeovers forget seq marks, 4 a home resends no owed full sync "
                         "to a peer that comes back (the heard-heartbeat backstop's test)"},
                integer_kind<uint8_t>{.min = 0, .max = 4},
                member([](auto& o) -> auto& { return o.planted_bug; }),
                uint8_t{0}),
    make_option({.key = "lmcc_restore_from", .flag = "--restore-from", .value_name = "DIR",
                 .help = "boot from this snapshot (lmcc snapshot): verified, then it replaces "
                         "the data dir; empty: none"},
                text_kind{},
                member([](auto& o) -> auto& { return o.restore_from; }),
                std::string()),
    make_option({.key = "lmcc_log_level", .flag = "--log-level", .value_name = "LEVEL",
                 .help = "log level (warning = warn)"},
                choice_kind{.choices = log_levels, .aliases = log_level_aliases},
                member([](auto& o) -> auto& { return o.log_level; }),
                std::string("info")),
    make_option({.key = "lmcc_full_sync_timeout_s", .flag = "--full-sync-timeout",
                 .value_name = "SECONDS",
                 .help = "a full-sync session idle this long fails and the worker is asked to "
                         "retry"},
                seconds_kind{},
                member([](auto& o) -> auto& { return o.controller.full_sync_timeout; }),
                300s),
    make_option({.key = "lmcc_full_sync_completion_threshold",
                 .flag = "--full-sync-completion-threshold", .value_name = "RATIO",
                 .help = "share of synced workers before can_exit_freeze"},
                number_kind{.min = 0, .max = 1},
                member([](auto& o) -> auto& {
                  return o.controller.full_sync_completion_threshold;
                }),
                0.8),
    make_option({.key = "lmcc_control_timeout_ms", .flag = "--control-timeout-ms",
                 .value_name = "MS",
                 .help = "timeout of one command to a worker"},
                milliseconds_kind{},
                member([](auto& o) -> auto& { return o.control.request_timeout; }),
                30'000ms),
    make_option({.key = "lmcc_max_frame_bytes", .flag = "--max-frame-bytes",
                 .value_name = "BYTES",
                 .help = "largest ZMQ frame accepted; decoding may take ~50x it in memory"},
                byte_size_kind{{.min = 1}},
                member([](auto& o) -> auto& { return o.zmq.limits.max_frame_bytes; }),
                size_t{8} << 20),
    make_option({.key = "lmcc_max_body_bytes", .flag = "--max-body-bytes",
                 .value_name = "BYTES",
                 .help = "largest HTTP body accepted"},
                byte_size_kind{{.min = 1}},
                member([](auto& o) -> auto& { return o.http.max_body_bytes; }),
                size_t{64} << 20),
    make_option({.key = "lmcc_max_tokens", .flag = "--max-tokens", .value_name = "N",
                 .help = "most tokens in one /lookup or /pin"},
                integer_kind<size_t>{.min = 1},
                member([](auto& o) -> auto& { return o.http.max_tokens; }),
                size_t{1} << 20),
    make_option({.key = "lmcc_http_threads", .flag = "--http-threads", .value_name = "N",
                 .help = "HTTP worker threads; a control command to a silent worker holds one "
                         "until it times out"},
                integer_kind<uint32_t>{.min = 1, .max = 1024},
                member([](auto& o) -> auto& { return o.http.threads; }),
                uint32_t{32}),
    make_option({.key = "lmcc_api_token_file", .flag = "--api-token-file", .value_name = "FILE",
                 .help = "file holding the API token that calls which change state must bear "
                         "(Authorization: Bearer); empty: the variable named by "
                         "lmcc_api_token_env; neither: the API is open"},
                text_kind{},
                member([](auto& o) -> auto& { return o.http.security.token_file; }),
                std::string()),
    make_option({.key = "lmcc_api_token_env", .value_name = "NAME",
                 .help = "environment variable holding the API token when no file is given"},
                text_kind{.non_empty = true},
                member([](auto& o) -> auto& { return o.http.security.token_env; }),
                std::string("LMCC_API_TOKEN")),
    make_option({.key = "lmcc_api_token_for_reads", .flag = "--api-token-for-reads",
                 .value_name = "on|off",
                 .help = "require the API token for LMCache's read endpoints, /metrics and the "
                         "cluster's status too (probes stay open)"},
                switch_kind{},
                member([](auto& o) -> auto& { return o.http.security.token_for_reads; }),
                false),
    make_option({.key = "lmcc_http_tls_cert_file", .flag = "--http-tls-cert-file",
                 .value_name = "FILE",
                 .help = "PEM certificate (chain): the HTTP API serves HTTPS only; empty: plain "
                         "HTTP"},
                text_kind{},
                member([](auto& o) -> auto& { return o.http.security.tls_cert_file; }),
                std::string()),
    make_option({.key = "lmcc_http_tls_key_file", .flag = "--http-tls-key-file",
                 .value_name = "FILE",
                 .help = "PEM private key of lmcc_http_tls_cert_file"},
                text_kind{},
                member([](auto& o) -> auto& { return o.http.security.tls_key_file; }),
                std::string()),
    make_option({.key = "lmcc_scheduler_threads", .flag = "--scheduler-threads",
                 .value_name = "N",
                 .help = "actor scheduler threads; 0: one per core"},
                integer_kind<uint32_t>{.min = 0, .max = 1024},
                member([](auto& o) -> auto& { return o.scheduler_threads; }),
                uint32_t{0}),
    make_option({.key = "lmcc_none_hash", .flag = "--none-hash", .value_name = "INT",
                 .help = "initial chunk-chain hash, vLLM's NONE_HASH; 0 when vLLM is not "
                         "installed where the workers run"},
                integer_kind<int64_t>{},
                read_then_write(
                    [](auto& o) -> auto& { return o.controller.chunk_hashing.none_hash; },
                    [](resolve_state& s, int64_t v) { s.none_hash = hash_setting_here(s, v); }),
                int64_t{0}),
    make_option({.key = "lmcc_python_hash_seed", .flag = "--python-hash-seed",
                 .value_name = "SEED", .excludes = "--none-hash",
                 .help = "derive the initial chunk hash from the workers' PYTHONHASHSEED, as "
                         "vLLM does"},
                integer_kind<uint32_t>{.min = 0, .max = 4294967295}, // CPython's range
                into_state([](resolve_state& s, uint32_t seed) {
                  s.python_hash_seed =
                      hash_setting_here(s, msg::none_hash_from_python_hash_seed(seed));
                }),
                std::nullopt),
    make_option({.key = "lmcc_chunk_size", .flag = "--chunk-size", .value_name = "N",
                 .help = "tokens per chunk; must match the workers'"},
                integer_kind<uint32_t>{.min = 1, .max = int64_t{1} << 20},
                member([](auto& o) -> auto& { return o.controller.chunk_hashing.chunk_size; }),
                uint32_t{256}),
  };
  // clang-format on
}

} // namespace

const std::vector<option_spec>& node_option_table() {
  static const std::vector<option_spec> table = make_table();
  return table;
}

const option_spec* find_option(std::string_view key) {
  if (key.empty())
    return nullptr;
  for (const auto& spec : node_option_table())
    if (spec.key == key)
      return &spec;
  return nullptr;
}

std::string env_name(std::string_view key) {
  std::string name(env_prefix);
  for (char c : key)
    name += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return name;
}

option_spec custom_option(option_names names, std::string accepts, std::string default_yaml,
                          std::function<refusal(const json&, resolve_state&)> apply,
                          std::function<void(YAML::Emitter&, const node_options&)> emit) {
  option_spec spec{names};
  spec.accepts = std::move(accepts);
  spec.default_yaml = default_yaml;
  spec.default_shown = default_yaml.empty() ? "unset" : default_yaml;
  spec.apply = apply;
  spec.emit = emit;
  spec.check_default = [apply, emit, default_yaml]() -> refusal {
    if (!apply || default_yaml.empty())
      return std::nullopt;
    resolve_state s;
    if (auto why = apply(yaml_to_json(YAML::Load(default_yaml)), s))
      return "the table default " + default_yaml + " is refused by its own parser: " + *why;
    if (!s.warnings.empty())
      return "the table default " + default_yaml + " draws a warning: " + s.warnings.front();
    if (!emit)
      return std::nullopt;
    YAML::Emitter from_table;
    YAML::Emitter from_struct;
    emit(from_table, s.options);
    emit(from_struct, node_options{});
    if (std::string_view(from_table.c_str()) != from_struct.c_str())
      return "the table default reads as " + std::string(from_table.c_str()) +
             " but the struct initializers give " + from_struct.c_str();
    return std::nullopt;
  };
  return spec;
}

} // namespace lmcc::apps::config
