#include "actors/lookup_actor.hpp"

#include "actors/lookup_logic.hpp"

namespace lmcc::actors {
namespace {

/// Holders of each key, read under one shared lock.
std::vector<holder_list> holders_of(const kv_index& index, const std::vector<uint64_t>& keys) {
  std::vector<holder_list> out(keys.size());
  auto r = index.read();
  for (size_t i = 0; i < keys.size(); ++i)
    r.holders(keys[i], out[i]);
  return out;
}

} // namespace

msg::Msg lookup_actor_state::answer(const msg::Msg& m) const {
  if (const auto* l = std::get_if<msg::LookupMsg>(&m)) {
    auto chunks = hasher.chunks(l->tokens);
    std::vector<uint64_t> keys;
    keys.reserve(chunks.size());
    for (const auto& c : chunks)
      keys.push_back(static_cast<uint64_t>(c.key));
    return msg::Msg{multi_holder_layout(*view, l->event_id, chunks, holders_of(*index, keys))};
  }
  if (const auto* p = std::get_if<msg::BatchedP2PLookupMsg>(&m)) {
    std::vector<uint64_t> keys;
    keys.reserve(p->hashes.size());
    for (const auto& h : p->hashes)
      keys.push_back(h.bits());
    return msg::Msg{p2p_layout(*view, p->instance_id, p->worker_id, holders_of(*index, keys))};
  }
  return msg::Msg{msg::ErrorMsg{"lookup actor cannot handle " + std::string(msg::type_tag_of(m))}};
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
