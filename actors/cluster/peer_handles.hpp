// peer_handles: what a node hands a peer at a join (cluster_gate.hpp) and
// what the peer keeps of it (cluster_table.hpp): its actors, and where its
// HTTP API and its key reads answer. One struct with named fields, carried as
// it is: the join is the one message that carries actor handles.
//
//   if (!handles.complete()) refuse();        // a join needs all four actors
//
// Context: a plain value; thread-compatible.
#pragma once

#include <caf/actor.hpp>
#include <caf/meta/type_name.hpp>

#include <string>

namespace lmcc::actors {

/// One node's actors, as its join answer named them (null while never joined).
struct peer_handles {
  caf::actor node;      ///< its cluster_node (greetings)
  caf::actor shard;     ///< its kv_shard (sub-batches, through a peer_link)
  caf::actor directory; ///< its directory (forwarded requests, replicated rows)
  caf::actor service;   ///< its cluster_service (counts, digests, copies, forwarded frames)
  std::string http;     ///< its HTTP API, host:port
  std::string read;     ///< its key-read endpoint (gateway/peer_read.hpp)

  /// Every actor is there (a join that lacks one is refused).
  bool complete() const noexcept { return node && shard && directory && service; }
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, peer_handles& x) {
  return f(caf::meta::type_name("lmcc.peer_handles"), x.node, x.shard, x.directory, x.service,
           x.http, x.read);
}

} // namespace lmcc::actors
