// Request bodies are read in one pass with simdjson On-Demand (json_text_reader):
// the fields an endpoint declares are read into a body_field as they arrive,
// everything else is walked only to check that it is JSON. No document is
// built, token lists go straight into the message, and a list over max_tokens
// is refused at the item past the limit: the work is linear in the body and the
// memory bounded by the limits, whatever the body holds.
//
// Precedence, as when the whole body was parsed first: a body that is not JSON
// is 400 wherever the fault sits (even after a mistyped field), except that a
// token list over the limit is 413 at once; then the first missing or mistyped
// field, in the model's order, is 422.
#include "gateway/http_body.hpp"

#include "gateway/internal/body_reader.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <charconv>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace lmcc::gateway {
namespace {

using namespace internal;

// -- field values: 422 for the first missing or mistyped field ---------------------------------

std::string require_string(body_field& f) {
  if (!f.present)
    throw request_error{422, field_label(f) + " is required"};
  if (!f.well_typed)
    throw request_error{422, field_label(f) + " must be a string"};
  return std::move(f.text);
}

bool optional_bool(const body_field& f, bool fallback) {
  if (!f.present)
    return fallback;
  if (!f.well_typed)
    throw request_error{422, field_label(f) + " must be a boolean"};
  return f.flag;
}

std::optional<uint64_t> optional_count(const body_field& f) {
  if (!f.present)
    return std::nullopt;
  if (!f.well_typed)
    throw request_error{422, field_label(f) + " must be an integer >= 0"};
  return f.number;
}

std::optional<int64_t> optional_signed(const body_field& f) {
  if (!f.present)
    return std::nullopt;
  if (!f.well_typed)
    throw request_error{422, field_label(f) + " must be an integer in [-2^63, 2^63-1]"};
  return f.signed_number;
}

std::vector<msg::wire_int> int_list(body_field& f) {
  if (!f.well_typed)
    throw request_error{422, field_label(f) + " must be a list of integers"};
  if (f.problem != item_problem::none)
    throw request_error{422, field_label(f) + " item " + std::to_string(f.problem_index) +
                                 " must be an integer in [-2^63, 2^64-1]"};
  return std::move(f.ints);
}

std::vector<msg::wire_int> require_int_list(body_field& f) {
  if (!f.present)
    throw request_error{422, field_label(f) + " is required"};
  return int_list(f);
}

/// `Optional[List[int]] = <missing>`: absent -> `missing`, null -> nullopt.
std::optional<std::vector<msg::wire_int>>
nullable_int_list(body_field& f, std::optional<std::vector<msg::wire_int>> missing) {
  if (!f.present)
    return missing;
  if (f.null)
    return std::nullopt;
  return int_list(f);
}

std::pair<std::string, std::string> require_position(body_field& f) {
  if (!f.present)
    throw request_error{422, field_label(f) + " is required"};
  if (!f.well_typed)
    throw request_error{422, field_label(f) + " must be [instance_id, location] (two strings)"};
  return std::move(f.position);
}

/// /lookup's own wording for its token list (the router's hot path says why).
std::vector<msg::wire_int> lookup_tokens(body_field& f) {
  if (!f.present)
    throw request_error{422, "field 'tokens' is required"};
  if (!f.well_typed)
    throw request_error{422, "field 'tokens' must be a list of integers"};
  if (f.problem == item_problem::none)
    return std::move(f.ints);
  const std::string item = "field 'tokens' item " + std::to_string(f.problem_index);
  switch (f.problem) {
  case item_problem::none:
  case item_problem::not_a_number:
    break;
  case item_problem::out_of_range:
    throw request_error{422, item + " is outside the range of token ids [-2^63, 2^64-1]"};
  case item_problem::fraction:
    throw request_error{422, item + " must be an integer, not a float"};
  }
  throw request_error{422, item + " must be an integer"};
}

/// Runs a reader that throws request_error and answers its result as a value.
template <class Read>
auto catching(Read&& read) -> body_result<decltype(read())> {
  try {
    return read();
  } catch (request_error& e) {
    return std::move(e);
  }
}

template <class M>
M read_compression_body(std::string_view body, size_t max_tokens) {
  body_field fields[] = {{.name = "instance_id", .type = field_type::string},
                         {.name = "method", .type = field_type::string},
                         {.name = "location", .type = field_type::string},
                         {.name = "tokens", .type = field_type::int_list}};
  read_body(body, fields, max_tokens);
  return M{.event_id = {},
           .instance_id = require_string(fields[0]),
           .method = require_string(fields[1]),
           .location = require_string(fields[2]),
           .tokens = nullable_int_list(fields[3], std::vector<msg::wire_int>{})};
}

} // namespace

