// cluster: the W x TP simulated workers of one run, and the threads that drive
// them.
//
// Instance k is "<prefix>-k"; its ranks 0..tp-1 are its workers. Workers are
// registered in order (instance-major), so the controller's registration
// order, which seed-era lookups depend on, is deterministic. On destruction
// every registered worker stops heartbeating and then sends DeRegisterMsg
// (unless --keep-registered), so repeated runs start from a clean controller
// state. With --nodes, worker i's PUSH and DEALER reach the nodes
// pick_node(push, i) and pick_node(reply, i).
//
//   cluster c{ctx, opts};          // against the controller node(s) of opts
//   c.register_all();
//   c.run_all([&](simulated_worker& w, std::stop_token) { w.push_random(...); });
//
// Context: the cluster object belongs to the thread that made it; run_all /
// start_all hand each worker to one thread of its own.
#pragma once

#include "apps/lmcc-bench/bench_options.hpp"
#include "apps/lmcc-bench/lookup_clients.hpp"
#include "apps/lmcc-bench/simulated_worker.hpp"

#include <exception>
#include <functional>
#include <memory>
#include <stop_token>
#include <thread>
#include <vector>

namespace lmcc::bench {

class cluster {
public:
  /// Workers of the controller(s) in `opts`; with `sink_url`, workers that
  /// only push there (no controller: no registration, no DEALER).
  cluster(zmq::context_t& ctx, const bench_options& opts, const std::string& sink_url = {});
  ~cluster();
  cluster(const cluster&) = delete;
  cluster& operator=(const cluster&) = delete;

  /// Registers every worker (throws unreachable_error) and starts its service.
  void register_all();

  size_t size() const { return workers_.size(); }
  simulated_worker& operator[](size_t i) { return *workers_[i]; }
  const simulated_worker& operator[](size_t i) const { return *workers_[i]; }

  /// The position of `w` in this cluster (instance-major registration order).
  size_t index_of(const simulated_worker& w) const;

  /// Sum of the workers' ground-truth set sizes.
  uint64_t truth_total() const;

  /// Sum of one counter over all workers.
  uint64_t sum(const std::atomic<uint64_t> worker_counters::*counter) const;

  using worker_fn = std::function<void(simulated_worker&, std::stop_token)>;

  /// Runs `fn` for every worker, one thread each, and waits for all; the first
  /// exception thrown by any of them is rethrown here.
  void run_all(const worker_fn& fn);

  /// Background version: the threads stop (stop_token) and join when the
  /// returned handle is destroyed or stop() is called.
  class running {
  public:
    running() = default;
    running(running&&) noexcept = default;
    running& operator=(running&&) noexcept = default;
    ~running();
    /// Stops and joins the threads; rethrows the first exception one threw.
    void stop();

  private:
    friend class cluster;
    std::vector<std::jthread> threads_;
    std::shared_ptr<std::vector<std::exception_ptr>> errors_;
  };
  running start_all(const worker_fn& fn);

  /// Every worker admits all prompts of its instance (pinned keys).
  void admit_prompts(const prompt_corpus& corpus, steady::time_point deadline);

  /// Sum of the sync epochs of an instance's ranks: a lookup overlapped a full
  /// sync of the instance if this changed across it or was odd for any rank.
  uint64_t sync_epoch(size_t instance) const;
  bool syncing(size_t instance) const;

  /// The ground truth of who holds what, per instance (peer URLs by rank).
  std::vector<instance_info> instance_infos() const;

  /// Stops every worker's heartbeats, then DeRegisterMsg for every registered
  /// worker (also done by the destructor).
  void deregister_all();

private:
  const bench_options* opts_;
  std::vector<std::unique_ptr<simulated_worker>> workers_;
  size_t registered_ = 0;
};

} // namespace lmcc::bench
