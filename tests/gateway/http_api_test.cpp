// http_api against a fake controller_api over real HTTP on loopback: every
// endpoint's JSON shape and status, the event_id prefixes, the error paths
// (400/404/413/422/500/504) and the request timing in node_metrics.
#include "gateway/http_api.hpp"

#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdlib>
#include <functional>
#include <future>
#include <limits>
#include <mutex>
#include <random>
#include <regex>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace lmcc::gateway {
namespace {

using namespace std::chrono_literals;
using json = nlohmann::json;
using msg::Msg;
using msg::wire_int;

constexpr uint64_t u64_max = std::numeric_limits<uint64_t>::max();
constexpr int64_t i64_min = std::numeric_limits<int64_t>::min();

msg::WorkerInfo worker(std::string instance, int64_t id, std::string ip) {
  return msg::WorkerInfo{.instance_id = std::move(instance),
                         .worker_id = id,
                         .ip = std::move(ip),
                         .port = 8500 + id,
                         .peer_init_url = std::nullopt,
                         .registration_time = 1700000000.5,
                         .last_heartbeat_time = 1700000010.25};
}

/// Records every OrchMsg and answers with a canned reply per type (or with
/// `override_reply` when set); can also leave futures unresolved forever.
class fake_controller : public controller_api {
public:
  std::future<Msg> orchestrate(Msg request) override {
    std::lock_guard lock{mutex_};
    requests_.push_back(request);
    std::promise<Msg> promise;
    auto fut = promise.get_future();
    if (hang_) {
      hanging_.push_back(std::move(promise)); // kept alive: never resolves
      return fut;
    }
    promise.set_value(override_reply_ ? override_reply_(request) : canned(request));
    return fut;
  }

  std::future<std::vector<worker_view>> workers() override {
    std::promise<std::vector<worker_view>> p;
    p.set_value({{worker("A", 0, "10.0.0.1"), 10},
                 {worker("A", 1, "10.0.0.1"), 11},
                 {worker("B", 0, "10.0.0.2"), 20}});
    return p.get_future();
  }

  std::future<key_stats> stats() override {
    std::promise<key_stats> p;
    p.set_value(key_stats{.total_key_count = 41,
                          .total_instance_count = 2,
                          .total_worker_count = 3,
                          .instances = {{"A", 21, 2}, {"B", 20, 1}}});
    return p.get_future();
  }

  std::future<controller_gauges> gauges() override {
    std::promise<controller_gauges> p;
    p.set_value(controller_gauges{.kv_pool_keys_count = 1234, .registered_workers_count = 3});
    return p.get_future();
  }

  bool ready() const override { return ready_; }

  std::future<snapshot_outcome> snapshot(const std::string& dir) override {
    std::lock_guard lock{mutex_};
    snapshot_dirs_.push_back(dir);
    std::promise<snapshot_outcome> p;
    snapshot_outcome out = snapshot_reply_;
    out.dir = dir;
    p.set_value(out);
    return p.get_future();
  }

  // -- test controls ---------------------------------------------------------

