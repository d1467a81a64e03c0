// The orchestration endpoints other than /lookup over real HTTP against a fake
// controller: each one's fields, event_id prefix and reply shape, and the error
// paths shared by all (ErrorMsg -> 500, wrong reply type, 504, 503 on stop).
#include "tests/gateway/http_api_fixture.hpp"

#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <future>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace lmcc::gateway {
namespace {

using namespace std::chrono_literals;
using namespace http_test;
using json = nlohmann::json;
using msg::Msg;
using msg::wire_int;

// -- /query_instance ---------------------------------------------------------------

TEST_F(http_api_test, query_instance_answers_the_instance_of_an_ip) {
  auto j = expect_json(post("/query_instance", R"({"event_id": "x", "ip": "10.0.0.1"})"), 200);
  auto m = last<msg::QueryInstMsg>();
  EXPECT_TRUE(has_prefix_and_uuid(m.event_id, "QueryInst")) << m.event_id;
  EXPECT_EQ(m.ip, "10.0.0.1");
  EXPECT_EQ(j, (json{{"event_id", m.event_id}, {"res", "A"}}));
}

TEST_F(http_api_test, query_instance_of_an_unknown_ip_is_404_with_detail) {
  auto detail =
      expect_error(post("/query_instance", R"({"event_id": "x", "ip": "10.9.9.9"})"), 404);
  EXPECT_EQ(detail, "no instance registered for ip 10.9.9.9");
}

TEST_F(http_api_test, query_instance_validates_its_fields_with_422) {
  EXPECT_EQ(expect_error(post("/query_instance", R"({"event_id": "x"})"), 422),
            "field 'ip' is required");
  EXPECT_EQ(expect_error(post("/query_instance", R"({"ip": "10.0.0.1"})"), 422),
            "field 'event_id' is required");
  EXPECT_EQ(expect_error(post("/query_instance", R"({"event_id": "x", "ip": 10})"), 422),
            "field 'ip' must be a string");
  expect_error(post("/query_instance", "{not json"), 400);
  expect_error(post("/query_instance", "[]"), 422);
  EXPECT_TRUE(controller_.requests().empty());
}

// -- admin commands ------------------------------------------------------------------

TEST_F(http_api_test, clear_answers_num_tokens) {
  auto j =
      expect_json(post("/clear", R"({"instance_id": "A", "location": "LocalCPUBackend"})"), 200);
  auto m = last<msg::ClearMsg>();
  EXPECT_TRUE(has_prefix_and_uuid(m.event_id, "Clear")) << m.event_id;
  EXPECT_EQ(m.instance_id, "A");
  EXPECT_EQ(m.location, "LocalCPUBackend");
  EXPECT_EQ(j, (json{{"event_id", m.event_id}, {"num_tokens", 7}}));
  EXPECT_EQ(expect_error(post("/clear", R"({"instance_id": "A"})"), 422),
            "field 'location' is required");
}

TEST_F(http_api_test, pin_passes_tokens_and_answers_num_tokens) {
  auto j = expect_json(
      post("/pin",
           R"({"instance_id": "A", "location": "L", "tokens": [5, -6, 18446744073709551615]})"),
      200);
  auto m = last<msg::PinMsg>();
  EXPECT_TRUE(has_prefix_and_uuid(m.event_id, "Pin")) << m.event_id;
  EXPECT_EQ(m.tokens, (std::vector<wire_int>{5, -6, wire_int::from_unsigned(u64_max)}));
  EXPECT_EQ(j, (json{{"event_id", m.event_id}, {"num_tokens", 8}}));
  EXPECT_EQ(expect_error(post("/pin", R"({"instance_id": "A", "location": "L"})"), 422),
            "field 'tokens' is required");
  EXPECT_EQ(
      expect_error(post("/pin", R"({"instance_id": "A", "location": "L", "tokens": [1.5]})"), 422),
      "field 'tokens' item 0 must be an integer in [-2^63, 2^64-1]");
}

TEST_F(http_api_test, compress_and_decompress_default_tokens_to_empty_and_allow_null) {
  auto j = expect_json(post("/compress", R"({"instance_id": "A", "method": "cachegen",
                                              "location": "L"})"),
                       200);
  auto c = last<msg::CompressMsg>();
  EXPECT_TRUE(has_prefix_and_uuid(c.event_id, "Compress")) << c.event_id;
  EXPECT_EQ(c.method, "cachegen");
  EXPECT_EQ(c.tokens, std::optional<std::vector<wire_int>>(std::vector<wire_int>{}));
  EXPECT_EQ(j, (json{{"event_id", c.event_id}, {"num_tokens", 9}}));

