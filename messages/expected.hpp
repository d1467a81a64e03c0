// expected<T>: a value or a codec_error, returned by every decoder.
//
// g++ 12 has no std::expected; this is the small subset lmcc needs. It is
// [[nodiscard]] so that a decode result cannot be dropped unlooked-at.
//
//   auto r = decode_msgpack(frame);
//   if (!r) log(r.error().message);
//   else handle(*r);
//
// Context: a plain value type, thread-compatible.
#pragma once

#include <cassert>
#include <string>
#include <utility>
#include <variant>

namespace lmcc::msg {

/// Why an input was refused. `message` follows msgspec's wording, including the
/// path of the offending field ("Expected `int`, got `str` - at `$.port`").
struct codec_error {
  std::string message;
};

template <class T>
class [[nodiscard]] expected {
public:
  expected(T value) : state_(std::in_place_index<0>, std::move(value)) {}           // NOLINT
  expected(codec_error error) : state_(std::in_place_index<1>, std::move(error)) {} // NOLINT

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

  const codec_error& error() const {
    assert(!has_value());
    return std::get<1>(state_);
  }

private:
  std::variant<T, codec_error> state_;
};

} // namespace lmcc::msg
