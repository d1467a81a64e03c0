#include "index/slot_copy.hpp"

#include "index/kv_index.hpp"

namespace lmcc::actors {

uint64_t slot_copy::key_count() const noexcept {
  uint64_t keys = 0;
  for (const auto& h : holders)
    keys += h.keys.size();
  return keys;
}

std::string check_slot_copy(const slot_copy& copy, uint32_t slot_count) {
  if (copy.slot >= slot_count)
    return "slot copy: slot " + std::to_string(copy.slot) + " out of range";
  for (const auto& h : copy.holders) {
    if ((h.holder & ~holder_id_mask) != 0)
      return "slot copy: holder " + std::to_string(h.holder) + " is not a holder id";
    for (uint64_t k : h.keys)
      if (slot_of(k, slot_count) != copy.slot)
        return "slot copy: key " + std::to_string(k) + " is not of slot " +
               std::to_string(copy.slot);
  }
  return {};
}

uint64_t holder_keys_digest(holder_id h, std::span<const uint64_t> keys) {
  uint64_t d = 0;
  for (uint64_t k : keys)
    d ^= kv_index::entry_hash(k, h);
  return d;
}

} // namespace lmcc::actors
