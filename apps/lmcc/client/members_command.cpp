#include "apps/lmcc/client/members_command.hpp"

#include "apps/lmcc/client/members_view.hpp"

#include <algorithm>
#include <chrono>
#include <functional>
#include <map>
#include <set>
#include <thread>

namespace lmcc::apps::client {
namespace {

using clock = std::chrono::steady_clock;
using next_members_fn = std::function<msg::expected<std::vector<std::string>>(
    const std::vector<std::string>& current, size_t replicas)>;

/// One command's context: its name for messages, where text for people goes
/// (stdout for tables; stderr when stdout carries the JSON answer).
struct change_run {
  std::string name; ///< "lmcc members add"
  const client_options& options;
  std::ostream& out;
  std::ostream& err;
  std::string drained;         ///< lmcc drain's node, else ""
  request_settings settings{}; ///< the API's token and TLS (request() of the options)
  clock::time_point started = clock::now();

  std::ostream& say() const { return options.json() ? err : out; }
  request_settings request_bound() const {
    auto r = settings;
    r.timeout = std::min<std::chrono::milliseconds>(options.timeout(), std::chrono::seconds(5));
    return r;
  }
  int64_t elapsed_ms() const {
    return std::chrono::duration_cast<std::chrono::milliseconds>(clock::now() - started).count();
  }

