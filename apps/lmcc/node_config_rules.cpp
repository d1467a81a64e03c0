// Rules between `lmcc node`'s options, applied once every layer is read: two
// keys for one setting, a legacy fallback, a cluster's member list against this
// node and its replica count, fault injection against the build. The options
// themselves are in node_config_table.cpp.
#include "apps/lmcc/node_config_table.hpp"
#include "faults/fault_injection.hpp"

#include <algorithm>
#include <string>
#include <vector>

namespace lmcc::apps::config {

std::vector<std::string> fault_injection_errors(const node_options& options, bool built) {
  std::vector<std::string> errors;
  const std::string planted = std::to_string(static_cast<int>(options.planted_bug));
  if (!built) {
    // A release build: the code is not there, whatever the setting says.
    const std::string option = faults::build_option;
    const std::string why = ", but this lmcc is built without fault injection (the CMake option " +
                            option + " is OFF, as in every release build; a test build passes -D" +
                            option + "=ON, as `make build` does)";
    if (options.fault_injection)
      errors.push_back("lmcc_fault_injection: on" + why);
    if (options.planted() != planted_bug_kind::none)
      errors.push_back("lmcc_planted_bug: " + planted + why);
    return errors;
  }
  // A planted bug only where faults may be injected.
  if (options.planted() != planted_bug_kind::none && !options.fault_injection)
    errors.push_back("lmcc_planted_bug: " + planted +
                     " needs lmcc_fault_injection on (it is for chaos-checker tests only)");
  return errors;
}

void apply_cross_option_rules(resolve_state& s) {
  // -- controller_monitor_ports null: LMCache's legacy layout, pull only.
  uint16_t legacy_port = s.legacy_monitor_port.value_or(legacy_default_monitor_port);
  if (!s.monitor_ports_null) {
    if (s.legacy_monitor_port)
      s.warnings.push_back("--monitor-port " + std::to_string(legacy_port) +
                           " ignored: it applies only when controller_monitor_ports is null");
  } else {
    s.options.zmq.pull_port = legacy_port;
    s.options.zmq.reply_port.reset();
    s.options.zmq.heartbeat_port.reset();
    // Without a reply socket workers cannot register, so say so.
    s.warnings.push_back("controller_monitor_ports is null: legacy mode, PULL on port " +
                         std::to_string(legacy_port) +
                         " only, no reply and no heartbeat socket (workers cannot register)");
  }

  // -- a cluster: this node is a member, ids are distinct, R fits.
  if (const auto& c = s.options.cluster; c.enabled()) {
    const auto& self = s.options.controller.node_id;
    std::vector<std::string> ids;
    for (const auto& m : c.members) {
      if (std::find(ids.begin(), ids.end(), m.id) != ids.end())
        s.errors.push_back("lmcc_cluster_members: node id \"" + m.id + "\" is listed twice");
      ids.push_back(m.id);
    }
    if (std::find(ids.begin(), ids.end(), self) == ids.end())
      s.errors.push_back("lmcc_cluster_members: this node's id \"" + self +
                         "\" (lmcc_node_id) is not in the member list");
    if (c.replicas > c.members.size())
      s.errors.push_back("lmcc_replicas: " + std::to_string(c.replicas) + " owners per slot but " +
                         std::to_string(c.members.size()) + " members");
    // A greeting's interval at or above the timeout takes healthy peers for down.
    for (const auto& [key, interval] :
         {std::pair{"lmcc_cluster_heartbeat_ms", c.heartbeat_interval},
          std::pair{"lmcc_cluster_quiet_heartbeat_ms", c.quiet_heartbeat_interval}})
      if (interval >= c.failure_timeout)
        s.errors.push_back(std::string{key} + ": " + std::to_string(interval.count()) +
                           " ms is not below lmcc_cluster_failure_timeout_ms (" +
                           std::to_string(c.failure_timeout.count()) +
                           " ms): peers would be taken as down between two greetings");
  }

  // -- TLS between nodes needs all three files, and a cluster.
  if (const auto& c = s.options.cluster;
      !c.tls_ca_file.empty() || !c.tls_cert_file.empty() || !c.tls_key_file.empty()) {
    if (c.tls_ca_file.empty() || c.tls_cert_file.empty() || c.tls_key_file.empty())
      s.errors.push_back("lmcc_cluster_tls_ca_file, lmcc_cluster_tls_cert_file and "
                         "lmcc_cluster_tls_key_file: set all three or none");
    else if (!c.enabled())
      s.errors.push_back("lmcc_cluster_tls_*: TLS between nodes needs lmcc_cluster_members");
  }

  // -- HTTPS needs both halves.
  if (const auto& sec = s.options.http.security;
      sec.tls_cert_file.empty() != sec.tls_key_file.empty())
    s.errors.push_back("lmcc_http_tls_cert_file and lmcc_http_tls_key_file: set both or neither");

  // -- fault injection only in a build that has it; a planted bug only where
  // faults may be injected.
  for (auto& e : fault_injection_errors(s.options, faults::built))
    s.errors.push_back(std::move(e));

  // -- lmcc_none_hash or lmcc_python_hash_seed: the higher layer wins.
  const auto& none = s.none_hash;
  const auto& seed = s.python_hash_seed;
  if (none && seed && none->from == seed->from) {
    s.errors.push_back(seed->label + ": set lmcc_none_hash or lmcc_python_hash_seed, not both (" +
                       none->label + ")");
    return;
  }
  const auto& winner =
      (none && seed) ? (none->from > seed->from ? none : seed) : (none ? none : seed);
  if (winner)
    s.options.controller.chunk_hashing.none_hash = winner->none_hash;
}

} // namespace lmcc::apps::config