body_result<msg::LookupMsg> read_lookup_body(std::string_view body, size_t max_tokens) {
  return catching([&] {
    body_field tokens{.name = "tokens", .type = field_type::int_list};
    read_body(body, {&tokens, 1}, max_tokens);
    return msg::LookupMsg{.event_id = {}, .tokens = lookup_tokens(tokens)};
  });
}

body_result<msg::QueryInstMsg> read_query_instance_body(std::string_view body) {
  return catching([&] {
    body_field fields[] = {{.name = "event_id", .type = field_type::string},
                           {.name = "ip", .type = field_type::string}};
    read_body(body, fields, 0);
    (void)require_string(fields[0]); // required by LMCache's model, then unused
    return msg::QueryInstMsg{.event_id = {}, .ip = require_string(fields[1])};
  });
}

body_result<msg::ClearMsg> read_clear_body(std::string_view body) {
  return catching([&] {
    body_field fields[] = {{.name = "instance_id", .type = field_type::string},
                           {.name = "location", .type = field_type::string}};
    read_body(body, fields, 0);
    return msg::ClearMsg{.event_id = {},
                         .instance_id = require_string(fields[0]),
                         .location = require_string(fields[1])};
  });
}

body_result<msg::PinMsg> read_pin_body(std::string_view body, size_t max_tokens) {
  return catching([&] {
    body_field fields[] = {{.name = "instance_id", .type = field_type::string},
                           {.name = "location", .type = field_type::string},
                           {.name = "tokens", .type = field_type::int_list}};
    read_body(body, fields, max_tokens);
    return msg::PinMsg{.event_id = {},
                       .instance_id = require_string(fields[0]),
                       .location = require_string(fields[1]),
                       .tokens = require_int_list(fields[2])};
  });
}

body_result<msg::CompressMsg> read_compress_body(std::string_view body, size_t max_tokens) {
  return catching([&] { return read_compression_body<msg::CompressMsg>(body, max_tokens); });
}

body_result<msg::DecompressMsg> read_decompress_body(std::string_view body, size_t max_tokens) {
  return catching([&] { return read_compression_body<msg::DecompressMsg>(body, max_tokens); });
}

body_result<msg::MoveMsg> read_move_body(std::string_view body, size_t max_tokens) {
  return catching([&] {
    body_field fields[] = {{.name = "old_position", .type = field_type::position},
                           {.name = "new_position", .type = field_type::position},
                           {.name = "tokens", .type = field_type::int_list},
                           {.name = "should_copy", .type = field_type::boolean}};
    read_body(body, fields, max_tokens);
    // LMCache: tokens: List[int] = [] (not nullable), should_copy: bool = False.
    std::vector<msg::wire_int> tokens;
    if (fields[2].present)
      tokens = int_list(fields[2]);
    return msg::MoveMsg{.event_id = {},
                        .old_position = require_position(fields[0]),
                        .new_position = require_position(fields[1]),
                        .tokens = std::move(tokens),
                        .copy = optional_bool(fields[3], false)};
  });
}

body_result<msg::HealthMsg> read_health_body(std::string_view body) {
  return catching([&] {
    body_field instance_id{.name = "instance_id", .type = field_type::string};
    read_body(body, {&instance_id, 1}, 0);
    return msg::HealthMsg{.event_id = {}, .instance_id = require_string(instance_id)};
  });
}