  expect_json(post("/compress", R"({"instance_id": "A", "method": "m", "location": "L",
                                     "tokens": null})"),
              200);
  EXPECT_EQ(last<msg::CompressMsg>().tokens, std::nullopt);

  j = expect_json(post("/decompress", R"({"instance_id": "A", "method": "m", "location": "L",
                                          "tokens": [3]})"),
                  200);
  auto d = last<msg::DecompressMsg>();
  EXPECT_TRUE(has_prefix_and_uuid(d.event_id, "Decompress")) << d.event_id;
  EXPECT_EQ(d.tokens, std::optional<std::vector<wire_int>>(std::vector<wire_int>{3}));
  EXPECT_EQ(j, (json{{"event_id", d.event_id}, {"num_tokens", 10}}));
  EXPECT_EQ(expect_error(post("/decompress", R"({"instance_id": "A", "location": "L"})"), 422),
            "field 'method' is required");
}

TEST_F(http_api_test, move_maps_positions_and_should_copy) {
  auto j = expect_json(post("/move", R"({"old_position": ["A", "LocalCPUBackend"],
                                          "new_position": ["B", "LocalDiskBackend"],
                                          "tokens": [1, 2], "should_copy": true})"),
                       200);
  auto m = last<msg::MoveMsg>();
  EXPECT_TRUE(has_prefix_and_uuid(m.event_id, "Move")) << m.event_id;
  EXPECT_EQ(m.old_position, (std::pair<std::string, std::string>{"A", "LocalCPUBackend"}));
  EXPECT_EQ(m.new_position, (std::pair<std::string, std::string>{"B", "LocalDiskBackend"}));
  EXPECT_EQ(m.tokens, std::optional<std::vector<wire_int>>(std::vector<wire_int>{1, 2}));
  EXPECT_EQ(m.copy, std::optional<bool>(true));
  EXPECT_EQ(j, (json{{"event_id", m.event_id}, {"num_tokens", 11}}));

  expect_json(post("/move", R"({"old_position": ["A", "L"], "new_position": ["B", "L"]})"), 200);
  m = last<msg::MoveMsg>();
  EXPECT_EQ(m.tokens, std::optional<std::vector<wire_int>>(std::vector<wire_int>{}));
  EXPECT_EQ(m.copy, std::optional<bool>(false));

  EXPECT_NE(
      expect_error(post("/move", R"({"old_position": ["A"], "new_position": ["B", "L"]})"), 422)
          .find("'old_position'"),
      std::string::npos);
  EXPECT_NE(
      expect_error(post("/move", R"({"old_position": ["A", "L"], "new_position": ["B", 1]})"), 422)
          .find("'new_position'"),
      std::string::npos);
  EXPECT_EQ(expect_error(post("/move", R"({"old_position": ["A", "L"], "new_position": ["B", "L"],
                                          "should_copy": "yes"})"),
                         422),
            "field 'should_copy' must be a boolean");
}

TEST_F(http_api_test, health_uses_a_lower_case_prefix_and_string_worker_keys) {
  auto j = expect_json(post("/health", R"({"instance_id": "A"})"), 200);
  auto m = last<msg::HealthMsg>();
  EXPECT_TRUE(has_prefix_and_uuid(m.event_id, "health")) << m.event_id;
  EXPECT_EQ(m.instance_id, "A");
  EXPECT_EQ(j, (json{{"event_id", m.event_id}, {"error_codes", {{"0", 0}, {"1", -1001}}}}));
}

TEST_F(http_api_test, check_finish_forwards_the_given_event_id) {
  auto j = expect_json(post("/check_finish", R"({"event_id": "Move1234"})"), 200);
  EXPECT_EQ(last<msg::CheckFinishMsg>().event_id, "Move1234");
  EXPECT_EQ(j, (json{{"status", "finished"}}));
  EXPECT_EQ(expect_error(post("/check_finish", "{}"), 422), "field 'event_id' is required");
}

