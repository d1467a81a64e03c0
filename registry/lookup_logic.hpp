// lookup_logic: turning per-chunk holder sets into LMCache's answers, actor-free.
//
// multi_holder_layout is spec section 10's multi-holder lookup (lmcc's choice
// for LookupMsg and /lookup): every instance holding chunk 0 is credited with
// its own contiguous prefix from token 0, the walk stops when no such instance
// holds the next chunk, suffix-only holders are never credited, and the first
// entry is the chunk-0 holder first in registration order (what LMCache's
// find_kv picks), followed by the others in registration order.
// p2p_layout is the TP-aware BatchedP2PLookupMsg of section 10: only workers
// with the asker's worker_id count, the asker's own instance never does.
//
//   auto ret = multi_holder_layout(view, "Lookup-1", chunks, holders_per_chunk);
//
// Context: pure functions; thread-safe.
#pragma once

#include "index/kv_index.hpp"
#include "messages/chunk_hash.hpp"
#include "messages/lmcache_msgs.hpp"
#include "registry/registry.hpp"

#include <string>
#include <vector>

namespace lmcc::actors {

/// `holders[i]` are the holders of `chunks[i].key`.
msg::LookupRetMsg multi_holder_layout(const directory_view& view, std::string event_id,
                                      const std::vector<msg::token_chunk>& chunks,
                                      const std::vector<holder_list>& holders);

/// `holders[i]` are the holders of the asker's hashes[i].
msg::BatchedP2PLookupRetMsg p2p_layout(const directory_view& view,
                                       const std::string& asker_instance,
                                       const msg::wire_int& asker_worker_id,
                                       const std::vector<holder_list>& holders);

} // namespace lmcc::actors
