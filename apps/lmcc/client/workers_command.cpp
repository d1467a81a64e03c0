#include "apps/lmcc/client/workers_command.hpp"

#include "apps/lmcc/client/workers_view.hpp"
#include "clock/clock.hpp"

#include <algorithm>
#include <chrono>
#include <map>
#include <set>
#include <vector>

namespace lmcc::apps::client {
namespace {

/// GET /cluster/workers from every home node other than the one that
/// answered (`asked`, at `endpoint`), all at once; their addresses from the
/// answering node's /cluster/status. Node id -> its answer; a home that
/// does not answer is left out.
std::map<std::string, nlohmann::json> ask_homes(const nlohmann::json& body,
                                                const std::string& endpoint,
                                                const request_settings& settings) {
  const auto asked = body.value("node", std::string{});
  std::set<std::string> homes;
  for (const auto& w : body["workers"])
    if (const auto home = w.value("home", std::string{}); !home.empty() && home != asked)
      homes.insert(home);
  std::map<std::string, nlohmann::json> out;
  if (homes.empty())
    return out;
  const auto status = fetch_json(endpoint, "/cluster/status", settings);
  if (!status.ok() || !status.body->contains("members"))
    return out;
  std::vector<std::string> ids;
  std::vector<std::string> addresses;
  for (const auto& m : (*status.body)["members"]) {
    const auto id = m.value("id", std::string{});
    const auto http = m.value("http", std::string{});
    if (homes.contains(id) && !http.empty()) {
      ids.push_back(id);
      addresses.push_back(http);
    }
  }
  auto answers = fetch_all(addresses, "/cluster/workers", settings);
  for (size_t i = 0; i < ids.size(); ++i)
    if (answers[i].ok() && answers[i].body->value("node", std::string{}) == ids[i])
      out.emplace(ids[i], std::move(*answers[i].body));
  return out;
}

} // namespace

int run_workers(const client_options& options, std::ostream& out, std::ostream& err) {
  const auto endpoints = parse_endpoints(options.endpoints);
  if (!endpoints) {
    err << "lmcc workers: --endpoints: " << endpoints.error().message << "\n";
    return exit_usage;
  }
  const auto settings = settings_or_say(options, err, "lmcc workers");
  if (!settings)
    return exit_usage;
  const auto first = fetch_first(*endpoints, "/cluster/workers", *settings);
  if (!first.answer) {
    const bool any_http = std::any_of(first.failures.begin(), first.failures.end(),
                                      [](const auto& f) { return f.answered(); });
    err << "lmcc workers: no node listed the workers: " << describe_failures(first.failures)
        << "\n";
    return any_http ? exit_bad_answer : exit_unreachable;
  }
  auto body = *first.answer->body;
  if (!body.is_object() || !body.contains("workers") || !body["workers"].is_array()) {
    err << "lmcc workers: " << first.answer->endpoint
        << " answered GET /cluster/workers without a worker list\n";
    return exit_bad_answer;
  }
  take_full_sync_from_homes(body, ask_homes(body, first.answer->endpoint, *settings));
  if (options.json()) {
    body["asked"] = first.answer->endpoint;
    out << body.dump(2) << "\n";
    return exit_ok;
  }
  render_workers_table(body, wall_now(), out);
  return exit_ok;
}

} // namespace lmcc::apps::client
