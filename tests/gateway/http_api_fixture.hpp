// http_api_fixture: what the http_api_*_test.cpp suites share — a fake
// controller_api that records every OrchMsg and answers with canned replies, and
// a fixture that serves a real http_api on a loopback port with an httplib
// client in front of it.
//
//   TEST_F(http_api_test, clear_answers_num_tokens) {
//     auto j = expect_json(post("/clear", R"({"instance_id": "A", "location": "L"})"), 200);
//     EXPECT_EQ(last<msg::ClearMsg>().instance_id, "A");
//   }
#pragma once

#include "gateway/http_api.hpp"

#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <limits>
#include <memory>
#include <mutex>
#include <regex>
#include <string>
#include <vector>

namespace lmcc::gateway::http_test {

using namespace std::chrono_literals;
using json = nlohmann::json;
using msg::Msg;
using msg::wire_int;

inline constexpr uint64_t u64_max = std::numeric_limits<uint64_t>::max();
inline constexpr int64_t i64_min = std::numeric_limits<int64_t>::min();

inline msg::WorkerInfo worker(std::string instance, int64_t id, std::string ip) {
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

  std::future<workers_detail> worker_details() override {
    std::lock_guard lock{mutex_};
    std::promise<workers_detail> p;
    workers_detail d{.status = details_status_, .error = "the node is loading", .node = "n1"};
    d.workers = {{.view = {worker("A", 0, "10.0.0.1"), 10},
                  .locations = 1,
                  .home = "n2",
                  .full_sync = "none"},
                 {.view = {worker("B", 0, "10.0.0.2"), 20},
                  .locations = 2,
                  .home = "n3",
                  .full_sync = "owed",
                  .full_sync_reason = "controller_restart"}};
    d.completed = 1;
    p.set_value(std::move(d));
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
  void set_details_status(int status) {
    std::lock_guard lock{mutex_};
    details_status_ = status;
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
  int details_status_ = 200;
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

inline const std::regex uuid_re{
    "[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}"};

inline bool has_prefix_and_uuid(const std::string& event_id, const std::string& prefix) {
  return event_id.starts_with(prefix) && std::regex_match(event_id.substr(prefix.size()), uuid_re);
}

} // namespace lmcc::gateway::http_test
