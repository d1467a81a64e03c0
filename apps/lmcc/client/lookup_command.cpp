#include "apps/lmcc/client/lookup_command.hpp"

#include "apps/lmcc/client/lookup_view.hpp"
#include "clock/clock.hpp"

#include <algorithm>
#include <chrono>
#include <fstream>
#include <iterator>
#include <sstream>

namespace lmcc::apps::client {

int run_lookup(const client_options& options, const std::string& source, std::istream& in,
               std::ostream& out, std::ostream& err) {
  const auto endpoints = parse_endpoints(options.endpoints);
  if (!endpoints) {
    err << "lmcc lookup: --endpoints: " << endpoints.error().message << "\n";
    return exit_usage;
  }
  std::string text;
  const bool from_stdin = source.empty() || source == "-";
  if (from_stdin) {
    text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  } else {
    std::ifstream file{source, std::ios::binary};
    if (!file) {
      err << "lmcc lookup: cannot read " << source << "\n";
      return exit_usage;
    }
    text.assign(std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>());
  }
  auto tokens = parse_tokens(text);
  if (!tokens) {
    err << "lmcc lookup: " << (from_stdin ? "stdin" : source) << ": " << tokens.error().message
        << "\n";
    return exit_usage;
  }
  const size_t token_count = tokens->size();
  const nlohmann::json body{{"tokens", std::move(*tokens)}};

  const auto settings = settings_or_say(options, err, "lmcc lookup");
  if (!settings)
    return exit_usage;
  std::vector<fetched> failures;
  for (const auto& endpoint : *endpoints) {
    const auto started = steady_now();
    auto answer = post_json(endpoint, "/lookup", body, *settings);
    const auto elapsed = steady_now() - started;
    if (!answer.ok() || !answer.body->is_object() || !answer.body->contains("layout_info")) {
      if (answer.ok())
        answer.error = "answered POST /lookup without a layout_info";
      failures.push_back(std::move(answer));
      continue;
    }
    lookup_origin origin{.node = {},
                         .endpoint = endpoint,
                         .elapsed_ms = std::chrono::duration<double, std::milli>(elapsed).count()};
    // Which node that is: a cluster node says in /cluster/status; a single
    // node does not (404), and is named by its address alone.
    if (const auto status = fetch_json(endpoint, "/cluster/status", *settings);
        status.ok() && status.body->is_object())
      origin.node = status.body->value("node", std::string{});
    const bool found = layout_instances(*answer.body) > 0;
    if (options.json())
      out << lookup_json(std::move(*answer.body), origin).dump(2) << "\n";
    else
      render_lookup(*answer.body, origin, token_count, out);
    return found ? exit_ok : exit_degraded;
  }
  const bool any_http = std::any_of(failures.begin(), failures.end(),
                                    [](const auto& f) { return f.answered() || f.ok(); });
  err << "lmcc lookup: no node answered the lookup: " << describe_failures(failures) << "\n";
  return any_http ? exit_bad_answer : exit_unreachable;
}

} // namespace lmcc::apps::client
