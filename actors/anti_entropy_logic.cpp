#include "actors/anti_entropy_logic.hpp"

#include <algorithm>
#include <sstream>

namespace lmcc::actors {

bool peer_is_senior(uint64_t peer_uptime_ms, node_index peer, uint64_t own_uptime_ms,
                    node_index self) noexcept {
  const uint64_t gap = peer_uptime_ms > own_uptime_ms ? peer_uptime_ms - own_uptime_ms
                                                      : own_uptime_ms - peer_uptime_ms;
  if (gap < seniority_tie_ms)
    return peer < self;
  return peer_uptime_ms > own_uptime_ms;
}

bool peer_copy_wins(bool self_new, bool peer_new, bool own_suspect, bool peer_suspect,
                    bool peer_senior) noexcept {
  if (self_new != peer_new)
    return self_new;
  if (own_suspect != peer_suspect)
    return own_suspect;
  return peer_senior;
}

void slot_suspects::mark_all() noexcept {
  for (auto& f : flags_)
    f.store(1, std::memory_order_relaxed);
}

bool slot_suspects::stood_still(int64_t now_ms) noexcept {
  const int64_t last = last_tick_ms_.load(std::memory_order_relaxed);
  if (last < 0 || now_ms - last <= stall_after_ms_)
    return false;
  mark_all();
  return true;
}

void slot_suspects::clear(uint32_t slot) noexcept {
  if (slot < flags_.size())
    flags_[slot].store(0, std::memory_order_relaxed);
}

bool slot_suspects::suspect(uint32_t slot) const noexcept {
  return slot < flags_.size() && flags_[slot].load(std::memory_order_relaxed) != 0;
}

uint32_t slot_suspects::count() const noexcept {
  uint32_t n = 0;
  for (const auto& f : flags_)
    n += f.load(std::memory_order_relaxed) != 0 ? 1 : 0;
  return n;
}

namespace {

/// Bit i of word i / 64 set when `flagged(slots[i])`; the layout digest
/// answers carry (slot_suspects::bit reads it).
template <class Flagged>
std::vector<uint64_t> bit_words(std::span<const uint64_t> slots, Flagged flagged) {
  std::vector<uint64_t> words(slot_suspects::word_count(slots.size()), 0);
  for (size_t i = 0; i < slots.size(); ++i)
    if (flagged(slots[i]))
      words[i / 64] |= uint64_t{1} << (i % 64);
  return words;
}

} // namespace

std::vector<uint64_t> slot_suspects::bits(std::span<const uint64_t> slots) const {
  return bit_words(
      slots, [this](uint64_t s) { return s < flags_.size() && suspect(static_cast<uint32_t>(s)); });
}

size_t peer_lag_hints::add(const std::string& peer, const std::string& source,
                           std::span<const uint64_t> slots) {
  std::lock_guard lock{mutex_};
  auto& flags = flags_[peer][source];
  flags.resize(slot_count_);
  size_t added = 0;
  for (uint64_t s : slots)
    if (s < slot_count_ && !flags[s]) {
      flags[s] = true;
      ++added;
    }
  if (added > 0)
    changed();
  return added;
}

void peer_lag_hints::clear_source(const std::string& peer, const std::string& source) {
  std::lock_guard lock{mutex_};
  auto it = flags_.find(peer);
  if (it != flags_.end() && it->second.erase(source) > 0)
    changed();
}

bool peer_lag_hints::lagging_locked(const std::string& peer, uint32_t slot) const {
  auto it = flags_.find(peer);
  if (it == flags_.end())
    return false;
  for (const auto& [source, flags] : it->second)
    if (slot < flags.size() && flags[slot])
      return true;
  return false;
}

bool peer_lag_hints::lagging(const std::string& peer, uint32_t slot) const {
  std::lock_guard lock{mutex_};
  return lagging_locked(peer, slot);
}

void peer_lag_hints::clear(const std::string& peer, uint32_t slot) {
  std::lock_guard lock{mutex_};
  auto it = flags_.find(peer);
  if (it == flags_.end())
    return;
  bool any = false;
  for (auto& [source, flags] : it->second)
    if (slot < flags.size() && flags[slot]) {
      flags[slot] = false;
      any = true;
    }
  if (any)
    changed();
}

std::vector<uint64_t> peer_lag_hints::bits(const std::string& peer,
                                           std::span<const uint64_t> slots) const {
  std::lock_guard lock{mutex_};
  auto words = bit_words(slots, [&](uint64_t s) {
    return s < slot_count_ && lagging_locked(peer, static_cast<uint32_t>(s));
  });
  const bool any = std::any_of(words.begin(), words.end(), [](uint64_t w) { return w != 0; });
  return any ? words : std::vector<uint64_t>{};
}

size_t peer_lag_hints::count() const {
  std::lock_guard lock{mutex_};
  size_t n = 0;
  for (const auto& [peer, sources] : flags_)
    for (const auto& [source, flags] : sources)
      n += static_cast<size_t>(std::count(flags.begin(), flags.end(), true));
  return n;
}

size_t peer_lag_hints::load_text(std::string_view text) {
  std::lock_guard lock{mutex_};
  size_t loaded = 0;
  std::istringstream in{std::string{text}};
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields{line};
    std::string peer;
    std::string source;
    if (!(fields >> peer >> source))
      continue;
    auto& flags = flags_[peer][source];
    flags.resize(slot_count_);
    uint64_t slot = 0;
    while (fields >> slot)
      if (slot < slot_count_ && !flags[slot]) {
        flags[slot] = true;
        ++loaded;
      }
  }
  return loaded;
}

void peer_lag_hints::changed() {
  if (!save_)
    return;
  std::string text;
  for (const auto& [peer, sources] : flags_)
    for (const auto& [source, flags] : sources) {
      std::string line = peer;
      line.push_back(' ');
      line.append(source);
      const size_t bare = line.size();
      for (size_t s = 0; s < flags.size(); ++s)
        if (flags[s]) {
          line.push_back(' ');
          line.append(std::to_string(s));
        }
      if (line.size() > bare) {
        text.append(line);
        text.push_back('\n');
      }
    }
  save_(text);
}

std::vector<uint32_t> divergence_tracker::compare(node_index peer, std::span<const uint32_t> slots,
                                                  std::span<const uint64_t> local,
                                                  std::span<const uint64_t> remote) {
  std::vector<uint32_t> repair;
  for (size_t i = 0; i < slots.size() && i < local.size() && i < remote.size(); ++i) {
    const auto key = std::make_pair(peer, slots[i]);
    if (local[i] == remote[i]) {
      seen_.erase(key);
      continue;
    }
    const auto now = std::make_pair(local[i], remote[i]);
    auto [it, inserted] = seen_.try_emplace(key, now);
    if (!inserted && it->second == now) {
      repair.push_back(slots[i]);
      seen_.erase(it); // repaired now; a new difference starts over
    } else {
      it->second = now;
    }
  }
  return repair;
}

void divergence_tracker::forget(node_index peer) {
  std::erase_if(seen_, [peer](const auto& kv) { return kv.first.first == peer; });
}

} // namespace lmcc::actors
