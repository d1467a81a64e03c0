#include "apps/lmcc/cluster_command.hpp"

#include <CLI/CLI.hpp>
#include <httplib.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <ctime>
#include <deque>
#include <fcntl.h>
#include <map>
#include <memory>
#include <set>
#include <stdexcept>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <utility>

namespace lmcc::apps {

namespace fs = std::filesystem;
using json = nlohmann::json;
using clock_type = std::chrono::steady_clock;

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
  const uint64_t last_port =
      uint64_t{options.base_port} + uint64_t{port_stride} * (options.nodes - 1) + cluster_offset;
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
  for (uint32_t i = 0; i < options.nodes; ++i) {
    planned_node node;
    node.id = node_id(i);
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
  for (const auto& member : plan.nodes)
    out << YAML::Flow << YAML::BeginMap << YAML::Key << "id" << YAML::Value << member.id
        << YAML::Key << "host" << YAML::Value << plan.host << YAML::Key << "port" << YAML::Value
        << member.cluster_port << YAML::EndMap;
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
    }
    return "[" + text + "]";
  };
  json wanted_members = json::array();
  for (const auto& member : plan.nodes)
    wanted_members.push_back(
        {{"id", member.id}, {"host", plan.host}, {"port", std::to_string(member.cluster_port)}});
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

// -- the process side ---------------------------------------------------------------

namespace {

/// Thrown while laying out the data dir; its message is shown as is.
struct setup_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

std::string errno_text(int error) {
  return std::strerror(error);
}

/// An owned file descriptor.
class unique_fd {
public:
  explicit unique_fd(int fd = -1) noexcept : fd_(fd) {}
  unique_fd(unique_fd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  unique_fd& operator=(unique_fd&& other) noexcept {
    if (this != &other) {
      reset();
      fd_ = std::exchange(other.fd_, -1);
    }
    return *this;
  }
  unique_fd(const unique_fd&) = delete;
  unique_fd& operator=(const unique_fd&) = delete;
  ~unique_fd() { reset(); }

  int get() const noexcept { return fd_; }
  explicit operator bool() const noexcept { return fd_ >= 0; }
  void reset() noexcept {
    if (fd_ >= 0)
      ::close(fd_);
    fd_ = -1;
  }

private:
  int fd_;
};

void write_all(int fd, std::string_view text, const fs::path& path) {
  while (!text.empty()) {
    ssize_t n = ::write(fd, text.data(), text.size());
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      throw setup_error("cannot write " + path.string() + ": " + errno_text(errno));
    text.remove_prefix(static_cast<size_t>(n));
  }
}

std::string read_file(const fs::path& path) {
  unique_fd fd{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (!fd)
    throw setup_error("cannot read " + path.string() + ": " + errno_text(errno));
  std::string text;
  std::array<char, 8192> buffer{};
  for (;;) {
    ssize_t n = ::read(fd.get(), buffer.data(), buffer.size());
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      throw setup_error("cannot read " + path.string() + ": " + errno_text(errno));
    if (n == 0)
      return text;
    text.append(buffer.data(), static_cast<size_t>(n));
  }
}

/// Writes `text` to a fresh temporary beside `path` with `mode`, then moves
/// or links it into place, so a crash never leaves a half-written file that a
/// later run would take as complete. Returns false when `exclusive` and
/// `path` appeared meanwhile (the temporary is dropped then).
bool install_file(const fs::path& path, std::string_view text, mode_t mode, bool exclusive) {
  fs::path temporary = path;
  temporary += ".tmp-" + std::to_string(::getpid());
  {
    unique_fd fd{::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode)};
    if (!fd)
      throw setup_error("cannot create " + temporary.string() + ": " + errno_text(errno));
    write_all(fd.get(), text, temporary);
    if (::fsync(fd.get()) != 0)
      throw setup_error("cannot sync " + temporary.string() + ": " + errno_text(errno));
  }
  // link() refuses to replace, which is what an exclusive create needs;
  // rename() replaces atomically.
  int rc = exclusive ? ::link(temporary.c_str(), path.c_str())
                     : ::rename(temporary.c_str(), path.c_str());
  int error = errno;
  if (exclusive || rc != 0)
    ::unlink(temporary.c_str());
  if (rc != 0 && exclusive && error == EEXIST)
    return false;
  if (rc != 0)
    throw setup_error("cannot write " + path.string() + ": " + errno_text(error));
  return true;
}

/// DIR/cluster.secret: kept when present (a restarted cluster must keep
/// trusting itself), else 32 random bytes in hex, mode 0600.
void ensure_secret(const fs::path& path, spdlog::logger& log) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) { // a symlink to a shared secret is fine
    if (!S_ISREG(st.st_mode))
      throw setup_error(path.string() + " exists and is not a regular file");
    std::string secret = read_file(path);
    if (secret.find_first_not_of(" \t\r\n") == std::string::npos)
      throw setup_error(path.string() + " is empty; delete it to have a new secret made " +
                        "(every node of the cluster must then be restarted)");
    if ((st.st_mode & 077) != 0)
      log.warn("cluster-secret-readable path={} mode={:o} (others than its owner can read it)",
               path.string(), st.st_mode & 0777);
    log.info("cluster-secret-kept path={}", path.string());
    return;
  }
  if (errno != ENOENT)
    throw setup_error("cannot stat " + path.string() + ": " + errno_text(errno));

