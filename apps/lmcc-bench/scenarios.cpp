#include "apps/lmcc-bench/scenarios.hpp"

#include <stdexcept>

namespace lmcc::bench {

const std::vector<std::string>& scenario_names() {
  static const std::vector<std::string> names{"ingest",     "lookup",  "p2p",   "fullsync",
                                              "memory",     "restart", "flood", "floor",
                                              "heartbeats", "soak",    "idle"};
  return names;
}

report run_scenario(scenario_env& env) {
  const std::string& name = env.opts.scenario;
  if (name == "ingest")
    return run_ingest(env);
  if (name == "lookup")
    return run_lookup(env);
  if (name == "p2p")
    return run_p2p(env);
  if (name == "fullsync")
    return run_fullsync(env);
  if (name == "memory")
    return run_memory(env);
  if (name == "restart")
    return run_restart(env);
  if (name == "flood")
    return run_flood(env);
  if (name == "floor")
    return run_floor(env);
  if (name == "heartbeats")
    return run_heartbeats(env);
  if (name == "soak")
    return run_soak(env);
  if (name == "idle")
    return run_idle(env);
  throw std::invalid_argument("unknown scenario '" + name + "'");
}

} // namespace lmcc::bench
