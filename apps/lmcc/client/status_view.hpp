// status_view: the pure half of `lmcc status`: what each node of a cluster
// said about itself (its GET /cluster/status, or why it said nothing), the
// cluster's verdict drawn from all of them, and the table or JSON the
// operator sees. status_command.cpp fetches; everything here is testable
// with made-up statuses.
//
//   auto reports = member_reports(seed_status, "10.0.0.1:9000"); // one per member
//   reports[1].status = <n2's /cluster/status>;  reports[2].error = "Connection refused";
//   cluster_verdict v = judge(reports);                  // healthy, or reasons
//   render_status_table(reports, v, std::cout);           // or status_json(reports, v)
//
// The verdict is `healthy` only when every member answered and each one sees
// every member live, every slot with its full count of live copies, the same
// ring version and member set, no membership change under way, no node
// refilling and no slot copy uncertain; otherwise `degraded`, with one reason
// per finding (docs/client.md lists them).
//
// Context: pure functions, reentrant.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <ostream>
#include <string>
#include <vector>

namespace lmcc::apps::client {

/// One node as the client saw it.
struct node_report {
  std::string id;
  std::string http;   ///< HTTP address asked ("" when no node that answered knows it)
  bool member = true; ///< owns slots (false: a standby node, which never degrades the cluster)
  std::optional<nlohmann::json> status; ///< its GET /cluster/status
  std::string error;                    ///< why there is no status
};

struct cluster_verdict {
  bool healthy = false;
  std::vector<std::string> reasons; ///< empty when healthy
};

/// One report per node in `seed`'s member list (members and standby nodes,
/// in its order), with the HTTP address `seed` knows for each; the node that
/// answered (`self`) gets `seed` as its status and `seed_endpoint` as its
/// address (its own idea of its address may not be reachable from here).
std::vector<node_report> member_reports(const nlohmann::json& seed,
                                        const std::string& seed_endpoint);

/// The member ids of `status` whose HTTP address it does not know, filled from
/// another report's status that does (a node that lost a peer forgets it).
void fill_addresses(std::vector<node_report>& reports);

/// The cluster's verdict from every node's report.
cluster_verdict judge(const std::vector<node_report>& reports);

/// "3/3", or "2/3 (n3 down)": members live as `status` sees them.
std::string live_summary(const nlohmann::json& status);

/// The node table and the verdict below it.
void render_status_table(const std::vector<node_report>& reports, const cluster_verdict& verdict,
                         std::ostream& out);

/// {"verdict", "reasons", "nodes": [{id, http, member, reachable, error, ...the
/// table's figures..., "status": its /cluster/status}], "entries"}.
nlohmann::json status_json(const std::vector<node_report>& reports, const cluster_verdict& verdict);

} // namespace lmcc::apps::client
