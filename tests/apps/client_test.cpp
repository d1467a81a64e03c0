// The operator client's pure parts (apps/lmcc/client/): the cluster's verdict
// drawn from made-up /cluster/status answers, the tables people read, and
// the --endpoints list. tests/integration/test_client.py runs the commands
// against a real cluster.
#include "apps/lmcc/client/endpoints.hpp"
#include "apps/lmcc/client/status_view.hpp"
#include "apps/lmcc/client/table.hpp"
#include "apps/lmcc/client/workers_view.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

namespace lmcc::apps::client {
namespace {

using json = nlohmann::json;

const std::vector<std::string> three = {"n1", "n2", "n3"};

/// A /cluster/status as node `self` of n1..n3 (R = 2, 4096 slots) answers it
/// when it sees the nodes in `live` live; tests change fields from there.
json status_of(const std::string& self, const std::vector<std::string>& live = three) {
  json members = json::array();
  for (size_t i = 0; i < three.size(); ++i) {
    const auto& id = three[i];
    const bool is_live = std::find(live.begin(), live.end(), id) != live.end();
    members.push_back({{"id", id},
                       {"http", "127.0.0.1:90" + std::to_string(i) + "0"},
                       {"live", is_live},
                       {"presumed", false},
                       {"self", id == self},
                       {"member", true},
                       {"primary_slots", 1365},
                       {"replica_slots", 1366}});
  }
  return {{"node", self},
          {"version", "0.1.0"},
          {"uptime_ms", 125000},
          {"ring_version", "5f0c1d2e3a4b5c6d"},
          {"replicas", 2},
          {"slots", 4096},
          {"members", members},
          {"membership",
           {{"epoch", 0},
            {"state", "committed"},
            {"members", three},
            {"slots_to_copy", 0},
            {"slots_copied", 0}}},
          {"refilling", false},
          {"slots_primary", 1365},
          {"slots_replica", 1366},
          {"slots_under_replicated", 0},
          {"slots_without_live_copy", 0},
          {"keys", 150},
          {"entries", 150},
          {"primary_entries", 100},
          {"workers_homed", 1},
          {"replication_lag_sub_batches", 0},
          {"ingest_inflight_ops", 0},
          {"anti_entropy", {{"slots_uncertain", 0}}}};
}

node_report answered(const std::string& id, json status) {
  node_report r;
  r.id = id;
  r.http = status["members"][id[1] - '1']["http"].get<std::string>();
  r.status = std::move(status);
  return r;
}

node_report silent(const std::string& id, std::string error = "Could not establish connection") {
  node_report r;
  r.id = id;
  r.http = "127.0.0.1:90" + std::to_string(id[1] - '1') + "0";
  r.error = std::move(error);
  return r;
}

std::vector<node_report> healthy_three() {
  return {answered("n1", status_of("n1")), answered("n2", status_of("n2")),
          answered("n3", status_of("n3"))};
}

bool has_reason(const cluster_verdict& v, const std::string& text) {
  return std::any_of(v.reasons.begin(), v.reasons.end(),
                     [&](const auto& r) { return r.find(text) != std::string::npos; });
}

std::string joined(const cluster_verdict& v) {
  std::string out;
  for (const auto& r : v.reasons)
    out += r + "\n";
  return out;
}

// -- the verdict ---------------------------------------------------------------------

TEST(StatusVerdict, ThreeNodesThatSeeEachOtherOnOneRingAreHealthy) {
  const auto v = judge(healthy_three());
  EXPECT_TRUE(v.healthy) << joined(v);
  EXPECT_TRUE(v.reasons.empty());
}

TEST(StatusVerdict, ANodeThatDoesNotAnswerAndThatTheOthersSeeDownIsNamedTwice) {
  auto n1 = status_of("n1", {"n1", "n2"});
  auto n2 = status_of("n2", {"n1", "n2"});
  n1["slots_under_replicated"] = n2["slots_under_replicated"] = 2731;
  const auto v = judge({answered("n1", n1), answered("n2", n2), silent("n3")});
  EXPECT_FALSE(v.healthy);
  ASSERT_EQ(v.reasons.size(), 3U) << joined(v);
  EXPECT_EQ(v.reasons[0], "n3 (127.0.0.1:9020) is unreachable: Could not establish connection");
  EXPECT_EQ(v.reasons[1], "n3 is down as n1, n2 see it");
  EXPECT_EQ(v.reasons[2], "2731 of 4096 slots have fewer than 2 live copies as n1, n2 see it");
}

TEST(StatusVerdict, ANodeWhoseAddressNobodyKnowsIsUnreachableWithoutAnAddress) {
  auto r = silent("n3", "");
  r.http.clear();
  const auto v = judge({answered("n1", status_of("n1")), r});
  EXPECT_TRUE(has_reason(v, "n3 is unreachable: no node that answered knows its HTTP address"))
      << joined(v);
}

TEST(StatusVerdict, ANodeOnlyOneSeesDownDegradesTheClusterEvenIfItAnswersTheClient) {
  auto reports = healthy_three();
  reports[0].status = status_of("n1", {"n1", "n2"}); // a one-way cut: n1 lost n3
  const auto v = judge(reports);
  EXPECT_FALSE(v.healthy);
  EXPECT_TRUE(has_reason(v, "n3 is down as n1 sees it")) << joined(v);
}

TEST(StatusVerdict, APeerNotHeardFromSinceStartIsReportedAsSuch) {
  auto reports = healthy_three();
  auto& m = (*reports[1].status)["members"][2];
  m["live"] = false;
  m["presumed"] = true;
  const auto v = judge(reports);
  EXPECT_TRUE(has_reason(v, "n3 has not been heard from by n2 since it started")) << joined(v);
}

TEST(StatusVerdict, SlotsWithoutAnyLiveCopyAreAReasonOfTheirOwn) {
  auto reports = healthy_three();
  (*reports[0].status)["slots_under_replicated"] = 4096;
  (*reports[0].status)["slots_without_live_copy"] = 1300;
  const auto v = judge(reports);
  EXPECT_TRUE(has_reason(v, "4096 of 4096 slots have fewer than 2 live copies as n1 sees it"));
  EXPECT_TRUE(has_reason(v, "1300 of 4096 slots have no live copy")) << joined(v);
}

TEST(StatusVerdict, NodesOnDifferentRingVersionsDisagree) {
  auto reports = healthy_three();
  (*reports[2].status)["ring_version"] = "0000000000000001";
  const auto v = judge(reports);
  ASSERT_EQ(v.reasons.size(), 1U) << joined(v);
  EXPECT_EQ(v.reasons[0], "nodes disagree on the ring version: 0000000000000001 (n3); "
                          "5f0c1d2e3a4b5c6d (n1, n2)");
}

TEST(StatusVerdict, NodesWithDifferentMemberSetsDisagree) {
  auto reports = healthy_three();
  (*reports[1].status)["membership"]["epoch"] = 1;
  (*reports[1].status)["membership"]["members"] = {"n1", "n2", "n3", "n4"};
  const auto v = judge(reports);
  EXPECT_TRUE(has_reason(v, "nodes disagree on the member set: epoch 0 [n1 n2 n3] (n1, n3); "
                            "epoch 1 [n1 n2 n3 n4] (n2)"))
      << joined(v);
}

TEST(StatusVerdict, AMembershipChangeUnderWaySaysHowFarItIs) {
  auto reports = healthy_three();
  for (auto& r : reports) {
    (*r.status)["membership"]["epoch"] = 1;
    (*r.status)["membership"]["state"] = "joint";
  }
  (*reports[2].status)["membership"]["slots_to_copy"] = 1365;
  (*reports[2].status)["membership"]["slots_copied"] = 120;
  const auto v = judge(reports);
  EXPECT_TRUE(has_reason(v, "n3: membership change to epoch 1 in progress (joint), 120/1365 "
                            "slots copied"))
      << joined(v);
  EXPECT_TRUE(has_reason(v, "n1: membership change to epoch 1 in progress (joint), 0/0"));
}

TEST(StatusVerdict, ACommittedChangeWhoseCopiesAreNotDoneIsStillInProgress) {
  auto reports = healthy_three();
  (*reports[0].status)["membership"]["slots_to_copy"] = 10;
  (*reports[0].status)["membership"]["slots_copied"] = 9;
  const auto v = judge(reports);
  EXPECT_TRUE(has_reason(v, "in progress (committed, copying), 9/10 slots copied")) << joined(v);
}

TEST(StatusVerdict, ARefillingNodeAndUncertainCopiesDegradeTheCluster) {
  auto reports = healthy_three();
  (*reports[1].status)["refilling"] = true;
  (*reports[2].status)["anti_entropy"]["slots_uncertain"] = 12;
  const auto v = judge(reports);
  EXPECT_TRUE(has_reason(v, "n2 is refilling")) << joined(v);
  EXPECT_TRUE(has_reason(v, "n3 is uncertain of 12 slot copies")) << joined(v);
}

TEST(StatusVerdict, AStandbyNodeThatDoesNotAnswerLeavesTheClusterHealthy) {
  auto reports = healthy_three();
  auto standby = silent("n4");
  standby.member = false;
  reports.push_back(standby);
  EXPECT_TRUE(judge(reports).healthy);
}

TEST(StatusVerdict, WithNoAnswerAtAllTheClusterIsNotHealthy) {
  const auto v = judge({silent("n1"), silent("n2")});
  EXPECT_FALSE(v.healthy);
  EXPECT_EQ(v.reasons, std::vector<std::string>{"no node answered"});
}

// -- reports from the first answer -------------------------------------------------

TEST(StatusReports, TheNodeThatAnsweredIsAskedWhereTheClientReachedIt) {
  const auto reports = member_reports(status_of("n2"), "lmcc-0.example:9000");
  ASSERT_EQ(reports.size(), 3U);
  EXPECT_EQ(reports[0].http, "127.0.0.1:9000");
  EXPECT_FALSE(reports[0].status);
  EXPECT_EQ(reports[1].http, "lmcc-0.example:9000");
  EXPECT_TRUE(reports[1].status);
}

TEST(StatusReports, AnAddressOneNodeForgotIsTakenFromAnotherThatKnowsIt) {
  auto seed = status_of("n1");
  seed["members"][2]["http"] = ""; // n1 lost n3 and forgot its address
  auto reports = member_reports(seed, "127.0.0.1:9000");
  reports[1].status = status_of("n2");
  fill_addresses(reports);
  EXPECT_EQ(reports[2].http, "127.0.0.1:9020");
}

// -- what people and scripts read ------------------------------------------------------

TEST(StatusTable, AHealthyClusterIsOneRowPerNodeAndOneLineOfVerdict) {
  auto reports = healthy_three();
  std::ostringstream out;
  render_status_table(reports, judge(reports), out);
  EXPECT_EQ(out.str(),
            "NODE  HTTP            LIVE  RING      PRIMARY  REPLICA  LAG  IN-FLIGHT  KEYS  WORKERS"
            "  VERSION  UPTIME\n"
            "n1    127.0.0.1:9000  3/3   5f0c1d2e     1365     1366    0          0   150        1"
            "  0.1.0     2m05s\n"
            "n2    127.0.0.1:9010  3/3   5f0c1d2e     1365     1366    0          0   150        1"
            "  0.1.0     2m05s\n"
            "n3    127.0.0.1:9020  3/3   5f0c1d2e     1365     1366    0          0   150        1"
            "  0.1.0     2m05s\n"
            "\n"
            "cluster healthy: 3/3 members live, ring 5f0c1d2e3a4b5c6d, 4096 slots with 2 live "
            "copies each, 300 entries\n");
}

TEST(StatusTable, AnUnreachableNodeIsARowOfDashesAndTheReasonsFollow) {
  auto n1 = status_of("n1", {"n1", "n2"});
  std::vector<node_report> reports{answered("n1", n1), silent("n3")};
  std::ostringstream out;
  render_status_table(reports, judge(reports), out);
  const auto text = out.str();
  EXPECT_NE(text.find("n1    127.0.0.1:9000  2/3 (n3 down)"), std::string::npos) << text;
  EXPECT_NE(text.find("n3    127.0.0.1:9020  unreachable    -"), std::string::npos) << text;
  EXPECT_NE(text.find("cluster degraded:\n  - n3 (127.0.0.1:9020) is unreachable"),
            std::string::npos)
      << text;
}

TEST(StatusJson, CarriesTheVerdictTheFiguresAndEachNodesOwnStatus) {
  auto reports = healthy_three();
  reports.push_back(silent("n4"));
  reports.back().member = false;
  const auto j = status_json(reports, judge(reports));
  EXPECT_EQ(j["verdict"], "healthy");
  EXPECT_EQ(j["entries"], 300);
  ASSERT_EQ(j["nodes"].size(), 4U);
  EXPECT_EQ(j["nodes"][0]["live"], "3/3");
  EXPECT_EQ(j["nodes"][0]["keys"], 150);
  EXPECT_EQ(j["nodes"][0]["status"]["node"], "n1");
  EXPECT_EQ(j["nodes"][3]["reachable"], false);
  EXPECT_EQ(j["nodes"][3]["error"], "Could not establish connection");
}

TEST(StatusJson, TheClusterEntryCountIsUnknownWhileAMemberIsSilent) {
  std::vector<node_report> reports{answered("n1", status_of("n1")), silent("n2")};
  const auto j = status_json(reports, judge(reports));
  EXPECT_EQ(j["verdict"], "degraded");
  EXPECT_TRUE(j["entries"].is_null());
}

TEST(LiveSummary, NamesTheMembersSeenDownAndIgnoresStandbyNodes) {
  auto s = status_of("n1", {"n1"});
  s["members"].push_back({{"id", "n4"}, {"live", false}, {"member", false}});
  EXPECT_EQ(live_summary(s), "1/3 (n2,n3 down)");
  EXPECT_EQ(live_summary(status_of("n1")), "3/3");
}

TEST(TextTable, PadsEachColumnToItsWidestCellAndRightAlignsNumbers) {
  text_table t{{{"NAME"}, {"N", align::right}, {"NOTE"}}};
  t.add_row({"a", "1234", ""});
  t.add_row({"longer", "5"}); // a missing cell is blank
  EXPECT_EQ(t.str(), "NAME       N  NOTE\n"
                     "a       1234\n"
                     "longer     5\n");
  EXPECT_EQ(t.rows(), 2U);
}

TEST(TextTable, CountsCodePointsNotBytes) {
  text_table t{{{"A"}, {"B"}}};
  t.add_row({"é", "x"});
  EXPECT_EQ(t.str(), "A  B\né  x\n");
  EXPECT_EQ(display_width("héllo"), 5U);
}

TEST(FormatDuration, ShowsTwoUnitsAtMost) {
  EXPECT_EQ(format_duration(9'000), "9s");
  EXPECT_EQ(format_duration(125'000), "2m05s");
  EXPECT_EQ(format_duration(3'725'000), "1h02m");
  EXPECT_EQ(format_duration(90'061'000), "1d01h");
  EXPECT_EQ(format_duration(-5), "0s");
}

TEST(WorkersTable, ShowsEachWorkerWithItsHomeAndFullSyncAndSumsTheKeys) {
  const json body = {{"node", "n1"},
                     {"workers",
                      {{{"instance_id", "vllm-0"},
                        {"worker_id", 0},
                        {"ip", "10.0.0.7"},
                        {"port", 54321},
                        {"last_heartbeat_time", 1000.0},
                        {"key_count", 1200},
                        {"locations", 1},
                        {"home", "n2"},
                        {"full_sync", "none"},
                        {"full_sync_reason", ""}},
                       {{"instance_id", "vllm-0"},
                        {"worker_id", 1},
                        {"ip", "10.0.0.8"},
                        {"port", 54322},
                        {"last_heartbeat_time", 0.0},
                        {"key_count", 30},
                        {"locations", 2},
                        {"home", "n3"},
                        {"full_sync", "owed"},
                        {"full_sync_reason", "controller_restart"}}}},
                     {"full_sync", {{"syncing", 0}, {"completed", 1}, {"missing_batches", 0}}}};
  std::ostringstream out;
  render_workers_table(body, 1004.2, out);
  EXPECT_EQ(out.str(),
            "INSTANCE  WORKER  ADDRESS         LOCATIONS  KEYS  LAST HEARTBEAT  HOME  FULL SYNC\n"
            "vllm-0         0  10.0.0.7:54321          1  1200  4s ago          n2    none\n"
            "vllm-0         1  10.0.0.8:54322          2    30  never           n3    owed "
            "(controller_restart)\n"
            "\n"
            "2 workers in 1 instance, 1230 keys; full syncs: 0 running, 1 completed, 0 "
            "batches missing\n");
}

json listed_worker(const char* instance, int worker_id, const char* home, const char* full_sync,
                   const char* reason = "") {
  return {{"instance_id", instance},
          {"worker_id", worker_id},
          {"ip", "10.0.0.7"},
          {"port", 1},
          {"key_count", 0},
          {"locations", 1},
          {"home", home},
          {"full_sync", full_sync},
          {"full_sync_reason", reason}};
}

TEST(WorkersTable, EachWorkersFullSyncIsWhatItsHomeSays) {
  json body = {{"node", "n1"},
               {"workers",
                {listed_worker("a", 0, "n2", "none"), listed_worker("a", 1, "n3", "none"),
                 listed_worker("b", 0, "n1", "owed", "controller_restart")}}};
  const json n2 = {{"node", "n2"},
                   {"workers",
                    {listed_worker("a", 1, "n3", "none"),
                     listed_worker("a", 0, "n2", "owed", "controller_restart")}}};
  take_full_sync_from_homes(body, {{"n2", n2}}); // n3 did not answer
  const auto& w = body["workers"];
  EXPECT_EQ(w[0]["full_sync"], "owed");
  EXPECT_EQ(w[0]["full_sync_reason"], "controller_restart");
  EXPECT_EQ(w[0]["full_sync_seen_by"], "n2");
  EXPECT_EQ(w[1]["full_sync"], "none");
  EXPECT_EQ(w[1]["full_sync_seen_by"], "n1");
  EXPECT_EQ(w[2]["full_sync"], "owed");
  EXPECT_EQ(w[2]["full_sync_seen_by"], "n1");
  std::ostringstream out;
  render_workers_table(body, 0, out);
  EXPECT_NE(out.str().find("\nthe full-sync states of the workers homed on n3 are n1's view "
                           "(n3 did not answer)\n"),
            std::string::npos)
      << out.str();
}

TEST(FormatAgo, AClockAheadOfTheClientReadsAsJustNow) {
  EXPECT_EQ(format_ago(100.0, 99.0), "0s ago");
  EXPECT_EQ(format_ago(0.0, 99.0), "never");
}

// -- the endpoints flag ---------------------------------------------------------------------

TEST(Endpoints, ACommaListIsTrimmedAndLosesSchemesAndSlashes) {
  auto e = parse_endpoints(" 10.0.0.1:9000, http://lmcc-1.lmcc:9000/ ,,[::1]:9010");
  ASSERT_TRUE(e) << e.error().message;
  EXPECT_EQ(*e, (std::vector<std::string>{"10.0.0.1:9000", "lmcc-1.lmcc:9000", "[::1]:9010"}));
}

TEST(Endpoints, AnEntryWithoutAGoodPortIsRefusedByName) {
  auto bad = [](const char* text) {
    auto e = parse_endpoints(text);
    return e ? std::string{"accepted"} : e.error().message;
  };
  EXPECT_EQ(bad("10.0.0.1"), "'10.0.0.1' is not HOST:PORT");
  EXPECT_EQ(bad("h:9000,h:0"), "'h:0' is not HOST:PORT");
  EXPECT_EQ(bad("h:70000"), "'h:70000' is not HOST:PORT");
  EXPECT_EQ(bad(":9000"), "':9000' is not HOST:PORT");
  EXPECT_EQ(bad(" , "), "no endpoint given (HOST:PORT[,HOST:PORT...])");
}

TEST(Endpoints, NothingListeningIsNoAnswerAndIsNamedInTheFailures) {
  // Port 1 on loopback: nothing listens there in a test environment.
  auto first =
      fetch_first({"127.0.0.1:1"}, "/cluster/status", request_settings{std::chrono::seconds(2)});
  EXPECT_FALSE(first.answer);
  ASSERT_EQ(first.failures.size(), 1U);
  EXPECT_FALSE(first.failures[0].answered());
  EXPECT_NE(describe_failures(first.failures).find("127.0.0.1:1 ("), std::string::npos);
}

} // namespace
} // namespace lmcc::apps::client
