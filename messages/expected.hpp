// expected: a value or an error, the result type of every decoder and every
// store operation (g++ 12 has no std::expected; this is the small subset lmcc
// needs). [[nodiscard]], so that a failed decode or write cannot be dropped
// unlooked-at.
//
//   msg::expected<Msg> r = decode_msgpack(frame);      // codec_error on failure
//   if (!r) log(r.error().message); else handle(*r);
//   persistence::expected<void> w = store.commit(b);   // persistence::error on failure
//
// basic_expected<T, E> is the one template; msg::expected<T> fixes E =
// codec_error (msgspec's wording), persistence::expected<T> fixes E =
// persistence::error (operational: paths, RocksDB status). The void form is
// success or an error.
//
// Context: plain value types, thread-compatible.
#pragma once

#include <cassert>
#include <string>
#include <utility>
#include <variant>

namespace lmcc::msg {

template <class T, class E>
class [[nodiscard]] basic_expected {
public:
  basic_expected(T value) : state_(std::in_place_index<0>, std::move(value)) {} // NOLINT
  basic_expected(E error) : state_(std::in_place_index<1>, std::move(error)) {} // NOLINT

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

  const E& error() const {
    assert(!has_value());
    return std::get<1>(state_);
  }

private:
  std::variant<T, E> state_;
};

/// Success or an error; `basic_expected<void, E>{}` is success.
template <class E>
class [[nodiscard]] basic_expected<void, E> {
public:
  basic_expected() = default;
  basic_expected(E error) : error_(std::move(error)), failed_(true) {} // NOLINT

  explicit operator bool() const noexcept { return !failed_; }
  bool has_value() const noexcept { return !failed_; }

  const E& error() const {
    assert(failed_);
    return error_;
  }

private:
  E error_;
  bool failed_ = false;
};

/// Why an input was refused. `message` follows msgspec's wording, including the
/// path of the offending field ("Expected `int`, got `str` - at `$.port`").
struct codec_error {
  std::string message;
};

template <class T>
using expected = basic_expected<T, codec_error>;

} // namespace lmcc::msg
