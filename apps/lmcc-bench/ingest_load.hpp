// ingest_load: the measured load that ingest and flood share. The workers push
// random admits (and --evict-ratio evicts), either exactly --ops ops in total
// (equal work for every controller: a controller that takes ops faster than it
// applies them gets no more work than one that pushes back) or for --duration;
// at --rate ops/s or as fast as the controller's PULL sockets take them. The
// controller's key count is sampled every 200 ms on a connection of its own
// (a miss is counted, never waited out), then the run waits until the count
// equals the ground truth. The headline figure is
//   applied ops/s = ops sent / (time from the first push until the controller's
//                   key count equals the ground truth),
// and with --pid, the controller's CPU per applied op up to that point and
// including --post-seconds after it (flushes and compactions the load caused).
// With --nodes (a non-empty controller_nodes), the run also waits until the
// nodes' shards have applied every copy (the sum over the nodes of
// lmcc_shard_ops has grown by R x the ops sent, R the replica count), and
// reports that time, the ops applied as (sum of shard ops) / R, and each
// node's shard ops, CPU per op, RSS and entries at that point.
//
//   ingest_load load{c, keys, node, opts, &nodes};
//   load.push();  load.converge();  load.post_window();
//   load.add_to(report);
//
// Context: used from one scenario thread; push() runs the workers' threads.
#pragma once

#include "apps/lmcc-bench/cluster.hpp"
#include "apps/lmcc-bench/controller_nodes.hpp"
#include "apps/lmcc-bench/proc_stats.hpp"
#include "apps/lmcc-bench/report.hpp"
#include "apps/lmcc-bench/scenario_support.hpp"

#include <array>
#include <map>
#include <optional>

namespace lmcc::bench {

class ingest_load {
public:
  /// `nodes` may be null or empty (one controller: no per-node figures).
  ingest_load(cluster& c, key_tracker& keys, const process_set& node, const bench_options& o,
              controller_nodes* nodes = nullptr);

  /// Pushes until the workers have sent their share of --ops (or --duration
  /// has passed), sampling the key count meanwhile.
  void push();

  /// Waits (--settle-timeout) until the key count equals the ground truth
  /// and, with nodes, until every copy is applied.
  void converge();

  /// Waits --post-seconds after convergence and reads the controller's CPU.
  void post_window();

  /// The figures and checks of the load (ops, rates, lag, CPU, key count).
  void add_to(report& r) const;

  steady::time_point t0() const { return t0_; }
  double push_seconds() const { return push_s_; }
  uint64_t ops_sent() const { return sent_; }
  const convergence& result() const { return conv_; }
  /// The key-count samples (push() must have run).
  const key_sampler& sampler() const { return *sampler_; }

private:
  /// Counter `counter` of ingest_load.cpp's `counted` list since the push began.
  uint64_t pushed(const cluster& c, size_t counter) const;
  /// CPU per applied op of each thread name, push start to convergence.
  void add_thread_use(report& r) const;

  cluster* cluster_;
  const bench_options* opts_;
  const process_set* node_;
  key_tracker* keys_;
  steady::time_point t0_;
  std::optional<key_sampler> sampler_; // made when the push starts: its clock is t0_
  double push_s_ = 0;
  uint64_t sent_ = 0;
  std::array<uint64_t, 6> at_start_{};
  uint64_t max_lag_ = 0;
  uint64_t lag_at_end_ = 0;
  double last_push_sample_t_ = 0;
  uint64_t count_at_last_push_sample_ = 0;
  convergence conv_;
  cpu_marks cpu_;
  std::map<std::string, thread_use> threads_start_, threads_converged_;
  double push_end_read_s_ = 0;
  controller_nodes* nodes_;
  std::vector<node_figures> nodes_start_;
  std::vector<node_figures> nodes_end_;
  std::optional<double> all_copies_s_; ///< since t0, when every copy was seen applied
};

} // namespace lmcc::bench
