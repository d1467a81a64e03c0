#include "actors/control_fanout.hpp"

#include <spdlog/spdlog.h>

namespace lmcc::actors {

control_fanout_actor::behavior_type
control_fanout_main(control_fanout_actor::stateful_pointer<control_fanout_state> self,
                    control_send_fn send) {
  self->state.send = std::move(send);
  return {
      [self](fanout_atom, control_plan& plan) -> caf::result<msg::Msg> {
        if (plan.commands.empty())
          return aggregate_control(plan, {});
        auto id = self->state.next_id++;
        auto rp = self->make_response_promise<msg::Msg>();
        auto& run = self->state.plans[id];
        run.replies.assign(plan.commands.size(), control_reply{msg::codec_error{"no reply"}});
        run.waiting = plan.commands.size();
        run.promise = rp;
        run.plan = std::move(plan);
        control_fanout_actor handle = self;
        for (uint64_t i = 0; i < run.plan.commands.size(); ++i) {
          const auto& c = run.plan.commands[i];
          self->state.send(c.endpoint, c.command, [handle, id, i](control_reply reply) {
            caf::anon_send(handle, control_result_atom::value, id, i, std::move(reply));
          });
        }
        return rp;
      },
      [self](control_result_atom, uint64_t id, uint64_t index, control_reply& reply) {
        auto it = self->state.plans.find(id);
        if (it == self->state.plans.end() || index >= it->second.replies.size())
          return;
        auto& run = it->second;
        run.replies[index] = std::move(reply);
        if (--run.waiting > 0)
          return;
        auto result = aggregate_control(run.plan, run.replies);
        if (const auto* e = std::get_if<msg::ErrorMsg>(&result))
          spdlog::warn("control-failed event_id={} error={}", run.plan.event_id, e->error);
        run.promise.deliver(std::move(result));
        self->state.plans.erase(it);
      },
  };
}

} // namespace lmcc::actors
