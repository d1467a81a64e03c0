#include "registry/lookup_reader.hpp"

#include "registry/lookup_logic.hpp"

#include <string>

namespace lmcc::actors {

holder_reads local_holders(const kv_index& index, const std::vector<uint64_t>& keys) {
  holder_reads out{std::vector<holder_list>(keys.size()), keys.size()};
  index.lookup(keys, out.lists);
  return out;
}

msg::Msg answer_lookup(const directory_view& view, const holder_source& source,
                       const msg::chunk_hasher& hasher, const msg::Msg& m) {
  if (const auto* l = std::get_if<msg::LookupMsg>(&m)) {
    auto chunks = hasher.chunks(l->tokens);
    std::vector<uint64_t> keys;
    keys.reserve(chunks.size());
    for (const auto& c : chunks)
      keys.push_back(static_cast<uint64_t>(c.key));
    auto reads = source(keys);
    auto ret = multi_holder_layout(view, l->event_id, chunks, reads.lists);
    if (reads.first_unsure < chunks.size())
      ret.unsure_from_tokens = chunks[reads.first_unsure].start;
    return msg::Msg{std::move(ret)};
  }
  if (const auto* p = std::get_if<msg::BatchedP2PLookupMsg>(&m)) {
    std::vector<uint64_t> keys;
    keys.reserve(p->hashes.size());
    for (const auto& h : p->hashes)
      keys.push_back(h.bits());
    return msg::Msg{p2p_layout(view, p->instance_id, p->worker_id, source(keys).lists)};
  }
  return msg::Msg{msg::ErrorMsg{"a lookup cannot handle " + std::string(msg::type_tag_of(m))}};
}

} // namespace lmcc::actors
