#include "apps/lmcc-bench/controller_nodes.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <fstream>

namespace lmcc::bench {
namespace {

constexpr std::string_view primary_entries_metric = "lmcache:cache_controller_kv_pool_keys_count";

/// The sum of a figure over the nodes; nullopt when it is missing on any node.
template <class Field>
std::optional<double> sum_over(const std::vector<node_figures>& figures, Field field) {
  double total = 0;
  for (const auto& f : figures) {
    const auto& v = f.*field;
    if (!v)
      return std::nullopt;
    total += static_cast<double>(*v);
  }
  return total;
}

template <class Field>
std::optional<double> delta(const node_figures& start, const node_figures& now, Field field) {
  const auto& a = start.*field;
  const auto& b = now.*field;
  if (!a || !b)
    return std::nullopt;
  return static_cast<double>(*b) - static_cast<double>(*a);
}

/// "Name:\t value" of /proc/<pid>/status.
std::optional<std::string> status_field(int64_t pid, std::string_view name) {
  std::ifstream file{fmt::format("/proc/{}/status", pid)};
  std::string line;
  while (file && std::getline(file, line))
    if (line.starts_with(name) && line.size() > name.size() && line[name.size()] == ':') {
      const auto start = line.find_first_not_of(" \t", name.size() + 1);
      return start == std::string::npos ? std::string{} : line.substr(start);
    }
  return std::nullopt;
}

std::optional<std::string> thread_comm(int64_t tid) {
  std::ifstream file{fmt::format("/proc/{}/comm", tid)};
  std::string comm;
  if (!file || !std::getline(file, comm))
    return std::nullopt;
  return comm;
}

} // namespace

controller_nodes::controller_nodes(const bench_options& o) {
  const bool have_pids = !o.node_pids.empty() && o.node_pids.size() == o.nodes.size();
  std::optional<uint32_t> replicas;
  std::optional<uint32_t> live;
  size_t members = 0;
  size_t in_cluster = 0;
  for (size_t i = 0; i < o.nodes.size(); ++i) {
    node n;
    n.http = o.nodes[i].http;
    n.name = fmt::format("node{}", i + 1);
    if (have_pids)
      n.process.emplace(std::vector<int>{o.node_pids[i]});
    n.api = std::make_unique<controller_http>(n.http, o.key_source, o.instance_prefix,
                                              o.request_timeout_ms, o.http_access);
    if (auto res = n.api->get("/cluster/status"); res && res->status == 200) {
      auto status = nlohmann::json::parse(res->body, nullptr, false);
      if (status.is_object()) {
        ++in_cluster;
        n.name = status.value("node", n.name);
        if (!replicas) {
          replicas = status.value("replicas", 1U);
          live = status.value("live_members", 1U);
          if (status.contains("members") && status["members"].is_array())
            members = status["members"].size();
        }
        if (!status.value("all_live", true))
          spdlog::warn("{} ({}) does not see every member live: {}", n.name, n.http.str(),
                       res->body.substr(0, 300));
      }
    }
    nodes_.push_back(std::move(n));
  }
  if (replicas)
    copies_ = std::max<uint32_t>(1, std::min(*replicas, live.value_or(*replicas)));
  if (in_cluster != 0 && in_cluster != nodes_.size())
    spdlog::warn("only {} of the {} --nodes answer GET /cluster/status", in_cluster, nodes_.size());
  if (members > nodes_.size())
    spdlog::warn("the cluster has {} members but --nodes lists {}: the sums over the nodes "
                 "miss the others",
                 members, nodes_.size());
}

controller_nodes::~controller_nodes() = default;

std::vector<node_figures> controller_nodes::read() {
  std::vector<node_figures> out(nodes_.size());
  for (size_t i = 0; i < nodes_.size(); ++i) {
    auto& f = out[i];
    if (auto res = nodes_[i].api->get("/metrics"); res && res->status == 200) {
      f.shard_ops = metric_value(res->body, "lmcc_shard_ops");
      f.primary_entries = metric_value(res->body, primary_entries_metric);
      f.index_keys = metric_value(res->body, "lmcc_index_keys");
      f.index_bytes = metric_value(res->body, "lmcc_index_memory_bytes");
      f.replication_timeouts = metric_value(res->body, "lmcc_cluster_replication_timeouts");
      f.replication_lag = metric_value(res->body, "lmcc_cluster_replication_lag_sub_batches");
      f.peers_lost = metric_value(res->body, "lmcc_cluster_peers_lost");
    }
    if (nodes_[i].process) {
      f.cpu_s = nodes_[i].process->cpu_seconds();
      f.rss_kib = nodes_[i].process->rss_kib();
    }
  }
  return out;
}

std::optional<double> controller_nodes::shard_ops_delta(const std::vector<node_figures>& start,
                                                        const std::vector<node_figures>& now) {
  if (start.size() != now.size())
    return std::nullopt;
  double total = 0;
  for (size_t i = 0; i < now.size(); ++i) {
    auto d = delta(start[i], now[i], &node_figures::shard_ops);
    if (!d)
      return std::nullopt;
    total += *d;
  }
  return total;
}

void controller_nodes::add_to(report& r, const std::string& id, const std::string& label,
                              const std::vector<node_figures>& now,
                              const std::vector<node_figures>* start, uint64_t ops) const {
  if (nodes_.empty() || now.size() != nodes_.size())
    return;
  if (start && start->size() != now.size())
    start = nullptr;
  const double n_ops = static_cast<double>(ops);
  for (size_t i = 0; i < nodes_.size(); ++i) {
    const auto& f = now[i];
    const std::string nid = id + "_" + nodes_[i].name;
    const std::string nlabel = label + ", " + nodes_[i].name;
    if (f.rss_kib)
      r.add(nid + "_rss_mib", nlabel + ": RSS", kib_to_mib(*f.rss_kib), "MiB");
    if (f.primary_entries)
      r.add(nid + "_primary_entries", nlabel + ": entries of its primary slots", *f.primary_entries,
            "entries");
    if (f.index_keys)
      r.add(nid + "_held_keys", nlabel + ": keys its index holds (primary + replica)",
            *f.index_keys, "keys");
    if (f.rss_kib && f.primary_entries && *f.primary_entries > 0)
      r.add(nid + "_rss_per_primary_entry", nlabel + ": RSS / primary entries",
            static_cast<double>(*f.rss_kib) * 1024 / *f.primary_entries, "B");
    if (f.rss_kib && f.index_keys && *f.index_keys > 0)
      r.add(nid + "_rss_per_held_key", nlabel + ": RSS / held keys",
            static_cast<double>(*f.rss_kib) * 1024 / *f.index_keys, "B");
    if (f.index_bytes && f.index_keys && *f.index_keys > 0)
      r.add(nid + "_index_bytes_per_held_key", nlabel + ": index memory / held keys",
            *f.index_bytes / *f.index_keys, "B");
    if (!start)
      continue;
    const auto& s = (*start)[i];
    const auto keys = delta(s, f, &node_figures::index_keys);
    const auto rss = delta(s, f, &node_figures::rss_kib);
    if (keys && rss && *keys > 0)
      r.add(nid + "_rss_growth_per_held_key", nlabel + ": RSS growth / held keys added",
            *rss * 1024 / *keys, "B");
    if (auto d = delta(s, f, &node_figures::shard_ops))
      r.add(nid + "_shard_ops", nlabel + ": ops its shard applied (lmcc_shard_ops)", *d, "ops");
    if (auto d = delta(s, f, &node_figures::cpu_s); d && ops > 0)
      r.add(nid + "_cpu_us_per_op", nlabel + ": its CPU per op sent to the cluster",
            *d * 1e6 / n_ops, "us/op");
    if (copies_ > 1)
      if (auto d = delta(s, f, &node_figures::replication_timeouts))
        r.add(nid + "_replication_timeouts", nlabel + ": replication timeouts", *d, "timeouts");
    if (auto d = delta(s, f, &node_figures::peers_lost); d && *d > 0)
      r.add(nid + "_peers_lost", nlabel + ": peers it declared lost", *d, "peers");
  }

  const std::string clabel = label + ", all nodes";
  const auto rss = sum_over(now, &node_figures::rss_kib);
  const auto entries = sum_over(now, &node_figures::primary_entries);
  const auto held = sum_over(now, &node_figures::index_keys);
  r.add(id + "_copies", clabel + ": copies of every entry (replicas)", copies_, "copies");
  if (rss)
    r.add(id + "_rss_total_mib", clabel + ": RSS summed", *rss / 1024, "MiB");
  if (entries)
    r.add(id + "_entries", clabel + ": entries (sum of primary entries)", *entries, "entries");
  if (held)
    r.add(id + "_held_keys", clabel + ": keys held, every copy (sum)", *held, "keys");
  if (rss && entries && *entries > 0)
    r.add(id + "_rss_per_entry", clabel + ": RSS summed / entries (all copies' cost)",
          *rss * 1024 / *entries, "B");
  if (!start)
    return;
  const auto rss0 = sum_over(*start, &node_figures::rss_kib);
  const auto entries0 = sum_over(*start, &node_figures::primary_entries);
  if (rss && rss0 && entries && entries0 && *entries > *entries0)
    r.add(id + "_rss_growth_per_entry", clabel + ": RSS growth summed / entries added",
          (*rss - *rss0) * 1024 / (*entries - *entries0), "B");
  if (const auto ops_applied = shard_ops_delta(*start, now)) {
    r.add(id + "_shard_ops", clabel + ": ops applied, every copy (sum of lmcc_shard_ops)",
          *ops_applied, "ops");
    r.add(id + "_shard_ops_per_copy",
          fmt::format("{}: ops applied (that sum / R = {})", clabel, copies_),
          *ops_applied / copies_, "ops");
  }
  const auto cpu = sum_over(now, &node_figures::cpu_s);
  const auto cpu0 = sum_over(*start, &node_figures::cpu_s);
  if (cpu && cpu0 && ops > 0)
    r.add(id + "_cpu_us_per_op", clabel + ": CPU summed per op sent", (*cpu - *cpu0) * 1e6 / n_ops,
          "us/op");
}

std::string controller_nodes::processes_text() const {
  std::string text;
  for (const auto& n : nodes_) {
    if (!text.empty())
      text += ", ";
    text += n.process ? fmt::format("{} ({})", n.process->pids()[0], n.name)
                      : fmt::format("? ({})", n.name);
  }
  return text;
}

std::optional<int> discover_node_pid(const host_port& http, uint32_t timeout_ms, bool* answered,
                                     const bench_options::http_access_settings& access) {
  controller_http api{http, "auto", "", timeout_ms, access};
  const auto res = api.get("/threads");
  if (answered != nullptr)
    *answered = res.has_value();
  if (!res || res->status != 200)
    return std::nullopt;
  const auto threads = nlohmann::json::parse(res->body, nullptr, false);
  if (!threads.is_array() || threads.empty())
    return std::nullopt;
  std::optional<int64_t> pid;
  size_t found = 0;
  for (const auto& t : threads) {
    if (!t.is_object() || !t.contains("thread_id") || !t["thread_id"].is_number_integer())
      return std::nullopt;
    const auto tid = t["thread_id"].get<int64_t>();
    const auto tgid = status_field(tid, "Tgid");
    const auto comm = thread_comm(tid);
    if (!tgid || !comm)
      continue; // exited since, or not on this host
    // Another process's thread: the node is elsewhere (or the ids are of
    // another pid namespace).
    if (*comm != t.value("name", std::string{}))
      return std::nullopt;
    const int64_t owner = std::stoll(*tgid);
    if (pid && *pid != owner)
      return std::nullopt;
    pid = owner;
    ++found;
  }
  if (!pid || found * 2 < threads.size())
    return std::nullopt;
  return static_cast<int>(*pid);
}

} // namespace lmcc::bench
