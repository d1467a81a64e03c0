// any_value: a msgpack/JSON value of unknown shape, for `Any` in the schema.
//
// Only `HeartbeatCommand.args: Optional[Dict[str, Any]]` uses it. It keeps
// everything msgspec keeps when it decodes into `Any`: nil, bool, full-range
// ints, floats (always float64 after decoding), str, bytes, arrays and maps in
// their wire order, so that a re-encode is byte-identical.
//
// Context: a plain value type, thread-compatible.
#pragma once

#include "messages/wire_int.hpp"

#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace lmcc::msg {

struct any_value;

/// Raw bytes (msgpack bin); JSON carries them as base64 text, as msgspec does.
struct any_bytes {
  std::string data;
  friend bool operator==(const any_bytes&, const any_bytes&) = default;
};

using any_array = std::vector<any_value>;
using any_map = std::vector<std::pair<any_value, any_value>>;

struct any_value {
  using variant_type = std::variant<std::monostate, bool, wire_int, double, std::string, any_bytes,
                                    any_array, any_map>;
  variant_type value;

  // Defaulted below, not here: an implicit (constexpr) default constructor makes
  // clang instantiate ~vector<pair<any_value, any_value>> while that pair is
  // still incomplete, and the header does not compile with clang (`make fuzz`).
  any_value() noexcept;

  friend bool operator==(const any_value&, const any_value&) = default;
};

inline any_value::any_value() noexcept = default;

} // namespace lmcc::msg
