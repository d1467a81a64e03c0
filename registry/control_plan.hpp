// control_plan: spec 4.10's executor as data, actor-free.
//
// plan_control turns one orchestration command (ClearMsg, PinMsg, CompressMsg,
// DecompressMsg, MoveMsg, HealthMsg, CheckFinishMsg) into the ControlMsg each
// target worker must get, with LMCache's worker_event_id formats;
// aggregate_control turns the workers' replies into the OrchRetMsg or a clear
// ErrorMsg. LMCache's aggregation rules are kept (all num_tokens equal; health
// codes -1001 for an ErrorMsg reply, -1002 for another type, -1003 for an
// undecodable reply), but where LMCache hides the reason behind
// "Operation 'x' is not supported." or an empty error, lmcc says what happened
// and on which worker. A worker that does not answer in time costs one timeout:
// health reports it as -1004, the other commands fail with its text.
//
//   auto plan = plan_control(orch_msg, reg, random_hex);
//   ... send plan->commands[i].command to plan->commands[i].endpoint ...
//   msg::Msg reply = aggregate_control(*plan, replies);
//
// Context: pure functions; thread-safe.
#pragma once

#include "messages/expected.hpp"
#include "messages/lmcache_msgs.hpp"
#include "registry/registry.hpp"

#include <functional>
#include <string>
#include <variant>
#include <vector>

namespace lmcc::actors {

/// Health code lmcc reports for a worker that did not answer in time.
constexpr int64_t health_code_no_answer = -1004;

struct control_command {
  msg::wire_int worker_id;
  std::string endpoint; ///< "ip:port" of the worker's REP socket
  msg::Msg command;
};

struct control_plan {
  enum class op { clear, pin, compress, decompress, move, health, check_finish };
  op kind = op::health;
  std::string event_id;
  std::vector<control_command> commands;
};

/// The plan, or the ErrorMsg to answer right away (unknown instance, no peer URL).
std::variant<control_plan, msg::ErrorMsg>
plan_control(const msg::Msg& orch, const registry& reg,
             const std::function<std::string()>& random_hex);

/// replies[i] answers plan.commands[i].
msg::Msg aggregate_control(const control_plan& plan,
                           const std::vector<msg::expected<msg::Msg>>& replies);

} // namespace lmcc::actors
