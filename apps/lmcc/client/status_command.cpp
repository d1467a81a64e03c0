#include "apps/lmcc/client/status_command.hpp"

#include "apps/lmcc/client/status_view.hpp"

#include <algorithm>

namespace lmcc::apps::client {
namespace {

/// Asks every report without a status whose address is known, all at once.
void ask_members(std::vector<node_report>& reports, const request_settings& settings) {
  std::vector<size_t> asked;
  std::vector<std::string> addresses;
  for (size_t i = 0; i < reports.size(); ++i)
    if (!reports[i].status && !reports[i].http.empty() && reports[i].error.empty()) {
      asked.push_back(i);
      addresses.push_back(reports[i].http);
    }
  auto answers = fetch_all(addresses, "/cluster/status", settings);
  for (size_t k = 0; k < asked.size(); ++k) {
    auto& r = reports[asked[k]];
    if (answers[k].ok() && answers[k].body->value("node", std::string{}) == r.id)
      r.status = std::move(answers[k].body);
    else if (answers[k].ok())
      r.error =
          "another node answers there (" + answers[k].body->value("node", std::string{"?"}) + ")";
    else
      r.error = answers[k].error;
  }
}

} // namespace

int run_status(const client_options& options, std::ostream& out, std::ostream& err) {
  const auto endpoints = parse_endpoints(options.endpoints);
  if (!endpoints) {
    err << "lmcc status: --endpoints: " << endpoints.error().message << "\n";
    return exit_usage;
  }
  const auto settings = settings_or_say(options, err, "lmcc status");
  if (!settings)
    return exit_usage;
  const auto first = fetch_first(*endpoints, "/cluster/status", *settings);
  if (!first.answer) {
    const bool any_http = std::any_of(first.failures.begin(), first.failures.end(),
                                      [](const auto& f) { return f.answered(); });
    const auto why = describe_failures(first.failures);
    if (options.json())
      out << nlohmann::json{{"verdict", any_http ? "unknown" : "unreachable"},
                            {"reasons",
                             nlohmann::json::array({"no cluster node answered: " + why})},
                            {"nodes", nlohmann::json::array()},
                            {"entries", nullptr}}
                 .dump(2)
          << "\n";
    err << "lmcc status: no cluster node answered: " << why << "\n";
    return any_http ? exit_bad_answer : exit_unreachable;
  }
  const auto& seed = *first.answer->body;
  auto reports = member_reports(seed, first.answer->endpoint);
  if (reports.empty()) {
    err << "lmcc status: " << first.answer->endpoint
        << " answered GET /cluster/status without a member list\n";
    return exit_bad_answer;
  }
  ask_members(reports, *settings);
  // A node that lost a peer forgets its address; another that answered may know it.
  fill_addresses(reports);
  ask_members(reports, *settings);
  for (auto& r : reports)
    if (!r.status && r.http.empty())
      r.error = "no node that answered knows its HTTP address";
  const auto verdict = judge(reports);
  if (options.json()) {
    auto j = status_json(reports, verdict);
    j["asked"] = first.answer->endpoint;
    out << j.dump(2) << "\n";
  } else
    render_status_table(reports, verdict, out);
  return verdict.healthy ? exit_ok : exit_degraded;
}

} // namespace lmcc::apps::client
