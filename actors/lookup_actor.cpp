#include "actors/lookup_actor.hpp"

namespace lmcc::actors {

lookup_actor::behavior_type lookup_main(lookup_actor::stateful_pointer<lookup_actor_state> self,
                                        std::shared_ptr<const lookup_reader> reader) {
  self->state.reader = std::move(reader);
  return {
      [self](request_atom, const msg::Msg& m) { return self->state.reader->answer(m); },
      [self](request_atom, const msg::Msg& m, const reply_callback& done) {
        done(self->state.reader->answer(m));
      },
  };
}

} // namespace lmcc::actors
