// http_access: who may call which HTTP endpoint. Every route declares what it
// does (route_access); a configured API token (a bearer token, from a file or
// an environment variable, never from the config itself) is then required for
// every route that changes state, and for reads too when the operator closes
// them. Probes stay open: an orchestrator's liveness and readiness checks
// carry no token.
//
//   http_security s;  s.token = resolve_api_token(s, process_environment());
//   if (auto refusal = check_access(route_access::change, s, "Bearer abc"))
//     answer(refusal->status, refusal->detail);   // 401 without, 403 wrong
//
// Context: pure functions over the options; thread-safe. No httplib.
#pragma once

#include "gateway/gateway_options.hpp"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace lmcc::gateway {

enum class route_access : uint8_t {
  /// /healthz, /readyz: always open.
  probe,
  /// LMCache's read API that routers use (/lookup, /query_*, /controller/*,
  /// /metrics, /health), the cluster's status, the dashboard: open unless
  /// lmcc_api_token_for_reads, so a drop-in deployment keeps working.
  read,
  /// Anything that changes state (/clear /pin /move /compress /decompress,
  /// membership, snapshots, /admin/*): the token when one is configured.
  change,
};

/// Why a request is refused.
struct access_refusal {
  int status = 401;       ///< 401: no bearer token; 403: the wrong one
  std::string detail;     ///< the {"detail": ...} text
  std::string_view event; ///< lmcc_events_total's name for it
};

/// nullopt: allowed. `authorization` is the request's Authorization header
/// ("" when absent); the token is compared in constant time.
std::optional<access_refusal> check_access(route_access access, const http_security& security,
                                           std::string_view authorization);

/// The API token from lmcc_api_token_file, else from the environment variable
/// lmcc_api_token_env names; "" when neither is set (the API is open).
/// Throws std::invalid_argument for a file that cannot be read or a token
/// shorter than min_api_token_bytes (trailing whitespace is trimmed).
std::string resolve_api_token(const http_security& security,
                              const std::map<std::string, std::string>& environment);

inline constexpr size_t min_api_token_bytes = 16;

/// The token in `file` when one is named, else `env_value`; surrounding
/// blanks and line ends trimmed, "" for neither. Throws std::invalid_argument
/// when the file cannot be read. (resolve_api_token's reading, for clients.)
std::string read_api_token(const std::string& file, std::string_view env_value);

} // namespace lmcc::gateway
