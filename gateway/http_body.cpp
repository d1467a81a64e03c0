#include "gateway/http_body.hpp"

#include <nlohmann/json.hpp>
#include <simdjson.h>

#include <algorithm>
#include <optional>
#include <utility>
#include <vector>

namespace lmcc::gateway {
namespace {

using json = nlohmann::ordered_json;
namespace sj = simdjson::ondemand;

/// Thread-local parse buffers larger than this are released after the request, so
/// that one huge body does not pin its memory in every HTTP thread.
constexpr size_t keep_buffer_bytes = size_t{1} << 20;

// -- /lookup body: simdjson On-Demand ----------------------------------------------------------
//
// /lookup carries thousands of token ids per call and is the hot path, so its body
// is read straight off the wire with simdjson instead of building a DOM. On-Demand
// only checks what it visits, so every value is visited: unknown fields are walked
// by validate_value and the document must end where the body ends.

[[noreturn]] void throw_malformed(simdjson::error_code e) {
  throw request_error{400, std::string("malformed JSON body: ") + simdjson::error_message(e)};
}

void check_json(simdjson::error_code e) {
  if (e != simdjson::SUCCESS)
    throw_malformed(e);
}

/// Walks a value that is not used, so that malformed JSON inside it is refused too.
void validate_value(sj::value v, size_t depth) {
  if (depth > max_body_depth)
    throw request_error{400, "request body nests deeper than " + std::to_string(max_body_depth) +
                                 " levels"};
  sj::json_type type;
  check_json(v.type().get(type));
  switch (type) {
  case sj::json_type::object: {
    sj::object obj;
    check_json(v.get_object().get(obj));
    for (auto field : obj) {
      std::string_view key;
      check_json(field.unescaped_key().get(key));
      sj::value child;
      check_json(field.value().get(child));
      validate_value(child, depth + 1);
    }
    return;
  }
  case sj::json_type::array: {
    sj::array arr;
    check_json(v.get_array().get(arr));
    for (auto element : arr) {
      sj::value child;
      check_json(element.get(child));
      validate_value(child, depth + 1);
    }
    return;
  }
  case sj::json_type::number: {
    double ignored;
    check_json(v.get_double().get(ignored));
    return;
  }
  case sj::json_type::string: {
    std::string_view ignored;
    check_json(v.get_string().get(ignored));
    return;
  }
  case sj::json_type::boolean: {
    bool ignored;
    check_json(v.get_bool().get(ignored));
    return;
  }
  case sj::json_type::null: {
    bool is_null = false;
    check_json(v.is_null().get(is_null));
    if (!is_null)
      throw_malformed(simdjson::N_ATOM_ERROR);
    return;
  }
  }
}

/// True for JSON's integer grammar: -?(0|[1-9][0-9]*).
bool is_json_integer(std::string_view text) {
  while (!text.empty() &&
         (text.back() == ' ' || text.back() == '\t' || text.back() == '\n' || text.back() == '\r'))
    text.remove_suffix(1);
  if (!text.empty() && text.front() == '-')
    text.remove_prefix(1);
  if (text.empty() || (text.front() == '0' && text.size() > 1))
    return false;
  return std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
}

/// Why token `index` is not a 64-bit integer: 422 for a value of another type (as
/// FastAPI says), 400 when its bytes are not JSON at all.
request_error bad_token(sj::value& item, size_t index) {
  std::string where = "field 'tokens' item " + std::to_string(index);
  sj::json_type type;
  check_json(item.type().get(type));
  if (type == sj::json_type::number) {
    if (is_json_integer(item.raw_json_token()))
      return {422, where + " is outside the range of token ids [-2^63, 2^64-1]"};
    double ignored;
    check_json(item.get_double().get(ignored));
    return {422, where + " must be an integer, not a float"};
  }
  validate_value(item, 3);
  return {422, where + " must be an integer"};
}

void read_tokens(sj::value v, size_t max_tokens, std::vector<msg::wire_int>& out) {
  out.clear();
  sj::json_type type;
  check_json(v.type().get(type));
  if (type != sj::json_type::array) {
    validate_value(v, 2);
    throw request_error{422, "field 'tokens' must be a list of integers"};
  }
  sj::array arr;
  check_json(v.get_array().get(arr));
  for (auto element : arr) {
    sj::value item;
    check_json(element.get(item));
    if (out.size() == max_tokens)
      throw request_error{413, "field 'tokens' has more than " + std::to_string(max_tokens) +
                                   " entries"};
    // Signed first (the common case), then the unsigned range above 2^63-1.
    int64_t i = 0;
    if (item.get_int64().get(i) == simdjson::SUCCESS) {
      out.emplace_back(i);
      continue;
    }
    uint64_t u = 0;
    if (item.get_uint64().get(u) == simdjson::SUCCESS) {
      out.push_back(msg::wire_int::from_unsigned(u));
      continue;
    }
    throw bad_token(item, out.size());
  }
}

std::vector<msg::wire_int> read_lookup_tokens(std::string_view body, size_t max_tokens) {
  thread_local sj::parser parser;
  thread_local std::string buffer;
  struct release_large_buffers {
    ~release_large_buffers() {
      if (buffer.capacity() > keep_buffer_bytes)
        std::string{}.swap(buffer);
      if (parser.capacity() > keep_buffer_bytes)
        parser = sj::parser{};
    }
  } release_guard;

  // The body is wrapped in "[...]": the root is then always an array (On-Demand
  // treats root scalars specially), a second top-level value shows up as a second
  // element, and the copy provides the padding simdjson needs anyway.
  buffer.clear();
  buffer.reserve(body.size() + 2 + simdjson::SIMDJSON_PADDING);
  buffer += '[';
  buffer += body;
  buffer += ']';
  sj::document doc;
  check_json(parser.iterate(buffer.data(), buffer.size(), buffer.capacity()).get(doc));
  sj::array root;
  check_json(doc.get_array().get(root));

  std::vector<msg::wire_int> tokens;
  bool have_tokens = false;
  size_t values = 0;
  for (auto element : root) {
    sj::value v;
    check_json(element.get(v));
    if (++values > 1)
      throw request_error{400, "malformed JSON body: more than one top-level value"};
    sj::json_type type;
    check_json(v.type().get(type));
    if (type != sj::json_type::object) {
      validate_value(v, 1);
      throw request_error{422, "request body must be a JSON object"};
    }
    sj::object obj;
    check_json(v.get_object().get(obj));
    for (auto field : obj) {
      std::string_view key;
      check_json(field.unescaped_key().get(key));
      sj::value child;
      check_json(field.value().get(child));
      if (key == "tokens") { // a repeated key wins, as with Python's json module
        read_tokens(child, max_tokens, tokens);
        have_tokens = true;
      } else {
        validate_value(child, 2);
      }
    }
  }
  if (values == 0)
    throw request_error{400, "malformed JSON body: empty"};
  // The wrapper's ']' must be the last thing: anything after it came from the body
  // (e.g. a body of `{...}], [`), which On-Demand would otherwise never look at.
  const char* location = nullptr;
  if (doc.current_location().get(location) != simdjson::OUT_OF_BOUNDS)
    throw request_error{400, "malformed JSON body: unexpected content after the JSON value"};
  if (!have_tokens)
    throw request_error{422, "field 'tokens' is required"};
  return tokens;
}

// -- other bodies: nlohmann-json ----------------------------------------------------------------

/// Cheap pre-check so that no parser ever sees absurd nesting (a body of 60 MB of
/// '[' would otherwise cost gigabytes in a DOM).
bool nesting_exceeds(std::string_view text, size_t limit) {
  size_t depth = 0;
  bool in_string = false;
  bool escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > limit)
        return true;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return false;
}

json parse_object_body(std::string_view body) {
  if (nesting_exceeds(body, max_body_depth))
    throw request_error{400, "request body nests deeper than " + std::to_string(max_body_depth) +
                                 " levels"};
  json j;
  try {
    j = json::parse(body);
  } catch (const json::parse_error& e) {
    throw request_error{400, std::string("malformed JSON body: ") + e.what()};
  }
  if (!j.is_object())
    throw request_error{422, "request body must be a JSON object"};
  return j;
}

const json* find_field(const json& obj, const char* name) {
  auto it = obj.find(name);
  return it == obj.end() ? nullptr : &*it;
}

std::string field_name(const char* name) {
  return std::string("field '") + name + "'";
}

std::string require_string(const json& obj, const char* name) {
  const json* v = find_field(obj, name);
  if (v == nullptr)
    throw request_error{422, field_name(name) + " is required"};
  if (!v->is_string())
    throw request_error{422, field_name(name) + " must be a string"};
  return v->get<std::string>();
}

bool optional_bool(const json& obj, const char* name, bool fallback) {
  const json* v = find_field(obj, name);
  if (v == nullptr)
    return fallback;
  if (!v->is_boolean())
    throw request_error{422, field_name(name) + " must be a boolean"};
  return v->get<bool>();
}

std::vector<msg::wire_int> int_list(const json& v, const char* name, size_t max_items) {
  if (!v.is_array())
    throw request_error{422, field_name(name) + " must be a list of integers"};
  if (v.size() > max_items)
    throw request_error{413, field_name(name) + " has more than " + std::to_string(max_items) +
                                 " entries"};
  std::vector<msg::wire_int> out;
  out.reserve(v.size());
  for (const auto& item : v) {
    if (item.is_number_unsigned())
      out.push_back(msg::wire_int::from_unsigned(item.get<uint64_t>()));
    else if (item.is_number_integer())
      out.emplace_back(item.get<int64_t>());
    else
      throw request_error{422, field_name(name) + " item " + std::to_string(out.size()) +
                                   " must be an integer in [-2^63, 2^64-1]"};
  }
  return out;
}

std::vector<msg::wire_int> require_int_list(const json& obj, const char* name, size_t max_items) {
  const json* v = find_field(obj, name);
  if (v == nullptr)
    throw request_error{422, field_name(name) + " is required"};
  return int_list(*v, name, max_items);
}

/// `name: Optional[List[int]] = <missing>`: absent -> `missing`, null -> nullopt.
std::optional<std::vector<msg::wire_int>>
nullable_int_list(const json& obj, const char* name, size_t max_items,
                  std::optional<std::vector<msg::wire_int>> missing) {
  const json* v = find_field(obj, name);
  if (v == nullptr)
    return missing;
  if (v->is_null())
    return std::nullopt;
  return int_list(*v, name, max_items);
}

/// /move's [instance_id, location] pairs.
std::pair<std::string, std::string> require_position(const json& obj, const char* name) {
  const json* v = find_field(obj, name);
  if (v == nullptr)
    throw request_error{422, field_name(name) + " is required"};
  if (!v->is_array() || v->size() != 2 || !(*v)[0].is_string() || !(*v)[1].is_string())
    throw request_error{422, field_name(name) + " must be [instance_id, location] (two strings)"};
  return {(*v)[0].get<std::string>(), (*v)[1].get<std::string>()};
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

} // namespace

body_result<msg::LookupMsg> read_lookup_body(std::string_view body, size_t max_tokens) {
  return catching([&] {
    return msg::LookupMsg{.event_id = {}, .tokens = read_lookup_tokens(body, max_tokens)};
  });
}

body_result<msg::QueryInstMsg> read_query_instance_body(std::string_view body) {
  return catching([&] {
    auto j = parse_object_body(body);
    (void)require_string(j, "event_id"); // required by LMCache's model, then unused
    return msg::QueryInstMsg{.event_id = {}, .ip = require_string(j, "ip")};
  });
}

body_result<msg::ClearMsg> read_clear_body(std::string_view body) {
  return catching([&] {
    auto j = parse_object_body(body);
    return msg::ClearMsg{.event_id = {},
                         .instance_id = require_string(j, "instance_id"),
                         .location = require_string(j, "location")};
  });
}

body_result<msg::PinMsg> read_pin_body(std::string_view body, size_t max_tokens) {
  return catching([&] {
    auto j = parse_object_body(body);
    return msg::PinMsg{.event_id = {},
                       .instance_id = require_string(j, "instance_id"),
                       .location = require_string(j, "location"),
                       .tokens = require_int_list(j, "tokens", max_tokens)};
  });
}

template <class M>
M read_compression_body(std::string_view body, size_t max_tokens) {
  auto j = parse_object_body(body);
  return M{.event_id = {},
           .instance_id = require_string(j, "instance_id"),
           .method = require_string(j, "method"),
           .location = require_string(j, "location"),
           .tokens = nullable_int_list(j, "tokens", max_tokens, std::vector<msg::wire_int>{})};
}

body_result<msg::CompressMsg> read_compress_body(std::string_view body, size_t max_tokens) {
  return catching([&] { return read_compression_body<msg::CompressMsg>(body, max_tokens); });
}

body_result<msg::DecompressMsg> read_decompress_body(std::string_view body, size_t max_tokens) {
  return catching([&] { return read_compression_body<msg::DecompressMsg>(body, max_tokens); });
}

body_result<msg::MoveMsg> read_move_body(std::string_view body, size_t max_tokens) {
  return catching([&] {
    auto j = parse_object_body(body);
    // LMCache: tokens: List[int] = [] (not nullable), should_copy: bool = False.
    std::vector<msg::wire_int> tokens;
    if (const json* t = find_field(j, "tokens"))
      tokens = int_list(*t, "tokens", max_tokens);
    return msg::MoveMsg{.event_id = {},
                        .old_position = require_position(j, "old_position"),
                        .new_position = require_position(j, "new_position"),
                        .tokens = std::move(tokens),
                        .copy = optional_bool(j, "should_copy", false)};
  });
}

body_result<msg::HealthMsg> read_health_body(std::string_view body) {
  return catching([&] {
    auto j = parse_object_body(body);
    return msg::HealthMsg{.event_id = {}, .instance_id = require_string(j, "instance_id")};
  });
}

body_result<msg::CheckFinishMsg> read_check_finish_body(std::string_view body) {
  return catching([&] {
    auto j = parse_object_body(body);
    return msg::CheckFinishMsg{.event_id = require_string(j, "event_id")};
  });
}

body_result<msg::QueryWorkerInfoMsg> read_query_worker_info_body(std::string_view body,
                                                                 size_t max_tokens) {
  return catching([&] {
    auto j = parse_object_body(body);
    return msg::QueryWorkerInfoMsg{
        .event_id = {},
        .instance_id = require_string(j, "instance_id"),
        .worker_ids = nullable_int_list(j, "worker_ids", max_tokens, std::nullopt)};
  });
}

body_result<std::string> read_snapshot_body(std::string_view body) {
  return catching([&] {
    auto j = parse_object_body(body);
    auto dir = require_string(j, "dir");
    if (dir.empty())
      throw request_error{422, "dir must not be empty"};
    return dir;
  });
}

} // namespace lmcc::gateway
