#include "apps/lmcc/snapshot_command.hpp"

#include <httplib.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <utility>
#include <vector>

namespace lmcc::apps {

int run_snapshot(const std::string& node, const std::string& out_dir, std::chrono::seconds timeout,
                 std::ostream& out, std::ostream& err) {
  auto colon = node.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == node.size()) {
    err << "lmcc snapshot: --node must be HOST:PORT, got '" << node << "'\n";
    return 2;
  }
  // Relative paths mean the caller's working directory; the node resolves
  // nothing itself (it may run elsewhere, with another cwd).
  std::error_code ec;
  std::string dir = std::filesystem::absolute(out_dir, ec).lexically_normal().string();
  if (ec) {
    err << "lmcc snapshot: bad --out '" << out_dir << "': " << ec.message() << "\n";
    return 2;
  }
  httplib::Client client{"http://" + node};
  client.set_connection_timeout(std::chrono::seconds(5));
  client.set_read_timeout(timeout);
  auto body = nlohmann::json{{"dir", dir}}.dump();
  auto res = client.Post("/admin/snapshot", body, "application/json");
  if (!res) {
    err << "lmcc snapshot: cannot reach http://" << node << ": " << httplib::to_string(res.error())
        << "\n";
    return 2;
  }
  auto reply = nlohmann::json::parse(res->body, nullptr, false);
  if (res->status != 200) {
    std::string why = res->body;
    if (!reply.is_discarded() && reply.contains("detail") && reply["detail"].is_string())
      why = reply["detail"].get<std::string>();
    err << "lmcc snapshot: the node refused (HTTP " << res->status << "): " << why << "\n";
    return 1;
  }
  if (reply.is_discarded() || !reply.is_object()) {
    err << "lmcc snapshot: unexpected reply: " << res->body << "\n";
    return 1;
  }
  out << "snapshot-written dir=" << reply.value("dir", dir)
      << " workers=" << reply.value("workers", uint64_t{0})
      << " holders=" << reply.value("holders", uint64_t{0})
      << " slots=" << reply.value("slots", uint64_t{0})
      << " log_records=" << reply.value("log_records", uint64_t{0})
      << " files=" << reply.value("files", uint64_t{0})
      << " bytes=" << reply.value("bytes", uint64_t{0})
      << " seconds=" << reply.value("seconds", 0.0) << "\n";
  return 0;
}

int run_cluster_snapshot(const std::string& node, const std::string& out_dir,
                         std::chrono::seconds timeout, std::ostream& out, std::ostream& err) {
  httplib::Client client{"http://" + node};
  client.set_connection_timeout(std::chrono::seconds(5));
  client.set_read_timeout(std::chrono::seconds(10));
  auto res = client.Get("/cluster/status");
  if (!res) {
    err << "lmcc snapshot: cannot reach http://" << node << ": " << httplib::to_string(res.error())
        << "\n";
    return 2;
  }
  auto status = nlohmann::json::parse(res->body, nullptr, false);
  if (res->status != 200 || status.is_discarded() || !status.contains("members")) {
    err << "lmcc snapshot: http://" << node << " is not a cluster node (HTTP " << res->status
        << "): " << res->body << "\n";
    return 1;
  }
  std::vector<std::pair<std::string, std::string>> targets; // id, http
  for (const auto& m : status["members"]) {
    const auto id = m.value("id", std::string{});
    auto http = m.value("http", std::string{});
    if (m.value("self", false))
      http = node;
    if (!m.value("live", false) || http.empty()) {
      err << "lmcc snapshot: member " << id << " is not live as " << status.value("node", node)
          << " sees it; a cluster snapshot needs every node\n";
      return 1;
    }
    targets.emplace_back(id, http);
  }
  std::error_code ec;
  const auto root = std::filesystem::absolute(out_dir, ec).lexically_normal();
  if (ec || std::filesystem::exists(root) || !std::filesystem::create_directories(root, ec)) {
    err << "lmcc snapshot: --out " << out_dir << " must be a directory that does not exist yet"
        << (ec ? ": " + ec.message() : std::string{}) << "\n";
    return 2;
  }
  for (const auto& [id, http] : targets) {
    out << "node=" << id << " ";
    if (int rc = run_snapshot(http, (root / id).string(), timeout, out, err); rc != 0)
      return rc;
  }
  out << "cluster-snapshot-written dir=" << root.string() << " nodes=" << targets.size()
      << " ring=" << status.value("ring_version", std::string{}) << "\n";
  return 0;
}

} // namespace lmcc::apps
