// cluster_command's pure parts: the port plan, the node configs, the check of
// a kept config, the node-ready line and the judgement of /cluster/status
// replies (cluster_command.hpp). No process, signal or file is touched here
// except by fetch_node_status's HTTP request; cluster_command.cpp is the
// process side.
#include "apps/lmcc/launcher/cluster_command.hpp"

#include <CLI/CLI.hpp>
#include <httplib.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <map>
#include <set>
#include <utility>

namespace lmcc::apps {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

// Node i's ports are base + 10*i + offset; a stride of 10 leaves room for
// sockets a node may grow later without renumbering existing clusters.
constexpr unsigned port_stride = 10;
constexpr unsigned http_offset = 0;
constexpr unsigned pull_offset = 1;
constexpr unsigned reply_offset = 2;
constexpr unsigned heartbeat_offset = 3;
constexpr unsigned cluster_offset = 4;

constexpr std::array<std::string_view, 8> log_levels = {"trace",   "debug", "info",     "warn",
                                                        "warning", "error", "critical", "off"};

std::string node_id(size_t index) {
  return "n" + std::to_string(index + 1);
}

} // namespace

// -- command line -------------------------------------------------------------------

void add_cluster_up_flags(CLI::App& up_cmd, cluster_up_options& options) {
  up_cmd.add_option("--nodes", options.nodes, "number of nodes (ids n1..nN)")
      ->required()
      ->type_name("N")
      ->check(CLI::Range(1U, 1000U));
  up_cmd
      .add_option("--standby", options.standby,
                  "extra nodes (ids after the N members) started as standby: they own "
                  "nothing until POST /cluster/members adds them (default 0)")
      ->type_name("K")
      ->check(CLI::Range(0U, 64U));
  up_cmd
      .add_option("--data-dir", options.data_dir,
                  "cluster folder: cluster.secret, and nI/lmcc.yaml, nI/data, nI/node.log")
      ->required()
      ->type_name("DIR");
  up_cmd.add_option("--host", options.host, "host every node binds and is reached at")
      ->capture_default_str();
  up_cmd
      .add_option("--base-port", options.base_port,
                  "node i (0-based) listens on P+10i (HTTP), +1 (pull), +2 (reply), "
                  "+3 (heartbeat), +4 (cluster)")
      ->check(CLI::Range(1, 65535))
      ->type_name("P")
      ->capture_default_str();
  up_cmd
      .add_option("--replicas", options.replicas,
                  "owners per slot (default 2, at most the node count)")
      ->check(CLI::Range(1U, 64U))
      ->type_name("R");
  up_cmd.add_option("--slots", options.slots, "key-space slots, a power of two")
      ->check(CLI::Validator(
          [](const std::string& text) -> std::string {
            uint64_t value = 0;
            if (!CLI::detail::lexical_cast(text, value) || value == 0 ||
                value > (uint64_t{1} << 31) || (value & (value - 1)) != 0)
              return "expected a power of two in 1..2147483648, got " + text;
            return {};
          },
          "POWER-OF-TWO"))
      ->type_name("S")
      ->capture_default_str();
  up_cmd
      .add_option("--restore-from", options.restore_from,
                  "folder of snapshots, one per node id (SNAPDIR/n1, ...): each node boots "
                  "from its own")
      ->type_name("SNAPDIR");
  up_cmd
      .add_option("--log-level", options.log_level,
                  "log level of the nodes (written into new configs) and of this launcher")
      ->check(CLI::IsMember(std::vector<std::string>(log_levels.begin(), log_levels.end())))
      ->capture_default_str();
  up_cmd.add_flag("--rewrite-config", options.rewrite_config,
                  "overwrite existing nI/lmcc.yaml files (their data is kept)");
  up_cmd
      .add_option_function<int>(
          "--ready-timeout",
          [&options](const int& seconds) { options.ready_timeout = std::chrono::seconds(seconds); },
          "seconds each node may take to become ready (default 60)")
      ->type_name("SECONDS")
      ->check(CLI::Range(1, 86400));
  up_cmd
      .add_option_function<int>(
          "--stop-timeout",
          [&options](const int& seconds) { options.stop_timeout = std::chrono::seconds(seconds); },
          "seconds stopping nodes may take before they are killed (default 30)")
      ->type_name("SECONDS")
      ->check(CLI::Range(1, 86400));
}

