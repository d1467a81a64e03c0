#include "actors/lookup_actor.hpp"

#include "actors/lookup_reader.hpp"

namespace lmcc::actors {

msg::Msg lookup_actor_state::answer(const msg::Msg& m) const {
  return answer_lookup(*view, *index, hasher, m);
}

lookup_actor::behavior_type lookup_main(lookup_actor::stateful_pointer<lookup_actor_state> self,
                                        lookup_config cfg) {
  self->state.hasher = msg::chunk_hasher{cfg.chunk_hashing};
  self->state.index = std::move(cfg.index);
  return {
      [self](request_atom, const msg::Msg& m) { return self->state.answer(m); },
      [self](request_atom, const msg::Msg& m, const reply_callback& done) {
        done(self->state.answer(m));
      },
      [self](view_atom, const view_ptr& v) { self->state.view = v; },
  };
}

} // namespace lmcc::actors
