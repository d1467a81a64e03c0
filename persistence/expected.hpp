// persistence::expected<T>: a value or a persistence::error, returned by every
// store operation that touches the disk (the template is msg::basic_expected;
// see messages/expected.hpp). The store's errors are operational, one line
// naming the path or file involved ("open /data/n1: IO error: ..."), unlike the
// codec's msgspec-worded ones, hence their own error type.
//
//   expected<void> r = s.commit(b);
//   if (!r) spdlog::error("store-commit-failed error={}", r.error().message);
//
// Context: plain value types, thread-compatible.
#pragma once

#include "messages/expected.hpp"

#include <string>

namespace lmcc::persistence {

/// Why a store operation failed: one line, naming the path or file involved.
struct error {
  std::string message;
};

template <class T>
using expected = msg::basic_expected<T, error>;

} // namespace lmcc::persistence
