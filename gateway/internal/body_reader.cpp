// body_reader: reads a request body in one pass with simdjson On-Demand
// (json_text_reader) into an endpoint's declared fields (body_reader.hpp).
#include "gateway/internal/body_reader.hpp"

#include "messages/json_text_reader.hpp"

#include <simdjson.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <utility>
#include <vector>

namespace lmcc::gateway::internal {
namespace {

namespace sj = simdjson::ondemand;

// -- malformed JSON: 400 -------------------------------------------------------------------------

[[noreturn]] void throw_malformed(simdjson::error_code e) {
  throw request_error{400, std::string("malformed JSON body: ") + simdjson::error_message(e)};
}

void check_json(simdjson::error_code e) {
  if (e != simdjson::SUCCESS)
    throw_malformed(e);
}

/// `v` is a container `depth` levels deep (the body itself is level 1).
void check_depth(size_t depth) {
  if (depth > max_body_depth)
    throw request_error{400, "request body nests deeper than " + std::to_string(max_body_depth) +
                                 " levels"};
}

/// Reads a value nobody uses, `depth` levels deep, so that malformed JSON inside
/// it is refused too (On-Demand checks only what is read).
void skip_value(sj::value& v, size_t depth) {
  sj::json_type type;
  check_json(v.type().get(type));
  switch (type) {
  case sj::json_type::object: {
    check_depth(depth);
    sj::object object;
    check_json(v.get_object().get(object));
    for (auto field : object) {
      std::string_view key;
      check_json(field.unescaped_key().get(key));
      sj::value child;
      check_json(field.value().get(child));
      skip_value(child, depth + 1);
    }
    return;
  }
  case sj::json_type::array: {
    check_depth(depth);
    sj::array array;
    check_json(v.get_array().get(array));
    for (auto element : array) {
      sj::value child;
      check_json(element.get(child));
      skip_value(child, depth + 1);
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
  throw_malformed(simdjson::TAPE_ERROR);
}

/// True for JSON's integer grammar, -?(0|[1-9][0-9]*), before trailing whitespace.
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

// -- integers: the token fast path ---------------------------------------------------------------

/// The usual token id, -?(0|[1-9][0-9]{0,7}) followed by ',', ']' or whitespace,
/// read with one 8-byte load instead of simdjson's digit-by-digit loop (whose
/// exit mispredicts on every token of varying length). Anything else, and
/// anything longer, answers nullopt and takes simdjson's general path, which
/// also refuses what is malformed. `text` must have 8 readable bytes after its
/// first digit: json_text_reader's zeroed padding guarantees them.
std::optional<int64_t> read_short_integer(const char* text) {
  const bool negative = *text == '-';
  const char* digits = text + (negative ? 1 : 0);
  uint64_t chunk;
  std::memcpy(&chunk, digits, sizeof chunk); // byte 0 is the first character
  // Each byte minus '0' is a digit's value when below 10. The high bit marks the
  // others; a carry out of a marked byte only disturbs bytes after it.
  const uint64_t values = chunk ^ 0x3030303030303030;
  const uint64_t not_digit = ((values + 0x7676767676767676) | values) & 0x8080808080808080;
  if (not_digit == 0)
    return std::nullopt; // 8 digits or more
  const int length = std::countr_zero(not_digit) / 8;
  if (length == 0 || (digits[0] == '0' && length > 1))
    return std::nullopt;
  const char next = digits[length];
  if (next != ',' && next != ']' && next != ' ' && next != '\n' && next != '\r' && next != '\t')
    return std::nullopt;
  // The digits to the top bytes (zeros below them are leading zeros), then
  // pairs, quads and octets combined: simdjson's parse_eight_digits_unrolled.
  uint64_t v = values << (8 * (8 - length));
  v = (v * 10 + (v >> 8)) & 0x00FF00FF00FF00FF;
  v = (v * 100 + (v >> 16)) & 0x0000FFFF0000FFFF;
  v = (v * 10000 + (v >> 32)) & 0x00000000FFFFFFFF;
  const auto magnitude = static_cast<int64_t>(v);
  return negative ? -magnitude : magnitude;
}

// -- declared fields ------------------------------------------------------------------------------

/// An array of integers, item by item into f.ints. Every item is checked (a
/// malformed one is 400 wherever it sits) and counted: the item past
/// `max_items` is 413 at once, before the rest is read.
void read_int_list(body_field& f, sj::value& v, size_t max_items) {
  sj::array array;
  check_json(v.get_array().get(array));
  size_t count = 0;
  for (auto element : array) {
    sj::value item;
    check_json(element.get(item));
    if (count == max_items)
      throw request_error{413, field_label(f) + " has more than " + std::to_string(max_items) +
                                   " entries"};
    const size_t index = count++;
    // The usual short token straight off the text (the item is then skipped by
    // the array's iteration, one token on), else simdjson: signed, then the
    // unsigned range above 2^63-1. A failed get_* leaves the item unread.
    if (auto short_token = read_short_integer(item.raw_json_token().data())) {
      if (f.problem == item_problem::none)
        f.ints.emplace_back(*short_token);
      continue;
    }
    int64_t i = 0;
    auto e = item.get_int64().get(i);
    if (e == simdjson::SUCCESS) {
      if (f.problem == item_problem::none)
        f.ints.emplace_back(i);
      continue;
    }
    if (e == simdjson::NUMBER_ERROR)
      throw_malformed(e);
    uint64_t u = 0;
    if (item.get_uint64().get(u) == simdjson::SUCCESS) {
      if (f.problem == item_problem::none)
        f.ints.push_back(msg::wire_int::from_unsigned(u));
      continue;
    }
    item_problem problem = item_problem::not_a_number;
    sj::json_type type;
    check_json(item.type().get(type));
    if (type == sj::json_type::number && is_json_integer(item.raw_json_token())) {
      problem = item_problem::out_of_range; // an integer beyond 64 bits
    } else {
      if (type == sj::json_type::number)
        problem = item_problem::fraction;
      skip_value(item, 3);
    }
    if (f.problem == item_problem::none) {
      f.problem = problem;
      f.problem_index = index;
      f.ints.clear();
      f.ints.shrink_to_fit();
    }
  }
}

/// [instance_id, location]: exactly two strings; anything else is mistyped.
void read_position(body_field& f, sj::value& v) {
  sj::array array;
  check_json(v.get_array().get(array));
  size_t count = 0;
  bool all_strings = true;
  for (auto element : array) {
    sj::value item;
    check_json(element.get(item));
    sj::json_type type;
    check_json(item.type().get(type));
    if (type != sj::json_type::string || count >= 2) {
      all_strings = all_strings && type == sj::json_type::string;
      skip_value(item, 3);
    } else {
      std::string_view s;
      check_json(item.get_string().get(s));
      (count == 0 ? f.position.first : f.position.second).assign(s);
    }
    ++count;
  }
  f.well_typed = all_strings && count == 2;
}

void read_field(body_field& f, sj::value& v, size_t max_items) {
  f.present = true;
  f.null = false;
  f.well_typed = false;
  f.ints.clear();
  f.problem = item_problem::none;
  sj::json_type type;
  check_json(v.type().get(type));
  if (type == sj::json_type::null) {
    skip_value(v, 2);
    f.null = true;
    return;
  }
  switch (f.type) {
  case field_type::string:
    if (type == sj::json_type::string) {
      std::string_view s;
      check_json(v.get_string().get(s));
      f.text.assign(s);
      f.well_typed = true;
      return;
    }
    break;
  case field_type::boolean:
    if (type == sj::json_type::boolean) {
      check_json(v.get_bool().get(f.flag));
      f.well_typed = true;
      return;
    }
    break;
  case field_type::int_list:
    if (type == sj::json_type::array) {
      read_int_list(f, v, max_items);
      f.well_typed = true;
      return;
    }
    break;
  case field_type::position:
    if (type == sj::json_type::array) {
      read_position(f, v);
      return;
    }
    break;
  // simdjson calls an integer beyond 64 bits signed or unsigned by its sign and
  // then fails to read it: such a field is mistyped (422), not malformed, and
  // skip_value below still refuses a malformed number with 400.
  case field_type::count:
    if (type == sj::json_type::number) {
      sj::number_type kind;
      check_json(v.get_number_type().get(kind));
      if (kind == sj::number_type::unsigned_integer || (kind == sj::number_type::signed_integer)) {
        int64_t n = 0;
        if (kind == sj::number_type::signed_integer) {
          if (v.get_int64().get(n) != simdjson::SUCCESS || n < 0)
            break;
          f.number = static_cast<uint64_t>(n);
        } else if (v.get_uint64().get(f.number) != simdjson::SUCCESS) {
          break;
        }
        f.well_typed = true;
        return;
      }
    }
    break;
  case field_type::signed_count:
    if (type == sj::json_type::number) {
      sj::number_type kind;
      check_json(v.get_number_type().get(kind));
      if (kind == sj::number_type::signed_integer) {
        if (v.get_int64().get(f.signed_number) != simdjson::SUCCESS)
          break;
        f.well_typed = true;
        return;
      }
      if (kind == sj::number_type::unsigned_integer) {
        uint64_t u = 0;
        if (v.get_uint64().get(u) == simdjson::SUCCESS && u <= static_cast<uint64_t>(INT64_MAX)) {
          f.signed_number = static_cast<int64_t>(u);
          f.well_typed = true;
          return;
        }
      }
    }
    break;
  }
  skip_value(v, 2);
}

} // namespace

void read_body(std::string_view body, std::span<body_field> fields, size_t max_items) {
  msg::borrowed_json_reader reader;
  bool is_object = false;
  check_json(reader->read(body, [&](sj::value root) {
    sj::json_type type;
    check_json(root.type().get(type));
    if (type != sj::json_type::object) {
      skip_value(root, 1); // malformed JSON inside is still 400, not 422
      return;
    }
    is_object = true;
    sj::object object;
    check_json(root.get_object().get(object));
    for (auto entry : object) {
      std::string_view key;
      check_json(entry.unescaped_key().get(key));
      sj::value value;
      check_json(entry.value().get(value));
      auto declared = std::find_if(fields.begin(), fields.end(),
                                   [&](const body_field& f) { return f.name == key; });
      if (declared != fields.end())
        read_field(*declared, value, max_items);
      else
        skip_value(value, 2);
    }
  }));
  if (!is_object)
    throw request_error{422, "request body must be a JSON object"};
}

} // namespace lmcc::gateway::internal