// -- plan ---------------------------------------------------------------------------

msg::expected<cluster_plan> plan_cluster(const cluster_up_options& options) {
  using error = msg::codec_error;
  if (options.nodes == 0)
    return error{"--nodes must be at least 1"};
  if (options.data_dir.empty())
    return error{"--data-dir must not be empty"};
  if (options.host.empty())
    return error{"--host must not be empty"};
  const uint64_t last_port = uint64_t{options.base_port} +
                             uint64_t{port_stride} * (options.nodes + options.standby - 1) +
                             cluster_offset;
  if (options.base_port == 0 || last_port > 65535)
    return error{"--base-port " + std::to_string(options.base_port) + " with --nodes " +
                 std::to_string(options.nodes) + " needs ports up to " + std::to_string(last_port) +
                 ", past 65535"};
  // A node refuses more owners per slot than members, so the default follows
  // small clusters down; an explicit --replicas is taken literally.
  const uint32_t replicas = options.replicas.value_or(std::min<uint32_t>(2, options.nodes));
  if (replicas == 0 || replicas > options.nodes)
    return error{"--replicas " + std::to_string(replicas) + " exceeds --nodes " +
                 std::to_string(options.nodes) + " (a slot cannot have more owners than members)"};
  if (options.slots == 0 || (options.slots & (options.slots - 1)) != 0 ||
      options.slots > (uint32_t{1} << 31))
    return error{"--slots must be a power of two in 1..2147483648, got " +
                 std::to_string(options.slots)};
  if (std::find(log_levels.begin(), log_levels.end(), options.log_level) == log_levels.end())
    return error{"--log-level: unknown level '" + options.log_level + "'"};

  // Absolute paths, because the configs are also used by `lmcc node` started
  // by hand from any directory.
  auto absolute = [](const std::string& path) -> std::optional<fs::path> {
    std::error_code ec;
    fs::path p = fs::absolute(path, ec).lexically_normal();
    if (ec)
      return std::nullopt;
    if (!p.has_filename() && p.has_parent_path() && p != p.root_path())
      p = p.parent_path(); // "DIR/" -> "DIR"
    return p;
  };
  auto dir = absolute(options.data_dir);
  if (!dir)
    return error{"--data-dir: cannot make '" + options.data_dir + "' absolute"};
  std::optional<fs::path> restore_dir;
  if (!options.restore_from.empty()) {
    restore_dir = absolute(options.restore_from);
    if (!restore_dir)
      return error{"--restore-from: cannot make '" + options.restore_from + "' absolute"};
  }

  cluster_plan plan;
  plan.dir = *dir;
  plan.secret_file = *dir / "cluster.secret";
  plan.host = options.host;
  plan.replicas = replicas;
  plan.slots = options.slots;
  plan.log_level = options.log_level;
  for (uint32_t i = 0; i < options.nodes + options.standby; ++i) {
    planned_node node;
    node.id = node_id(i);
    node.standby = i >= options.nodes;
    auto base = static_cast<unsigned>(options.base_port) + port_stride * i;
    node.http_port = static_cast<uint16_t>(base + http_offset);
    node.pull_port = static_cast<uint16_t>(base + pull_offset);
    node.reply_port = static_cast<uint16_t>(base + reply_offset);
    node.heartbeat_port = static_cast<uint16_t>(base + heartbeat_offset);
    node.cluster_port = static_cast<uint16_t>(base + cluster_offset);
    node.dir = *dir / node.id;
    node.config_path = node.dir / "lmcc.yaml";
    node.data_dir = node.dir / "data";
    node.log_path = node.dir / "node.log";
    if (restore_dir)
      node.restore_from = *restore_dir / node.id;
    plan.nodes.push_back(std::move(node));
  }
  return plan;
}

// -- config text --------------------------------------------------------------------