  std::array<unsigned char, 32> bytes{};
  for (size_t filled = 0; filled < bytes.size();) {
    ssize_t n = ::getrandom(bytes.data() + filled, bytes.size() - filled, 0);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      throw setup_error(std::string("getrandom failed: ") + errno_text(errno));
    filled += static_cast<size_t>(n);
  }
  static constexpr char digits[] = "0123456789abcdef";
  std::string hex;
  for (unsigned char byte : bytes) {
    hex += digits[byte >> 4];
    hex += digits[byte & 0xF];
  }
  if (install_file(path, hex + "\n", 0600, /*exclusive=*/true))
    log.info("cluster-secret-created path={}", path.string());
  else
    log.info("cluster-secret-kept path={} (made by another run meanwhile)", path.string());
}

/// Creates the folders, the secret and the configs. Everything that can
/// refuse the layout (a kept config of another layout, a missing snapshot)
/// is checked before anything is written, so a refused run changes nothing.
void lay_out(const cluster_plan& plan, bool rewrite_config, spdlog::logger& log) {
  std::error_code ec;
  std::vector<bool> keep(plan.nodes.size(), false);
  for (size_t i = 0; i < plan.nodes.size(); ++i) {
    const auto& node = plan.nodes[i];
    if (!node.restore_from.empty() && !fs::is_directory(node.restore_from, ec))
      throw setup_error("--restore-from: " + node.restore_from.string() +
                        " is not a folder (the snapshot folder must hold one folder per "
                        "node id)");
    if (rewrite_config || !fs::exists(node.config_path, ec))
      continue;
    if (auto why = config_mismatch(read_file(node.config_path), plan, node))
      throw setup_error(node.config_path.string() + " belongs to another layout: " + *why +
                        ". Run with the flags of the first `cluster up` on this folder, or "
                        "with --rewrite-config to write the configs anew (the data is kept)");
    keep[i] = true;
  }

  fs::create_directories(plan.dir, ec);
  if (ec)
    throw setup_error("cannot create " + plan.dir.string() + ": " + ec.message());
  ensure_secret(plan.secret_file, log);
  for (size_t i = 0; i < plan.nodes.size(); ++i) {
    const auto& node = plan.nodes[i];
    fs::create_directories(node.dir, ec);
    if (ec)
      throw setup_error("cannot create " + node.dir.string() + ": " + ec.message());
    if (keep[i]) {
      log.info("node-config-kept node={} config={} (--rewrite-config writes it anew)", node.id,
               node.config_path.string());
      continue;
    }
    install_file(node.config_path, node_config_yaml(plan, node), 0644, /*exclusive=*/false);
    log.info("node-config-written node={} config={}", node.id, node.config_path.string());
  }
}

std::string local_time_text() {
  std::time_t now = std::time(nullptr);
  std::tm parts{};
  localtime_r(&now, &parts);
  std::array<char, 32> text{};
  std::strftime(text.data(), text.size(), "%Y-%m-%d %H:%M:%S", &parts);
  return text.data();
}

/// One started node: its process and the unread end of its log.
struct child_node {
  const planned_node* node = nullptr;
  pid_t pid = -1;
  bool running = false;
  bool ready = false;
  /// Read from where this run's output starts, until the node-ready line.
  unique_fd log_reader;
  std::string partial_line;
  /// The last lines read, shown when the node fails before it is ready.
  std::deque<std::string> recent_lines;
};

