// body_reader: the one pass over an HTTP request body that http_body.cpp's
// endpoint readers share (that file's header comment has the rules): the
// fields an endpoint declares are read into body_fields as they arrive,
// everything else is only checked to be JSON. Malformed JSON (400), a list
// over its limit (413) and a body that is not an object (422) are thrown here
// as request_error; each endpoint then judges its fields' presence and types.
//
// Private to gateway/: included by http_body.cpp and internal/body_reader.cpp only.
#pragma once

#include "gateway/http_body.hpp"
#include "messages/lmcache_msgs.hpp"

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace lmcc::gateway::internal {

/// A field's type in the endpoint's FastAPI model.
enum class field_type { string, boolean, int_list, position, count, signed_count };

/// Why an int list is not a list of wire ints: its first offending item.
enum class item_problem { none, not_a_number, fraction, out_of_range };

/// One declared field as the body gave it. A repeated key is read again and
/// replaces what the earlier one gave, as Python's json module keeps the last.
struct body_field {
  std::string_view name;
  field_type type;

  bool present = false;
  bool null = false;
  bool well_typed = false;   ///< the declared type (int_list: an array, items aside)
  std::string text;          ///< string
  bool flag = false;         ///< boolean
  uint64_t number = 0;       ///< count
  int64_t signed_number = 0; ///< signed_count
  std::pair<std::string, std::string> position;
  std::vector<msg::wire_int> ints; ///< int_list, up to the first problem
  item_problem problem = item_problem::none;
  size_t problem_index = 0;
};

inline std::string field_label(const body_field& f) {
  return "field '" + std::string(f.name) + "'";
}

/// Reads `body`, a JSON object, into `fields`; other keys are checked and skipped.
/// `max_items` bounds every int list.
void read_body(std::string_view body, std::span<body_field> fields, size_t max_items);

} // namespace lmcc::gateway::internal
