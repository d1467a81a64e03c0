#include "index/slot_copy.hpp"

#include "index/kv_index.hpp"

namespace lmcc::actors {

std::vector<uint64_t> encode_slot_copy(const slot_copy& copy) {
  size_t size = 4;
  for (const auto& h : copy.holders)
    size += 8 + h.keys.size();
  std::vector<uint64_t> out;
  out.reserve(size);
  out.push_back(slot_copy_format);
  out.push_back(copy.slot);
  out.push_back(copy.complete ? 1 : 0);
  out.push_back(copy.holders.size());
  for (const auto& h : copy.holders) {
    out.push_back(h.holder);
    out.push_back(h.worker_uid);
    out.push_back(h.certain ? 1 : 0);
    out.push_back(h.pos.incarnation);
    out.push_back(h.pos.era);
    out.push_back(h.pos.n);
    out.push_back(h.pos.sub);
    out.push_back(h.keys.size());
    out.insert(out.end(), h.keys.begin(), h.keys.end());
  }
  return out;
}

std::variant<slot_copy, std::string> decode_slot_copy(std::span<const uint64_t> words,
                                                      uint32_t slot_count) {
  if (words.size() < 4 || words[0] != slot_copy_format)
    return std::string{"slot copy: not a copy (format word)"};
  if (words[1] >= slot_count)
    return "slot copy: slot " + std::to_string(words[1]) + " out of range";
  if (words[2] > 1)
    return std::string{"slot copy: unknown flags"};
  slot_copy copy;
  copy.slot = static_cast<uint32_t>(words[1]);
  copy.complete = words[2] == 1;
  size_t at = 4;
  const uint64_t holders = words[3];
  if (holders > (words.size() - at) / 8)
    return std::string{"slot copy: more holders than words"};
  copy.holders.reserve(holders);
  for (uint64_t i = 0; i < holders; ++i) {
    if (words.size() - at < 8)
      return std::string{"slot copy: truncated holder"};
    holder_slot_copy h;
    h.holder = words[at] & holder_id_mask;
    h.worker_uid = words[at + 1];
    if (words[at + 2] > 1)
      return std::string{"slot copy: unknown holder flags"};
    h.certain = words[at + 2] == 1;
    h.pos = stream_pos{words[at + 3], words[at + 4], words[at + 5], words[at + 6]};
    const uint64_t keys = words[at + 7];
    at += 8;
    if (keys > words.size() - at)
      return std::string{"slot copy: more keys than words"};
    h.keys.assign(words.begin() + static_cast<ptrdiff_t>(at),
                  words.begin() + static_cast<ptrdiff_t>(at + keys));
    at += keys;
    for (uint64_t k : h.keys)
      if (slot_of(k, slot_count) != copy.slot)
        return "slot copy: key " + std::to_string(k) + " is not of slot " +
               std::to_string(copy.slot);
    copy.holders.push_back(std::move(h));
  }
  if (at != words.size())
    return std::string{"slot copy: trailing words"};
  return copy;
}

uint64_t slot_copy_keys(std::span<const uint64_t> words) {
  if (words.size() < 4 || words[0] != slot_copy_format)
    return 0;
  uint64_t keys = 0;
  size_t at = 4;
  for (uint64_t i = 0; i < words[3] && words.size() - at >= 8; ++i) {
    const uint64_t n = words[at + 7];
    at += 8;
    if (n > words.size() - at)
      return keys;
    keys += n;
    at += n;
  }
  return keys;
}

std::vector<uint64_t> encode_copy_outcome(const copy_outcome& o) {
  std::vector<uint64_t> out{o.installed, o.waiting, o.changed, o.conflicts.size()};
  for (const auto& [uid, h] : o.conflicts)
    out.insert(out.end(), {uid, h});
  out.push_back(o.unresolved.size());
  for (const auto& [uid, h] : o.unresolved)
    out.insert(out.end(), {uid, h});
  out.push_back(o.still_blank ? 1 : 0);
  return out;
}

copy_outcome decode_copy_outcome(std::span<const uint64_t> words) {
  copy_outcome o;
  if (words.size() < 6)
    return o;
  size_t at = 3;
  auto pairs = [&](std::vector<std::pair<uint64_t, holder_id>>& into) {
    if (at >= words.size())
      return false;
    const uint64_t n = words[at++];
    if (n > (words.size() - at) / 2)
      return false;
    for (uint64_t i = 0; i < n; ++i, at += 2)
      into.emplace_back(words[at], words[at + 1]);
    return true;
  };
  if (!pairs(o.conflicts) || !pairs(o.unresolved) || at + 1 != words.size() || words[at] > 1)
    return copy_outcome{};
  o.still_blank = words[at] == 1;
  o.installed = words[0];
  o.waiting = words[1];
  o.changed = words[2];
  return o;
}

uint64_t holder_keys_digest(holder_id h, std::span<const uint64_t> keys) {
  uint64_t d = 0;
  for (uint64_t k : keys)
    d ^= kv_index::entry_hash(k, h);
  return d;
}

} // namespace lmcc::actors