class launcher {
public:
  launcher(const cluster_plan& plan, const cluster_up_options& options, std::ostream& out,
           std::ostream& err, std::shared_ptr<spdlog::logger> log)
    : plan_(plan), options_(options), out_(out), err_(err), log_(std::move(log)) {
    sigemptyset(&signals_);
    for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGCHLD})
      sigaddset(&signals_, sig);
  }

  int run();

private:
  void spawn(const std::string& exe, const planned_node& node);
  /// A signal among signals_, or 0 after `timeout`.
  int wait_signal(std::chrono::milliseconds timeout);
  void read_log(child_node& child);
  /// Reaps exited children; returns the first one that exited before it was
  /// ready, if any.
  child_node* reap();
  void stop_all();
  void poll_cluster(clock_type::time_point all_ready_at);
  std::string log_tail(const child_node& child) const;

  const cluster_plan& plan_;
  const cluster_up_options& options_;
  std::ostream& out_;
  std::ostream& err_;
  std::shared_ptr<spdlog::logger> log_;
  sigset_t signals_{};
  std::vector<child_node> children_;
  bool cluster_reported_ = false;
  bool cluster_late_warned_ = false;
  std::string last_reason_;
};

void launcher::spawn(const std::string& exe, const planned_node& node) {
  std::vector<std::string> args = {exe, "node", "--config", node.config_path.string()};
  if (!node.restore_from.empty()) {
    args.emplace_back("--restore-from");
    args.push_back(node.restore_from.string());
  }
  std::string command_line;
  for (const auto& arg : args)
    command_line += (command_line.empty() ? "" : " ") + arg;

  unique_fd log_fd{::open(node.log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644)};
  if (!log_fd)
    throw setup_error("cannot open " + node.log_path.string() + ": " + errno_text(errno));
  // Runs append to one log; this line tells where each run starts.
  write_all(log_fd.get(), "---- lmcc cluster up " + local_time_text() + ": " + command_line + "\n",
            node.log_path);
  child_node child;
  child.node = &node;
  child.log_reader = unique_fd{::open(node.log_path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (!child.log_reader || ::lseek(child.log_reader.get(), 0, SEEK_END) < 0)
    throw setup_error("cannot read " + node.log_path.string() + ": " + errno_text(errno));
  unique_fd null_fd{::open("/dev/null", O_RDONLY | O_CLOEXEC)};
  if (!null_fd)
    throw setup_error("cannot open /dev/null: " + errno_text(errno));

  // Everything the child needs is prepared before fork(): between fork and
  // exec only async-signal-safe calls are allowed.
  std::vector<char*> argv;
  for (auto& arg : args)
    argv.push_back(arg.data());
  argv.push_back(nullptr);
  sigset_t no_signals;
  sigemptyset(&no_signals);
  const pid_t parent = ::getpid();

  pid_t pid = ::fork();
  if (pid < 0)
    throw setup_error("cannot start " + node.id + ": fork: " + errno_text(errno));
  if (pid == 0) {
    // Its own process group: the terminal's Ctrl-C reaches only the
    // launcher, which then stops the nodes in order and reports them.
    ::setpgid(0, 0);
    // If the launcher dies without stopping it (SIGKILL, crash), the node
    // stops too instead of holding the cluster's ports as an orphan.
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != parent)
      ::_exit(127);
    ::signal(SIGINT, SIG_DFL);
    ::signal(SIGTERM, SIG_DFL);
    ::signal(SIGHUP, SIG_DFL);
    ::sigprocmask(SIG_SETMASK, &no_signals, nullptr); // the node blocks what it needs itself
    ::dup2(null_fd.get(), STDIN_FILENO);
    ::dup2(log_fd.get(), STDOUT_FILENO);
    ::dup2(log_fd.get(), STDERR_FILENO);
    ::execv(argv[0], argv.data());
    constexpr std::string_view failed = "lmcc cluster up: exec of the lmcc binary failed\n";
    [[maybe_unused]] auto ignored = ::write(STDERR_FILENO, failed.data(), failed.size());
    ::_exit(127);
  }
  ::setpgid(pid, pid); // also here, so it holds before the child gets to it
  child.pid = pid;
  child.running = true;
  log_->info("node-started node={} pid={} log={}", node.id, pid, node.log_path.string());
  children_.push_back(std::move(child));
}

int launcher::wait_signal(std::chrono::milliseconds timeout) {
  timespec wait{};
  wait.tv_sec = static_cast<time_t>(timeout.count() / 1000);
  wait.tv_nsec = static_cast<long>((timeout.count() % 1000) * 1'000'000);
  int sig = ::sigtimedwait(&signals_, nullptr, &wait);
  return sig > 0 ? sig : 0;
}

void launcher::read_log(child_node& child) {
  if (!child.log_reader)
    return;
  std::array<char, 16384> buffer{};
  for (;;) {
    ssize_t n = ::read(child.log_reader.get(), buffer.data(), buffer.size());
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      break;
    child.partial_line.append(buffer.data(), static_cast<size_t>(n));
    size_t start = 0;
    for (size_t end = child.partial_line.find('\n'); end != std::string::npos;
         end = child.partial_line.find('\n', start)) {
      std::string_view line(child.partial_line.data() + start, end - start);
      start = end + 1;
      child.recent_lines.emplace_back(line);
      if (child.recent_lines.size() > 10)
        child.recent_lines.pop_front();
      if (!child.ready && is_node_ready_line(line, child.node->id)) {
        child.ready = true;
        out_ << node_ready_line(plan_, *child.node, child.pid) << std::endl;
      }
    }
    child.partial_line.erase(0, start);
    // A line this long is not the node-ready line; do not hoard it.
    if (child.partial_line.size() > (size_t{1} << 20))
      child.partial_line.clear();
    if (child.ready)
      break;
  }
  // Past the ready line the launcher has nothing to look for; the node keeps
  // appending to its log file on its own.
  if (child.ready) {
    child.log_reader.reset();
    child.partial_line.clear();
  }
}

std::string launcher::log_tail(const child_node& child) const {
  std::string text;
  for (const auto& line : child.recent_lines)
    text += "  | " + line + "\n";
  return text.empty() ? "  (it wrote nothing)\n" : text;
}

child_node* launcher::reap() {
  child_node* failed = nullptr;
  for (auto& child : children_) {
    if (!child.running)
      continue;
    int status = 0;
    pid_t pid = ::waitpid(child.pid, &status, WNOHANG);
    if (pid != child.pid)
      continue;
    child.running = false;
    read_log(child); // its last words, maybe even its ready line
    out_ << "node-exited node=" << child.node->id << " pid=" << child.pid
         << " status=" << describe_wait_status(status) << std::endl;
    if (!child.ready && failed == nullptr)
      failed = &child;
  }
  return failed;
}

void launcher::stop_all() {
  for (auto& child : children_)
    if (child.running)
      ::kill(child.pid, SIGTERM);
  const auto deadline = clock_type::now() + options_.stop_timeout;
  bool killed = false;
  auto kill_all = [&](std::string_view reason) {
    for (auto& child : children_)
      if (child.running) {
        log_->warn("node-kill node={} pid={} reason={}", child.node->id, child.pid, reason);
        ::kill(child.pid, SIGKILL);
      }
    killed = true;
  };
  for (;;) {
    for (auto& child : children_) {
      if (!child.running)
        continue;
      int status = 0;
      if (::waitpid(child.pid, &status, WNOHANG) != child.pid)
        continue;
      child.running = false;
      out_ << "node-stopped node=" << child.node->id << " pid=" << child.pid
           << " status=" << describe_wait_status(status) << std::endl;
    }
    if (std::none_of(children_.begin(), children_.end(),
                     [](const child_node& c) { return c.running; }))
      return;
    int sig = wait_signal(std::chrono::milliseconds(100));
    if (killed)
      continue;
    // A second Ctrl-C means "now": the user does not want to wait.
    if (sig == SIGINT || sig == SIGTERM || sig == SIGHUP)
      kill_all("second-signal");
    else if (clock_type::now() >= deadline)
      kill_all("not-stopped-after-" + std::to_string(options_.stop_timeout.count()) + "s");
  }
}

void launcher::poll_cluster(clock_type::time_point all_ready_at) {
  std::vector<node_status> statuses;
  for (const auto& child : children_) {
    node_status status{.id = child.node->id};
    if (!child.running) {
      status.error = "not running";
      statuses.push_back(std::move(status));
      continue;
    }
    statuses.push_back(fetch_node_status(plan_, *child.node));
  }
  auto verdict = judge_cluster_status(plan_, statuses);
  if (verdict.ready) {
    cluster_reported_ = true;
    out_ << "cluster-ready nodes=" << plan_.nodes.size() << " ring=" << verdict.ring_version
         << std::endl;
    return;
  }
  if (verdict.reason != last_reason_) {
    log_->debug("cluster-not-ready reason=\"{}\"", verdict.reason);
    last_reason_ = verdict.reason;
  }
  // Not fatal: nodes serve their workers meanwhile, and a slow peer may still
  // join; but say why the cluster-ready line is not coming.
  if (!cluster_late_warned_ && clock_type::now() - all_ready_at >= options_.ready_timeout) {
    cluster_late_warned_ = true;
    log_->warn("cluster-not-ready-yet after_s={} reason=\"{}\" (still waiting)",
               options_.ready_timeout.count(), verdict.reason);
  }
}

int launcher::run() {
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec) {
    err_ << "lmcc cluster up: cannot find this program's path: " << ec.message() << "\n";
    return 2;
  }
  // Taken with sigtimedwait in this loop, never by handlers: the launcher
  // then reacts to signals and child exits at one well-defined point.
  pthread_sigmask(SIG_BLOCK, &signals_, nullptr);
  try {
    for (const auto& node : plan_.nodes)
      spawn(exe.string(), node);
  } catch (const setup_error& e) {
    err_ << "lmcc cluster up: " << e.what() << "\n";
    stop_all();
    return 1;
  }

  const auto ready_deadline = clock_type::now() + options_.ready_timeout;
  std::optional<clock_type::time_point> all_ready_at;
  auto next_poll = clock_type::now();
  for (;;) {
    int sig = wait_signal(std::chrono::milliseconds(100));
    if (sig == SIGINT || sig == SIGTERM || sig == SIGHUP) {
      log_->info("cluster-stopping signal={}", sigabbrev_np(sig));
      stop_all();
      return 0;
    }
    for (auto& child : children_)
      if (child.running && !child.ready)
        read_log(child);
    if (child_node* failed = reap()) {
      err_ << "lmcc cluster up: node " << failed->node->id
           << " exited before it became ready; the end of " << failed->node->log_path.string()
           << ":\n"
           << log_tail(*failed);
      stop_all();
      return 1;
    }
    if (std::none_of(children_.begin(), children_.end(),
                     [](const child_node& c) { return c.running; })) {
      err_ << "lmcc cluster up: every node has exited\n";
      return 1;
    }
    const auto now = clock_type::now();
    bool all_ready = std::all_of(children_.begin(), children_.end(),
                                 [](const child_node& c) { return c.ready; });
    if (!all_ready) {
      if (now < ready_deadline)
        continue;
      for (const auto& child : children_)
        if (!child.ready)
          err_ << "lmcc cluster up: node " << child.node->id << " did not become ready within "
               << options_.ready_timeout.count() << " s; the end of "
               << child.node->log_path.string() << ":\n"
               << log_tail(child);
      stop_all();
      return 1;
    }
    if (!all_ready_at)
      all_ready_at = now;
    if (!cluster_reported_ && now >= next_poll) {
      poll_cluster(*all_ready_at);
      next_poll = clock_type::now() + std::chrono::milliseconds(100);
    }
  }
}

} // namespace

int run_cluster_up(const cluster_up_options& options, std::ostream& out, std::ostream& err) {
  auto plan = plan_cluster(options);
  if (!plan) {
    err << "lmcc cluster up: " << plan.error().message << "\n";
    return 2;
  }
  // The launcher's own log goes to stderr, so stdout carries only the lines
  // scripts wait for (node-ready, cluster-ready, node-exited, node-stopped).
  auto log = std::make_shared<spdlog::logger>(
      "cluster", std::make_shared<spdlog::sinks::stderr_color_sink_mt>());
  log->set_level(spdlog::level::from_str(options.log_level));
  try {
    lay_out(*plan, options.rewrite_config, *log);
  } catch (const setup_error& e) {
    err << "lmcc cluster up: " << e.what() << "\n";
    return 2;
  } catch (const fs::filesystem_error& e) {
    err << "lmcc cluster up: " << e.what() << "\n";
    return 2;
  }
  launcher cluster{*plan, options, out, err, std::move(log)};
  return cluster.run();
}

} // namespace lmcc::apps
