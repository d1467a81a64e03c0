// idle: what the controller costs while nobody asks it anything. For
// --duration seconds the bench sends nothing and reads, at the start and the
// end, every live thread of every --pid process (or every --nodes node's,
// found through GET /threads): its time on a CPU from schedstat (exact to the
// nanosecond, where utime + stime counts 10 ms ticks per thread) and its
// context switches. The figures are per second of wall time, summed over the
// processes, and per thread name, so that what still wakes up shows by name.
//
// Nothing may run meanwhile: no workers, no lookups. The bench itself only
// sleeps. A thread that starts or ends within the window is left out.
#include "apps/lmcc-bench/proc_stats.hpp"
#include "apps/lmcc-bench/scenario_support.hpp"
#include "apps/lmcc-bench/scenarios.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <thread>

namespace lmcc::bench {

report run_idle(scenario_env& env) {
  const auto& o = env.opts;
  report r{"idle"};
  r.set_config(config_json(o));
  if (o.pids.empty()) {
    r.check("the controller's processes are known", false,
            "give --pid P[,P...] (or --nodes of nodes on this host)");
    return r;
  }
  const process_set processes{o.pids};
  const auto start = processes.threads_by_name();
  const auto t0 = steady::now();
  std::this_thread::sleep_for(seconds_to_duration(o.duration_s));
  const double seconds = seconds_since(t0);
  const auto end = processes.threads_by_name();

  struct use_per_second {
    std::string name;
    uint32_t threads = 0;
    double cpu_ms = 0;
    double switches = 0;
  };
  std::vector<use_per_second> by_name;
  double cpu_ms = 0;
  double switches = 0;
  for (const auto& [name, after] : end) {
    const auto it = start.find(name);
    if (it == start.end() || it->second.threads != after.threads)
      continue; // threads of this name came or went: their counts do not compare
    const double ms =
        static_cast<double>(after.run_ns - std::min(after.run_ns, it->second.run_ns)) / 1e6 /
        seconds;
    const double sw =
        static_cast<double>(after.switches - std::min(after.switches, it->second.switches)) /
        seconds;
    by_name.push_back({name, after.threads, ms, sw});
    cpu_ms += ms;
    switches += sw;
  }
  std::sort(by_name.begin(), by_name.end(),
            [](const auto& a, const auto& b) { return a.cpu_ms > b.cpu_ms; });

  r.add("seconds", "window", seconds, "s");
  r.add("processes", "controller processes", static_cast<double>(o.pids.size()), "processes");
  r.add("cpu_ms_per_s", "CPU, every thread of every process (schedstat)", cpu_ms, "ms/s");
  r.add("switches_per_s", "context switches (voluntary + involuntary)", switches, "switches/s");
  nlohmann::json threads = nlohmann::json::array();
  for (const auto& t : by_name) {
    threads.push_back({{"name", t.name},
                       {"threads", t.threads},
                       {"cpu_ms_per_s", t.cpu_ms},
                       {"switches_per_s", t.switches}});
    if (t.switches < 0.05 && t.cpu_ms < 0.005)
      continue;
    std::string key = "thread_cpu_ms_per_s_";
    for (char ch : t.name)
      key += std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
    r.add(key, fmt::format("  thread {} (x{}): {:.1f} switches/s", t.name, t.threads, t.switches),
          t.cpu_ms, "ms/s");
  }
  r.extra()["threads"] = std::move(threads);
  r.check("every process stayed up", processes.cpu_seconds().has_value(),
          "a process that ended makes the figures meaningless");
  return r;
}

} // namespace lmcc::bench
