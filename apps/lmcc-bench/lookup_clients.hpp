// lookup_clients: the two ways a cluster asks the controller who holds a
// prompt's chunks, each timed and checked against the ground truth:
//
//  * HTTP POST /lookup {"tokens": [...]} (a router, spec 5.1 / 4.5): the
//    owner instance must be credited with exactly the held prefix
//    (held_chunks * 256 tokens), and nobody else; a zero hit must be `{}`.
//  * BatchedP2PLookupMsg over a DEALER (a worker that misses locally, spec
//    4.6): the reply must name the owner, the location and the number of
//    leading hashes held, with the peer_init_url of one of the owner's ranks;
//    `tp_exact` says whether it is the asker's own rank (TP-aware controllers).
//
// Context: one client per thread.
#pragma once

#include "apps/lmcc-bench/controller_http.hpp"
#include "apps/lmcc-bench/key_space.hpp"
#include "apps/lmcc-bench/zmq_io.hpp"

#include <string>
#include <vector>

namespace lmcc::bench {

/// What the ground truth says about the instance that holds a query's prompt.
struct instance_info {
  std::string instance_id;
  std::vector<std::string> peer_urls; ///< by rank
};

struct lookup_verdict {
  bool answered = false; ///< a well-formed reply arrived
  bool no_reply = false; ///< nothing arrived within the timeout (or no connection)
  bool correct = false;
  bool tp_exact = true;
  double latency_us = 0;
  std::string detail; ///< what was wrong
};

lookup_verdict http_lookup(controller_http& api, const lookup_query& query,
                           const instance_info& owner, const std::string& location);

class p2p_client {
public:
  /// `asker_instance` must not be one of the simulated instances: the
  /// controller excludes the asker's own instance from the answer.
  p2p_client(zmq::context_t& ctx, std::string reply_url, uint32_t timeout_ms,
             std::string asker_instance);

  lookup_verdict lookup(const lookup_query& query, int64_t asker_rank, const instance_info& owner,
                        const std::string& location);

private:
  dealer_channel channel_;
  std::string asker_;
};

} // namespace lmcc::bench