std::string node_config_yaml(const cluster_plan& plan, const planned_node& node) {
  YAML::Emitter out;
  out << YAML::BeginMap;
  out << YAML::Key << "controller_host" << YAML::Value << plan.host;
  out << YAML::Key << "controller_port" << YAML::Value << node.http_port;
  out << YAML::Key << "controller_monitor_ports" << YAML::Value << YAML::Flow << YAML::BeginMap
      << YAML::Key << "pull" << YAML::Value << node.pull_port << YAML::Key << "reply" << YAML::Value
      << node.reply_port << YAML::Key << "heartbeat" << YAML::Value << node.heartbeat_port
      << YAML::EndMap;
  out << YAML::Key << "lmcc_node_id" << YAML::Value << node.id;
  out << YAML::Key << "lmcc_data_dir" << YAML::Value << node.data_dir.string();
  out << YAML::Key << "lmcc_cluster_members" << YAML::Value << YAML::BeginSeq;
  for (const auto& member : plan.nodes) {
    out << YAML::Flow << YAML::BeginMap << YAML::Key << "id" << YAML::Value << member.id
        << YAML::Key << "host" << YAML::Value << plan.host << YAML::Key << "port" << YAML::Value
        << member.cluster_port;
    if (member.standby)
      out << YAML::Key << "standby" << YAML::Value << true;
    out << YAML::EndMap;
  }
  out << YAML::EndSeq;
  out << YAML::Key << "lmcc_replicas" << YAML::Value << plan.replicas;
  out << YAML::Key << "lmcc_slots" << YAML::Value << plan.slots;
  out << YAML::Key << "lmcc_cluster_secret_file" << YAML::Value << plan.secret_file.string();
  out << YAML::Key << "lmcc_log_level" << YAML::Value << plan.log_level;
  out << YAML::EndMap;
  return "# lmcc node " + node.id + " of the cluster in " + plan.dir.string() +
         ", written by `lmcc cluster up`.\n"
         "# Restart this node alone with: lmcc node --config " +
         node.config_path.string() + "\n" + out.c_str() + "\n";
}

namespace {

/// A YAML value the way the node reads it: scalars stay text, and a scalar
/// holding JSON (LMCache writes controller_monitor_ports that way) is parsed.
json loose_value(const YAML::Node& node) {
  switch (node.Type()) {
  case YAML::NodeType::Scalar: {
    const std::string& text = node.Scalar();
    if (!text.empty() && (text.front() == '{' || text.front() == '[')) {
      json parsed = json::parse(text, nullptr, false);
      if (!parsed.is_discarded())
        return parsed;
    }
    return text;
  }
  case YAML::NodeType::Sequence: {
    json out = json::array();
    for (const auto& item : node)
      out.push_back(loose_value(item));
    return out;
  }
  case YAML::NodeType::Map: {
    json out = json::object();
    for (const auto& item : node)
      out[item.first.Scalar()] = loose_value(item.second);
    return out;
  }
  default:
    return nullptr;
  }
}

/// A scalar as text; numbers (from JSON) in decimal.
std::string as_text(const json& value) {
  if (value.is_string())
    return value.get<std::string>();
  if (value.is_null())
    return "(absent)";
  return value.dump();
}

} // namespace

