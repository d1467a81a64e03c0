// heartbeats: what a fleet's heartbeats cost the controller. --workers x --tp
// workers register and heartbeat every --heartbeat-interval seconds for
// --duration seconds, and push nothing. The figure is the controller's CPU per
// heartbeat answered (with --pid, or --nodes: all nodes' processes summed),
// over a window that starts once every worker's first heartbeat was answered
// (a first heartbeat is stored; the later ones are the steady cost). In a
// cluster this is where a heartbeat's forwarding and replication show.
//
// A fresh controller asks every worker for a full sync, and asks again on
// every heartbeat until the sync starts. With --full-sync-on-request the
// workers run those syncs (they hold no keys) and the window starts once the
// asks have stopped: the steady state of a fleet that owes nothing. Without
// it every heartbeat in the window carries an ask.
#include "apps/lmcc-bench/cluster.hpp"
#include "apps/lmcc-bench/scenario_support.hpp"
#include "apps/lmcc-bench/scenarios.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <thread>

namespace lmcc::bench {

report run_heartbeats(scenario_env& env) {
  const auto& o = env.opts;
  report r{"heartbeats"};
  r.set_config(config_json(o));
  if (o.heartbeat_interval_s <= 0) {
    r.check("--heartbeat-interval is set", false, "this scenario needs heartbeats (> 0 s)");
    return r;
  }
  const process_set node{o.pids};
  check_controllers_reachable(o);
  cluster c{env.ctx, o};
  c.register_all();
  const auto interval = seconds_to_duration(o.heartbeat_interval_s);
  cluster::running serving;
  if (o.full_sync_on_request) {
    const auto until = steady::now() + seconds_to_duration(o.duration_s + 60) + 8 * interval;
    serving = c.start_all([until](simulated_worker& w, std::stop_token stop) {
      w.serve_full_sync_requests(push_limits{.deadline = until, .stop = std::move(stop)});
    });
  }

  // Every worker's first heartbeat answered: what follows is the steady cost.
  const auto first_deadline =
      steady::now() + std::chrono::duration_cast<steady::duration>(
                          std::chrono::duration<double>(4 * o.heartbeat_interval_s + 10));
  const auto everyone_beat = [&] {
    for (size_t i = 0; i < c.size(); ++i)
      if (c[i].counters().heartbeats_ok.load() == 0)
        return false;
    return true;
  };
  while (!everyone_beat() && steady::now() < first_deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20)); // polling a counter
  r.check("every worker's first heartbeat answered", everyone_beat(),
          fmt::format("within {:.0f} s", 4 * o.heartbeat_interval_s + 10));
  if (o.full_sync_on_request) {
    // Settled once two intervals pass with no ask (every worker beat twice).
    const auto settle_deadline = steady::now() + std::chrono::seconds{60};
    bool settled = false;
    while (!settled && steady::now() < settle_deadline) {
      const uint64_t asks = c.sum(&worker_counters::full_sync_requests);
      std::this_thread::sleep_for(2 * interval + std::chrono::milliseconds{200}); // a window
      settled = c.sum(&worker_counters::full_sync_requests) == asks;
    }
    r.check("the full syncs asked for are done before the window", settled,
            fmt::format("{} syncs run", c.sum(&worker_counters::full_syncs)));
  }
  const uint64_t asks0 = c.sum(&worker_counters::full_sync_requests);

  const uint64_t ok0 = c.sum(&worker_counters::heartbeats_ok);
  const uint64_t failed0 = c.sum(&worker_counters::heartbeat_failures);
  const auto cpu0 = node.cpu_seconds();
  const auto t0 = steady::now();
  std::this_thread::sleep_for(std::chrono::duration<double>(o.duration_s)); // the window
  const auto t1 = steady::now();
  const auto cpu1 = node.cpu_seconds();
  const uint64_t answered = c.sum(&worker_counters::heartbeats_ok) - ok0;
  const uint64_t asked = c.sum(&worker_counters::full_sync_requests) - asks0;
  const uint64_t failed = c.sum(&worker_counters::heartbeat_failures) - failed0;
  const double seconds = std::chrono::duration<double>(t1 - t0).count();

  r.add("workers", "workers heartbeating", static_cast<double>(c.size()), "workers");
  r.add("heartbeats_per_s", "heartbeats answered per second",
        static_cast<double>(answered) / seconds, "1/s");
  r.add("heartbeat_failures", "heartbeats unanswered or refused in the window",
        static_cast<double>(failed), "heartbeats");
  r.add("full_sync_asks", "answers in the window that asked for a full sync",
        static_cast<double>(asked), "heartbeats");
  if (cpu0 && cpu1) {
    const double cpu = *cpu1 - *cpu0;
    r.add("controller_cpu_ms_per_s", "controller CPU (all its threads, summed over --pid)",
          cpu * 1000 / seconds, "ms/s");
    if (answered > 0)
      r.add("cpu_us_per_heartbeat", "controller CPU per heartbeat answered",
            cpu * 1e6 / static_cast<double>(answered), "us");
  }
  r.check("every heartbeat in the window answered", failed == 0,
          fmt::format("{} answered, {} not", answered, failed));
  serving.stop();
  c.deregister_all();
  return r;
}

} // namespace lmcc::bench