  void set_reply(std::function<Msg(const Msg&)> f) {
    std::lock_guard lock{mutex_};
    override_reply_ = std::move(f);
  }
  void set_hang(bool on) {
    std::lock_guard lock{mutex_};
    hang_ = on;
  }
  std::vector<Msg> requests() {
    std::lock_guard lock{mutex_};
    return requests_;
  }
  Msg last_request() {
    std::lock_guard lock{mutex_};
    return requests_.empty() ? Msg{} : requests_.back();
  }
  std::atomic<bool> ready_{true};
  std::vector<std::string> snapshot_dirs() {
    std::lock_guard lock{mutex_};
    return snapshot_dirs_;
  }
  void set_snapshot_reply(snapshot_outcome out) {
    std::lock_guard lock{mutex_};
    snapshot_reply_ = std::move(out);
  }

private:
  std::vector<std::string> snapshot_dirs_;
  snapshot_outcome snapshot_reply_;
  static Msg canned(const Msg& request) {
    return std::visit(
        [](const auto& m) -> Msg {
          using T = std::decay_t<decltype(m)>;
          if constexpr (std::is_same_v<T, msg::LookupMsg>)
            return msg::LookupRetMsg{
                .event_id = m.event_id,
                .layout_info = {{"A", {"LocalCPUBackend", 512}}, {"B", {"LocalDiskBackend", 256}}}};
          else if constexpr (std::is_same_v<T, msg::QueryInstMsg>)
            return msg::QueryInstRetMsg{
                .event_id = m.event_id,
                .instance_id = m.ip == "10.0.0.1" ? std::optional<std::string>("A") : std::nullopt};
          else if constexpr (std::is_same_v<T, msg::ClearMsg>)
            return msg::ClearRetMsg{.event_id = m.event_id, .num_tokens = 7};
          else if constexpr (std::is_same_v<T, msg::PinMsg>)
            return msg::PinRetMsg{.event_id = m.event_id, .num_tokens = 8};
          else if constexpr (std::is_same_v<T, msg::CompressMsg>)
            return msg::CompressRetMsg{.event_id = m.event_id, .num_tokens = 9};
          else if constexpr (std::is_same_v<T, msg::DecompressMsg>)
            return msg::DecompressRetMsg{.event_id = m.event_id, .num_tokens = 10};
          else if constexpr (std::is_same_v<T, msg::MoveMsg>)
            return msg::MoveRetMsg{.event_id = m.event_id, .num_tokens = 11};
          else if constexpr (std::is_same_v<T, msg::HealthMsg>)
            return msg::HealthRetMsg{.event_id = m.event_id, .error_codes = {{0, 0}, {1, -1001}}};
          else if constexpr (std::is_same_v<T, msg::CheckFinishMsg>)
            return msg::CheckFinishRetMsg{.status = "finished"};
          else if constexpr (std::is_same_v<T, msg::QueryWorkerInfoMsg>)
            return msg::QueryWorkerInfoRetMsg{.event_id = m.event_id,
                                              .worker_infos = {worker("A", 0, "10.0.0.1")}};
          else
            return msg::ErrorMsg{.error = "unexpected request"};
        },
        request);
  }

  std::mutex mutex_;
  std::vector<Msg> requests_;
  std::function<Msg(const Msg&)> override_reply_;
  bool hang_ = false;
  std::vector<std::promise<Msg>> hanging_;
};

class http_api_test : public ::testing::Test {
protected:
  void SetUp() override { start_with({}); }

  void start_with(http_options options) {
    api_.reset();
    options.host = "127.0.0.1";
    options.port = 0;
    options.threads = 2;
    if (options.handler_timeout == http_options{}.handler_timeout)
      options.handler_timeout = 10s;
    api_ = std::make_unique<http_api>(options, controller_, metrics_, frontend_);
    api_->start();
    client_ = std::make_unique<httplib::Client>("127.0.0.1", api_->port());
    client_->set_read_timeout(20s);
  }

  httplib::Result post(const std::string& path, const std::string& body) {
    return client_->Post(path.c_str(), body, "application/json");
  }

  httplib::Result get(const std::string& path) { return client_->Get(path.c_str()); }

  /// The JSON body of a response with the expected status.
  json expect_json(const httplib::Result& r, int status) {
    EXPECT_TRUE(r) << "no response";
    if (!r)
      return json();
    EXPECT_EQ(r->status, status) << r->body;
    auto j = json::parse(r->body, nullptr, false);
    EXPECT_FALSE(j.is_discarded()) << r->body;
    return j;
  }

  /// Status + the detail text of an error response.
  std::string expect_error(const httplib::Result& r, int status) {
    auto j = expect_json(r, status);
    EXPECT_TRUE(j.is_object() && j.contains("detail") && j["detail"].is_string()) << j.dump();
    return j.is_object() && j.contains("detail") && j["detail"].is_string()
               ? j["detail"].get<std::string>()
               : "";
  }

  template <class T>
  T last() {
    auto m = controller_.last_request();
    EXPECT_TRUE(std::holds_alternative<T>(m)) << msg::type_tag_of(m);
    return std::holds_alternative<T>(m) ? std::get<T>(m) : T{};
  }

