// json_text_util: JSON texts built for tests of the JSON readers (frames and
// HTTP bodies), shared so both suites feed the same shapes.
#pragma once

#include <cstddef>
#include <string>

namespace lmcc::test {

/// `"k0":0,"k1":1,...`: `n` distinct keys.
inline std::string distinct_entries(size_t n) {
  std::string text;
  text.reserve(n * 12);
  for (size_t i = 0; i < n; ++i) {
    if (i > 0)
      text += ',';
    text += "\"k";
    text += std::to_string(i);
    text += "\":";
    text += std::to_string(i % 10);
  }
  return text;
}

} // namespace lmcc::test
