// endpoints: how the operator's client (`lmcc status`, `lmcc workers`) finds
// a cluster and fetches JSON from its nodes' HTTP APIs.
//
// Every client command takes the same flags: --endpoints HOST:PORT[,...]
// (any nodes of one cluster, tried in order; default 127.0.0.1:9000),
// --output table|json, --timeout SECONDS (each HTTP request's bound,
// connecting and reading alike; default 5), and for a secured API
// (docs/security.md) --token-file FILE (else $LMCC_API_TOKEN), --https and
// --ca-file FILE (HTTPS verified against that CA).
//
//   client_options o;                         // or add_client_flags(cmd, o)
//   auto list = parse_endpoints(o.endpoints); // {"127.0.0.1:9000"} or an error
//   fetched first = fetch_first(*list, "/cluster/status", o.request());
//   if (first.ok()) use(*first.body);
//   auto all = fetch_all({"h1:9000", "h2:9000"}, "/cluster/status", o.timeout()); // in parallel
//
// Context: called from main()'s thread; fetch_all() runs one thread per
// endpoint and joins them before it returns.
#pragma once

#include "messages/expected.hpp"

#include <nlohmann/json.hpp>

#include <chrono>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

namespace CLI {
class App;
}

namespace lmcc::apps::client {

/// Exit codes shared by the client commands (docs/client.md).
enum exit_code : int {
  exit_ok = 0,          ///< healthy (status) / listed (workers)
  exit_degraded = 1,    ///< status: the cluster answered and is degraded
  exit_unreachable = 2, ///< no endpoint answered
  exit_bad_answer = 3,  ///< an endpoint answered, but not as an lmcc cluster node does
  exit_usage = 4,       ///< bad --endpoints
};

/// How each request is made: its bound, and the API's token and TLS.
struct request_settings {
  request_settings(std::chrono::milliseconds bound = std::chrono::seconds(5)) // NOLINT: a bound
    : timeout(bound) {}
  std::chrono::milliseconds timeout;
  std::string token;   ///< sent as Authorization: Bearer; empty: none
  bool https = false;  ///< HTTPS, the server's certificate verified
  std::string ca_file; ///< the CA to verify it against; empty: the system's
};

/// The flags every client command takes.
struct client_options {
  /// Comma-separated HOST:PORT of any nodes of the cluster, tried in order.
  /// Default: 127.0.0.1:9000 (a node's default HTTP port)
  std::string endpoints = "127.0.0.1:9000";
  /// "table" (text for people) or "json" (for scripts). Default: table
  std::string output = "table";
  /// Each HTTP request's bound, in seconds. Default: 5
  int timeout_s = 5;
  /// File holding the API token; empty: $LMCC_API_TOKEN, if set.
  std::string token_file;
  /// HTTPS (implied by ca_file). Default: plain HTTP
  bool https = false;
  std::string ca_file;

  std::chrono::milliseconds timeout() const { return std::chrono::seconds(timeout_s); }
  /// The settings of each request. Throws std::runtime_error when
  /// --token-file cannot be read.
  request_settings request() const;
  bool json() const { return output == "json"; }
};

/// Adds --endpoints, --output and --timeout to a subcommand; --timeout's
/// default is options.timeout_s, its help `timeout_help`.
void add_client_flags(CLI::App& cmd, client_options& options,
                      const std::string& timeout_help = "seconds each HTTP request may take");

/// "h1:9000, h2:9000" -> {"h1:9000", "h2:9000"}: blanks trimmed, an
/// "http://" prefix and a trailing '/' dropped. Fails naming the first entry
/// that is not HOST:PORT with a port in 1..65535, or when the list is empty.
[[nodiscard]] msg::expected<std::vector<std::string>> parse_endpoints(std::string_view text);

/// One GET's outcome.
struct fetched {
  std::string endpoint;
  int http_status = 0;                ///< 0: no HTTP answer at all
  std::optional<nlohmann::json> body; ///< a 200 answer's JSON
  std::string error;                  ///< why not, when !ok()

  bool ok() const noexcept { return body.has_value(); }
  /// The node answered HTTP at all (even with an error status).
  bool answered() const noexcept { return http_status != 0; }
};

/// GET http://endpoint/path; ok() for a 200 whose body is JSON.
fetched fetch_json(const std::string& endpoint, const std::string& path,
                   const request_settings& settings);

/// POST http://endpoint/path with `body` (JSON); ok() for a 200 whose
/// answer is JSON. An error status's reason is FastAPI's {"detail": ...}.
fetched post_json(const std::string& endpoint, const std::string& path, const nlohmann::json& body,
                  const request_settings& settings);

/// fetch_json on every endpoint at once; results in the endpoints' order.
std::vector<fetched> fetch_all(const std::vector<std::string>& endpoints, const std::string& path,
                               const request_settings& settings);

/// The endpoints one after the other until one is ok(); with none, every
/// failure in order (so the caller can name them all).
struct first_answer {
  std::optional<fetched> answer;
  std::vector<fetched> failures;
};
first_answer fetch_first(const std::vector<std::string>& endpoints, const std::string& path,
                         const request_settings& settings);

/// options.request(), or nullopt after telling `err` why ("<command>: ...").
std::optional<request_settings> settings_or_say(const client_options& options, std::ostream& err,
                                                std::string_view command);

/// "h1:9000 (Connection refused); h2:9000 (HTTP 404: ...)".
std::string describe_failures(const std::vector<fetched>& failures);

} // namespace lmcc::apps::client
