#include "persistence/crc32c.hpp"

#include <array>
#include <cstring>

namespace lmcc::persistence::crc32c {
namespace {

constexpr uint32_t polynomial = 0x82f63b78; // Castagnoli, reflected

constexpr std::array<uint32_t, 256> make_table() {
  std::array<uint32_t, 256> t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k)
      c = (c & 1) ? (c >> 1) ^ polynomial : c >> 1;
    t[i] = c;
  }
  return t;
}

constexpr std::array<uint32_t, 256> table = make_table();

uint32_t extend_portable(uint32_t crc, const unsigned char* p, size_t n) noexcept {
  crc = ~crc;
  for (size_t i = 0; i < n; ++i)
    crc = table[(crc ^ p[i]) & 0xff] ^ (crc >> 8);
  return ~crc;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) uint32_t extend_sse42(uint32_t crc, const unsigned char* p,
                                                        size_t n) noexcept {
  uint64_t c = ~crc;
  while (n >= 8) {
    uint64_t word;
    std::memcpy(&word, p, 8);
    c = __builtin_ia32_crc32di(c, word);
    p += 8;
    n -= 8;
  }
  auto c32 = static_cast<uint32_t>(c);
  while (n-- > 0)
    c32 = __builtin_ia32_crc32qi(c32, *p++);
  return ~c32;
}

bool has_sse42() noexcept {
  static const bool yes = __builtin_cpu_supports("sse4.2");
  return yes;
}
#endif

} // namespace

uint32_t extend(uint32_t crc, std::string_view data) noexcept {
  const auto* p = reinterpret_cast<const unsigned char*>(data.data());
#if defined(__x86_64__)
  if (has_sse42())
    return extend_sse42(crc, p, data.size());
#endif
  return extend_portable(crc, p, data.size());
}

} // namespace lmcc::persistence::crc32c
