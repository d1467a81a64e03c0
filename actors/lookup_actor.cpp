#include "actors/lookup_actor.hpp"

#include "actors/lookup_logic.hpp"

#include <memory>

namespace lmcc::actors {
namespace {

using self_ptr = lookup_actor::stateful_pointer<lookup_actor_state>;

/// Asks the owning shards for the holders of `keys`, then calls
/// done(holders per key) once all answered; a shard that fails or times out
/// counts as holding nothing (the answer is then a shorter prefix, never wrong
/// data).
template <class Done>
void gather_holders(self_ptr self, key_list keys, Done done) {
  auto positions = self->state.positions_by_shard(keys);
  struct pending_state {
    holder_lists holders;
    size_t waiting = 0;
    Done done;
  };
  auto pending =
      std::make_shared<pending_state>(pending_state{holder_lists(keys.size()), 0, std::move(done)});
  for (const auto& p : positions)
    pending->waiting += p.empty() ? 0 : 1;
  if (pending->waiting == 0) {
    pending->done(std::move(pending->holders));
    return;
  }
  for (size_t shard = 0; shard < positions.size(); ++shard) {
    if (positions[shard].empty())
      continue;
    key_list subset;
    subset.reserve(positions[shard].size());
    for (uint32_t pos : positions[shard])
      subset.push_back(keys[pos]);
    auto finish_one = [pending] {
      if (--pending->waiting == 0)
        pending->done(std::move(pending->holders));
    };
    self->request(self->state.cfg.shards[shard], self->state.cfg.timeout, find_atom::value,
                  std::move(subset))
        .then(
            [pending, finish_one, pos = positions[shard]](holder_lists& found) {
              for (size_t i = 0; i < pos.size() && i < found.size(); ++i)
                pending->holders[pos[i]] = std::move(found[i]);
              finish_one();
            },
            [finish_one](caf::error&) { finish_one(); });
  }
}

caf::result<msg::Msg> lookup(self_ptr self, const msg::LookupMsg& m) {
  auto chunks = self->state.hasher.chunks(m.tokens);
  key_list keys;
  keys.reserve(chunks.size());
  for (const auto& c : chunks)
    keys.push_back(static_cast<uint64_t>(c.key));
  auto rp = self->make_response_promise<msg::Msg>();
  gather_holders(
      self, std::move(keys),
      [self, rp, chunks = std::move(chunks), event_id = m.event_id](holder_lists holders) mutable {
        rp.deliver(msg::Msg{multi_holder_layout(*self->state.view, event_id, chunks, holders)});
      });
  return rp;
}

caf::result<msg::Msg> p2p_lookup(self_ptr self, const msg::BatchedP2PLookupMsg& m) {
  key_list keys;
  keys.reserve(m.hashes.size());
  for (const auto& h : m.hashes)
    keys.push_back(h.bits());
  auto rp = self->make_response_promise<msg::Msg>();
  gather_holders(
      self, std::move(keys),
      [self, rp, instance = m.instance_id, worker = m.worker_id](holder_lists holders) mutable {
        rp.deliver(msg::Msg{p2p_layout(*self->state.view, instance, worker, holders)});
      });
  return rp;
}

} // namespace

std::vector<std::vector<uint32_t>>
lookup_actor_state::positions_by_shard(const key_list& keys) const {
  std::vector<std::vector<uint32_t>> out(cfg.shards.size());
  for (uint32_t i = 0; i < keys.size(); ++i)
    out[slot_of(keys[i], cfg.slot_count) % cfg.shards.size()].push_back(i);
  return out;
}

lookup_actor::behavior_type lookup_main(lookup_actor::stateful_pointer<lookup_actor_state> self,
                                        lookup_config cfg) {
  self->state.hasher = msg::chunk_hasher{cfg.chunk_hashing};
  self->state.cfg = std::move(cfg);
  return {
      [self](request_atom, const msg::Msg& m) -> caf::result<msg::Msg> {
        if (const auto* l = std::get_if<msg::LookupMsg>(&m))
          return lookup(self, *l);
        if (const auto* p = std::get_if<msg::BatchedP2PLookupMsg>(&m))
          return p2p_lookup(self, *p);
        return msg::Msg{
            msg::ErrorMsg{"lookup actor cannot handle " + std::string(msg::type_tag_of(m))}};
      },
      [self](view_atom, const view_ptr& v) { self->state.view = v; },
  };
}

} // namespace lmcc::actors
