// `lmcc node` configuration (spec section 6.1): LMCache's flags, YAML file,
// LMCACHE_CONTROLLER_* environment, extra --key=value arguments, lmcc's own
// keys, their precedence, validation errors (fault injection against the
// build among them) and --dump-config.
#include "apps/lmcc/node_config.hpp"
#include "apps/lmcc/node_config_table.hpp"
#include "faults/fault_injection.hpp"
#include "messages/chunk_hash.hpp"

#include <CLI/CLI.hpp>
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <unistd.h>
#include <vector>

namespace lmcc::apps {
namespace {

using namespace std::chrono_literals;
using env_map = std::map<std::string, std::string>;

/// A `lmcc node ...` command line parsed the way main() does it.
struct node_cli {
  CLI::App app{"lmcc"};
  CLI::App* node_cmd = nullptr;
  node_config_inputs inputs;

  node_cli() {
    app.require_subcommand(1);
    node_cmd = app.add_subcommand("node", "a controller node");
    add_node_flags(*node_cmd, inputs);
  }

  /// Parses `lmcc node <args...>`; throws CLI11's errors.
  void parse(std::vector<std::string> args) {
    args.insert(args.begin(), {"lmcc", "node"});
    std::vector<char*> argv;
    for (auto& arg : args)
      argv.push_back(arg.data());
    app.parse(static_cast<int>(argv.size()), argv.data());
    inputs.extra_args = node_cmd->remaining();
  }
};

/// Resolves `lmcc node <args...>` under `env`; fails the test on an error.
node_config_result resolve_ok(std::vector<std::string> args, const env_map& env = {}) {
  node_cli cli;
  cli.parse(std::move(args));
  auto result = resolve_node_options(cli.inputs, env);
  EXPECT_TRUE(result.has_value()) << result.error().message;
  if (!result)
    return {};
  return *std::move(result);
}

/// The error of `lmcc node <args...>` under `env`; fails the test if it resolves.
std::string resolve_error(std::vector<std::string> args, const env_map& env = {}) {
  node_cli cli;
  cli.parse(std::move(args));
  auto result = resolve_node_options(cli.inputs, env);
  EXPECT_FALSE(result.has_value()) << "resolved although an error was expected";
  return result ? std::string{} : result.error().message;
}

bool contains(const std::vector<std::string>& lines, std::string_view part) {
  for (const auto& line : lines)
    if (line.find(part) != std::string::npos)
      return true;
  return false;
}

/// A YAML file that lives as long as the test.
class temp_yaml {
public:
  explicit temp_yaml(const std::string& text) {
    static int counter = 0;
    path_ =
        std::filesystem::temp_directory_path() / ("lmcc-node-config-" + std::to_string(::getpid()) +
                                                  "-" + std::to_string(counter++) + ".yaml");
    std::ofstream{path_} << text;
  }
  ~temp_yaml() { std::filesystem::remove(path_); }
  temp_yaml(const temp_yaml&) = delete;
  temp_yaml& operator=(const temp_yaml&) = delete;

