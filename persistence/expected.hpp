// persistence::expected<T>: a value or a persistence::error, returned by every
// store operation that touches the disk.
//
// messages/expected.hpp carries a codec_error (msgspec's wording); the store's
// errors are operational ("open /data/n1: IO error: ...") and several calls
// return nothing on success, hence this small sibling with an expected<void>.
// Both are [[nodiscard]] so that a failed write cannot be dropped unlooked-at.
//
//   expected<void> r = s.commit(std::move(b));
//   if (!r) spdlog::error("store-commit-failed error={}", r.error().message);
//
// Context: a plain value type, thread-compatible.
#pragma once

#include <cassert>
#include <string>
#include <utility>
#include <variant>

namespace lmcc::persistence {

/// Why a store operation failed: one line, naming the path or file involved.
struct error {
  std::string message;
};

template <class T>
class [[nodiscard]] expected {
public:
  expected(T value) : state_(std::in_place_index<0>, std::move(value)) {}    // NOLINT
  expected(struct error e) : state_(std::in_place_index<1>, std::move(e)) {} // NOLINT

  explicit operator bool() const noexcept { return state_.index() == 0; }
  bool has_value() const noexcept { return state_.index() == 0; }

  T& value() & {
    assert(has_value());
    return std::get<0>(state_);
  }
  const T& value() const& {
    assert(has_value());
    return std::get<0>(state_);
  }
  T&& value() && {
    assert(has_value());
    return std::get<0>(std::move(state_));
  }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  const struct error& error() const {
    assert(!has_value());
    return std::get<1>(state_);
  }

private:
  std::variant<T, struct error> state_;
};

/// Success or an error; `expected<void>{}` is success.
template <>
class [[nodiscard]] expected<void> {
public:
  expected() = default;
  expected(struct error e) : error_(std::move(e)), failed_(true) {} // NOLINT

  explicit operator bool() const noexcept { return !failed_; }
  bool has_value() const noexcept { return !failed_; }

  const struct error& error() const {
    assert(failed_);
    return error_;
  }

private:
  struct error error_;
  bool failed_ = false;
};

} // namespace lmcc::persistence
