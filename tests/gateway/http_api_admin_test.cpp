// The admin and observability endpoints of http_api over real HTTP (GET
// /controller/workers, /controller/key-stats, /cluster/workers, /metrics, /healthz, /readyz,
// /threads, /env, POST /admin/snapshot, 404/405), the request timing in
// node_metrics, binding, and make_uuid4.
#include "tests/gateway/http_api_fixture.hpp"

#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <regex>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace lmcc::gateway {
namespace {

using namespace std::chrono_literals;
using namespace http_test;
using json = nlohmann::json;
using msg::Msg;
using msg::wire_int;

// -- GET endpoints ---------------------------------------------------------------------------

TEST_F(http_api_test, controller_workers_lists_filters_and_404s) {
  auto all = expect_json(get("/controller/workers"), 200);
  EXPECT_EQ(all["total_count"], 3);
  ASSERT_EQ(all["workers"].size(), 3u);
  EXPECT_EQ(all["workers"][2]["instance_id"], "B");
  EXPECT_EQ(all["workers"][2]["key_count"], 20);

  auto a = expect_json(get("/controller/workers?instance_id=A"), 200);
  EXPECT_EQ(a["total_count"], 2);
  EXPECT_EQ(a["workers"][1]["worker_id"], 1);

  auto one = expect_json(get("/controller/workers?instance_id=A&worker_id=1"), 200);
  EXPECT_EQ(one, json::parse(R"({"instance_id": "A", "worker_id": 1, "ip": "10.0.0.1",
      "port": 8501, "peer_init_url": null, "registration_time": 1700000000.5,
      "last_heartbeat_time": 1700000010.25, "key_count": 11})"));

  expect_error(get("/controller/workers?instance_id=Z"), 404);
  expect_error(get("/controller/workers?instance_id=A&worker_id=7"), 404);
  expect_error(get("/controller/workers?instance_id=A&worker_id=x"), 422);
}

TEST_F(http_api_test, cluster_workers_adds_home_locations_and_full_sync_to_each_worker) {
  auto j = expect_json(get("/cluster/workers"), 200);
  EXPECT_EQ(j, json::parse(R"({"node": "n1", "total_count": 2,
      "full_sync": {"syncing": 0, "completed": 1, "missing_batches": 0},
      "workers": [
        {"instance_id": "A", "worker_id": 0, "ip": "10.0.0.1", "port": 8500,
         "peer_init_url": null, "registration_time": 1700000000.5,
         "last_heartbeat_time": 1700000010.25, "key_count": 10, "locations": 1,
         "home": "n2", "full_sync": "none", "full_sync_reason": ""},
        {"instance_id": "B", "worker_id": 0, "ip": "10.0.0.2", "port": 8500,
         "peer_init_url": null, "registration_time": 1700000000.5,
         "last_heartbeat_time": 1700000010.25, "key_count": 20, "locations": 2,
         "home": "n3", "full_sync": "owed", "full_sync_reason": "controller_restart"}]})"));
  controller_.set_details_status(503);
  EXPECT_EQ(expect_error(get("/cluster/workers"), 503), "the node is loading");
}

TEST_F(http_api_test, key_stats_has_lmcache_shape) {
  auto j = expect_json(get("/controller/key-stats"), 200);
  EXPECT_EQ(j, json::parse(R"({"total_key_count": 41, "total_instance_count": 2,
      "total_worker_count": 3, "instances": [
        {"instance_id": "A", "key_count": 21, "worker_count": 2},
        {"instance_id": "B", "key_count": 20, "worker_count": 1}]})"));
}

TEST_F(http_api_test, metrics_shows_each_lmcache_gauge_once_with_role_controller) {
  frontend_.pull_frames = 17;
  auto r = get("/metrics");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->get_header_value("Content-Type"), "text/plain; version=0.0.4; charset=utf-8");
  const char* names[] = {"kv_pool_keys_count",
                         "registered_workers_count",
                         "pull_socket_message_count",
                         "reply_socket_message_count",
                         "pull_socket_has_pending",
                         "reply_socket_has_pending",
                         "pull_socket_active_requests",
                         "reply_socket_active_requests",
                         "kv_op_seq_discontinuity_count",
                         "full_sync_workers_syncing",
                         "full_sync_workers_completed",
                         "full_sync_global_progress",
                         "full_sync_missing_batches_total"};
  for (const char* n : names) {
    std::string series = std::string("\nlmcache:cache_controller_") + n + "{role=\"controller\"} ";
    auto first = r->body.find(series);
    EXPECT_NE(first, std::string::npos) << n;
    EXPECT_EQ(r->body.find(series, first + 1), std::string::npos) << n;
  }
  EXPECT_NE(
      r->body.find("lmcache:cache_controller_kv_pool_keys_count{role=\"controller\"} 1234.0\n"),
      std::string::npos);
  EXPECT_NE(r->body.find(
                "lmcache:cache_controller_pull_socket_message_count{role=\"controller\"} 17.0\n"),
            std::string::npos);
}