body_result<msg::CheckFinishMsg> read_check_finish_body(std::string_view body) {
  return catching([&] {
    body_field event_id{.name = "event_id", .type = field_type::string};
    read_body(body, {&event_id, 1}, 0);
    return msg::CheckFinishMsg{.event_id = require_string(event_id)};
  });
}

body_result<msg::QueryWorkerInfoMsg> read_query_worker_info_body(std::string_view body,
                                                                 size_t max_tokens) {
  return catching([&] {
    body_field fields[] = {{.name = "instance_id", .type = field_type::string},
                           {.name = "worker_ids", .type = field_type::int_list}};
    read_body(body, fields, max_tokens);
    return msg::QueryWorkerInfoMsg{.event_id = {},
                                   .instance_id = require_string(fields[0]),
                                   .worker_ids = nullable_int_list(fields[1], std::nullopt)};
  });
}

body_result<std::string> read_snapshot_body(std::string_view body) {
  return catching([&] {
    body_field dir{.name = "dir", .type = field_type::string};
    read_body(body, {&dir, 1}, 0);
    auto path = require_string(dir);
    if (path.empty())
      throw request_error{422, "dir must not be empty"};
    return path;
  });
}

body_result<store_fault_settings> read_faults_body(std::string_view body) {
  return catching([&] {
    body_field fields[] = {
        {.name = "fail_commits", .type = field_type::count},
        {.name = "fail_all_commits", .type = field_type::boolean},
        {.name = "commit_delay_us", .type = field_type::count},
        {.name = "clock_jump_ms", .type = field_type::signed_count},
    };
    read_body(body, fields, 0);
    store_fault_settings out;
    out.fail_commits = optional_count(fields[0]);
    if (fields[1].present)
      out.fail_all_commits = optional_bool(fields[1], false);
    out.commit_delay_us = optional_count(fields[2]);
    out.clock_jump_ms = optional_signed(fields[3]);
    return out;
  });
}

body_result<std::vector<std::string>> read_members_body(std::string_view body) {
  if (body.size() > max_members_body_bytes)
    return request_error{413, "a membership change body is larger than " +
                                  std::to_string(max_members_body_bytes) + " bytes"};
  const auto doc = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  const auto members = doc.is_object() ? doc.find("members") : doc.end();
  if (!doc.is_object() || members == doc.end() || !members->is_array() ||
      !std::all_of(members->begin(), members->end(), [](const auto& m) { return m.is_string(); }))
    return request_error{422, R"(expected {"members": ["node id", ...]})"};
  return members->get<std::vector<std::string>>();
}

// -- query parameters ----------------------------------------------------------------------------

std::optional<std::string> read_query_param(const query_params& params, std::string_view name) {
  const auto first = params.lower_bound(std::string(name));
  if (first == params.end() || first->first != name || first->second.empty())
    return std::nullopt;
  return first->second;
}

body_result<std::optional<msg::wire_int>> read_int_query_param(const query_params& params,
                                                               std::string_view name) {
  auto text = read_query_param(params, name);
  if (!text)
    return std::optional<msg::wire_int>{};
  auto value = parse_wire_int(*text);
  if (!value)
    return request_error{422, "query parameter '" + std::string(name) + "' must be an integer"};
  return value;
}

std::optional<msg::wire_int> parse_wire_int(std::string_view text) {
  const char* end = text.data() + text.size();
  int64_t i = 0;
  if (auto r = std::from_chars(text.data(), end, i); r.ec == std::errc{} && r.ptr == end)
    return msg::wire_int{i};
  uint64_t u = 0;
  if (auto r = std::from_chars(text.data(), end, u); r.ec == std::errc{} && r.ptr == end)
    return msg::wire_int::from_unsigned(u);
  return std::nullopt;
}

} // namespace lmcc::gateway
