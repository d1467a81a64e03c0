#include "registry/control_plan.hpp"

#include <map>

namespace lmcc::actors {
namespace {

using msg::ErrorMsg;
using msg::wire_int;

std::string no_workers(const std::string& instance_id) {
  return "instance '" + instance_id + "' has no registered workers";
}

template <class WorkerMsgT, class Fill>
std::variant<control_plan, ErrorMsg> per_worker(control_plan::op kind, const std::string& event_id,
                                                const std::string& instance_id, const registry& reg,
                                                Fill&& fill) {
  control_plan plan{kind, event_id, {}};
  auto targets = reg.control_targets(instance_id);
  if (targets.empty())
    return ErrorMsg{no_workers(instance_id)};
  for (const auto& t : targets) {
    WorkerMsgT m{};
    fill(m, t);
    plan.commands.push_back(control_command{t.worker_id, t.endpoint, msg::Msg{std::move(m)}});
  }
  return plan;
}

std::string worker_name(const control_command& c) {
  return "worker " + c.worker_id.to_string() + " (" + c.endpoint + ")";
}

/// num_tokens of a *RetMsg reply, or why there is none.
std::variant<wire_int, std::string> num_tokens_of(const control_command& c,
                                                  const msg::expected<msg::Msg>& reply) {
  if (!reply)
    return worker_name(c) + ": " + reply.error().message;
  return std::visit(
      [&](const auto& m) -> std::variant<wire_int, std::string> {
        using M = std::decay_t<decltype(m)>;
        if constexpr (std::is_same_v<M, ErrorMsg>)
          return worker_name(c) + " answered with an error: " + m.error;
        else if constexpr (requires { m.num_tokens; })
          return m.num_tokens;
        else
          return worker_name(c) + " answered with an unexpected " + std::string(M::type_tag);
      },
      *reply);
}

template <class RetMsgT>
msg::Msg aggregate_num_tokens(const control_plan& plan,
                              const std::vector<msg::expected<msg::Msg>>& replies) {
  std::map<std::string, wire_int> seen; // worker id text -> num_tokens, for the error text
  std::optional<wire_int> agreed;
  bool disagree = false;
  for (size_t i = 0; i < plan.commands.size(); ++i) {
    auto n = num_tokens_of(plan.commands[i], replies[i]);
    if (auto* why = std::get_if<std::string>(&n))
      return ErrorMsg{*why};
    auto value = std::get<wire_int>(n);
    seen.emplace(plan.commands[i].worker_id.to_string(), value);
    if (agreed && *agreed != value)
      disagree = true;
    agreed = value;
  }
  if (!agreed)
    return ErrorMsg{"no workers answered"};
  if (disagree) {
    std::string text = "workers disagree on num_tokens:";
    for (const auto& [w, n] : seen)
      text += " worker " + w + "=" + n.to_string();
    return ErrorMsg{text};
  }
  RetMsgT ret{};
  ret.event_id = plan.event_id;
  ret.num_tokens = *agreed;
  return ret;
}

} // namespace

std::variant<control_plan, ErrorMsg> plan_control(const msg::Msg& orch, const registry& reg,
                                                  const std::function<std::string()>& random_hex) {
  using op = control_plan::op;
  return std::visit(
      [&](const auto& m) -> std::variant<control_plan, ErrorMsg> {
        using M = std::decay_t<decltype(m)>;
        if constexpr (std::is_same_v<M, msg::ClearMsg>) {
          return per_worker<msg::ClearWorkerMsg>(
              op::clear, m.event_id, m.instance_id, reg, [&](auto& w, const control_target& t) {
                w.worker_event_id = "Worker" + t.worker_id.to_string() + m.event_id;
                w.location = m.location;
              });
        } else if constexpr (std::is_same_v<M, msg::PinMsg>) {
          return per_worker<msg::PinWorkerMsg>(
              op::pin, m.event_id, m.instance_id, reg, [&](auto& w, const control_target& t) {
                w.worker_event_id = "Worker" + t.worker_id.to_string() + m.event_id;
                w.location = m.location;
                w.tokens = m.tokens;
              });
        } else if constexpr (std::is_same_v<M, msg::CompressMsg>) {
          return per_worker<msg::CompressWorkerMsg>(
              op::compress, m.event_id, m.instance_id, reg, [&](auto& w, const control_target& t) {
                w.worker_event_id = "CompressWorker" + t.worker_id.to_string() + random_hex();
                w.method = m.method;
                w.location = m.location;
                w.tokens = m.tokens;
              });
        } else if constexpr (std::is_same_v<M, msg::DecompressMsg>) {
          return per_worker<msg::DecompressWorkerMsg>(
              op::decompress, m.event_id, m.instance_id, reg,
              [&](auto& w, const control_target& t) {
                w.worker_event_id = "DecompressWorker" + t.worker_id.to_string() + random_hex();
                w.method = m.method;
                w.location = m.location;
                w.tokens = m.tokens;
              });
        } else if constexpr (std::is_same_v<M, msg::HealthMsg>) {
          control_plan plan{op::health, m.event_id, {}};
          for (const auto& t : reg.control_targets(m.instance_id)) {
            msg::HealthWorkerMsg w{"HealthWorker" + t.worker_id.to_string() + random_hex()};
            plan.commands.push_back(control_command{t.worker_id, t.endpoint, msg::Msg{w}});
          }
          return plan; // zero workers: HealthRetMsg with no codes, as LMCache
        } else if constexpr (std::is_same_v<M, msg::MoveMsg>) {
          auto src = reg.control_targets(m.old_position.first);
          auto dst = reg.control_targets(m.new_position.first);
          if (src.empty())
            return ErrorMsg{no_workers(m.old_position.first)};
          if (dst.empty())
            return ErrorMsg{no_workers(m.new_position.first)};
          control_plan plan{op::move, m.event_id, {}};
          for (size_t i = 0; i < src.size() && i < dst.size(); ++i) {
            if (!dst[i].peer_init_url)
              return ErrorMsg{"worker " + dst[i].worker_id.to_string() + " of instance '" +
                              m.new_position.first + "' has no peer_init_url (P2P disabled)"};
            msg::MoveWorkerMsg w;
            w.worker_event_id = "MoveWorker" + src[i].worker_id.to_string() + random_hex();
            w.old_position = m.old_position.second;
            w.new_position = {*dst[i].peer_init_url, m.new_position.second};
            w.tokens = m.tokens;
            w.copy = m.copy;
            plan.commands.push_back(
                control_command{src[i].worker_id, src[i].endpoint, msg::Msg{w}});
          }
          return plan;
        } else if constexpr (std::is_same_v<M, msg::CheckFinishMsg>) {
          // CheckFinishMsg names no instance: ask every registered worker.
          control_plan plan{op::check_finish, m.event_id, {}};
          for (const auto* rec : reg.all_workers())
            plan.commands.push_back(
                control_command{rec->worker_id, rec->control_endpoint(),
                                msg::Msg{msg::CheckFinishWorkerMsg{m.event_id}}});
          if (plan.commands.empty())
            return ErrorMsg{"check_finish: no workers are registered"};
          return plan;
        } else {
          return ErrorMsg{"not a control command: " + std::string(M::type_tag)};
        }
      },
      orch);
}

msg::Msg aggregate_control(const control_plan& plan,
                           const std::vector<msg::expected<msg::Msg>>& replies) {
  using op = control_plan::op;
  switch (plan.kind) {
  case op::clear:
    return aggregate_num_tokens<msg::ClearRetMsg>(plan, replies);
  case op::pin:
    return aggregate_num_tokens<msg::PinRetMsg>(plan, replies);
  case op::compress:
    return aggregate_num_tokens<msg::CompressRetMsg>(plan, replies);
  case op::decompress:
    return aggregate_num_tokens<msg::DecompressRetMsg>(plan, replies);
  case op::move:
    return aggregate_num_tokens<msg::MoveRetMsg>(plan, replies);
  case op::health: {
    msg::HealthRetMsg ret;
    ret.event_id = plan.event_id;
    for (size_t i = 0; i < plan.commands.size(); ++i) {
      int64_t code = health_code_no_answer;
      const auto& reply = replies[i];
      if (reply) {
        if (const auto* h = std::get_if<msg::HealthWorkerRetMsg>(&*reply))
          code = h->error_code.to_int64().value_or(-1002);
        else if (std::holds_alternative<ErrorMsg>(*reply))
          code = -1001;
        else
          code = -1002;
      } else if (reply.error().message.find("undecodable") != std::string::npos) {
        code = -1003;
      }
      ret.error_codes.emplace_back(plan.commands[i].worker_id, code);
    }
    return ret;
  }
  case op::check_finish: {
    std::optional<std::string> status;
    for (size_t i = 0; i < plan.commands.size(); ++i) {
      const auto& reply = replies[i];
      const auto& c = plan.commands[i];
      if (!reply)
        return ErrorMsg{"check_finish: " + worker_name(c) + ": " + reply.error().message};
      if (const auto* e = std::get_if<ErrorMsg>(&*reply))
        return ErrorMsg{"check_finish is not supported by " + worker_name(c) + ": " + e->error};
      const auto* r = std::get_if<msg::CheckFinishWorkerRetMsg>(&*reply);
      if (r == nullptr)
        return ErrorMsg{"check_finish: " + worker_name(c) + " answered with an unexpected " +
                        std::string(msg::type_tag_of(*reply))};
      if (status && *status != r->status)
        return ErrorMsg{"check_finish: workers report different statuses ('" + *status + "' and '" +
                        r->status + "')"};
      status = r->status;
    }
    return msg::CheckFinishRetMsg{status.value_or("")};
  }
  }
  return ErrorMsg{"unknown control operation"};
}

} // namespace lmcc::actors
