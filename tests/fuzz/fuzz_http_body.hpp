// The fuzz body of lmcc-fuzz-http-body: the request readers every HTTP endpoint
// calls (gateway/http_body.hpp), shared by the libFuzzer target
// (fuzz_http_body_main.cpp, clang only) and its g++ smoke test.
//
// An input is a selector byte and a body. The selector's low four bits pick
// the endpoint (POST /lookup, /query_instance, /clear, /pin, /compress,
// /decompress, /move, /health, /check_finish, /query_worker_info,
// /admin/snapshot, /admin/faults, /cluster/members, or the query string of
// GET /controller/workers and /threads, read by httplib and then by lmcc), its
// high four bits the token limit (0: the default, 2^20; else 1-15, so that the
// 413 path is reached). check_http_body(input) holds:
//   - a refusal is 400, 413 or 422 with a detail; 413 only where a list has a limit;
//   - against nlohmann (SAX for the shape, the document for the values): a
//     body that is not JSON (or nests deeper than max_body_depth) is 400 or
//     413; one that is gets no 400; it is 413 exactly when a declared token
//     list has more items than the limit (any occurrence of a repeated key);
//     otherwise the FastAPI model of the endpoint, written here again from the
//     document (required, defaulted and nullable fields, their types), decides
//     between 422 and a request, and the request holds the document's values;
//   - a request read back from its own canonical body is the same request;
//   - query parameters: the first value counts, an empty one is absent, and
//     an integer parameter is read exactly when it is decimal in [-2^63, 2^64-1].
// The same exclusions as fuzz_json.hpp apply where nlohmann is not JSON (a
// byte order mark, a NUL byte, an integer too large for a double, which the
// readers take for an integer out of range) or simdjson 3.0.1 refuses valid
// JSON (an exponent of more than 19 digits): there only the first rule is checked.
//
//   std::string why = lmcc::fuzz::check_http_body(input);   // "" when all hold
//
// Thread-safety: reentrant.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace lmcc::fuzz {

/// Runs the whole body on one input: "" when every invariant holds, else the first broken.
std::string check_http_body(std::string_view input);

/// Real bodies of every endpoint (as LMCache's clients and lmcc's tools send
/// them, and their refusals), each behind a selector byte.
std::vector<std::string> http_body_seeds();

} // namespace lmcc::fuzz
