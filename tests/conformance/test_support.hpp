// Helpers shared by the conformance suites: hex text and a hand-written
// msgpack writer for building frames byte by byte.
//
// The writer is deliberately independent of messages/codec_msgpack: tests use
// it to spell out the bytes they expect, so it must not reuse the code under
// test. It writes the smallest width for every header and int, as msgspec
// does, and float64 for every double.
//
//   std::string frame = mp{}.map(2).str("type").str("ErrorMsg").str("error").str("x").bytes();
#pragma once

#include <bit>
#include <cstdint>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <string_view>

namespace lmcc::test {

inline std::string from_hex(std::string_view hex) {
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9')
      return c - '0';
    if (c >= 'a' && c <= 'f')
      return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
      return c - 'A' + 10;
    throw std::invalid_argument("not a hex digit");
  };
  if (hex.size() % 2 != 0)
    throw std::invalid_argument("odd number of hex digits");
  std::string out;
  out.reserve(hex.size() / 2);
  for (size_t i = 0; i < hex.size(); i += 2)
    out.push_back(static_cast<char>(nibble(hex[i]) * 16 + nibble(hex[i + 1])));
  return out;
}

inline std::string to_hex(std::string_view bytes) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) {
    out.push_back(digits[c >> 4]);
    out.push_back(digits[c & 15]);
  }
  return out;
}

/// A msgpack byte string written by hand, one element at a time.
class mp {
public:
  mp& raw(std::initializer_list<int> bytes) {
    for (int b : bytes)
      out_.push_back(static_cast<char>(b));
    return *this;
  }
  mp& raw(std::string_view bytes) {
    out_.append(bytes);
    return *this;
  }
  mp& raw(const mp& other) { return raw(other.bytes()); }

  mp& map(uint32_t n) { return header(n, 0x80, 0xde, 0xdf); }
  mp& array(uint32_t n) { return header(n, 0x90, 0xdc, 0xdd); }

  mp& str(std::string_view s) {
    if (s.size() < 32) {
      out_.push_back(static_cast<char>(0xa0 | s.size()));
    } else if (s.size() <= 0xff) {
      out_.push_back(static_cast<char>(0xd9));
      big_endian(s.size(), 1);
    } else if (s.size() <= 0xffff) {
      out_.push_back(static_cast<char>(0xda));
      big_endian(s.size(), 2);
    } else {
      out_.push_back(static_cast<char>(0xdb));
      big_endian(s.size(), 4);
    }
    out_.append(s);
    return *this;
  }

  mp& bin(std::string_view s) {
    if (s.size() <= 0xff) {
      out_.push_back(static_cast<char>(0xc4));
      big_endian(s.size(), 1);
    } else if (s.size() <= 0xffff) {
      out_.push_back(static_cast<char>(0xc5));
      big_endian(s.size(), 2);
    } else {
      out_.push_back(static_cast<char>(0xc6));
      big_endian(s.size(), 4);
    }
    out_.append(s);
    return *this;
  }

  mp& nil() { return raw({0xc0}); }
  mp& boolean(bool b) { return raw({b ? 0xc3 : 0xc2}); }

  /// A non-negative int in its smallest width.
  mp& uint(uint64_t v) {
    if (v <= 0x7f) {
      out_.push_back(static_cast<char>(v));
    } else if (v <= 0xff) {
      out_.push_back(static_cast<char>(0xcc));
      big_endian(v, 1);
    } else if (v <= 0xffff) {
      out_.push_back(static_cast<char>(0xcd));
      big_endian(v, 2);
    } else if (v <= 0xffffffff) {
      out_.push_back(static_cast<char>(0xce));
      big_endian(v, 4);
    } else {
      out_.push_back(static_cast<char>(0xcf));
      big_endian(v, 8);
    }
    return *this;
  }

  /// A signed int in its smallest width (non-negative values as uint()).
  mp& sint(int64_t v) {
    if (v >= 0)
      return uint(static_cast<uint64_t>(v));
    auto bits = static_cast<uint64_t>(v);
    if (v >= -32) {
      out_.push_back(static_cast<char>(bits & 0xff));
    } else if (v >= -128) {
      out_.push_back(static_cast<char>(0xd0));
      big_endian(bits, 1);
    } else if (v >= -32768) {
      out_.push_back(static_cast<char>(0xd1));
      big_endian(bits, 2);
    } else if (v >= INT64_C(-2147483648)) {
      out_.push_back(static_cast<char>(0xd2));
      big_endian(bits, 4);
    } else {
      out_.push_back(static_cast<char>(0xd3));
      big_endian(bits, 8);
    }
    return *this;
  }

  mp& f64(double v) {
    out_.push_back(static_cast<char>(0xcb));
    big_endian(std::bit_cast<uint64_t>(v), 8);
    return *this;
  }