  std::string path() const { return path_.string(); }

private:
  std::filesystem::path path_;
};

// -- defaults ---------------------------------------------------------------------

TEST(NodeConfig, DefaultsAreLmcachesWithTheHeartbeatSocketOn) {
  auto r = resolve_ok({});
  const auto& o = r.options;
  EXPECT_EQ(o.http.host, "0.0.0.0");
  EXPECT_EQ(o.zmq.host, "0.0.0.0");
  EXPECT_EQ(o.http.port, 9000);
  EXPECT_EQ(o.zmq.pull_port, 8300);
  EXPECT_EQ(o.zmq.reply_port, 8400);
  EXPECT_EQ(o.zmq.heartbeat_port, 8082); // lmcc's deliberate fix
  EXPECT_EQ(o.controller.health_check_interval_s, -1);
  EXPECT_EQ(o.controller.lmcache_worker_timeout, 300s);
  EXPECT_EQ(o.zmq.advertise_host, "");
  EXPECT_EQ(o.controller.node_id, "n1");
  EXPECT_EQ(o.controller.max_inflight_ops, 262144U);
  EXPECT_EQ(o.zmq.pull_queue_messages, 16U);
  EXPECT_EQ(o.memory_free_limit_bytes, size_t{128} << 20);
  EXPECT_EQ(o.memory_check_interval, std::chrono::milliseconds{500});
  EXPECT_EQ(o.controller.slot_count, 4096U);
  EXPECT_EQ(o.data_dir, "./lmcc-data");
  EXPECT_EQ(o.log_level, "info");
  EXPECT_EQ(o.controller.full_sync_timeout, 300s);
  EXPECT_DOUBLE_EQ(o.controller.full_sync_completion_threshold, 0.8);
  EXPECT_EQ(o.control.request_timeout, 30s);
  EXPECT_EQ(o.zmq.limits.max_frame_bytes, size_t{8} << 20);
  EXPECT_EQ(o.http.max_body_bytes, size_t{64} << 20);
  EXPECT_EQ(o.http.max_tokens, size_t{1} << 20);
  EXPECT_EQ(o.http.threads, 32U);
  EXPECT_EQ(o.scheduler_threads, 0U);
  EXPECT_EQ(o.controller.chunk_hashing.none_hash, 0);
  EXPECT_EQ(o.controller.chunk_hashing.chunk_size, 256U);
  EXPECT_TRUE(r.warnings.empty());
}

TEST(NodeConfig, UnrelatedEnvironmentIsIgnored) {
  auto r = resolve_ok({}, {{"PATH", "/usr/bin"}, {"LMCACHE_CONFIG_FILE", "/nope.yaml"}});
  EXPECT_EQ(r.options.http.port, 9000);
  EXPECT_TRUE(r.warnings.empty());
}

// -- LMCache's flags ---------------------------------------------------------------

TEST(NodeConfig, HostFlagSetsHttpAndZmqHost) {
  auto r = resolve_ok({"--host", "127.0.0.1"});
  EXPECT_EQ(r.options.http.host, "127.0.0.1");
  EXPECT_EQ(r.options.zmq.host, "127.0.0.1");
}

TEST(NodeConfig, PortFlag) {
  EXPECT_EQ(resolve_ok({"--port", "9100"}).options.http.port, 9100);
  EXPECT_EQ(resolve_ok({"--port=9101"}).options.http.port, 9101);
}

TEST(NodeConfig, HealthCheckIntervalFlag) {
  EXPECT_EQ(resolve_ok({"--health-check-interval", "5"}).options.controller.health_check_interval_s,
            5);
  EXPECT_EQ(
      resolve_ok({"--health-check-interval", "-1"}).options.controller.health_check_interval_s, -1);
  EXPECT_EQ(resolve_ok({"--health-check-interval", "1"}).options.controller.health_check_interval_s,
            1);
}

TEST(NodeConfig, HealthCheckIntervalMustBeMinusOneOrAtLeastOne) {
  for (const char* bad : {"0", "0.5", "-2", "abc"}) {
    auto error = resolve_error({"--health-check-interval", bad});
    EXPECT_NE(error.find("--health-check-interval (health_check_interval)"), std::string::npos)
        << error;
    EXPECT_NE(error.find(bad), std::string::npos) << error;
  }
}

TEST(NodeConfig, WorkerTimeoutFlag) {
  EXPECT_EQ(
      resolve_ok({"--lmcache-worker-timeout", "60"}).options.controller.lmcache_worker_timeout,
      60s);
  EXPECT_EQ(
      resolve_ok({"--lmcache-worker-timeout", "1.5"}).options.controller.lmcache_worker_timeout,
      1500ms);
  auto error = resolve_error({"--lmcache-worker-timeout", "0"});
  EXPECT_NE(error.find("--lmcache-worker-timeout (lmcache_worker_timeout)"), std::string::npos)
      << error;
}

TEST(NodeConfig, AdvertiseHostFlagAndEnvironment) {
  EXPECT_EQ(resolve_ok({"--advertise-host", "ctrl.example"}).options.zmq.advertise_host,
            "ctrl.example");
  EXPECT_EQ(resolve_ok({}, {{"LMCACHE_CONTROLLER_CONTROLLER_ADVERTISE_HOST", "10.1.2.3"}})
                .options.zmq.advertise_host,
            "10.1.2.3");
  // The flag beats the environment.
  EXPECT_EQ(resolve_ok({"--advertise-host", "flag.example"},
                       {{"LMCACHE_CONTROLLER_CONTROLLER_ADVERTISE_HOST", "10.1.2.3"}})
                .options.zmq.advertise_host,
            "flag.example");
}

// -- controller_monitor_ports ------------------------------------------------------

TEST(NodeConfig, MonitorPortsWithHeartbeat) {
  auto r = resolve_ok({"--monitor-ports", R"({"pull": 8301, "reply": 8401, "heartbeat": 8083})"});
  EXPECT_EQ(r.options.zmq.pull_port, 8301);
  EXPECT_EQ(r.options.zmq.reply_port, 8401);
  EXPECT_EQ(r.options.zmq.heartbeat_port, 8083);
  EXPECT_TRUE(r.warnings.empty());
}

TEST(NodeConfig, MonitorPortsWithoutHeartbeatTurnTheHeartbeatSocketOff) {
  // The user gave the ports explicitly, as in LMCache's documented command
  // line without "heartbeat": taken literally.
  auto r = resolve_ok({"--monitor-ports", R"({"pull": 8300, "reply": 8400})"});
  EXPECT_EQ(r.options.zmq.pull_port, 8300);
  EXPECT_EQ(r.options.zmq.reply_port, 8400);
  EXPECT_EQ(r.options.zmq.heartbeat_port, std::nullopt);
}

TEST(NodeConfig, MonitorPortsWithNullOrZeroHeartbeat) {
  for (const char* ports : {R"({"pull": 8300, "reply": 8400, "heartbeat": null})",
                            R"({"pull": 8300, "reply": 8400, "heartbeat": 0})"}) {
    auto r = resolve_ok({"--monitor-ports", ports});
    EXPECT_EQ(r.options.zmq.heartbeat_port, std::nullopt) << ports;
    EXPECT_EQ(r.options.zmq.reply_port, 8400) << ports;
  }
}

TEST(NodeConfig, MonitorPortsMissingReplyIsAnError) {
  auto error = resolve_error({"--monitor-ports", R"({"pull": 8300, "heartbeat": 8082})"});
  EXPECT_NE(error.find("--monitor-ports (controller_monitor_ports)"), std::string::npos) << error;
  EXPECT_NE(error.find("\"reply\" is missing"), std::string::npos) << error;
}

TEST(NodeConfig, MonitorPortsMissingPullIsAnError) {
  auto error = resolve_error({"--monitor-ports", R"({"reply": 8400})"});
  EXPECT_NE(error.find("\"pull\" is missing"), std::string::npos) << error;
}

TEST(NodeConfig, MonitorPortsBadValues) {
  for (const char* ports :
       {R"({"pull": 0, "reply": 8400})", R"({"pull": 8300, "reply": 70000})",
        R"({"pull": "x", "reply": 8400})", R"({"pull": 8300, "reply": 8400, "heartbeat": -1})",
        "{not json", "[8300, 8400]", "8300"}) {
    auto error = resolve_error({"--monitor-ports", ports});
    EXPECT_NE(error.find("--monitor-ports (controller_monitor_ports): "), std::string::npos)
        << error;
  }
}

TEST(NodeConfig, MonitorPortsUnknownKeyIsAWarning) {
  auto r = resolve_ok({"--monitor-ports", R"({"pull": 8300, "reply": 8400, "hearbeat": 8082})"});
  EXPECT_TRUE(contains(r.warnings, "unknown monitor port \"hearbeat\"")) << r.warnings.size();
  EXPECT_EQ(r.options.zmq.heartbeat_port, std::nullopt);
}

// -- legacy --monitor-port ---------------------------------------------------------

TEST(NodeConfig, LegacyMonitorPortOnlyWhenMonitorPortsAreNull) {
  auto r = resolve_ok({"--monitor-ports", "null", "--monitor-port", "9005"});
  EXPECT_EQ(r.options.zmq.pull_port, 9005);
  EXPECT_EQ(r.options.zmq.reply_port, std::nullopt);     // LMCache: no reply socket
  EXPECT_EQ(r.options.zmq.heartbeat_port, std::nullopt); // ... and no heartbeat socket
  EXPECT_TRUE(contains(r.warnings, "legacy mode"));
}

TEST(NodeConfig, LegacyMonitorPortDefaultsTo9001) {
  // LMCache's env converter: `json.loads(x) if x else None`.
  auto r = resolve_ok({}, {{"LMCACHE_CONTROLLER_CONTROLLER_MONITOR_PORTS", ""}});
  EXPECT_EQ(r.options.zmq.pull_port, 9001);
  EXPECT_EQ(r.options.zmq.reply_port, std::nullopt);
  EXPECT_EQ(r.options.zmq.heartbeat_port, std::nullopt);
}

TEST(NodeConfig, LegacyMonitorPortIsIgnoredWhileMonitorPortsAreSet) {
  auto r = resolve_ok({"--monitor-port", "9005"});
  EXPECT_EQ(r.options.zmq.pull_port, 8300);
  EXPECT_EQ(r.options.zmq.reply_port, 8400);
  EXPECT_EQ(r.options.zmq.heartbeat_port, 8082);
  EXPECT_TRUE(contains(r.warnings, "--monitor-port 9005 ignored"));
}

TEST(NodeConfig, LegacyMonitorPortMustBeAPort) {
  auto error = resolve_error({"--monitor-ports", "null", "--monitor-port", "0"});
  EXPECT_NE(error.find("--monitor-port: expected an integer in 1..65535, got '0'"),
            std::string::npos)
      << error;
}

// -- YAML --------------------------------------------------------------------------

TEST(NodeConfig, YamlFileValues) {
  temp_yaml file{R"(controller_host: 127.0.0.2
controller_port: 9200
controller_monitor_ports:
  pull: 8310
  reply: 8410
  heartbeat: 8092
health_check_interval: 10
lmcache_worker_timeout: 120
controller_advertise_host: ctrl.yaml
extra_config: null
lmcc_node_id: yaml-node
lmcc_max_inflight_ops: 4096
lmcc_slots: 1024
lmcc_data_dir: /var/lib/lmcc
lmcc_log_level: debug
lmcc_full_sync_timeout_s: 45.5
lmcc_full_sync_completion_threshold: 0.5
lmcc_control_timeout_ms: 2500
lmcc_max_frame_bytes: 1048576
lmcc_max_body_bytes: 2097152
lmcc_max_tokens: 4096
lmcc_http_threads: 3
lmcc_scheduler_threads: 2
lmcc_none_hash: -42
lmcc_chunk_size: 128
)"};
  auto r = resolve_ok({"--config", file.path()});
  const auto& o = r.options;
  EXPECT_EQ(o.http.host, "127.0.0.2");
  EXPECT_EQ(o.zmq.host, "127.0.0.2");
  EXPECT_EQ(o.http.port, 9200);
  EXPECT_EQ(o.zmq.pull_port, 8310);
  EXPECT_EQ(o.zmq.reply_port, 8410);
  EXPECT_EQ(o.zmq.heartbeat_port, 8092);
  EXPECT_EQ(o.controller.health_check_interval_s, 10);
  EXPECT_EQ(o.controller.lmcache_worker_timeout, 120s);
  EXPECT_EQ(o.zmq.advertise_host, "ctrl.yaml");
  EXPECT_EQ(o.controller.node_id, "yaml-node");
  EXPECT_EQ(o.controller.max_inflight_ops, 4096U);
  EXPECT_EQ(o.controller.slot_count, 1024U);
  EXPECT_EQ(o.data_dir, "/var/lib/lmcc");
  EXPECT_EQ(o.log_level, "debug");
  EXPECT_EQ(o.controller.full_sync_timeout, 45500ms);
  EXPECT_DOUBLE_EQ(o.controller.full_sync_completion_threshold, 0.5);
  EXPECT_EQ(o.control.request_timeout, 2500ms);
  EXPECT_EQ(o.zmq.limits.max_frame_bytes, 1048576U);
  EXPECT_EQ(o.http.max_body_bytes, 2097152U);
  EXPECT_EQ(o.http.max_tokens, 4096U);
  EXPECT_EQ(o.http.threads, 3U);
  EXPECT_EQ(o.scheduler_threads, 2U);
  EXPECT_EQ(o.controller.chunk_hashing.none_hash, -42);
  EXPECT_EQ(o.controller.chunk_hashing.chunk_size, 128U);
  EXPECT_TRUE(r.warnings.empty()) << r.warnings.front();
}

TEST(NodeConfig, YamlMonitorPortsAsJsonStringAndWithoutHeartbeat) {
  temp_yaml json_string{"controller_monitor_ports: '{\"pull\": 8320, \"reply\": 8420}'\n"};
  auto r = resolve_ok({"--config", json_string.path()});
  EXPECT_EQ(r.options.zmq.pull_port, 8320);
  EXPECT_EQ(r.options.zmq.reply_port, 8420);
  EXPECT_EQ(r.options.zmq.heartbeat_port, std::nullopt);

  temp_yaml mapping{"controller_monitor_ports: {pull: 8321, reply: 8421, heartbeat: null}\n"};
  r = resolve_ok({"--config", mapping.path()});
  EXPECT_EQ(r.options.zmq.pull_port, 8321);
  EXPECT_EQ(r.options.zmq.heartbeat_port, std::nullopt);

  temp_yaml null_ports{"controller_monitor_ports: null\n"};
  r = resolve_ok({"--config", null_ports.path(), "--monitor-port", "9007"});
  EXPECT_EQ(r.options.zmq.pull_port, 9007);
  EXPECT_EQ(r.options.zmq.reply_port, std::nullopt);
}

TEST(NodeConfig, YamlFileFromEnvironment) {
  temp_yaml file{"controller_port: 9300\n"};
  auto r = resolve_ok({}, {{"LMCACHE_CONTROLLER_CONFIG_FILE", file.path()}});
  EXPECT_EQ(r.options.http.port, 9300);

  // --config wins over the variable.
  temp_yaml other{"controller_port: 9301\n"};
  r = resolve_ok({"--config", other.path()}, {{"LMCACHE_CONTROLLER_CONFIG_FILE", file.path()}});
  EXPECT_EQ(r.options.http.port, 9301);
}

TEST(NodeConfig, UnknownYamlKeyIsAWarning) {
  temp_yaml file{"controller_port: 9300\ncontroler_host: typo\n"};
  auto r = resolve_ok({"--config", file.path()});
  EXPECT_EQ(r.options.http.port, 9300);
  ASSERT_EQ(r.warnings.size(), 1U);
  EXPECT_NE(r.warnings[0].find("unknown key 'controler_host'"), std::string::npos) << r.warnings[0];
  EXPECT_NE(r.warnings[0].find(file.path()), std::string::npos) << r.warnings[0];
}

TEST(NodeConfig, EmptyYamlFileIsFine) {
  temp_yaml file{""};
  EXPECT_EQ(resolve_ok({"--config", file.path()}).options.http.port, 9000);
}

TEST(NodeConfig, BrokenOrMissingYamlFileIsAnError) {
  temp_yaml broken{"controller_port: [9000\n"};
  auto error = resolve_error({"--config", broken.path()});
  EXPECT_NE(error.find(broken.path()), std::string::npos) << error;
  EXPECT_NE(error.find("invalid YAML"), std::string::npos) << error;

  temp_yaml list{"- controller_port\n"};
  error = resolve_error({"--config", list.path()});
  EXPECT_NE(error.find("expected a mapping"), std::string::npos) << error;

  error = resolve_error({"--config", "/nonexistent/lmcc.yaml"});
  EXPECT_NE(error.find("/nonexistent/lmcc.yaml: cannot read the file"), std::string::npos) << error;
}

// -- precedence ----------------------------------------------------------------------

TEST(NodeConfig, EnvironmentOverridesYaml) {
  temp_yaml file{
      "controller_port: 9300\ncontroller_host: yaml.host\nlmcc_max_inflight_ops: 2048\n"};
  auto r = resolve_ok({"--config", file.path()},
                      {{"LMCACHE_CONTROLLER_CONTROLLER_PORT", "9400"},
                       {"LMCACHE_CONTROLLER_LMCC_MAX_INFLIGHT_OPS", "16384"}});
  EXPECT_EQ(r.options.http.port, 9400);
  EXPECT_EQ(r.options.controller.max_inflight_ops, 16384U);
  EXPECT_EQ(r.options.http.host, "yaml.host"); // not overridden
}

TEST(NodeConfig, CliOverridesEnvironment) {
  env_map env{{"LMCACHE_CONTROLLER_CONTROLLER_PORT", "9400"},
              {"LMCACHE_CONTROLLER_HEALTH_CHECK_INTERVAL", "30"},
              {"LMCACHE_CONTROLLER_LMCC_SLOTS", "256"}};
  auto r = resolve_ok({"--port", "9500", "--slots", "512"}, env);
  EXPECT_EQ(r.options.http.port, 9500);
  EXPECT_EQ(r.options.controller.slot_count, 512U);
  // Flags that were not given do not override (LMCache's argparse defaults do).
  EXPECT_EQ(r.options.controller.health_check_interval_s, 30);
}

TEST(NodeConfig, ExtraKeyValueOverridesEverything) {
  temp_yaml file{"controller_port: 9300\n"};
  auto r = resolve_ok({"--config", file.path(), "--port", "9500", "--controller_port=9100"},
                      {{"LMCACHE_CONTROLLER_CONTROLLER_PORT", "9400"}});
  EXPECT_EQ(r.options.http.port, 9100);
}

TEST(NodeConfig, ExtraArgumentsCoverEveryKey) {
  auto r = resolve_ok({"--controller_monitor_ports={\"pull\":1,\"reply\":2,\"heartbeat\":3}",
                       "--lmcc_slots=64", "--lmcc-node-id=dashes", "health_check_interval=7",
                       "--controller_advertise_host=extra.example"});
  EXPECT_EQ(r.options.zmq.pull_port, 1);
  EXPECT_EQ(r.options.zmq.reply_port, 2);
  EXPECT_EQ(r.options.zmq.heartbeat_port, 3);
  EXPECT_EQ(r.options.controller.slot_count, 64U);
  EXPECT_EQ(r.options.controller.node_id, "dashes");
  EXPECT_EQ(r.options.controller.health_check_interval_s, 7);
  EXPECT_EQ(r.options.zmq.advertise_host, "extra.example");
}

TEST(NodeConfig, UnknownExtraKeyIsAWarningAndStrayArgumentAnError) {
  auto r = resolve_ok({"--not_a_key=1"});
  EXPECT_TRUE(contains(r.warnings, "--not_a_key (extra argument): unknown controller setting"));

  auto error = resolve_error({"--prot", "9000"});
  EXPECT_NE(error.find("'--prot': unknown argument"), std::string::npos) << error;
}

TEST(NodeConfig, UnknownControllerEnvironmentVariableIsAWarning) {
  auto r = resolve_ok({}, {{"LMCACHE_CONTROLLER_CONTROLER_PORT", "1"}});
  EXPECT_TRUE(contains(r.warnings, "LMCACHE_CONTROLLER_CONTROLER_PORT"));
}

TEST(NodeConfig, EnvironmentQuotesAreStripped) {
  auto r = resolve_ok({}, {{"LMCACHE_CONTROLLER_CONTROLLER_HOST", "'10.0.0.1'"},
                           {"LMCACHE_CONTROLLER_CONTROLLER_MONITOR_PORTS",
                            R"( '{"pull": 8330, "reply": 8430, "heartbeat": 8099}' )"}});
  EXPECT_EQ(r.options.http.host, "10.0.0.1");
  EXPECT_EQ(r.options.zmq.pull_port, 8330);
  EXPECT_EQ(r.options.zmq.heartbeat_port, 8099);
}

// -- errors name the key and the source ------------------------------------------------

TEST(NodeConfig, InvalidValueFromEachSourceNamesKeyAndSource) {
  temp_yaml file{"controller_port: abc\n"};
  auto error = resolve_error({"--config", file.path()});
  EXPECT_EQ(error, file.path() + ": controller_port: expected an integer in 1..65535, got 'abc'");

  error = resolve_error({}, {{"LMCACHE_CONTROLLER_CONTROLLER_PORT", "abc"}});
  EXPECT_EQ(error,
            "LMCACHE_CONTROLLER_CONTROLLER_PORT: expected an integer in 1..65535, got 'abc'");

  error = resolve_error({"--port", "abc"});
  EXPECT_EQ(error, "--port (controller_port): expected an integer in 1..65535, got 'abc'");

  error = resolve_error({"--controller_port=abc"});
  EXPECT_EQ(error,
            "--controller_port (extra argument): expected an integer in 1..65535, got 'abc'");
}

TEST(NodeConfig, ValidationRules) {
  struct bad_case {
    std::vector<std::string> args;
    std::string expect;
  };
  std::vector<bad_case> cases = {
      {{"--port", "0"}, "--port (controller_port): expected an integer in 1..65535, got '0'"},
      {{"--port", "65536"}, "in 1..65535"},
      {{"--slots", "1000"}, "--slots (lmcc_slots): expected a power of two, got 1000"},
      {{"--slots", "0"}, "--slots (lmcc_slots)"},
      {{"--max-inflight-ops", "0"},
       "--max-inflight-ops (lmcc_max_inflight_ops): expected an integer in 1024..4294967296, got "
       "'0'"},
      {{"--full-sync-completion-threshold", "1.5"},
       "--full-sync-completion-threshold (lmcc_full_sync_completion_threshold): expected a number "
       "in [0, 1], got '1.5'"},
      {{"--full-sync-completion-threshold", "-0.1"}, "lmcc_full_sync_completion_threshold"},
      {{"--full-sync-timeout", "0"}, "--full-sync-timeout (lmcc_full_sync_timeout_s)"},
      {{"--control-timeout-ms", "0"}, "--control-timeout-ms (lmcc_control_timeout_ms)"},
      {{"--max-frame-bytes", "0"}, "--max-frame-bytes (lmcc_max_frame_bytes)"},
      {{"--max-body-bytes", "-1"}, "--max-body-bytes (lmcc_max_body_bytes)"},
      {{"--max-tokens", "x"}, "--max-tokens (lmcc_max_tokens)"},
      {{"--http-threads", "0"}, "--http-threads (lmcc_http_threads)"},
      {{"--scheduler-threads", "-1"}, "--scheduler-threads (lmcc_scheduler_threads)"},
      {{"--log-level", "loud"}, "--log-level (lmcc_log_level): expected one of"},
      {{"--node-id", ""}, "--node-id (lmcc_node_id): expected a non-empty string"},
      {{"--host", " "}, "--host (controller_host): expected a non-empty string"},
      {{"--chunk-size", "0"}, "--chunk-size (lmcc_chunk_size)"},
      {{"--python-hash-seed", "4294967296"}, "--python-hash-seed (lmcc_python_hash_seed)"},
      {{"--none-hash", "9223372036854775808"}, "--none-hash (lmcc_none_hash)"},
  };
  for (const auto& c : cases) {
    auto error = resolve_error(c.args);
    EXPECT_NE(error.find(c.expect), std::string::npos) << c.args[0] << ": " << error;
  }
}

TEST(NodeConfig, EveryErrorIsReported) {
  auto error = resolve_error({"--port", "x", "--slots", "3"},
                             {{"LMCACHE_CONTROLLER_LMCC_MAX_INFLIGHT_OPS", "none"}});
  EXPECT_NE(error.find("--port (controller_port)"), std::string::npos) << error;
  EXPECT_NE(error.find("--slots (lmcc_slots)"), std::string::npos) << error;
  EXPECT_NE(error.find("LMCACHE_CONTROLLER_LMCC_MAX_INFLIGHT_OPS"), std::string::npos) << error;
}

TEST(NodeConfig, AGreetingIntervalMustBeBelowTheFailureTimeout) {
  const std::string members = "lmcc_node_id: n1\n"
                              "lmcc_cluster_members:\n"
                              "  - {id: n1, host: 127.0.0.1, port: 7001}\n"
                              "  - {id: n2, host: 127.0.0.1, port: 7002}\n"
                              "lmcc_cluster_failure_timeout_ms: 2000\n";
  temp_yaml fine{members + "lmcc_cluster_quiet_heartbeat_ms: 1500\n"};
  EXPECT_EQ(resolve_ok({"--config", fine.path()}).options.cluster.quiet_heartbeat_interval,
            std::chrono::milliseconds{1500});
  temp_yaml quiet{members + "lmcc_cluster_quiet_heartbeat_ms: 2000\n"};
  auto error = resolve_error({"--config", quiet.path()});
  EXPECT_NE(error.find("lmcc_cluster_quiet_heartbeat_ms: 2000 ms is not below "
                       "lmcc_cluster_failure_timeout_ms (2000 ms)"),
            std::string::npos)
      << error;
  temp_yaml busy{members + "lmcc_cluster_heartbeat_ms: 3000\n"};
  error = resolve_error({"--config", busy.path()});
  EXPECT_NE(error.find("lmcc_cluster_heartbeat_ms: 3000 ms"), std::string::npos) << error;
}

// -- lmcc's own flags -------------------------------------------------------------------

TEST(NodeConfig, LmccFlags) {
  auto r = resolve_ok({"--node-id",
                       "n7",
                       "--max-inflight-ops",
                       "3000",
                       "--slots",
                       "8192",
                       "--data-dir",
                       "/d",
                       "--log-level",
                       "WARNING",
                       "--full-sync-timeout",
                       "12",
                       "--full-sync-completion-threshold",
                       "1",
                       "--control-timeout-ms",
                       "750",
                       "--max-frame-bytes",
                       "1000",
                       "--max-body-bytes",
                       "2000",
                       "--max-tokens",
                       "3000",
                       "--http-threads",
                       "2",
                       "--scheduler-threads",
                       "5",
                       "--chunk-size",
                       "16"});
  const auto& o = r.options;
  EXPECT_EQ(o.controller.node_id, "n7");
  EXPECT_EQ(o.controller.max_inflight_ops, 3000U);
  EXPECT_EQ(o.controller.slot_count, 8192U);
  EXPECT_EQ(o.data_dir, "/d");
  EXPECT_EQ(o.log_level, "warn");
  EXPECT_EQ(o.controller.full_sync_timeout, 12s);
  EXPECT_DOUBLE_EQ(o.controller.full_sync_completion_threshold, 1.0);
  EXPECT_EQ(o.control.request_timeout, 750ms);
  EXPECT_EQ(o.zmq.limits.max_frame_bytes, 1000U);
  EXPECT_EQ(o.http.max_body_bytes, 2000U);
  EXPECT_EQ(o.http.max_tokens, 3000U);
  EXPECT_EQ(o.http.threads, 2U);
  EXPECT_EQ(o.scheduler_threads, 5U);
  EXPECT_EQ(o.controller.chunk_hashing.chunk_size, 16U);
}

TEST(NodeConfig, PersistenceFlags) {
  auto defaults = resolve_ok({}).options;
  EXPECT_TRUE(defaults.persistence);
  EXPECT_FALSE(defaults.store.sync);
  EXPECT_EQ(defaults.store.block_cache_bytes, size_t{32} << 20);
  EXPECT_EQ(defaults.store.write_buffer_bytes, size_t{32} << 20);
  EXPECT_EQ(defaults.restore_from, "");

  auto o = resolve_ok({"--persistence", "off", "--persist-sync", "on", "--rocksdb-block-cache-mb",
                       "64", "--rocksdb-write-buffer-mb", "8", "--restore-from", "/snap/1"})
               .options;
  EXPECT_FALSE(o.persistence);
  EXPECT_TRUE(o.store.sync);
  EXPECT_EQ(o.store.block_cache_bytes, size_t{64} << 20);
  EXPECT_EQ(o.store.write_buffer_bytes, size_t{8} << 20);
  EXPECT_EQ(o.restore_from, "/snap/1");

  // YAML booleans and the environment work too.
  temp_yaml file{"lmcc_persistence: false\nlmcc_persist_sync: true\n"};
  auto y = resolve_ok({"--config", file.path()}, {{"LMCACHE_CONTROLLER_LMCC_PERSISTENCE", "on"}});
  EXPECT_TRUE(y.options.persistence); // env over YAML
  EXPECT_TRUE(y.options.store.sync);

  auto error = resolve_error({"--persistence", "maybe"});
  EXPECT_NE(error.find("expected on or off"), std::string::npos) << error;
  error = resolve_error({"--rocksdb-block-cache-mb", "0"});
  EXPECT_NE(error.find("lmcc_rocksdb_block_cache_mb"), std::string::npos) << error;
}

TEST(NodeConfig, ChunkHashInitialValue) {
  EXPECT_EQ(resolve_ok({"--none-hash", "-5"}).options.controller.chunk_hashing.none_hash, -5);
  EXPECT_EQ(resolve_ok({"--python-hash-seed", "123"}).options.controller.chunk_hashing.none_hash,
            msg::none_hash_from_python_hash_seed(123));
  // The two flags exclude each other.
  node_cli cli;
  EXPECT_THROW(cli.parse({"--none-hash", "1", "--python-hash-seed", "2"}), CLI::ExcludesError);
}

TEST(NodeConfig, ChunkHashHigherSourceWinsSameSourceConflicts) {
  temp_yaml file{"lmcc_none_hash: 77\n"};
  auto r =
      resolve_ok({"--config", file.path()}, {{"LMCACHE_CONTROLLER_LMCC_PYTHON_HASH_SEED", "0"}});
  EXPECT_EQ(r.options.controller.chunk_hashing.none_hash, msg::none_hash_from_python_hash_seed(0));

  r = resolve_ok({"--none-hash", "9"}, {{"LMCACHE_CONTROLLER_LMCC_PYTHON_HASH_SEED", "0"}});
  EXPECT_EQ(r.options.controller.chunk_hashing.none_hash, 9);

  auto error = resolve_error({}, {{"LMCACHE_CONTROLLER_LMCC_PYTHON_HASH_SEED", "1"},
                                  {"LMCACHE_CONTROLLER_LMCC_NONE_HASH", "2"}});
  EXPECT_NE(error.find("not both"), std::string::npos) << error;
}

// -- fault injection against the build --------------------------------------------------
// These tests run in a test build (fault injection built in); what a release
// build refuses is checked here through fault_injection_errors(options, false),
// and against a real release binary by `make check-release-build`.

TEST(NodeConfig, ABuildWithoutFaultInjectionRefusesItAndPlantedBugsNamingTheBuildOption) {
  constexpr auto npos = std::string::npos;
  node_options o;
  EXPECT_TRUE(config::fault_injection_errors(o, false).empty()); // off: any build starts
  o.fault_injection = true;
  auto errors = config::fault_injection_errors(o, false);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].rfind("lmcc_fault_injection: on, but this lmcc is built without fault "
                            "injection (the CMake option LMCC_FAULT_INJECTION is OFF",
                            0),
            0u)
      << errors[0];
  EXPECT_NE(errors[0].find("-DLMCC_FAULT_INJECTION=ON"), npos) << errors[0];
  o.planted_bug = 2;
  errors = config::fault_injection_errors(o, false);
  ASSERT_EQ(errors.size(), 2u);
  EXPECT_EQ(
      errors[1].rfind("lmcc_planted_bug: 2, but this lmcc is built without fault injection", 0), 0u)
      << errors[1];
  // A planted bug alone: the build is the reason, not the missing setting.
  o.fault_injection = false;
  errors = config::fault_injection_errors(o, false);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_NE(errors[0].find("LMCC_FAULT_INJECTION is OFF"), npos) << errors[0];
}

