#include "index/holder_arena.hpp"

#include <algorithm>

namespace lmcc::actors {

uint32_t holder_arena::allocate(uint8_t cls) {
  auto& c = classes_[cls];
  ++c.live;
  if (c.has_free) {
    const uint32_t block = c.free_head;
    const uint64_t next = data(cls, block)[0];
    c.has_free = next != UINT64_MAX;
    c.free_head = static_cast<uint32_t>(next);
    return block;
  }
  const size_t per_chunk = blocks_per_chunk(cls);
  if (c.carved == c.chunks.size() * per_chunk) {
    const size_t words = std::max(chunk_words, block_words(cls));
    c.chunks.push_back(std::make_unique_for_overwrite<uint64_t[]>(words));
    if (c.chunks.size() > c.directory_capacity) {
      const size_t capacity = std::max<size_t>(4, c.directory_capacity * 2);
      auto grown = std::make_unique<uint64_t*[]>(capacity);
      for (size_t i = 0; i + 1 < c.chunks.size(); ++i)
        grown[i] = c.chunks[i].get();
      c.directory.store(grown.get(), std::memory_order_release);
      c.directories.push_back(std::move(grown));
      c.directory_capacity = capacity;
    }
    // A slot no reader looks at yet: its blocks reach readers only through a
    // later slot-lock release.
    c.directories.back()[c.chunks.size() - 1] = c.chunks.back().get();
  }
  return c.carved++;
}

void holder_arena::release(uint8_t cls, uint32_t block) noexcept {
  auto& c = classes_[cls];
  if (--c.live == 0) {
    // Nothing of this class is in use: give every chunk back.
    // No block of the class is live, so no reader can be using the directory.
    c.directory.store(nullptr, std::memory_order_relaxed);
    c.directories.clear();
    c.directories.shrink_to_fit();
    c.directory_capacity = 0;
    c.chunks.clear();
    c.chunks.shrink_to_fit();
    c.carved = 0;
    c.has_free = false;
    return;
  }
  data(cls, block)[0] = c.has_free ? c.free_head : UINT64_MAX;
  c.free_head = block;
  c.has_free = true;
}

uint64_t* holder_arena::data(uint8_t cls, uint32_t block) noexcept {
  const size_t per_chunk = blocks_per_chunk(cls);
  return classes_[cls].chunks[block / per_chunk].get() + (block % per_chunk) * block_words(cls);
}

const uint64_t* holder_arena::data(uint8_t cls, uint32_t block) const noexcept {
  // Through the directory, not `chunks`: the writer may be growing `chunks`.
  const size_t per_chunk = blocks_per_chunk(cls);
  const auto* directory = classes_[cls].directory.load(std::memory_order_acquire);
  return directory[block / per_chunk] + (block % per_chunk) * block_words(cls);
}

size_t holder_arena::memory_bytes() const noexcept {
  size_t bytes = 0;
  for (uint8_t cls = 0; cls <= max_class; ++cls)
    bytes +=
        classes_[cls].chunks.size() * std::max(chunk_words, block_words(cls)) * sizeof(uint64_t);
  return bytes;
}

uint64_t holder_arena::live_blocks() const noexcept {
  uint64_t n = 0;
  for (const auto& c : classes_)
    n += c.live;
  return n;
}

} // namespace lmcc::actors
