// msgpack_bytes: the byte-level pieces of the msgpack reader (msgpack_tree.cpp):
// big-endian loads, the UTF-8 check with its ASCII shortcut, and the tables
// that say what each type byte starts.
//
// Everything here reads only bytes it is told are inside the frame; the
// callers check lengths first.
//
// Private to messages/: include only from the msgpack reader and its tests.
#pragma once

#include "messages/internal/decode_walk.hpp"
#include "messages/internal/utf8.hpp"

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace lmcc::msg::internal {

/// The unsigned big-endian field of `width` bytes at `p`.
inline uint64_t load_big_endian(const unsigned char* p, unsigned width) noexcept {
  auto swap = [](auto v) {
    if constexpr (std::endian::native == std::endian::little) {
      if constexpr (sizeof v == 2)
        return static_cast<decltype(v)>(__builtin_bswap16(v));
      else if constexpr (sizeof v == 4)
        return static_cast<decltype(v)>(__builtin_bswap32(v));
      else
        return static_cast<decltype(v)>(__builtin_bswap64(v));
    } else {
      return v;
    }
  };
  switch (width) {
  case 1:
    return p[0];
  case 2: {
    uint16_t v;
    std::memcpy(&v, p, sizeof v);
    return swap(v);
  }
  case 4: {
    uint32_t v;
    std::memcpy(&v, p, sizeof v);
    return swap(v);
  }
  default: {
    uint64_t v;
    std::memcpy(&v, p, sizeof v);
    return swap(v);
  }
  }
}

inline uint64_t load_native(const unsigned char* p) noexcept {
  uint64_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

/// A mask that keeps the first `n` (1..8) bytes of an 8-byte load.
inline uint64_t first_bytes(size_t n) noexcept {
  return std::endian::native == std::endian::little ? ~uint64_t{0} >> (64 - 8 * n)
                                                    : ~uint64_t{0} << (64 - 8 * n);
}

/// Whether the `n` bytes at `s` are valid UTF-8, past the ASCII shortcut.
[[gnu::noinline]] inline bool is_valid_utf8_slow(const unsigned char* s, size_t n) noexcept {
  constexpr uint64_t high_bits = 0x8080808080808080;
  uint64_t seen = 0;
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    seen |= load_native(s + i);
  for (; i < n; ++i)
    seen |= s[i];
  if ((seen & high_bits) == 0)
    return true;
  return is_valid_utf8(std::string_view{reinterpret_cast<const char*>(s), n});
}

/// Whether the `n` bytes at `s`, in a frame that ends at `end`, are valid
/// UTF-8. Most strings on the wire are short ASCII (field names, ids,
/// locations): those are settled inline with one or two 8-byte loads, which
/// may reach past the string but never past the frame.
[[gnu::always_inline]] inline bool is_valid_utf8_text(const unsigned char* s, size_t n,
                                                      const unsigned char* end) noexcept {
  constexpr uint64_t high_bits = 0x8080808080808080;
  uint64_t seen = 0;
  if (n - 1 < 8 && end - s >= 8) // 1..8 bytes
    seen = load_native(s) & first_bytes(n);
  else if (n - 9 < 8) // 9..16 bytes
    seen = load_native(s) | load_native(s + n - 8);
  else if (n == 0)
    return true;
  else
    return is_valid_utf8_slow(s, n);
  return (seen & high_bits) == 0 || is_valid_utf8_slow(s, n);
}

/// What a msgpack type byte starts. Decoding goes through this table so that
/// the bytes' mix of widths and signs costs no unpredictable branch: keys are
/// random 64-bit hashes, half uint64 and half int64 on the wire.
enum class byte_role : uint8_t {
  fixed,    ///< a scalar of `length` bytes in all: ints, nil, bools, floats, fixext
  fixstr,   ///< a str whose length is in the type byte
  str,      ///< a str with a `length`-byte length field
  bin,      ///< bytes with a `length`-byte length field
  ext,      ///< an ext with a `length`-byte length field, then a type byte
  fixarray, ///< an array whose element count is in the type byte
  fixmap,   ///< a map whose entry count is in the type byte
  array,    ///< an array with a `length`-byte count field
  map,      ///< a map with a `length`-byte count field
  invalid,  ///< 0xc1, which msgpack never uses
};

struct type_byte {
  byte_role role = byte_role::invalid;
  uint8_t length = 0;                ///< see byte_role
  node_kind kind = node_kind::other; ///< fixed: what the scalar is
  bool is_signed = false;            ///< integer: two's complement (fixints count as int8)
  uint8_t int_shift = 0;             ///< integer: 64 - its width in bits
};

constexpr std::array<type_byte, 256> make_type_bytes() noexcept {
  std::array<type_byte, 256> t{};
  for (unsigned c = 0; c < 256; ++c) {
    if (c <= 0x7f || c >= 0xe0) // fixints: the type byte itself, read as int8
      t[c] = {byte_role::fixed, 1, node_kind::integer, true, 56};
    else if (c <= 0x8f)
      t[c].role = byte_role::fixmap;
    else if (c <= 0x9f)
      t[c].role = byte_role::fixarray;
    else if (c <= 0xbf)
      t[c].role = byte_role::fixstr;
  }
  t[0xc0] = {byte_role::fixed, 1, node_kind::nil};
  t[0xc2] = {byte_role::fixed, 1, node_kind::boolean};
  t[0xc3] = {byte_role::fixed, 1, node_kind::boolean};
  for (unsigned i = 0; i < 4; ++i) {
    auto width = static_cast<uint8_t>(1u << i);
    auto shift = static_cast<uint8_t>(64 - 8 * width);
    t[0xcc + i] = {byte_role::fixed, static_cast<uint8_t>(1 + width), node_kind::integer, false,
                   shift};
    t[0xd0 + i] = {byte_role::fixed, static_cast<uint8_t>(1 + width), node_kind::integer, true,
                   shift};
    if (i < 3) {
      t[0xc4 + i] = {byte_role::bin, width};
      t[0xc7 + i] = {byte_role::ext, width};
      t[0xd9 + i] = {byte_role::str, width};
    }
  }
  t[0xca] = {byte_role::fixed, 5, node_kind::floating};
  t[0xcb] = {byte_role::fixed, 9, node_kind::floating};
  for (unsigned i = 0; i < 5; ++i) // fixext 1..16: a type byte and the data
    t[0xd4 + i] = {byte_role::fixed, static_cast<uint8_t>(2 + (1u << i)), node_kind::other};
  t[0xdc] = {byte_role::array, 2};
  t[0xdd] = {byte_role::array, 4};
  t[0xde] = {byte_role::map, 2};
  t[0xdf] = {byte_role::map, 4};
  return t;
}

inline constexpr std::array<type_byte, 256> type_bytes = make_type_bytes();

/// A value's shape, as struct runs compare them (see frame_reader): two
/// values of one shape span the same number of bytes and fill a node the same
/// way. High byte: the type byte for a fixstr (its length is in it), else the
/// node_kind of a fixed-size scalar; low byte: the bytes the value spans.
/// 0 for everything else (containers, sized strings, bins, exts, 0xc1).
constexpr std::array<uint16_t, 256> make_shapes() noexcept {
  std::array<uint16_t, 256> t{};
  for (unsigned c = 0; c < 256; ++c) {
    const type_byte& b = type_bytes[c];
    if (b.role == byte_role::fixstr)
      t[c] = static_cast<uint16_t>(c << 8 | (1 + (c & 0x1f)));
    else if (b.role == byte_role::fixed)
      t[c] = static_cast<uint16_t>(static_cast<unsigned>(b.kind) << 8 | b.length);
  }
  return t;
}

inline constexpr std::array<uint16_t, 256> shapes = make_shapes();

constexpr bool is_fixstr_shape(uint16_t shape) noexcept {
  return shape >> 8 >= 0xa0;
}
constexpr size_t shape_bytes(uint16_t shape) noexcept {
  return shape & 0xff;
}

} // namespace lmcc::msg::internal