TEST(NodeConfig, ABuildWithFaultInjectionTakesItAndAPlantedBugNeedsIt) {
  node_options o;
  o.fault_injection = true;
  o.planted_bug = 3;
  EXPECT_TRUE(config::fault_injection_errors(o, true).empty());
  o.fault_injection = false;
  EXPECT_EQ(config::fault_injection_errors(o, true),
            std::vector<std::string>{"lmcc_planted_bug: 3 needs lmcc_fault_injection on (it is "
                                     "for chaos-checker tests only)"});
}

TEST(NodeConfig, ThisBuildTakesOrRefusesFaultInjectionAsItsBuildOptionSays) {
  const std::string text = dump_config(resolve_ok({}).options);
  EXPECT_NE(text.find(std::string("\n# ") + faults::build_summary + ".\n"), std::string::npos)
      << text;
  if constexpr (faults::built) {
    auto r = resolve_ok({"--fault-injection", "on", "--lmcc_planted_bug=1"});
    EXPECT_TRUE(r.options.fault_injection);
    EXPECT_EQ(r.options.planted(), planted_bug_kind::drop_acked_sub_batch);
  } else {
    EXPECT_NE(resolve_error({"--fault-injection", "on"}).find("LMCC_FAULT_INJECTION is OFF"),
              std::string::npos);
  }
}

