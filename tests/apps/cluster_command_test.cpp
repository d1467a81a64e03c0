// `lmcc cluster up`'s pure parts: the port plan, the node configs it writes
// (read back with yaml-cpp and with the node's own config resolver), the
// check of a kept config, the node-ready line, and the judgement of
// /cluster/status replies (also fetched over HTTP from a fake node).
#include "apps/lmcc/launcher/cluster_command.hpp"
#include "apps/lmcc/node_config.hpp"

#include <CLI/CLI.hpp>
#include <gtest/gtest.h>
#include <httplib.h>
#include <yaml-cpp/yaml.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

namespace lmcc::apps {
namespace {

using json = nlohmann::json;

cluster_up_options three_nodes() {
  cluster_up_options options;
  options.nodes = 3;
  options.data_dir = "/srv/lmcc-cluster";
  return options;
}

cluster_plan plan_ok(const cluster_up_options& options) {
  auto plan = plan_cluster(options);
  EXPECT_TRUE(plan.has_value()) << plan.error().message;
  if (!plan)
    return {};
  return *std::move(plan);
}

std::string plan_error(const cluster_up_options& options) {
  auto plan = plan_cluster(options);
  EXPECT_FALSE(plan.has_value()) << "planned although an error was expected";
  return plan ? std::string{} : plan.error().message;
}

/// A file that lives as long as the test.
class temp_file {
public:
  explicit temp_file(const std::string& text) {
    static int counter = 0;
    path_ = std::filesystem::temp_directory_path() /
            ("lmcc-cluster-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter++) +
             ".yaml");
    std::ofstream{path_} << text;
  }
  ~temp_file() { std::filesystem::remove(path_); }
  temp_file(const temp_file&) = delete;
  temp_file& operator=(const temp_file&) = delete;

