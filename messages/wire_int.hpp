// wire_int: an integer in the full range msgspec carries, -2^63 .. 2^64-1.
//
// Python ints on the LMCache wire are either signed 64-bit (Python `hash`) or
// unsigned 64-bit (digests folded to an int). msgspec encodes each with the
// smallest msgpack width for its *value*, so the sign must survive a round trip
// even where two values share a bit pattern (-1 and 2^64-1). The index keys on
// `bits()` (the 64-bit pattern); the codec keys on the value.
//
//   wire_int k = wire_int::from_unsigned(UINT64_MAX);
//   k.is_negative();   // false
//   k.bits();          // 0xffffffffffffffff, same as wire_int{-1}.bits()
//
// Context: a plain value type, thread-compatible.
#pragma once

#include <chrono>
#include <compare>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <random>
#include <string>

namespace lmcc::msg {

class wire_int {
public:
  // -- construction ----------------------------------------------------------

  constexpr wire_int() noexcept = default;

  // Implicit on purpose: every signed value is a valid wire_int.
  constexpr wire_int(int64_t value) noexcept // NOLINT(google-explicit-constructor)
    : bits_(static_cast<uint64_t>(value)), negative_(value < 0) {}

  static constexpr wire_int from_unsigned(uint64_t value) noexcept {
    wire_int result;
    result.bits_ = value;
    result.negative_ = false;
    return result;
  }

  /// The value whose 64-bit pattern is `bits` and whose sign is `negative`,
  /// without a branch on the sign (decoders build millions of keys whose sign
  /// is a coin toss). REQUIRES: !negative || bits >= 2^63.
  static constexpr wire_int from_bits(uint64_t bits, bool negative) noexcept {
    wire_int result;
    result.bits_ = bits;
    result.negative_ = negative;
    return result;
  }

  // -- properties ------------------------------------------------------------

  /// The 64-bit two's-complement pattern; what the index keys on.
  constexpr uint64_t bits() const noexcept { return bits_; }

  constexpr bool is_negative() const noexcept { return negative_; }

  /// True when the value fits into int64_t (everything but 2^63 .. 2^64-1).
  constexpr bool fits_int64() const noexcept {
    return negative_ || bits_ <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
  }

  /// The value as int64_t; REQUIRES: fits_int64().
  constexpr int64_t as_int64() const noexcept { return static_cast<int64_t>(bits_); }

  /// The value as int64_t, or nullopt when it does not fit.
  constexpr std::optional<int64_t> to_int64() const noexcept {
    if (!fits_int64())
      return std::nullopt;
    return as_int64();
  }

  /// Decimal text of the value, as Python prints it.
  std::string to_string() const {
    return negative_ ? std::to_string(static_cast<int64_t>(bits_)) : std::to_string(bits_);
  }

  // -- comparison (by value) -------------------------------------------------

  friend constexpr bool operator==(const wire_int& a, const wire_int& b) noexcept {
    return a.bits_ == b.bits_ && a.negative_ == b.negative_;
  }

  friend constexpr std::strong_ordering operator<=>(const wire_int& a, const wire_int& b) noexcept {
    if (a.negative_ != b.negative_)
      return a.negative_ ? std::strong_ordering::less : std::strong_ordering::greater;
    if (a.negative_)
      return static_cast<int64_t>(a.bits_) <=> static_cast<int64_t>(b.bits_);
    return a.bits_ <=> b.bits_;
  }

private:
  // -- member variables ------------------------------------------------------

  uint64_t bits_ = 0;
  bool negative_ = false;
};

} // namespace lmcc::msg

namespace lmcc::msg {

/// A random number drawn once per process (immutable afterwards), so that keys
/// hash differently in every run and no sender can choose keys that share a bucket.
inline uint64_t process_hash_seed() noexcept {
  static const uint64_t seed = []() noexcept {
    try {
      std::random_device entropy;
      return (uint64_t{entropy()} << 32) ^ entropy();
    } catch (...) { // no entropy source: the clock and this stack's (randomized) address
      const int anchor = 0;
      return static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()) ^
             reinterpret_cast<uintptr_t>(&anchor);
    }
  }();
  return seed;
}

} // namespace lmcc::msg

/// Seeded and mixed: std::hash<uint64_t> is the identity in libstdc++ and a
/// hash table's bucket is hash % bucket_count, so 65,536 dict keys that were
/// multiples of one bucket count all shared a bucket, and deduplicating them
/// (decode_walk.hpp) took 6.9 s for a 970 KB frame.
template <>
struct std::hash<lmcc::msg::wire_int> {
  size_t operator()(const lmcc::msg::wire_int& x) const noexcept {
    uint64_t h = x.bits() ^ lmcc::msg::process_hash_seed();
    h ^= h >> 33; // MurmurHash3's fmix64: every input bit reaches every output bit
    h *= 0xff51afd7ed558ccd;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53;
    h ^= h >> 33;
    return static_cast<size_t>(h ^ static_cast<uint64_t>(x.is_negative()));
  }
};