// -- --dump-config -------------------------------------------------------------------------

TEST(NodeConfig, DumpConfigFlagIsParsed) {
  node_cli cli;
  cli.parse({"--dump-config"});
  EXPECT_TRUE(cli.inputs.dump_config);
  EXPECT_TRUE(cli.inputs.extra_args.empty());
}

TEST(NodeConfig, DumpConfigParsesBackWithTheEffectiveValues) {
  auto r = resolve_ok({"--host", "127.0.0.1", "--port", "9100", "--advertise-host", "adv.example",
                       "--health-check-interval", "15", "--lmcache-worker-timeout", "2.5",
                       "--full-sync-completion-threshold", "0.75", "--python-hash-seed", "42",
                       "--node-id", "null", "--scheduler-threads", "3"});
  std::string text = dump_config(r.options);
  YAML::Node y = YAML::Load(text);
  EXPECT_EQ(y["controller_host"].as<std::string>(), "127.0.0.1");
  EXPECT_EQ(y["controller_port"].as<int>(), 9100);
  EXPECT_EQ(y["controller_monitor_ports"]["pull"].as<int>(), 8300);
  EXPECT_EQ(y["controller_monitor_ports"]["reply"].as<int>(), 8400);
  EXPECT_EQ(y["controller_monitor_ports"]["heartbeat"].as<int>(), 8082);
  EXPECT_EQ(y["health_check_interval"].as<double>(), 15);
  EXPECT_EQ(y["lmcache_worker_timeout"].as<double>(), 2.5);
  EXPECT_EQ(y["controller_advertise_host"].as<std::string>(), "adv.example");
  EXPECT_EQ(y["lmcc_node_id"].as<std::string>(), "null");
  EXPECT_DOUBLE_EQ(y["lmcc_full_sync_completion_threshold"].as<double>(), 0.75);
  EXPECT_EQ(y["lmcc_none_hash"].as<int64_t>(), msg::none_hash_from_python_hash_seed(42));
  EXPECT_EQ(y["lmcc_scheduler_threads"].as<int>(), 3);
  EXPECT_EQ(y["lmcc_slots"].as<int>(), 4096);
  EXPECT_EQ(y["lmcc_log_level"].as<std::string>(), "info");
  for (const char* key :
       {"lmcc_max_inflight_ops", "lmcc_data_dir", "lmcc_persistence", "lmcc_persist_sync",
        "lmcc_rocksdb_block_cache_mb", "lmcc_rocksdb_write_buffer_mb", "lmcc_restore_from",
        "lmcc_full_sync_timeout_s", "lmcc_control_timeout_ms", "lmcc_max_frame_bytes",
        "lmcc_max_body_bytes", "lmcc_max_tokens", "lmcc_http_threads", "lmcc_chunk_size"})
    EXPECT_TRUE(y[key].IsScalar()) << key;

  // Fed back as --config it gives the same configuration.
  temp_yaml file{text};
  auto again = resolve_ok({"--config", file.path()});
  EXPECT_TRUE(again.warnings.empty()) << again.warnings.front();
  EXPECT_EQ(dump_config(again.options), text);
}

TEST(NodeConfig, DumpConfigOfDefaultsRoundTrips) {
  std::string text = dump_config(resolve_ok({}).options);
  temp_yaml file{text};
  EXPECT_EQ(dump_config(resolve_ok({"--config", file.path()}).options), text);
  EXPECT_TRUE(YAML::Load(text)["controller_advertise_host"].IsScalar());
  EXPECT_EQ(YAML::Load(text)["controller_advertise_host"].as<std::string>(), "");
}

TEST(NodeConfig, DumpConfigShowsAnOffHeartbeatAndLegacyMode) {
  auto r = resolve_ok({"--monitor-ports", R"({"pull": 8300, "reply": 8400})"});
  YAML::Node y = YAML::Load(dump_config(r.options));
  EXPECT_TRUE(y["controller_monitor_ports"]["heartbeat"].IsNull());

  r = resolve_ok({"--monitor-ports", "null", "--monitor-port", "9005"});
  std::string text = dump_config(r.options);
  EXPECT_TRUE(YAML::Load(text)["controller_monitor_ports"].IsNull()) << text;
  EXPECT_NE(text.find("--monitor-port 9005"), std::string::npos) << text;
}

} // namespace
} // namespace lmcc::apps
