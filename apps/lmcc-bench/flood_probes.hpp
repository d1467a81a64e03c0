// flood_probes: requests sent at a fixed, modest rate while the controller is
// flooded with KV events, each kind from a thread and a connection of its own
// with a per-request timeout, so that a controller that stops answering costs
// counted misses, never a blocked run:
//
//  * lookup:    HTTP POST /lookup (a router), answer checked against the
//               ground truth as the lookup scenario does;
//  * p2p:       BatchedP2PLookupMsg on a DEALER to the reply ROUTER, checked;
//  * heartbeat: HeartbeatMsg, as worker 0, on a DEALER to the heartbeat URL the
//               controller handed out at registration; a HeartbeatRetMsg is a
//               correct answer.
//
// After each request the next is due one interval after the previous was due,
// but never earlier than now: a slow answer delays the schedule, it does not
// cause a burst. A reply later than the timeout is unanswered (the DEALER is
// recreated, as LMCache's worker does, so it cannot answer the next request).
//
//   flood_probes probes{env, corpus, infos, c[0], opts};   // threads start
//   ...;  probes.stop();  probes.add_to(report);
//
// Context: made, stopped and read from one thread; each probe runs in its own.
#pragma once

#include "apps/lmcc-bench/key_space.hpp"
#include "apps/lmcc-bench/lookup_clients.hpp"
#include "apps/lmcc-bench/report.hpp"
#include "apps/lmcc-bench/scenarios.hpp"
#include "apps/lmcc-bench/simulated_worker.hpp"

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace lmcc::bench {

enum class probe_outcome { correct, wrong, error, unanswered };

struct probe_reply {
  probe_outcome outcome = probe_outcome::unanswered;
  double latency_us = 0;
  std::string detail;                ///< what was wrong
  std::vector<std::string> commands; ///< heartbeat: the commands in the reply
};

struct probe_stats {
  uint64_t sent = 0;
  uint64_t correct = 0;
  uint64_t wrong = 0;                            ///< well-formed but not the ground truth
  uint64_t errors = 0;                           ///< ErrorMsg, HTTP error, malformed reply
  uint64_t unanswered = 0;                       ///< nothing within the timeout
  std::map<std::string, uint64_t> commands;      ///< heartbeat: command -> times received
  std::vector<double> latencies_us;              ///< of every reply that came
  std::vector<std::pair<double, double>> series; ///< (t, latency us); -1 = unanswered
  std::vector<std::string> problems;             ///< the first few
};

/// One probe: a thread sending requests at `rate` per second until stopped.
class probe_thread {
public:
  using request_fn = std::function<probe_reply()>;
  /// Builds the request function inside the probe's thread (its sockets are
  /// made and used there).
  using factory = std::function<request_fn()>;

  probe_thread(std::string name, double rate, factory make);
  probe_thread(const probe_thread&) = delete;
  probe_thread& operator=(const probe_thread&) = delete;

  void stop();
  const std::string& name() const { return name_; }
  double rate() const { return rate_; }
  /// Valid after stop().
  const probe_stats& stats() const { return stats_; }

private:
  void loop(std::stop_token stop, const factory& make);

  std::string name_;
  double rate_;
  steady::time_point t0_ = steady::now();
  probe_stats stats_; // written by the thread only, read after it joined
  std::jthread thread_;
};

class flood_probes {
public:
  flood_probes(scenario_env& env, const prompt_corpus& corpus, std::vector<instance_info> infos,
               const simulated_worker& heartbeat_as);
  void stop();

  /// Per probe: answered, unanswered, errors, p50/p90/p99/max; the checks
  /// (no error replies, every lookup answer right); series into extra().
  void add_to(report& r) const;

private:
  std::vector<instance_info> infos_;
  std::vector<std::unique_ptr<probe_thread>> probes_;
  bool heartbeat_available_ = false;
};

} // namespace lmcc::bench
