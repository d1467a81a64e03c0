// soak_verify: the soak's exact end check of a cluster against the workers'
// ground truth, node by node, at any index size.
//
// Through every node N:
//  1. counts: GET /controller/key-stats gives, per instance, the entries of
//     the cluster's primary copies; each must equal the instance's truth.
//  2. presence: BatchedP2PLookupMsg of every live key of every worker, in
//     order, in batches: the answer must credit the worker with the whole
//     batch. A node reads the slots it owns (primary or replica) from its own
//     index and the others from an owner, so asking every node reads every
//     copy of every slot: every copy holds every key of the truth.
//  3. no extras: the sum over the nodes of lmcc_index_keys (every key a
//     node's index holds, primary and replica copies) equals R x the keys of
//     the truth. With (2), each copy holds at least its slots' keys; with R
//     owners per slot, equality leaves no room for a key the truth does not
//     hold (an evicted key brought back, an old incarnation's key kept).
// Keys are distinct across workers (TP = 1, one key range per instance), so
// (3) counts entries; the soak scenario refuses TP > 1.
//
//   soak_verifier v{ctx, opts, workers, replicas};
//   soak_verdict now = v.check(/*count_all=*/false);   // quick, stops at a miss
//
// Context: one thread; the workers' ground truth must not change during a
// check (their pushes have stopped; full syncs only read it).
#pragma once

#include "apps/lmcc-bench/bench_options.hpp"
#include "apps/lmcc-bench/cluster.hpp"

#include <nlohmann/json.hpp>
#include <zmq.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace lmcc::bench {

struct node_verdict {
  std::string node;                 ///< host:HTTP
  bool counts_ok = false;           ///< key-stats per instance == truth
  std::string counts_detail;        ///< the first instance that differs, or why unread
  bool scanned = false;             ///< the presence scan ran to the end
  uint64_t keys_checked = 0;        ///< keys the scan looked up
  uint64_t missing = 0;             ///< of which not credited to their worker
  std::string missing_detail;       ///< the first missing key
  std::optional<double> index_keys; ///< lmcc_index_keys
};

struct soak_verdict {
  bool exact = false;
  uint64_t truth_keys = 0;           ///< keys the workers hold
  uint64_t copies = 0;               ///< R
  std::optional<double> index_total; ///< sum of lmcc_index_keys over the nodes
  std::vector<node_verdict> nodes;
  std::string detail; ///< the first reason it is not exact

  nlohmann::json to_json() const;
};

class soak_verifier {
public:
  soak_verifier(zmq::context_t& ctx, const bench_options& o, const cluster& workers,
                uint32_t replicas);

  /// One check of every node. With `count_all`, the presence scan counts
  /// every missing key; otherwise each worker's scan stops at its first
  /// miss, and the scan is skipped for nodes whose counts already differ.
  soak_verdict check(bool count_all);

private:
  node_verdict check_node(const node_endpoints& node, bool count_all,
                          const std::vector<std::vector<int64_t>>& truth);

  zmq::context_t* ctx_;
  const bench_options* opts_;
  const cluster* workers_;
  uint32_t replicas_;
};

} // namespace lmcc::bench