TEST_F(http_api_test, healthz_and_readyz) {
  EXPECT_EQ(expect_json(get("/healthz"), 200), (json{{"status", "ok"}}));
  EXPECT_EQ(expect_json(get("/readyz"), 200), (json{{"status", "ready"}}));
  controller_.ready_ = false;
  EXPECT_EQ(expect_json(get("/readyz"), 503), (json{{"status", "loading"}}));
}

TEST_F(http_api_test, threads_lists_this_process_threads) {
  auto j = expect_json(get("/threads"), 200);
  ASSERT_TRUE(j.is_array());
  ASSERT_GE(j.size(), 3u); // main, listener, workers
  std::set<std::string> names;
  for (const auto& t : j) {
    EXPECT_TRUE(t["thread_id"].is_number_integer());
    EXPECT_TRUE(t["state"].is_string());
    EXPECT_EQ(t["function_name"], "");
    EXPECT_EQ(t["cpu_time"], 0);
    EXPECT_EQ(t["memory_usage"], 0);
    names.insert(t["name"].get<std::string>());
  }
  EXPECT_TRUE(names.contains("lmcc-http")) << json(names).dump();
  auto filtered = expect_json(get("/threads?name=lmcc-http-w"), 200);
  ASSERT_GE(filtered.size(), 1u);
  for (const auto& t : filtered)
    EXPECT_EQ(t["name"], "lmcc-http-w");
  auto id = j[0]["thread_id"].get<int64_t>();
  auto by_id = expect_json(get("/threads?thread_id=" + std::to_string(id)), 200);
  ASSERT_EQ(by_id.size(), 1u);
  EXPECT_EQ(by_id[0]["thread_id"], id);
}

TEST_F(http_api_test, env_shows_only_lmcache_and_lmcc_variables) {
  ::setenv("LMCACHE_TEST_VALUE", "1", 1);
  ::setenv("LMCC_TEST_VALUE", "2", 1);
  ::setenv("SECRET_TEST_TOKEN", "hunter2", 1);
  auto j = expect_json(get("/env"), 200);
  EXPECT_EQ(j["LMCACHE_TEST_VALUE"], "1");
  EXPECT_EQ(j["LMCC_TEST_VALUE"], "2");
  for (const auto& [name, value] : j.items())
    EXPECT_TRUE(name.starts_with("LMCACHE_") || name.starts_with("LMCC_")) << name;
  ::unsetenv("SECRET_TEST_TOKEN");
}

TEST_F(http_api_test, admin_snapshot_passes_the_dir_and_reports_the_checkpoint) {
  snapshot_outcome ok;
  ok.slots = 7;
  ok.log_records = 3;
  ok.workers = 2;
  ok.files = 5;
  ok.bytes = 4096;
  controller_.set_snapshot_reply(ok);
  auto j = expect_json(post("/admin/snapshot", R"({"dir": "/tmp/snap-1"})"), 200);
  EXPECT_EQ(j["dir"], "/tmp/snap-1");
  EXPECT_EQ(j["slots"], 7);
  EXPECT_EQ(j["log_records"], 3);
  EXPECT_EQ(j["workers"], 2);
  EXPECT_EQ(j["files"], 5);
  EXPECT_EQ(j["bytes"], 4096);
  EXPECT_EQ(controller_.snapshot_dirs(), std::vector<std::string>{"/tmp/snap-1"});

  // No dir, an empty one, or a refusal by the node: errors with the reason.
  expect_json(post("/admin/snapshot", R"({})"), 422);
  expect_json(post("/admin/snapshot", R"({"dir": ""})"), 422);
  snapshot_outcome refused;
  refused.status = 409;
  refused.error = "persistence is off on this node";
  controller_.set_snapshot_reply(refused);
  EXPECT_EQ(expect_json(post("/admin/snapshot", R"({"dir": "/tmp/snap-2"})"), 409)["detail"],
            "persistence is off on this node");
  EXPECT_EQ(controller_.snapshot_dirs().size(), 2U);
}