std::optional<std::string> config_mismatch(const std::string& yaml_text, const cluster_plan& plan,
                                           const planned_node& node) {
  json config;
  try {
    config = loose_value(YAML::Load(yaml_text));
  } catch (const YAML::Exception& e) {
    return std::string("it is not valid YAML: ") + e.what();
  }
  if (!config.is_object())
    return std::string("it is not a YAML mapping");
  auto field = [&](std::string_view key) -> json {
    auto it = config.find(key);
    return it == config.end() ? json() : *it;
  };
  auto differs = [](std::string_view key, const std::string& have,
                    const std::string& want) -> std::optional<std::string> {
    if (have == want)
      return std::nullopt;
    return std::string(key) + " is " + have + ", this command line gives " + want;
  };

  const std::pair<std::string_view, std::string> scalars[] = {
      {"lmcc_node_id", node.id},
      {"controller_host", plan.host},
      {"controller_port", std::to_string(node.http_port)},
      {"lmcc_data_dir", node.data_dir.string()},
      {"lmcc_cluster_secret_file", plan.secret_file.string()},
  };
  for (const auto& [key, want] : scalars)
    if (auto why = differs(key, as_text(field(key)), want))
      return why;

  json ports = field("controller_monitor_ports");
  const std::pair<const char*, uint16_t> wanted_ports[] = {
      {"pull", node.pull_port}, {"reply", node.reply_port}, {"heartbeat", node.heartbeat_port}};
  for (const auto& [name, want] : wanted_ports) {
    std::string have =
        ports.is_object() && ports.contains(name) ? as_text(ports[name]) : "(absent)";
    if (auto why =
            differs(std::string("controller_monitor_ports.") + name, have, std::to_string(want)))
      return why;
  }

  auto describe_members = [](const json& members) {
    std::string text;
    if (!members.is_array())
      return as_text(members);
    for (const auto& m : members) {
      text += text.empty() ? "" : ", ";
      if (!m.is_object()) {
        text += as_text(m);
        continue;
      }
      text += as_text(m.value("id", json())) + "@" + as_text(m.value("host", json())) + ":" +
              as_text(m.value("port", json()));
      if (m.contains("standby") && as_text(m["standby"]) != "false")
        text += " (standby)";
    }
    return "[" + text + "]";
  };
  json wanted_members = json::array();
  for (const auto& member : plan.nodes) {
    json entry = {
        {"id", member.id}, {"host", plan.host}, {"port", std::to_string(member.cluster_port)}};
    if (member.standby)
      entry["standby"] = true;
    wanted_members.push_back(std::move(entry));
  }
  if (auto why = differs("lmcc_cluster_members", describe_members(field("lmcc_cluster_members")),
                         describe_members(wanted_members)))
    return why;
  return std::nullopt;
}

// -- lines --------------------------------------------------------------------------

bool is_node_ready_line(std::string_view line, std::string_view id) {
  constexpr std::string_view marker = "node-ready node=";
  for (size_t at = line.find(marker); at != std::string_view::npos;
       at = line.find(marker, at + 1)) {
    // The marker starts a word (spdlog puts "[info] " before it) and the id
    // ends at a space, so n1 does not match n10's line.
    if (at != 0 && line[at - 1] != ' ')
      continue;
    std::string_view rest = line.substr(at + marker.size());
    if (rest.starts_with(id) &&
        (rest.size() == id.size() || rest[id.size()] == ' ' || rest[id.size()] == '\r'))
      return true;
  }
  return false;
}

std::string host_port(std::string_view host, uint16_t port) {
  std::string text = host.find(':') != std::string_view::npos && !host.starts_with('[')
                         ? "[" + std::string(host) + "]"
                         : std::string(host);
  return text + ":" + std::to_string(port);
}

std::string node_ready_line(const cluster_plan& plan, const planned_node& node, long pid) {
  return "node-ready node=" + node.id + " pid=" + std::to_string(pid) +
         " http=" + host_port(plan.host, node.http_port) +
         " pull=" + host_port(plan.host, node.pull_port) +
         " reply=" + host_port(plan.host, node.reply_port) +
         " heartbeat=" + host_port(plan.host, node.heartbeat_port) +
         " cluster=" + host_port(plan.host, node.cluster_port) +
         " config=" + node.config_path.string();
}

std::string describe_wait_status(int status) {
  if (WIFEXITED(status))
    return "exit:" + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    const char* name = sigabbrev_np(WTERMSIG(status));
    return name != nullptr ? std::string("signal:SIG") + name
                           : "signal:" + std::to_string(WTERMSIG(status));
  }
  return "unknown:" + std::to_string(status);
}

// -- readiness ----------------------------------------------------------------------

namespace {

/// The address to reach a node's HTTP API at: a wildcard bind is reached on
/// loopback.
std::string reach_host(const std::string& host) {
  if (host == "0.0.0.0")
    return "127.0.0.1";
  if (host == "::" || host == "[::]")
    return "::1";
  return host;
}

} // namespace

