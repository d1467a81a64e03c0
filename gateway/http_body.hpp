// http_body: the JSON request bodies of LMCache's HTTP API (spec 5.1), read into
// the OrchMsg each endpoint sends.
//
// One function per endpoint (and the query parameters of the GET endpoints
// that take integers). Each reads the body as one JSON object, checks the
// fields that endpoint's FastAPI model declares and answers the message, or a
// request_error saying why not, with FastAPI's status: 400 for a body that is
// not JSON, 422 for a missing or mistyped field (the first one, in the model's
// field order), 413 for a token list over max_tokens. Unknown fields are
// ignored; a repeated key takes its last value, as Python's json module does.
// event_id is left empty where lmcc makes it up ("<Prefix><uuid4>"): the route
// stamps it (http_orchestration.cpp).
//
//   auto m = read_clear_body(R"({"instance_id": "A", "location": "L"})");
//   if (!m) reply(m.error().status, m.error().detail);
//
// Thread-safety: every function is reentrant.
#pragma once

#include "gateway/controller_api.hpp"
#include "messages/expected.hpp"
#include "messages/lmcache_msgs.hpp"

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace lmcc::gateway {

/// A request refused with an HTTP status and a FastAPI-style {"detail": ...}.
struct request_error {
  int status = 500;
  std::string detail;
};

template <class T>
using body_result = msg::basic_expected<T, request_error>;

/// Deepest nesting accepted in a request body. LMCache bodies nest 2 deep; the
/// limit keeps every parser's stack and memory bounded whatever the input.
inline constexpr size_t max_body_depth = 64;

/// POST /lookup {"tokens": [int]}.
body_result<msg::LookupMsg> read_lookup_body(std::string_view body, size_t max_tokens);

/// POST /query_instance {"event_id": str (required, then unused), "ip": str}.
body_result<msg::QueryInstMsg> read_query_instance_body(std::string_view body);

/// POST /clear {"instance_id": str, "location": str}.
body_result<msg::ClearMsg> read_clear_body(std::string_view body);

/// POST /pin {"instance_id": str, "location": str, "tokens": [int]}.
body_result<msg::PinMsg> read_pin_body(std::string_view body, size_t max_tokens);

/// POST /compress {"instance_id", "method", "location": str, "tokens": [int] | null = []}.
body_result<msg::CompressMsg> read_compress_body(std::string_view body, size_t max_tokens);

/// POST /decompress: the same fields as /compress.
body_result<msg::DecompressMsg> read_decompress_body(std::string_view body, size_t max_tokens);

/// POST /move {"old_position": [str, str], "new_position": [str, str],
/// "tokens": [int] = [], "should_copy": bool = false}.
body_result<msg::MoveMsg> read_move_body(std::string_view body, size_t max_tokens);

/// POST /health {"instance_id": str}.
body_result<msg::HealthMsg> read_health_body(std::string_view body);

/// POST /check_finish {"event_id": str}: the event_id is the one given.
body_result<msg::CheckFinishMsg> read_check_finish_body(std::string_view body);

/// POST /query_worker_info {"instance_id": str, "worker_ids": [int] | null = null}.
body_result<msg::QueryWorkerInfoMsg> read_query_worker_info_body(std::string_view body,
                                                                 size_t max_tokens);

/// POST /admin/snapshot {"dir": str}: the directory (not empty).
body_result<std::string> read_snapshot_body(std::string_view body);

/// POST /admin/faults {"fail_commits": int >= 0, "fail_all_commits": bool,
/// "commit_delay_us": int >= 0}, every field optional (absent: unchanged).
body_result<store_fault_settings> read_faults_body(std::string_view body);

/// Largest POST /cluster/members body read. It is parsed as a whole document,
/// which costs tens of bytes per body byte; 64 ids of a few hundred bytes (a
/// cluster has at most 64 members) need a fraction of this.
inline constexpr size_t max_members_body_bytes = size_t{64} << 10;

/// POST /cluster/members {"members": ["node id", ...]}: the ids, or 422; 413
/// past max_members_body_bytes.
body_result<std::vector<std::string>> read_members_body(std::string_view body);

// -- query parameters (GET /controller/workers, /threads) ---------------------------------------

/// A request's query parameters as httplib parses them (httplib::Request::params).
using query_params = std::multimap<std::string, std::string>;

/// The first value of parameter `name`, or nullopt when it is absent or empty
/// (FastAPI's Optional[...] = None; an empty value counts as absent, as
/// `if instance_id:` does in LMCache).
std::optional<std::string> read_query_param(const query_params& params, std::string_view name);

/// The same parameter as an integer: nullopt when absent or empty, 422 when it
/// is not an integer in [-2^63, 2^64-1].
body_result<std::optional<msg::wire_int>> read_int_query_param(const query_params& params,
                                                               std::string_view name);

/// Decimal text (an optional '-' and digits, nothing else) as a wire int in
/// [-2^63, 2^64-1]; nullopt otherwise.
std::optional<msg::wire_int> parse_wire_int(std::string_view text);

} // namespace lmcc::gateway