  fake_controller controller_;
  node_metrics metrics_;
  frontend_counters frontend_;
  std::unique_ptr<http_api> api_;
  std::unique_ptr<httplib::Client> client_;
};

const std::regex uuid_re{"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}"};

bool has_prefix_and_uuid(const std::string& event_id, const std::string& prefix) {
  return event_id.starts_with(prefix) && std::regex_match(event_id.substr(prefix.size()), uuid_re);
}

// -- /lookup ---------------------------------------------------------------------

TEST_F(http_api_test, lookup_answers_layout_info_with_a_lookup_event_id) {
  auto j = expect_json(post("/lookup", R"({"tokens": [1, 2, 3]})"), 200);
  auto m = last<msg::LookupMsg>();
  EXPECT_TRUE(has_prefix_and_uuid(m.event_id, "Lookup")) << m.event_id;
  EXPECT_EQ(m.tokens, (std::vector<wire_int>{1, 2, 3}));
  EXPECT_EQ(j["event_id"], m.event_id);
  EXPECT_EQ(j["layout_info"], json::parse(R"({"A": ["LocalCPUBackend", 512],
                                               "B": ["LocalDiskBackend", 256]})"));
  // Keys in the order the controller gave (first holder first).
  EXPECT_EQ(j.dump().find("\"A\""), j.dump().find("\"layout_info\":{") + 15);
}

TEST_F(http_api_test, lookup_keeps_negative_and_full_range_unsigned_tokens_intact) {
  auto body =
      R"({"tokens": [-1, 18446744073709551615, -9223372036854775808, 9223372036854775808, 0]})";
  expect_json(post("/lookup", body), 200);
  auto m = last<msg::LookupMsg>();
  ASSERT_EQ(m.tokens.size(), 5u);
  EXPECT_EQ(m.tokens[0], wire_int{-1});
  EXPECT_TRUE(m.tokens[0].is_negative());
  EXPECT_EQ(m.tokens[1], wire_int::from_unsigned(u64_max));
  EXPECT_FALSE(m.tokens[1].is_negative());
  EXPECT_EQ(m.tokens[2], wire_int{i64_min});
  EXPECT_EQ(m.tokens[3], wire_int::from_unsigned(uint64_t{1} << 63));
  EXPECT_EQ(m.tokens[4], wire_int{0});
}

TEST_F(http_api_test, lookup_accepts_unknown_fields_and_empty_token_lists) {
  expect_json(post("/lookup", R"({"x": {"y": [1, "z", null, true, 2.5]}, "tokens": []})"), 200);
  EXPECT_TRUE(last<msg::LookupMsg>().tokens.empty());
}

TEST_F(http_api_test, lookup_refuses_malformed_json_with_400) {
  for (const char* body :
       {"{not json", "", "   ", R"({"tokens": [1, 2)", R"({"tokens": [1 2]})",
        R"({"tokens": [1]} x)", R"({"tokens": [1]}], [)", R"({"tokens": [1]} {})",
        R"({"tokens": [1], "x": [1 2]})", R"({"tokens": [1], "x": tru})", R"({"tokens": [-]})",
        "{\"tokens\": [1], \"x\": \"\xff\"}"}) {
    SCOPED_TRACE(body);
    auto detail = expect_error(post("/lookup", body), 400);
    EXPECT_NE(detail.find("malformed JSON"), std::string::npos) << detail;
  }
  EXPECT_TRUE(controller_.requests().empty());
}

TEST_F(http_api_test, lookup_refuses_mistyped_or_missing_tokens_with_422) {
  struct {
    const char* body;
    const char* detail_part;
  } cases[] = {
      {"{}", "field 'tokens' is required"},
      {R"({"token": [1]})", "field 'tokens' is required"},
      {"[1, 2]", "must be a JSON object"},
      {"42", "must be a JSON object"},
      {R"({"tokens": "1 2"})", "field 'tokens' must be a list"},
      {R"({"tokens": null})", "field 'tokens' must be a list"},
      {R"({"tokens": [1, 2.5]})", "item 1 must be an integer"},
      {R"({"tokens": [1, "2"]})", "item 1 must be an integer"},
      {R"({"tokens": [true]})", "item 0 must be an integer"},
      {R"({"tokens": [18446744073709551616]})", "item 0 is outside the range"},
      {R"({"tokens": [-9223372036854775809]})", "item 0 is outside the range"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.body);
    auto detail = expect_error(post("/lookup", c.body), 422);
    EXPECT_NE(detail.find(c.detail_part), std::string::npos) << detail;
  }
  EXPECT_TRUE(controller_.requests().empty());
}

TEST_F(http_api_test, lookup_refuses_too_many_tokens_with_413) {
  start_with(http_options{.max_tokens = 3});
  expect_json(post("/lookup", R"({"tokens": [1, 2, 3]})"), 200);
  auto detail = expect_error(post("/lookup", R"({"tokens": [1, 2, 3, 4]})"), 413);
  EXPECT_NE(detail.find("more than 3"), std::string::npos) << detail;
  expect_error(post("/pin", R"({"instance_id": "A", "location": "L", "tokens": [1, 2, 3, 4]})"),
               413);
}

TEST_F(http_api_test, oversized_bodies_get_413) {
  start_with(http_options{.max_body_bytes = 64});
  std::string body = R"({"tokens": [)" + std::string(100, '1') + "]}";
  auto detail = expect_error(post("/lookup", body), 413);
  EXPECT_NE(detail.find("64 bytes"), std::string::npos) << detail;
  expect_json(post("/lookup", R"({"tokens": [1]})"), 200);
}

TEST_F(http_api_test, lookup_handles_many_tokens) {
  std::string body = R"({"tokens": [)";
  for (int i = 0; i < 20000; ++i) {
    if (i > 0)
      body += ',';
    body += std::to_string(i * 7919 - 50000);
  }
  body += "]}";
  expect_json(post("/lookup", body), 200);
  auto m = last<msg::LookupMsg>();
  ASSERT_EQ(m.tokens.size(), 20000u);
  EXPECT_EQ(m.tokens[19999], wire_int{int64_t{19999} * 7919 - 50000});
}

TEST_F(http_api_test, deeply_nested_bodies_are_refused_without_crashing) {
  std::string deep =
      R"({"tokens": [], "x": )" + std::string(100000, '[') + std::string(100000, ']') + "}";
  expect_error(post("/lookup", deep), 400);
  std::string deep2 =
      R"({"instance_id": "A", "x": )" + std::string(100000, '[') + std::string(100000, ']') + "}";
  expect_error(post("/health", deep2), 400);
}

TEST_F(http_api_test, mutated_bodies_never_crash_and_get_a_known_status) {
  // Seeded so that a failure replays; each body is a valid one with a few bytes
  // flipped, cut or duplicated.
  std::mt19937 rng{20240611};
  const std::vector<std::pair<std::string, std::string>> seeds = {
      {"/lookup", R"({"tokens": [1, -2, 18446744073709551615], "x": {"y": [null, true]}})"},
      {"/query_instance", R"({"event_id": "x", "ip": "10.0.0.1"})"},
      {"/pin", R"({"instance_id": "A", "location": "L", "tokens": [1, 2]})"},
      {"/move", R"({"old_position": ["A", "L"], "new_position": ["B", "L"], "should_copy": true})"},
      {"/query_worker_info", R"({"instance_id": "all", "worker_ids": [0, 1]})"},
  };
  // Sized explicitly: it holds a NUL byte, along with invalid UTF-8.
  static constexpr char raw_alphabet[] = "{}[]\",:0123456789-.eE \\\x00\xff\xc3tfnul";
  const std::string alphabet{raw_alphabet, sizeof(raw_alphabet) - 1};
  const std::set<int> allowed = {200, 400, 404, 413, 422, 500};
  for (int round = 0; round < 60; ++round) {
    for (const auto& [path, seed] : seeds) {
      std::string body = seed;
      int edits = 1 + static_cast<int>(rng() % 4);
      for (int e = 0; e < edits && !body.empty(); ++e) {
        size_t at = rng() % body.size();
        switch (rng() % 3) {
        case 0:
          body[at] = alphabet[rng() % alphabet.size()];
          break;
        case 1:
          body.erase(at, 1 + rng() % 3);
          break;
        default:
          body.insert(at, body.substr(at, rng() % 8));
        }
      }
      auto r = post(path, body);
      ASSERT_TRUE(r) << path << " " << body;
      EXPECT_TRUE(allowed.contains(r->status)) << r->status << " " << path << " " << body;
      auto j = json::parse(r->body, nullptr, false);
      EXPECT_TRUE(j.is_object()) << r->body;
    }
  }
  EXPECT_EQ(expect_json(get("/healthz"), 200), (json{{"status", "ok"}}));
}

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
