// json_fields: reading one field of a node's JSON answer for the client's
// views, where a missing or malformed field reads as 0 rather than failing
// the whole view (an older or newer node may lack it).
//
//   uint64_t keys = u64_field(worker, "key_count");
//
// Context: pure functions.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>

namespace lmcc::apps::client {

/// `j[key]` as a count: 0 when `j` is not an object, the field is missing,
/// not a number or negative; a fraction is cut off.
inline uint64_t u64_field(const nlohmann::json& j, const char* key) {
  if (!j.is_object())
    return 0;
  const auto it = j.find(key);
  if (it == j.end())
    return 0;
  if (it->is_number_unsigned())
    return it->get<uint64_t>();
  if (it->is_number_integer())
    return it->get<int64_t>() > 0 ? static_cast<uint64_t>(it->get<int64_t>()) : 0;
  if (it->is_number_float())
    return it->get<double>() > 0 ? static_cast<uint64_t>(it->get<double>()) : 0;
  return 0;
}

} // namespace lmcc::apps::client
