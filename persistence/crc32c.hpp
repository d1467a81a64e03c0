// crc32c: the Castagnoli CRC that guards every op-log record and slot snapshot
// value (persistence/records.hpp), hardware-accelerated where the CPU has
// SSE4.2 (the same polynomial RocksDB uses for its blocks and WAL).
//
//   uint32_t c = crc32c::value(bytes);
//   uint32_t c2 = crc32c::extend(c, more);   // == value(bytes + more)
//
// Context: pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <string_view>

namespace lmcc::persistence::crc32c {

/// crc32c of `data` continued from `crc` (0 for a fresh one).
uint32_t extend(uint32_t crc, std::string_view data) noexcept;

inline uint32_t value(std::string_view data) noexcept {
  return extend(0, data);
}

} // namespace lmcc::persistence::crc32c
