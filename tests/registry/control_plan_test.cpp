#include "registry/control_plan.hpp"

#if defined(CAF_VERSION)
#error "control_plan pulls in CAF"
#endif

#include <gtest/gtest.h>

using namespace lmcc::actors;
namespace msg = lmcc::msg;

namespace {

struct fixture {
  registry reg;
  fixture() {
    reg.register_worker("A", 1, "10.0.0.1", 8501, "10.0.0.1:8201", 0, 1);
    reg.register_worker("A", 0, "10.0.0.1", 8500, "10.0.0.1:8200", 0, 2);
    reg.register_worker("B", 0, "10.0.0.2", 8500, "10.0.0.2:8200", 0, 3);
  }
};

std::string fixed_hex() {
  return "abcd";
}

control_plan plan_of(const msg::Msg& m, const registry& r) {
  auto p = plan_control(m, r, fixed_hex);
  EXPECT_TRUE(std::holds_alternative<control_plan>(p));
  return std::get<control_plan>(p);
}

} // namespace

TEST(control_plan, clear_goes_to_every_worker_of_the_instance_in_worker_id_order) {
  fixture f;
  auto plan = plan_of(msg::ClearMsg{"Clear-1", "A", "LocalCPUBackend"}, f.reg);
  ASSERT_EQ(plan.commands.size(), 2u);
  EXPECT_EQ(plan.commands[0].endpoint, "10.0.0.1:8500");
  const auto& c0 = std::get<msg::ClearWorkerMsg>(plan.commands[0].command);
  EXPECT_EQ(c0.worker_event_id, "Worker0Clear-1");
  EXPECT_EQ(c0.location, "LocalCPUBackend");
}

TEST(control_plan, clear_of_an_unknown_instance_is_a_clear_error) {
  fixture f;
  auto p = plan_control(msg::ClearMsg{"e", "nope", "L"}, f.reg, fixed_hex);
  ASSERT_TRUE(std::holds_alternative<msg::ErrorMsg>(p));
  EXPECT_NE(std::get<msg::ErrorMsg>(p).error.find("nope"), std::string::npos);
}

TEST(control_plan, equal_num_tokens_aggregate_and_unequal_ones_name_the_workers) {
  fixture f;
  auto plan = plan_of(msg::ClearMsg{"e", "A", "L"}, f.reg);
  auto ok = aggregate_control(
      plan, {msg::Msg{msg::ClearWorkerRetMsg{7}}, msg::Msg{msg::ClearWorkerRetMsg{7}}});
  EXPECT_EQ(std::get<msg::ClearRetMsg>(ok).num_tokens, msg::wire_int{7});
  EXPECT_EQ(std::get<msg::ClearRetMsg>(ok).event_id, "e");
  auto bad = aggregate_control(
      plan, {msg::Msg{msg::ClearWorkerRetMsg{7}}, msg::Msg{msg::ClearWorkerRetMsg{8}}});
  EXPECT_NE(std::get<msg::ErrorMsg>(bad).error.find("disagree"), std::string::npos);
}

TEST(control_plan, a_worker_error_or_timeout_fails_the_command_with_its_reason) {
  fixture f;
  auto plan = plan_of(msg::PinMsg{"e", "A", "L", {1, 2}}, f.reg);
  auto err = aggregate_control(
      plan, {msg::Msg{msg::PinWorkerRetMsg{2}}, msg::Msg{msg::ErrorMsg{"Worker error: boom"}}});
  EXPECT_NE(std::get<msg::ErrorMsg>(err).error.find("boom"), std::string::npos);
  auto timeout = aggregate_control(
      plan, {msg::Msg{msg::PinWorkerRetMsg{2}}, msg::codec_error{"did not answer within 30000ms"}});
  EXPECT_NE(std::get<msg::ErrorMsg>(timeout).error.find("did not answer"), std::string::npos);
}

TEST(control_plan, health_maps_each_outcome_to_lmcache_codes) {
  fixture f;
  auto plan = plan_of(msg::HealthMsg{"e", "A"}, f.reg);
  plan.commands.push_back(plan.commands[0]);
  plan.commands.push_back(plan.commands[0]);
  plan.commands[2].worker_id = 2;
  plan.commands[3].worker_id = 3;
  auto ret = std::get<msg::HealthRetMsg>(
      aggregate_control(plan, {msg::Msg{msg::HealthWorkerRetMsg{0}}, msg::Msg{msg::ErrorMsg{"x"}},
                               msg::codec_error{"undecodable reply from worker h:1"},
                               msg::codec_error{"worker h:1 did not answer within 200ms"}}));
  ASSERT_EQ(ret.error_codes.size(), 4u);
  EXPECT_EQ(ret.error_codes[0].second, msg::wire_int{0});
  EXPECT_EQ(ret.error_codes[1].second, msg::wire_int{-1001});
  EXPECT_EQ(ret.error_codes[2].second, msg::wire_int{-1003});
  EXPECT_EQ(ret.error_codes[3].second, msg::wire_int{health_code_no_answer});
}

TEST(control_plan, health_of_an_instance_without_workers_is_empty_success) {
  fixture f;
  auto plan = plan_of(msg::HealthMsg{"e", "nobody"}, f.reg);
  EXPECT_TRUE(plan.commands.empty());
  auto ret = aggregate_control(plan, {});
  EXPECT_TRUE(std::get<msg::HealthRetMsg>(ret).error_codes.empty());
}

TEST(control_plan, move_pairs_source_and_destination_workers_by_sorted_id) {
  fixture f;
  f.reg.register_worker("B", 1, "10.0.0.2", 8501, "10.0.0.2:8201", 0, 4);
  msg::MoveMsg m{"e", {"A", "LocalCPUBackend"}, {"B", "LocalCPUBackend"}, std::nullopt, false};
  auto plan = plan_of(m, f.reg);
  ASSERT_EQ(plan.commands.size(), 2u);
  const auto& mv = std::get<msg::MoveWorkerMsg>(plan.commands[1].command);
  EXPECT_EQ(plan.commands[1].endpoint, "10.0.0.1:8501");
  EXPECT_EQ(mv.new_position,
            (std::pair<std::string, std::string>{"10.0.0.2:8201", "LocalCPUBackend"}));
  EXPECT_EQ(mv.worker_event_id, "MoveWorker1abcd");
  EXPECT_EQ(mv.copy, std::optional<bool>{false});
}

TEST(control_plan, check_finish_asks_every_worker_and_needs_one_status) {
  fixture f;
  auto plan = plan_of(msg::CheckFinishMsg{"ev"}, f.reg);
  EXPECT_EQ(plan.commands.size(), 3u);
  std::vector<msg::expected<msg::Msg>> same(3, msg::Msg{msg::CheckFinishWorkerRetMsg{"finished"}});
  EXPECT_EQ(std::get<msg::CheckFinishRetMsg>(aggregate_control(plan, same)).status, "finished");
  auto unsupported = same;
  unsupported[1] = msg::Msg{msg::ErrorMsg{"Unknown control message"}};
  EXPECT_NE(
      std::get<msg::ErrorMsg>(aggregate_control(plan, unsupported)).error.find("not supported"),
      std::string::npos);
}
