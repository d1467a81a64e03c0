// byte_codec: little-endian fixed-width integers and LEB128 varints, the
// building blocks of the op-log record and slot snapshot encodings.
//
// The reader never reads past its input: every get_* returns false (and leaves
// the reader failed) on truncated or over-long input, so a torn or corrupted
// value becomes an error naming what was being read, never undefined behaviour.
//
// Private to persistence/: include only from its .cpp files.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace lmcc::persistence::internal {

/// Writes `v` as a LEB128 varint at `p` (at most 10 bytes); returns the end.
inline char* put_varint(char* p, uint64_t v) noexcept {
  while (v >= 0x80) {
    *p++ = static_cast<char>((v & 0x7f) | 0x80);
    v >>= 7;
  }
  *p++ = static_cast<char>(v);
  return p;
}

class byte_writer {
public:
  explicit byte_writer(std::string& out) : out_(out) {}

  void u8(uint8_t v) { out_.push_back(static_cast<char>(v)); }

  void u32(uint32_t v) {
    char b[4];
    for (int i = 0; i < 4; ++i)
      b[i] = static_cast<char>(v >> (8 * i));
    out_.append(b, 4);
  }

  void u64(uint64_t v) {
    char b[8];
    for (int i = 0; i < 8; ++i)
      b[i] = static_cast<char>(v >> (8 * i));
    out_.append(b, 8);
  }

  void varint(uint64_t v) {
    char b[10];
    out_.append(b, static_cast<size_t>(put_varint(b, v) - b));
  }

  void bytes(std::string_view s) {
    varint(s.size());
    out_.append(s);
  }

  void raw(std::string_view s) { out_.append(s); }

  size_t size() const noexcept { return out_.size(); }

private:
  std::string& out_;
};

class byte_reader {
public:
  explicit byte_reader(std::string_view in) : in_(in) {}

  bool u8(uint8_t& v) {
    if (!need(1))
      return false;
    v = static_cast<uint8_t>(in_[pos_++]);
    return true;
  }

  bool u32(uint32_t& v) {
    if (!need(4))
      return false;
    v = 0;
    for (int i = 0; i < 4; ++i)
      v |= uint32_t{static_cast<uint8_t>(in_[pos_ + i])} << (8 * i);
    pos_ += 4;
    return true;
  }

  bool u64(uint64_t& v) {
    if (!need(8))
      return false;
    std::memcpy(&v, in_.data() + pos_, 8); // little-endian hosts only (x86-64, aarch64)
    pos_ += 8;
    return true;
  }

  bool varint(uint64_t& v) {
    v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      uint8_t b;
      if (!u8(b))
        return false;
      v |= uint64_t{b & 0x7fu} << shift;
      if ((b & 0x80) == 0)
        return shift < 63 || b <= 1; // the 10th byte may only carry bit 63
    }
    return fail();
  }

  bool bytes(std::string_view& s) {
    uint64_t n;
    if (!varint(n) || !need(n))
      return false;
    s = in_.substr(pos_, n);
    pos_ += n;
    return true;
  }

  bool raw(size_t n, std::string_view& s) {
    if (!need(n))
      return false;
    s = in_.substr(pos_, n);
    pos_ += n;
    return true;
  }

  size_t position() const noexcept { return pos_; }
  size_t remaining() const noexcept { return in_.size() - pos_; }
  bool ok() const noexcept { return ok_; }

private:
  bool need(uint64_t n) {
    if (!ok_ || n > in_.size() - pos_)
      return fail();
    return true;
  }
  bool fail() {
    ok_ = false;
    return false;
  }

  std::string_view in_;
  size_t pos_ = 0;
  bool ok_ = true;
};

} // namespace lmcc::persistence::internal