node_status fetch_node_status(const cluster_plan& plan, const planned_node& node) {
  node_status status{.id = node.id};
  httplib::Client client(reach_host(plan.host), node.http_port);
  client.set_connection_timeout(std::chrono::milliseconds(500));
  client.set_read_timeout(std::chrono::seconds(1));
  auto res = client.Get("/cluster/status");
  if (!res) {
    status.error = "GET /cluster/status: " + httplib::to_string(res.error());
  } else if (res->status != 200) {
    status.error = "GET /cluster/status: HTTP " + std::to_string(res->status);
  } else {
    json body = json::parse(res->body, nullptr, false);
    if (body.is_discarded())
      status.error = "GET /cluster/status: not JSON";
    else
      status.status = std::move(body);
  }
  return status;
}

std::optional<std::string> replication_backlog(const std::vector<node_status>& statuses) {
  for (const auto& s : statuses) {
    if (!s.status || !s.status->is_object())
      return s.id + ": no status";
    auto lag = s.status->find("replication_lag_sub_batches");
    if (lag == s.status->end() || !lag->is_number_integer())
      return s.id + ": no replication_lag_sub_batches";
    if (lag->get<int64_t>() != 0)
      return s.id + ": " + std::to_string(lag->get<int64_t>()) + " sub-batches queued for peers";
  }
  return std::nullopt;
}

std::filesystem::path launcher_pid_path(const std::filesystem::path& dir) {
  return dir / "launcher.pid";
}

std::filesystem::path launcher_events_path(const std::filesystem::path& dir) {
  return dir / "launcher-events.log";
}

cluster_verdict judge_cluster_status(const cluster_plan& plan,
                                     const std::vector<node_status>& statuses) {
  cluster_verdict verdict;
  auto not_ready = [&verdict](std::string reason) {
    verdict.ready = false;
    verdict.ring_version.clear();
    verdict.reason = std::move(reason);
    return verdict;
  };
  std::set<std::string> planned;
  for (const auto& node : plan.nodes)
    planned.insert(node.id);

  std::map<std::string, std::string> rings; // node id -> its ring version
  for (const auto& node : plan.nodes) {
    auto it = std::find_if(statuses.begin(), statuses.end(),
                           [&](const node_status& s) { return s.id == node.id; });
    if (it == statuses.end())
      return not_ready(node.id + ": no status");
    if (!it->status)
      return not_ready(node.id + ": " + (it->error.empty() ? "no status" : it->error));
    const json& status = *it->status;
    if (!status.is_object())
      return not_ready(node.id + ": /cluster/status is not a JSON object");
    // Another process on the port (a stale node of another cluster) must not
    // pass for this node.
    auto self = status.find("node");
    if (self == status.end() || !self->is_string() || self->get<std::string>() != node.id)
      return not_ready(node.id + ": answered as " +
                       (self == status.end() ? std::string("nobody") : as_text(*self)));

    auto ring = status.find("ring_version");
    if (ring == status.end() || ring->is_null() || as_text(*ring).empty())
      return not_ready(node.id + ": no ring_version yet");
    rings[node.id] = as_text(*ring);

    auto members = status.find("members");
    if (members == status.end() || !members->is_array())
      return not_ready(node.id + ": no member list");
    std::set<std::string> seen;
    for (const auto& member : *members) {
      if (!member.is_object() || !member.contains("id") || !member["id"].is_string())
        return not_ready(node.id + ": a member without an id");
      std::string id = member["id"].get<std::string>();
      if (!planned.contains(id))
        return not_ready(node.id + ": lists " + id + ", which is not in this cluster");
      seen.insert(id);
      auto live = member.find("live");
      if (live == member.end() || !live->is_boolean() || !live->get<bool>())
        return not_ready(node.id + ": sees " + id + " not live");
    }
    if (seen != planned) {
      std::string missing;
      for (const auto& id : planned)
        if (!seen.contains(id))
          missing += (missing.empty() ? "" : ",") + id;
      return not_ready(node.id + ": does not list " + missing);
    }
  }

  const std::string& first = rings.begin()->second;
  bool same = std::all_of(rings.begin(), rings.end(),
                          [&](const auto& entry) { return entry.second == first; });
  if (!same) {
    std::string versions;
    for (const auto& [id, version] : rings)
      versions += (versions.empty() ? "" : " ") + id + "=" + version;
    return not_ready("ring versions differ: " + versions);
  }
  verdict.ready = true;
  verdict.ring_version = first;
  verdict.reason.clear();
  return verdict;
}

} // namespace lmcc::apps