  std::string path() const { return path_.string(); }

private:
  std::filesystem::path path_;
};

// -- plan ---------------------------------------------------------------------------

TEST(ClusterPlan, PortsIdsAndPathsFollowTheNodeIndex) {
  auto options = three_nodes();
  options.base_port = 9000;
  auto plan = plan_ok(options);
  ASSERT_EQ(plan.nodes.size(), 3U);
  EXPECT_EQ(plan.dir, "/srv/lmcc-cluster");
  EXPECT_EQ(plan.secret_file, "/srv/lmcc-cluster/cluster.secret");
  EXPECT_EQ(plan.host, "127.0.0.1");
  EXPECT_EQ(plan.replicas, 2U);
  EXPECT_EQ(plan.slots, 4096U);
  for (size_t i = 0; i < 3; ++i) {
    const auto& node = plan.nodes[i];
    const auto base = static_cast<uint16_t>(9000 + 10 * i);
    EXPECT_EQ(node.id, "n" + std::to_string(i + 1));
    EXPECT_EQ(node.http_port, base);
    EXPECT_EQ(node.pull_port, base + 1);
    EXPECT_EQ(node.reply_port, base + 2);
    EXPECT_EQ(node.heartbeat_port, base + 3);
    EXPECT_EQ(node.cluster_port, base + 4);
    EXPECT_EQ(node.dir, "/srv/lmcc-cluster/" + node.id);
    EXPECT_EQ(node.config_path, "/srv/lmcc-cluster/" + node.id + "/lmcc.yaml");
    EXPECT_EQ(node.data_dir, "/srv/lmcc-cluster/" + node.id + "/data");
    EXPECT_EQ(node.log_path, "/srv/lmcc-cluster/" + node.id + "/node.log");
    EXPECT_TRUE(node.restore_from.empty());
  }
}

TEST(ClusterPlan, RelativePathsBecomeAbsoluteAndSnapshotsArePerNode) {
  auto options = three_nodes();
  options.data_dir = "./lmcc-cluster/";
  options.restore_from = "snaps";
  auto plan = plan_ok(options);
  const auto cwd = std::filesystem::current_path();
  EXPECT_EQ(plan.dir, cwd / "lmcc-cluster");
  EXPECT_EQ(plan.nodes[1].data_dir, cwd / "lmcc-cluster" / "n2" / "data");
  EXPECT_EQ(plan.nodes[1].restore_from, cwd / "snaps" / "n2");
}

TEST(ClusterPlan, DefaultReplicasFollowSmallClustersDown) {
  auto options = three_nodes();
  options.nodes = 1;
  EXPECT_EQ(plan_ok(options).replicas, 1U);
  options.replicas = 1;
  options.nodes = 3;
  EXPECT_EQ(plan_ok(options).replicas, 1U);
}

TEST(ClusterPlan, RefusesWhatNoNodeCouldRun) {
  auto options = three_nodes();
  options.base_port = 65520; // n3's cluster port would be 65544
  EXPECT_NE(plan_error(options).find("past 65535"), std::string::npos);

  options = three_nodes();
  options.replicas = 4;
  EXPECT_NE(plan_error(options).find("--replicas 4 exceeds --nodes 3"), std::string::npos);

  options = three_nodes();
  options.slots = 1000;
  EXPECT_NE(plan_error(options).find("power of two"), std::string::npos);

  options = three_nodes();
  options.nodes = 0;
  EXPECT_NE(plan_error(options).find("--nodes"), std::string::npos);

  options = three_nodes();
  options.log_level = "loud";
  EXPECT_NE(plan_error(options).find("--log-level"), std::string::npos);
}

// -- config text --------------------------------------------------------------------

TEST(ClusterConfig, YamlListsEveryMemberAndThisNodesPortsAndPaths) {
  auto options = three_nodes();
  options.replicas = 3;
  options.slots = 1024;
  options.log_level = "debug";
  auto plan = plan_ok(options);
  const auto& n2 = plan.nodes[1];
  YAML::Node config = YAML::Load(node_config_yaml(plan, n2));

  EXPECT_EQ(config["controller_host"].as<std::string>(), "127.0.0.1");
  EXPECT_EQ(config["controller_port"].as<int>(), 9010);
  YAML::Node ports = config["controller_monitor_ports"];
  ASSERT_TRUE(ports.IsMap());
  EXPECT_EQ(ports["pull"].as<int>(), 9011);
  EXPECT_EQ(ports["reply"].as<int>(), 9012);
  EXPECT_EQ(ports["heartbeat"].as<int>(), 9013);
  EXPECT_EQ(config["lmcc_node_id"].as<std::string>(), "n2");
  EXPECT_EQ(config["lmcc_data_dir"].as<std::string>(), "/srv/lmcc-cluster/n2/data");
  EXPECT_EQ(config["lmcc_replicas"].as<int>(), 3);
  EXPECT_EQ(config["lmcc_slots"].as<int>(), 1024);
  EXPECT_EQ(config["lmcc_cluster_secret_file"].as<std::string>(),
            "/srv/lmcc-cluster/cluster.secret");
  EXPECT_EQ(config["lmcc_log_level"].as<std::string>(), "debug");

  YAML::Node members = config["lmcc_cluster_members"];
  ASSERT_TRUE(members.IsSequence());
  ASSERT_EQ(members.size(), 3U);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(members[i]["id"].as<std::string>(), "n" + std::to_string(i + 1));
    EXPECT_EQ(members[i]["host"].as<std::string>(), "127.0.0.1");
    EXPECT_EQ(members[i]["port"].as<int>(), 9004 + 10 * static_cast<int>(i));
  }
}

TEST(ClusterConfig, EveryNodeGetsTheSameMemberList) {
  auto plan = plan_ok(three_nodes());
  auto members_of = [&](const planned_node& node) {
    return YAML::Dump(YAML::Load(node_config_yaml(plan, node))["lmcc_cluster_members"]);
  };
  EXPECT_EQ(members_of(plan.nodes[0]), members_of(plan.nodes[1]));
  EXPECT_EQ(members_of(plan.nodes[0]), members_of(plan.nodes[2]));
}

TEST(ClusterConfig, PathsThatNeedQuotingSurviveTheRoundTrip) {
  auto options = three_nodes();
  options.data_dir = "/tmp/a dir: with #odd 'chars'";
  auto plan = plan_ok(options);
  YAML::Node config = YAML::Load(node_config_yaml(plan, plan.nodes[0]));
  EXPECT_EQ(config["lmcc_data_dir"].as<std::string>(), "/tmp/a dir: with #odd 'chars'/n1/data");
}

/// The node reads the config the way `lmcc node --config FILE` does.
auto resolve_config(const temp_file& file) {
  CLI::App app{"lmcc"};
  node_config_inputs inputs;
  auto* node_cmd = app.add_subcommand("node", "a controller node");
  add_node_flags(*node_cmd, inputs);
  std::vector<std::string> args = {"lmcc", "node", "--config", file.path()};
  std::vector<char*> argv;
  for (auto& arg : args)
    argv.push_back(arg.data());
  app.parse(static_cast<int>(argv.size()), argv.data());
  return resolve_node_options(inputs, {});
}

/// The node reads the config the way `lmcc node --config FILE` does.
TEST(ClusterConfig, TheNodeResolvesItsConfigIntoThePlannedPortsAndPaths) {
  auto plan = plan_ok(three_nodes());
  const auto& n3 = plan.nodes[2];
  temp_file file{node_config_yaml(plan, n3)};

  auto resolved = resolve_config(file);
  ASSERT_TRUE(resolved.has_value()) << resolved.error().message;
  const auto& o = resolved->options;
  EXPECT_EQ(o.http.host, "127.0.0.1");
  EXPECT_EQ(o.zmq.host, "127.0.0.1");
  EXPECT_EQ(o.http.port, 9020);
  EXPECT_EQ(o.zmq.pull_port, 9021);
  EXPECT_EQ(o.zmq.reply_port, 9022);
  EXPECT_EQ(o.zmq.heartbeat_port, 9023);
  EXPECT_EQ(o.controller.node_id, "n3");
  EXPECT_EQ(o.data_dir, "/srv/lmcc-cluster/n3/data");
  EXPECT_EQ(o.controller.slot_count, 4096U);
  EXPECT_EQ(o.log_level, "info");
}

TEST(ClusterConfig, StandbyNodesComeAfterTheMembersAndTheNodeReadsThemAsStandby) {
  auto options = three_nodes();
  options.standby = 1;
  auto plan = plan_ok(options);
  ASSERT_EQ(plan.nodes.size(), 4U);
  EXPECT_EQ(plan.nodes[3].id, "n4");
  EXPECT_EQ(plan.nodes[3].http_port, 9030);
  temp_file file{node_config_yaml(plan, plan.nodes[0])};
  auto resolved = resolve_config(file);
  ASSERT_TRUE(resolved.has_value()) << resolved.error().message;
  const auto& members = resolved->options.cluster.members;
  ASSERT_EQ(members.size(), 4U);
  for (const auto& m : members)
    EXPECT_EQ(m.standby, m.id == "n4") << m.id;
  // Kept on the next start with the same flags; without --standby the layout differs.
  EXPECT_EQ(config_mismatch(node_config_yaml(plan, plan.nodes[3]), plan, plan.nodes[3]),
            std::nullopt);
  auto without = plan_ok(three_nodes());
  EXPECT_NE(config_mismatch(node_config_yaml(plan, plan.nodes[0]), without, without.nodes[0]),
            std::nullopt);
}

// -- a kept config ------------------------------------------------------------------

TEST(ClusterConfig, ItsOwnConfigMatchesThePlan) {
  auto plan = plan_ok(three_nodes());
  for (const auto& node : plan.nodes)
    EXPECT_EQ(config_mismatch(node_config_yaml(plan, node), plan, node), std::nullopt);
}

TEST(ClusterConfig, EditedTuningAndJsonTextPortsStillMatch) {
  auto plan = plan_ok(three_nodes());
  const auto& n1 = plan.nodes[0];
  YAML::Node config = YAML::Load(node_config_yaml(plan, n1));
  config["lmcc_log_level"] = "debug";
  config["lmcc_replicas"] = 3;
  config["lmcc_max_inflight_ops"] = 1048576;
  // LMCache's own configs hold the ports as a JSON string.
  config["controller_monitor_ports"] = R"({"pull": 9001, "reply": 9002, "heartbeat": 9003})";
  EXPECT_EQ(config_mismatch(YAML::Dump(config), plan, n1), std::nullopt);
}

TEST(ClusterConfig, AnotherLayoutIsNamed) {
  auto first = three_nodes();
  auto first_plan = plan_ok(first);

  auto moved = first;
  moved.base_port = 9100;
  auto moved_plan = plan_ok(moved);
  auto why = config_mismatch(node_config_yaml(first_plan, first_plan.nodes[1]), moved_plan,
                             moved_plan.nodes[1]);
  ASSERT_TRUE(why.has_value());
  EXPECT_EQ(*why, "controller_port is 9010, this command line gives 9110");

  auto grown = first;
  grown.nodes = 4;
  auto grown_plan = plan_ok(grown);
  why = config_mismatch(node_config_yaml(first_plan, first_plan.nodes[0]), grown_plan,
                        grown_plan.nodes[0]);
  ASSERT_TRUE(why.has_value());
  EXPECT_NE(why->find("lmcc_cluster_members"), std::string::npos);
  EXPECT_NE(why->find("n4@127.0.0.1:9034"), std::string::npos);

  // n1's config in n2's folder.
  why = config_mismatch(node_config_yaml(first_plan, first_plan.nodes[0]), first_plan,
                        first_plan.nodes[1]);
  ASSERT_TRUE(why.has_value());
  EXPECT_EQ(*why, "lmcc_node_id is n1, this command line gives n2");

  YAML::Node without_ports = YAML::Load(node_config_yaml(first_plan, first_plan.nodes[0]));
  without_ports.remove("controller_monitor_ports");
  why = config_mismatch(YAML::Dump(without_ports), first_plan, first_plan.nodes[0]);
  ASSERT_TRUE(why.has_value());
  EXPECT_EQ(*why, "controller_monitor_ports.pull is (absent), this command line gives 9001");

  why = config_mismatch("controller_port: [unclosed", first_plan, first_plan.nodes[0]);
  ASSERT_TRUE(why.has_value());
  EXPECT_NE(why->find("not valid YAML"), std::string::npos);
}

// -- lines --------------------------------------------------------------------------

TEST(ClusterLines, NodeReadyLineIsRecognisedForItsNodeOnly) {
  const std::string spdlog_line =
      "[2026-01-02 10:11:12.345] [info] node-ready node=n1 http=http://127.0.0.1:9000 "
      "pull=tcp://127.0.0.1:9001 reply=9002 heartbeat=9003 store=/x entries=0";
  EXPECT_TRUE(is_node_ready_line(spdlog_line, "n1"));
  EXPECT_FALSE(is_node_ready_line(spdlog_line, "n2"));
  EXPECT_TRUE(is_node_ready_line("node-ready node=n1", "n1"));
  EXPECT_FALSE(is_node_ready_line("[info] node-ready node=n10 http=x", "n1"));
  EXPECT_FALSE(is_node_ready_line("[info] node-ready node=n1x http=x", "n1"));
  EXPECT_FALSE(is_node_ready_line("[info] not-node-ready node=n1 http=x", "n1"));
  EXPECT_FALSE(is_node_ready_line("[info] node-stopping node=n1", "n1"));
}

TEST(ClusterLines, ReadyLineCarriesEveryEndpointAndTheConfig) {
  auto plan = plan_ok(three_nodes());
  EXPECT_EQ(node_ready_line(plan, plan.nodes[1], 4242),
            "node-ready node=n2 pid=4242 http=127.0.0.1:9010 pull=127.0.0.1:9011 "
            "reply=127.0.0.1:9012 heartbeat=127.0.0.1:9013 cluster=127.0.0.1:9014 "
            "config=/srv/lmcc-cluster/n2/lmcc.yaml");
}

TEST(ClusterLines, HostPortBracketsIpv6) {
  EXPECT_EQ(host_port("127.0.0.1", 9000), "127.0.0.1:9000");
  EXPECT_EQ(host_port("::1", 9000), "[::1]:9000");
  EXPECT_EQ(host_port("node-a.example", 1), "node-a.example:1");
}

TEST(ClusterLines, WaitStatusSaysExitCodeOrSignal) {
  // The kernel's encoding of waitpid() statuses.
  EXPECT_EQ(describe_wait_status(3 << 8), "exit:3");
  EXPECT_EQ(describe_wait_status(0), "exit:0");
  EXPECT_EQ(describe_wait_status(SIGKILL), "signal:SIGKILL");
  EXPECT_EQ(describe_wait_status(SIGSEGV), "signal:SIGSEGV");
}

// -- readiness ----------------------------------------------------------------------

/// What node `self` of `plan` answers when it sees every member live on `ring`.
json healthy_status(const cluster_plan& plan, const std::string& self, const std::string& ring) {
  json members = json::array();
  for (const auto& node : plan.nodes)
    members.push_back({{"id", node.id},
                       {"host", plan.host},
                       {"port", node.cluster_port},
                       {"live", true},
                       {"self", node.id == self},
                       {"primary_slots", 1365},
                       {"replica_slots", 1365}});
  return {{"node", self},        {"ring_version", ring}, {"replicas", plan.replicas},
          {"slots", plan.slots}, {"members", members},   {"live_members", plan.nodes.size()}};
}

std::vector<node_status> healthy_statuses(const cluster_plan& plan, const std::string& ring) {
  std::vector<node_status> statuses;
  for (const auto& node : plan.nodes)
    statuses.push_back({.id = node.id, .status = healthy_status(plan, node.id, ring)});
  return statuses;
}

TEST(ClusterReadiness, ReadyWhenEveryNodeSeesEveryMemberLiveOnOneRing) {
  auto plan = plan_ok(three_nodes());
  auto verdict = judge_cluster_status(plan, healthy_statuses(plan, "9f3a01"));
  EXPECT_TRUE(verdict.ready) << verdict.reason;
  EXPECT_EQ(verdict.ring_version, "9f3a01");
  EXPECT_EQ(verdict.reason, "");
}

TEST(ClusterReadiness, NotReadyWhenAMemberIsNotLive) {
  auto plan = plan_ok(three_nodes());
  auto statuses = healthy_statuses(plan, "9f3a01");
  (*statuses[0].status)["members"][2]["live"] = false;
  auto verdict = judge_cluster_status(plan, statuses);
  EXPECT_FALSE(verdict.ready);
  EXPECT_EQ(verdict.ring_version, "");
  EXPECT_EQ(verdict.reason, "n1: sees n3 not live");

  statuses = healthy_statuses(plan, "9f3a01");
  (*statuses[1].status)["members"][0].erase("live");
  EXPECT_FALSE(judge_cluster_status(plan, statuses).ready);
}

TEST(ClusterReadiness, NotReadyWhileRingVersionsDiffer) {
  auto plan = plan_ok(three_nodes());
  auto statuses = healthy_statuses(plan, "9f3a01");
  (*statuses[2].status)["ring_version"] = "77aa00";
  auto verdict = judge_cluster_status(plan, statuses);
  EXPECT_FALSE(verdict.ready);
  EXPECT_EQ(verdict.reason, "ring versions differ: n1=9f3a01 n2=9f3a01 n3=77aa00");

  statuses = healthy_statuses(plan, "9f3a01");
  (*statuses[1].status).erase("ring_version");
  verdict = judge_cluster_status(plan, statuses);
  EXPECT_FALSE(verdict.ready);
  EXPECT_EQ(verdict.reason, "n2: no ring_version yet");
}

TEST(ClusterReadiness, NumericRingVersionsAreComparedToo) {
  auto plan = plan_ok(three_nodes());
  auto statuses = healthy_statuses(plan, "x");
  for (auto& s : statuses)
    (*s.status)["ring_version"] = 17;
  auto verdict = judge_cluster_status(plan, statuses);
  EXPECT_TRUE(verdict.ready) << verdict.reason;
  EXPECT_EQ(verdict.ring_version, "17");
}

TEST(ClusterReadiness, ARollingRestartWaitsForEmptyReplicationQueues) {
  auto plan = plan_ok(three_nodes());
  auto statuses = healthy_statuses(plan, "9f3a01");
  for (auto& s : statuses)
    (*s.status)["replication_lag_sub_batches"] = 0;
  EXPECT_EQ(replication_backlog(statuses), std::nullopt);
  (*statuses[1].status)["replication_lag_sub_batches"] = 7;
  EXPECT_EQ(replication_backlog(statuses), "n2: 7 sub-batches queued for peers");
  statuses[1].status->erase("replication_lag_sub_batches");
  EXPECT_EQ(replication_backlog(statuses), "n2: no replication_lag_sub_batches");
  statuses[2].status.reset();
  statuses[1].status.reset();
  EXPECT_EQ(replication_backlog(statuses), "n2: no status");
}

TEST(ClusterReadiness, NotReadyWhenAMemberIsMissingOrUnknown) {
  auto plan = plan_ok(three_nodes());
  auto statuses = healthy_statuses(plan, "r1");
  (*statuses[1].status)["members"].erase(2);
  auto verdict = judge_cluster_status(plan, statuses);
  EXPECT_FALSE(verdict.ready);
  EXPECT_EQ(verdict.reason, "n2: does not list n3");

  statuses = healthy_statuses(plan, "r1");
  (*statuses[0].status)["members"].push_back({{"id", "n9"}, {"live", true}});
  verdict = judge_cluster_status(plan, statuses);
  EXPECT_FALSE(verdict.ready);
  EXPECT_EQ(verdict.reason, "n1: lists n9, which is not in this cluster");
}

TEST(ClusterReadiness, NotReadyWhenANodeDidNotAnswerAsItself) {
  auto plan = plan_ok(three_nodes());
  auto statuses = healthy_statuses(plan, "r1");
  statuses[2].status.reset();
  statuses[2].error = "GET /cluster/status: HTTP 404";
  auto verdict = judge_cluster_status(plan, statuses);
  EXPECT_FALSE(verdict.ready);
  EXPECT_EQ(verdict.reason, "n3: GET /cluster/status: HTTP 404");

  // A stale node of another cluster on n2's port.
  statuses = healthy_statuses(plan, "r1");
  (*statuses[1].status)["node"] = "n7";
  verdict = judge_cluster_status(plan, statuses);
  EXPECT_FALSE(verdict.ready);
  EXPECT_EQ(verdict.reason, "n2: answered as n7");

  statuses = healthy_statuses(plan, "r1");
  statuses.pop_back();
  EXPECT_FALSE(judge_cluster_status(plan, statuses).ready);
}

/// The launcher's HTTP side against a fake node serving /cluster/status.
TEST(ClusterReadiness, FetchesAndJudgesWhatAFakeNodeServes) {
  auto options = three_nodes();
  options.nodes = 1;
  httplib::Server server;
  json reply;
  server.Get("/cluster/status", [&reply](const httplib::Request&, httplib::Response& res) {
    res.set_content(reply.dump(), "application/json");
  });
  int port = server.bind_to_any_port("127.0.0.1");
  ASSERT_GT(port, 0);
  // bind_to_any_port() already listens, so requests queue until the loop runs.
  std::thread serving([&server] { server.listen_after_bind(); });

  options.base_port = static_cast<uint16_t>(port);
  auto plan = plan_ok(options);
  reply = healthy_status(plan, "n1", "abc");
  auto status = fetch_node_status(plan, plan.nodes[0]);
  ASSERT_TRUE(status.status.has_value()) << status.error;
  EXPECT_EQ(status.id, "n1");
  auto verdict = judge_cluster_status(plan, {status});
  EXPECT_TRUE(verdict.ready) << verdict.reason;
  EXPECT_EQ(verdict.ring_version, "abc");

  options.host = "0.0.0.0"; // a wildcard bind is polled on loopback
  auto wildcard_plan = plan_ok(options);
  reply = healthy_status(wildcard_plan, "n1", "abc");
  EXPECT_TRUE(judge_cluster_status(wildcard_plan,
                                   {fetch_node_status(wildcard_plan, wildcard_plan.nodes[0])})
                  .ready);

  server.stop();
  serving.join();
  status = fetch_node_status(plan, plan.nodes[0]);
  EXPECT_FALSE(status.status.has_value());
  EXPECT_NE(status.error.find("GET /cluster/status"), std::string::npos);
}

} // namespace
} // namespace lmcc::apps
