// UTF-8 validation for decoded `str` values: msgspec refuses invalid UTF-8 in
// a str, and so must we, or a JSON re-encode could not represent the value.
// Private to messages/.
#pragma once

#include <simdjson.h>

#include <string_view>

namespace lmcc::msg::internal {

inline bool is_valid_utf8(std::string_view s) noexcept {
  return simdjson::validate_utf8(s.data(), s.size());
}

} // namespace lmcc::msg::internal
