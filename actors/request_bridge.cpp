#include "actors/request_bridge.hpp"

#include <caf/sec.hpp>

#include <chrono>

namespace lmcc::actors {

request_bridge_actor::behavior_type
request_bridge_main(request_bridge_actor::stateful_pointer<request_bridge_state> self,
                    directory_actor directory) {
  self->state.directory = std::move(directory);
  return {
      [self](request_atom, msg::Msg& m, uint32_t timeout_ms, reply_callback& done) {
        std::string type{msg::type_tag_of(m)};
        self->request(self->state.directory, std::chrono::milliseconds{timeout_ms},
                      request_atom::value, std::move(m))
            .then([done](msg::Msg& reply) { done(std::move(reply)); },
                  [done, type, timeout_ms](caf::error& e) {
                    std::string why =
                        e == caf::sec::request_timeout
                            ? "controller did not answer " + type + " within " +
                                  std::to_string(timeout_ms) + " ms"
                            : "controller failed to handle " + type + ": " + to_string(e);
                    done(msg::Msg{msg::ErrorMsg{why}});
                  });
      },
      [self](stats_atom, uint32_t timeout_ms, stats_callback& done) {
        self->request(self->state.directory, std::chrono::milliseconds{timeout_ms},
                      stats_atom::value)
            .then([done](node_stats& s) { done(std::move(s)); },
                  [done](caf::error&) { done(std::nullopt); });
      },
  };
}

} // namespace lmcc::actors