TEST_F(http_api_test, query_worker_info_answers_worker_infos) {
  auto j =
      expect_json(post("/query_worker_info", R"({"instance_id": "all", "worker_ids": [0]})"), 200);
  auto m = last<msg::QueryWorkerInfoMsg>();
  EXPECT_TRUE(has_prefix_and_uuid(m.event_id, "QueryWorkerInfo")) << m.event_id;
  EXPECT_EQ(m.instance_id, "all");
  EXPECT_EQ(m.worker_ids, std::optional<std::vector<wire_int>>(std::vector<wire_int>{0}));
  EXPECT_EQ(j["event_id"], m.event_id);
  EXPECT_EQ(j["worker_infos"], json::parse(R"([{"instance_id": "A", "worker_id": 0,
      "ip": "10.0.0.1", "port": 8500, "peer_init_url": null,
      "registration_time": 1700000000.5, "last_heartbeat_time": 1700000010.25}])"));

  expect_json(post("/query_worker_info", R"({"instance_id": "A"})"), 200);
  EXPECT_EQ(last<msg::QueryWorkerInfoMsg>().worker_ids, std::nullopt);
  expect_json(post("/query_worker_info", R"({"instance_id": "A", "worker_ids": null})"), 200);
  EXPECT_EQ(last<msg::QueryWorkerInfoMsg>().worker_ids, std::nullopt);
  expect_error(post("/query_worker_info", R"({"instance_id": "A", "worker_ids": "0"})"), 422);
}

// -- error paths -------------------------------------------------------------------------

TEST_F(http_api_test, an_error_msg_from_the_controller_becomes_500_with_its_text) {
  controller_.set_reply([](const Msg&) { return Msg{msg::ErrorMsg{.error = "no such worker"}}; });
  for (auto [path, body] : std::vector<std::pair<std::string, std::string>>{
           {"/lookup", R"({"tokens": [1]})"},
           {"/query_instance", R"({"event_id": "x", "ip": "1.2.3.4"})"},
           {"/clear", R"({"instance_id": "A", "location": "L"})"},
           {"/pin", R"({"instance_id": "A", "location": "L", "tokens": []})"},
           {"/compress", R"({"instance_id": "A", "method": "m", "location": "L"})"},
           {"/decompress", R"({"instance_id": "A", "method": "m", "location": "L"})"},
           {"/move", R"({"old_position": ["A", "L"], "new_position": ["B", "L"]})"},
           {"/health", R"({"instance_id": "A"})"},
           {"/check_finish", R"({"event_id": "e"})"},
           {"/query_worker_info", R"({"instance_id": "all"})"}}) {
    SCOPED_TRACE(path);
    EXPECT_EQ(expect_error(post(path, body), 500), "no such worker");
  }
}

TEST_F(http_api_test, a_reply_of_the_wrong_type_becomes_500) {
  controller_.set_reply([](const Msg&) { return Msg{msg::ClearRetMsg{.event_id = "e"}}; });
  auto detail = expect_error(post("/health", R"({"instance_id": "A"})"), 500);
  EXPECT_EQ(detail, "controller answered ClearRetMsg to HealthMsg");
}

TEST_F(http_api_test, a_throwing_controller_becomes_500) {
  controller_.set_reply([](const Msg&) -> Msg { throw std::runtime_error("boom"); });
  // The fake throws inside orchestrate(), before any future exists.
  EXPECT_EQ(expect_error(post("/clear", R"({"instance_id": "A", "location": "L"})"), 500), "boom");
}

TEST_F(http_api_test, a_controller_that_never_answers_gets_504) {
  start_with(http_options{.handler_timeout = 200ms});
  controller_.set_hang(true);
  auto t0 = std::chrono::steady_clock::now();
  auto detail = expect_error(post("/clear", R"({"instance_id": "A", "location": "L"})"), 504);
  EXPECT_EQ(detail, "controller did not answer within 200 ms");
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 200ms);
}

TEST_F(http_api_test, stop_releases_waiting_handlers_promptly) {
  controller_.set_hang(true); // handler_timeout is 10 s here
  auto pending = std::async(std::launch::async, [this] {
    return post("/clear", R"({"instance_id": "A", "location": "L"})");
  });
  while (controller_.requests().empty())
    std::this_thread::sleep_for(5ms);
  auto t0 = std::chrono::steady_clock::now();
  api_->stop();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);
  expect_error(pending.get(), 503);
}

} // namespace
} // namespace lmcc::gateway