  const std::string& bytes() const { return out_; }
  operator const std::string&() const { return out_; } // NOLINT(google-explicit-constructor)
  operator std::string_view() const { return out_; }   // NOLINT(google-explicit-constructor)

private:
  mp& header(uint32_t n, int fix, int w16, int w32) {
    if (n < 16) {
      out_.push_back(static_cast<char>(fix | static_cast<int>(n)));
    } else if (n <= 0xffff) {
      out_.push_back(static_cast<char>(w16));
      big_endian(n, 2);
    } else {
      out_.push_back(static_cast<char>(w32));
      big_endian(n, 4);
    }
    return *this;
  }

  void big_endian(uint64_t v, int width) {
    for (int i = width - 1; i >= 0; --i)
      out_.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  }

  std::string out_;
};

/// Empty when `bytes` is exactly one msgpack object written the way msgspec
/// writes it (the smallest width for every int, string, bin, array and map
/// header; float64 for every float; no ext types), else what is wrong and at
/// which byte offset. Written from the msgpack spec, independent of lmcc.
inline std::string msgspec_canonical_problem(std::string_view bytes) {
  struct reader {
    std::string_view b;
    size_t pos = 0;
    std::string problem;

    bool fail(const std::string& why, size_t at) {
      if (problem.empty())
        problem = why + " at byte " + std::to_string(at);
      return false;
    }
    bool have(size_t n) { return pos + n <= b.size() || fail("truncated", pos); }
    uint64_t be(size_t width) {
      uint64_t v = 0;
      for (size_t i = 0; i < width; ++i)
        v = (v << 8) | static_cast<unsigned char>(b[pos + i]);
      pos += width;
      return v;
    }
    bool sized(size_t width, uint64_t min_exclusive, size_t at, const char* what, uint64_t& n) {
      if (!have(width))
        return false;
      n = be(width);
      if (n <= min_exclusive)
        return fail(
            std::string(what) + " of " + std::to_string(n) + " in a wider header than needed", at);
      return true;
    }
    bool skip(uint64_t n) {
      if (!have(n))
        return false;
      pos += n;
      return true;
    }
    bool items(uint64_t n) {
      for (uint64_t i = 0; i < n; ++i)
        if (!object())
          return false;
      return true;
    }
    bool object() {
      if (!have(1))
        return false;
      size_t at = pos;
      auto c = static_cast<unsigned char>(b[pos++]);
      uint64_t n = 0;
      if (c <= 0x7f || c >= 0xe0 || c == 0xc0 || c == 0xc2 || c == 0xc3)
        return true;
      if (c >= 0x80 && c <= 0x8f)
        return items(2 * uint64_t{c & 0x0fu});
      if (c >= 0x90 && c <= 0x9f)
        return items(c & 0x0fu);
      if (c >= 0xa0 && c <= 0xbf)
        return skip(c & 0x1fu);
      switch (c) {
      case 0xc4:
        return have(1) && skip(be(1));
      case 0xc5:
        return sized(2, 0xff, at, "bin16", n) && skip(n);
      case 0xc6:
        return sized(4, 0xffff, at, "bin32", n) && skip(n);
      case 0xca:
        return fail("float32 (msgspec writes float64)", at);
      case 0xcb:
        return skip(8);
      case 0xcc:
        return sized(1, 0x7f, at, "uint8", n);
      case 0xcd:
        return sized(2, 0xff, at, "uint16", n);
      case 0xce:
        return sized(4, 0xffff, at, "uint32", n);
      case 0xcf:
        return sized(8, 0xffffffff, at, "uint64", n);
      case 0xd0:
        return signed_int(1, -32, at);
      case 0xd1:
        return signed_int(2, -128, at);
      case 0xd2:
        return signed_int(4, -32768, at);
      case 0xd3:
        return signed_int(8, INT64_C(-2147483648), at);
      case 0xd9:
        return sized(1, 31, at, "str8", n) && skip(n);
      case 0xda:
        return sized(2, 0xff, at, "str16", n) && skip(n);
      case 0xdb:
        return sized(4, 0xffff, at, "str32", n) && skip(n);
      case 0xdc:
        return sized(2, 15, at, "array16", n) && items(n);
      case 0xdd:
        return sized(4, 0xffff, at, "array32", n) && items(n);
      case 0xde:
        return sized(2, 15, at, "map16", n) && items(2 * n);
      case 0xdf:
        return sized(4, 0xffff, at, "map32", n) && items(2 * n);
      default:
        return fail("type byte " + std::to_string(c) + " msgspec never writes", at);
      }
    }
    // A signed width is minimal only for a negative value below what the
    // next narrower encoding holds (msgspec writes non-negatives unsigned).
    bool signed_int(size_t width, int64_t narrower_min, size_t at) {
      if (!have(width))
        return false;
      uint64_t raw = be(width);
      int shift = static_cast<int>(64 - 8 * width);
      auto v = static_cast<int64_t>(raw << shift) >> shift;
      if (v >= narrower_min)
        return fail("int" + std::to_string(8 * width) + " holding " + std::to_string(v) +
                        ", which has a shorter encoding",
                    at);
      return true;
    }
  };
  reader r{bytes};
  if (!r.object())
    return r.problem;
  if (r.pos != bytes.size())
    return "trailing bytes at byte " + std::to_string(r.pos);
  return {};
}

} // namespace lmcc::test