  /// Prints the outcome: the JSON answer on stdout with --output json, and
  /// `text` for people: on stderr after the command's name when it failed
  /// (`failed`), else on stdout (stderr with --output json).
  int end(int code, const std::string& result, const std::string& text, nlohmann::json j = {},
          bool failed = true) const {
    if (options.json()) {
      if (!j.is_object())
        j = nlohmann::json::object();
      j["result"] = result;
      j["elapsed_ms"] = elapsed_ms();
      if (!drained.empty())
        j["drained"] = drained;
      if (failed)
        j["reason"] = text;
      out << j.dump(2) << "\n";
    }
    if (failed)
      err << name << ": " << text << "\n";
    else
      say() << text << "\n";
    return code;
  }
};

std::vector<std::string> string_list(const nlohmann::json& j) {
  std::vector<std::string> out;
  if (j.is_array())
    for (const auto& e : j)
      if (e.is_string())
        out.push_back(e.get<std::string>());
  return out;
}

/// Node id -> HTTP address from a /cluster/status' members[].http (non-empty only).
void learn_addresses(const nlohmann::json& status, std::map<std::string, std::string>& http) {
  if (!status.contains("members") || !status["members"].is_array())
    return;
  for (const auto& m : status["members"]) {
    if (!m.is_object())
      continue;
    const auto id = m.value("id", std::string{});
    const auto address = m.value("http", std::string{});
    if (!id.empty() && !address.empty() && !http.contains(id))
      http.emplace(id, address);
  }
}

/// Asks every node in `ids` for its /cluster/status, all at once.
std::vector<node_progress> poll(const std::vector<std::string>& ids,
                                std::map<std::string, std::string>& http,
                                const request_settings& bound) {
  std::vector<size_t> asked;
  std::vector<std::string> addresses;
  std::vector<node_progress> out(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    if (const auto it = http.find(ids[i]); it != http.end()) {
      asked.push_back(i);
      addresses.push_back(it->second);
    } else
      out[i] = progress_of(ids[i], nullptr, "no node that answered knows its HTTP address");
  }
  auto answers = fetch_all(addresses, "/cluster/status", bound);
  for (size_t k = 0; k < asked.size(); ++k) {
    const auto& id = ids[asked[k]];
    auto& a = answers[k];
    if (a.ok() && a.body->is_object() && a.body->value("node", std::string{}) == id) {
      out[asked[k]] = progress_of(id, &*a.body);
      learn_addresses(*a.body, http);
    } else
      out[asked[k]] = progress_of(id, nullptr,
                                  a.ok() ? "another node answers at " + a.endpoint
                                         : a.endpoint + ": " + a.error);
  }
  return out;
}

int run_change(change_run& run, const next_members_fn& next_members, bool no_wait) {
  const auto endpoints = parse_endpoints(run.options.endpoints);
  if (!endpoints)
    return run.end(exit_usage, "usage", "--endpoints: " + endpoints.error().message);
  try {
    run.settings = run.options.request();
  } catch (const std::exception& e) {
    return run.end(exit_usage, "usage", e.what());
  }
  const auto first = fetch_first(*endpoints, "/cluster/status", run.request_bound());
  if (!first.answer) {
    const bool any_http = std::any_of(first.failures.begin(), first.failures.end(),
                                      [](const auto& f) { return f.answered(); });
    const auto why = describe_failures(first.failures);
    return any_http ? run.end(exit_refused, "refused", "no cluster node answered: " + why)
                    : run.end(exit_unreachable, "unreachable", "no cluster node answered: " + why);
  }
  const auto& seed = *first.answer->body;
  const auto& endpoint = first.answer->endpoint;
  if (!seed.is_object() || !seed.value("node", nlohmann::json{}).is_string())
    return run.end(exit_refused, "refused",
                   endpoint + " answered GET /cluster/status, but not as a cluster node does");
  const auto asked = seed.value("node", std::string{"?"}) + " (" + endpoint + ")";
  if (!seed.contains("membership") || !seed["membership"].is_object())
    return run.end(exit_refused, "refused",
                   asked + " answered GET /cluster/status without a membership");
  const auto current = string_list(seed["membership"].value("members", nlohmann::json::array()));
  const auto& r = seed.value("replicas", nlohmann::json{});
  const size_t replicas = r.is_number_unsigned() ? r.get<size_t>() : 1;
  const auto next = next_members(current, replicas);
  if (!next)
    return run.end(exit_refused, "refused", next.error().message,
                   {{"asked", endpoint}, {"members", current}});

  auto answer = post_json(endpoint, "/cluster/members", {{"members", *next}}, run.request_bound());
  if (!answer.answered())
    return run.end(exit_unreachable, "unreachable",
                   asked + " did not answer POST /cluster/members (" + answer.error +
                       "); `lmcc status` shows whether the change was made",
                   {{"asked", endpoint}, {"members", *next}});
  if (!answer.ok())
    return run.end(exit_refused, "refused", asked + " refused the change: " + answer.error,
                   {{"asked", endpoint}, {"members", *next}, {"http_status", answer.http_status}});
  const auto record = *answer.body;
  if (!record.is_object() || !record.value("epoch", nlohmann::json{}).is_number_unsigned())
    return run.end(exit_refused, "refused",
                   asked + " answered POST /cluster/members without a membership record",
                   {{"asked", endpoint}, {"members", *next}});
  const uint64_t epoch = record.value("epoch", uint64_t{0});
  const auto previous = string_list(record.value("previous", nlohmann::json::array()));
  std::vector<std::string> accepted_members;
  if (record.contains("members") && record["members"].is_array())
    for (const auto& m : record["members"])
      accepted_members.push_back(m.is_string()   ? m.get<std::string>()
                                 : m.is_object() ? m.value("id", std::string{"?"})
                                                 : "?");
  run.say() << seed.value("node", std::string{"?"}) << " accepted epoch " << epoch << ": members "
            << join_ids(accepted_members) << " (were " << join_ids(previous) << ")\n";
  nlohmann::json j{{"asked", endpoint},
                   {"accepted", record},
                   {"epoch", epoch},
                   {"members", accepted_members},
                   {"previous", previous}};
  const std::string drained_note =
      run.drained.empty()
          ? std::string{}
          : run.drained + " now owns nothing (no primary or replica slot, no worker home). After " +
                "its maintenance, add it back with `lmcc members add " + run.drained + "`.";
  if (!drained_note.empty())
    j["note"] = drained_note;
  if (no_wait) {
    std::string text = "not waiting for the commit (--no-wait); `lmcc status` shows the progress";
    if (!drained_note.empty())
      text += "\nonce it commits, " + drained_note;
    return run.end(exit_ok, "accepted", text, j, false);
  }

  // Every node of the old and the new member set has a part in the change.
  std::map<std::string, std::string> http;
  http[seed.value("node", std::string{})] = endpoint;
  learn_addresses(seed, http);
  std::set<std::string> involved(previous.begin(), previous.end());
  involved.insert(accepted_members.begin(), accepted_members.end());
  const std::vector<std::string> ids(involved.begin(), involved.end());
  const auto deadline = run.started + run.options.timeout();
  for (auto tick = clock::now();;) {
    const auto nodes = poll(ids, http, run.request_bound());
    const auto progress = judge_change(epoch, nodes);
    run.say() << progress_line(epoch, progress, run.elapsed_ms()) << "\n" << std::flush;
    j["nodes"] = nlohmann::json::array();
    for (const auto& n : nodes)
      j["nodes"].push_back(progress_json(n, epoch));
    j["unreachable"] = progress.unreachable;
    if (progress.done) {
      std::string text = "epoch " + std::to_string(epoch) + " committed on ";
      if (progress.unreachable.empty())
        text += "every node";
      else {
        std::vector<std::string> answered;
        for (const auto& id : ids)
          if (std::find(progress.unreachable.begin(), progress.unreachable.end(), id) ==
              progress.unreachable.end())
            answered.push_back(id);
        text += join_ids(answered);
      }
      text += " in " + std::to_string(run.elapsed_ms() / 1000) + "s: members " +
              join_ids(accepted_members);
      if (!progress.unreachable.empty())
        text += "\n" + join_ids(progress.unreachable) +
                " did not answer; a member copies the slots it gained when it is back";
      if (!drained_note.empty())
        text += "\n" + drained_note;
      return run.end(exit_ok, "committed", text, j, false);
    }
    if (clock::now() >= deadline)
      return run.end(exit_timed_out, "timed_out",
                     "epoch " + std::to_string(epoch) + " not committed everywhere within " +
                         std::to_string(run.options.timeout_s) + "s (--timeout): " +
                         progress.summary + "; the change goes on, `lmcc status` shows it",
                     j);
    // One line a second; the last poll at the deadline.
    tick += std::chrono::seconds(1);
    std::this_thread::sleep_until(std::min(tick, deadline));
  }
}

} // namespace

int run_members(const client_options& options, const std::string& verb,
                const std::vector<std::string>& ids, bool no_wait, std::ostream& out,
                std::ostream& err) {
  change_run run{.name = "lmcc members " + verb, .options = options, .out = out, .err = err};
  const bool add = verb == "add";
  return run_change(
      run,
      [&](const std::vector<std::string>& current, size_t) {
        return add ? members_after(current, ids, {}) : members_after(current, {}, ids);
      },
      no_wait);
}

int run_drain(const client_options& options, const std::string& node, bool no_wait,
              std::ostream& out, std::ostream& err) {
  change_run run{.name = "lmcc drain", .options = options, .out = out, .err = err, .drained = node};
  return run_change(
      run,
      [&](const std::vector<std::string>& current, size_t replicas) {
        auto next = drain_members(current, node, replicas);
        if (next)
          run.say() << "draining " << node << ": lmcc has no drain of its own, so " << node
                    << " leaves the member set (" << join_ids(current) << " -> " << join_ids(*next)
                    << "); its primaries, replicas and worker homes move to "
                    << "the others\n";
        return next;
      },
      no_wait);
}

} // namespace lmcc::apps::client