TEST_F(http_api_test, root_unknown_paths_and_wrong_methods) {
  auto root = get("/");
  ASSERT_TRUE(root);
  EXPECT_EQ(root->status, 404);
  EXPECT_NE(root->body.find("Controller Frontend not found"), std::string::npos);
  EXPECT_NE(root->get_header_value("Content-Type").find("text/html"), std::string::npos);

  EXPECT_EQ(expect_error(get("/no/such/path"), 404), "Not Found");
  EXPECT_EQ(expect_error(post("/run_script", "{}"), 404), "Not Found");
  EXPECT_EQ(expect_error(get("/lookup"), 405), "Method Not Allowed");
}

TEST_F(http_api_test, dashboard_is_one_self_contained_page) {
  auto page = get("/dashboard");
  ASSERT_TRUE(page);
  EXPECT_EQ(page->status, 200);
  EXPECT_NE(page->get_header_value("Content-Type").find("text/html"), std::string::npos);
  // Everything inline: it polls this node only and loads nothing from elsewhere.
  EXPECT_NE(page->body.find("<script>"), std::string::npos);
  EXPECT_NE(page->body.find("/cluster/status"), std::string::npos);
  EXPECT_EQ(page->body.find("http://"), std::string::npos);
  EXPECT_EQ(page->body.find("https://"), std::string::npos);
  EXPECT_EQ(page->body.find(" src="), std::string::npos);
  EXPECT_NE(page->get_header_value("Content-Security-Policy").find("connect-src 'self'"),
            std::string::npos);
  EXPECT_EQ(expect_error(post("/dashboard", "{}"), 405), "Method Not Allowed");
}

TEST_F(http_api_test, browsers_get_gzip_rather_than_brotli) {
  // A browser's Accept-Encoding: brotli at httplib's quality 11 would cost the
  // node ~7 ms of CPU per /metrics; gzip is what it gets.
  httplib::Client browser("127.0.0.1", api_->port());
  auto res = browser.Get("/metrics", {{"Accept-Encoding", "gzip, deflate, br, zstd"}});
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(res->get_header_value("Content-Encoding"), "gzip");
  auto br_only = browser.Get("/metrics", {{"Accept-Encoding", "br"}});
  ASSERT_TRUE(br_only);
  EXPECT_EQ(br_only->get_header_value("Content-Encoding"), "");
}

// -- metrics and lifecycle -----------------------------------------------------------------------

TEST_F(http_api_test, every_request_is_timed_in_node_metrics) {
  expect_json(post("/lookup", R"({"tokens": [1]})"), 200);
  expect_json(post("/lookup", R"({"tokens": [2]})"), 200);
  expect_error(post("/lookup", "{bad"), 400);
  expect_error(get("/nothing-here"), 404);
  // The logger runs just after the response is written; give it a moment.
  for (int i = 0; i < 200 && (metrics_.request_count("http /lookup") < 3 ||
                              metrics_.request_count("http other") < 1);
       ++i)
    std::this_thread::sleep_for(5ms);
  EXPECT_EQ(metrics_.request_count("http /lookup"), 3u);
  EXPECT_EQ(metrics_.request_count("http other"), 1u);
  EXPECT_EQ(metrics_.request_count("http /nothing-here"), 0u);
}

TEST_F(http_api_test, start_throws_when_the_port_is_taken) {
  http_options taken{.host = "127.0.0.1", .port = api_->port()};
  http_api second{taken, controller_, metrics_, frontend_};
  try {
    second.start();
    FAIL() << "bound a port already in use";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), "cannot bind http 127.0.0.1:" + std::to_string(api_->port()));
  }
}

TEST(make_uuid4, has_the_version_4_text_form_and_differs_each_time) {
  std::set<std::string> seen;
  for (int i = 0; i < 1000; ++i) {
    auto id = make_uuid4();
    ASSERT_TRUE(std::regex_match(id, uuid_re)) << id;
    seen.insert(id);
  }
  EXPECT_EQ(seen.size(), 1000u);
}

} // namespace
} // namespace lmcc::gateway
