// holder_arena: blocks of 2^c holder ids in 64 KiB chunks with a free list
// per size class; a class whose last block is released gives its chunks back.
// CAF-free: linked with lmcc_index only.
#include "index/holder_arena.hpp"

#if defined(CAF_VERSION)
#error "holder_arena pulls in CAF"
#endif

#include <gtest/gtest.h>

#include <set>
#include <vector>

namespace lmcc::actors {
namespace {

constexpr size_t chunk_bytes = holder_arena::chunk_words * sizeof(uint64_t);

/// Fills block b of class c with a pattern naming (c, b).
void fill(holder_arena& a, uint8_t c, uint32_t b) {
  uint64_t* d = a.data(c, b);
  for (size_t i = 0; i < (size_t{1} << c); ++i)
    d[i] = (uint64_t{c} << 56) | (uint64_t{b} << 24) | i;
}

bool holds_pattern(const holder_arena& a, uint8_t c, uint32_t b) {
  const uint64_t* d = a.data(c, b);
  for (size_t i = 0; i < (size_t{1} << c); ++i)
    if (d[i] != ((uint64_t{c} << 56) | (uint64_t{b} << 24) | i))
      return false;
  return true;
}

TEST(holder_arena, blocks_of_every_class_are_distinct_and_keep_their_contents) {
  holder_arena a;
  EXPECT_EQ(a.memory_bytes(), 0u);
  std::vector<std::pair<uint8_t, uint32_t>> blocks;
  for (uint8_t c = 1; c <= 14; ++c) // up to 16384 holders: a block larger than a chunk
    for (int i = 0; i < 3; ++i) {
      const uint32_t b = a.allocate(c);
      fill(a, c, b);
      blocks.emplace_back(c, b);
    }
  EXPECT_EQ(a.live_blocks(), blocks.size());
  for (const auto& [c, b] : blocks)
    EXPECT_TRUE(holds_pattern(a, c, b)) << "class " << int{c} << " block " << b;
  // Inside one class, the numbers differ.
  std::set<std::pair<uint8_t, uint32_t>> unique(blocks.begin(), blocks.end());
  EXPECT_EQ(unique.size(), blocks.size());
}

TEST(holder_arena, a_released_block_is_reused_before_a_new_one_is_carved) {
  holder_arena a;
  const uint32_t b0 = a.allocate(2);
  const uint32_t b1 = a.allocate(2);
  const uint32_t b2 = a.allocate(2);
  const size_t bytes = a.memory_bytes();
  a.release(2, b1);
  EXPECT_EQ(a.live_blocks(), 2u);
  EXPECT_EQ(a.allocate(2), b1);
  a.release(2, b0);
  a.release(2, b2);
  // Last released, first reused; the chunk stays while the class has blocks.
  EXPECT_EQ(a.allocate(2), b2);
  EXPECT_EQ(a.allocate(2), b0);
  EXPECT_EQ(a.allocate(2), 3u);
  EXPECT_EQ(a.memory_bytes(), bytes);
}

TEST(holder_arena, a_class_grows_chunk_by_chunk_and_reads_across_chunks) {
  holder_arena a;
  // Class 1 (2 holders): 4096 blocks per 64 KiB chunk.
  std::vector<uint32_t> blocks;
  for (int i = 0; i < 10'000; ++i) {
    blocks.push_back(a.allocate(1));
    fill(a, 1, blocks.back());
  }
  EXPECT_EQ(a.memory_bytes(), 3 * chunk_bytes);
  for (uint32_t b : blocks)
    ASSERT_TRUE(holds_pattern(a, 1, b)) << b;
  // A class larger than a chunk takes one chunk-sized-or-larger piece per block.
  holder_arena big;
  big.allocate(14);
  big.allocate(14);
  EXPECT_EQ(big.memory_bytes(), 2 * (size_t{1} << 14) * sizeof(uint64_t));
}

TEST(holder_arena, a_class_that_becomes_empty_returns_its_chunks) {
  holder_arena a;
  std::vector<uint32_t> small, large;
  for (int i = 0; i < 5000; ++i)
    small.push_back(a.allocate(1));
  for (int i = 0; i < 100; ++i)
    large.push_back(a.allocate(6));
  const uint32_t keep = a.allocate(3);
  fill(a, 3, keep);
  const size_t full = a.memory_bytes();
  EXPECT_EQ(full, 2 * chunk_bytes + 1 * chunk_bytes + 1 * chunk_bytes);

  // Releasing all but one block of a class keeps its chunks...
  for (size_t i = 1; i < small.size(); ++i)
    a.release(1, small[i]);
  EXPECT_EQ(a.memory_bytes(), full);
  // ... the last one gives them back.
  a.release(1, small[0]);
  EXPECT_EQ(a.memory_bytes(), full - 2 * chunk_bytes);
  for (uint32_t b : large)
    a.release(6, b);
  EXPECT_EQ(a.memory_bytes(), chunk_bytes); // only class 3's chunk is left
  EXPECT_TRUE(holds_pattern(a, 3, keep));   // untouched by the other classes
  EXPECT_EQ(a.live_blocks(), 1u);
  a.release(3, keep);
  EXPECT_EQ(a.memory_bytes(), 0u);
  EXPECT_EQ(a.live_blocks(), 0u);

  // An emptied class starts again from block 0 and works as new.
  const uint32_t again = a.allocate(1);
  EXPECT_EQ(again, 0u);
  fill(a, 1, again);
  const uint32_t next = a.allocate(1);
  fill(a, 1, next);
  EXPECT_TRUE(holds_pattern(a, 1, again));
  EXPECT_TRUE(holds_pattern(a, 1, next));
  EXPECT_EQ(a.memory_bytes(), chunk_bytes);
}

TEST(holder_arena, churn_across_classes_never_mixes_blocks) {
  holder_arena a;
  std::vector<std::pair<uint8_t, uint32_t>> live;
  uint64_t state = 12345;
  auto next = [&] { return state = state * 6364136223846793005ULL + 1442695040888963407ULL; };
  for (int step = 0; step < 20'000; ++step) {
    if (live.empty() || next() % 3 != 0) {
      const auto c = static_cast<uint8_t>(1 + (next() >> 33) % 8);
      const uint32_t b = a.allocate(c);
      fill(a, c, b);
      live.emplace_back(c, b);
    } else {
      const size_t i = (next() >> 33) % live.size();
      ASSERT_TRUE(holds_pattern(a, live[i].first, live[i].second));
      a.release(live[i].first, live[i].second);
      live[i] = live.back();
      live.pop_back();
    }
  }
  EXPECT_EQ(a.live_blocks(), live.size());
  for (const auto& [c, b] : live)
    ASSERT_TRUE(holds_pattern(a, c, b));
  for (const auto& [c, b] : live)
    a.release(c, b);
  EXPECT_EQ(a.memory_bytes(), 0u);
}

TEST(holder_arena, a_readers_pointer_to_a_block_stays_valid_while_the_class_grows) {
  // Readers (const data()) find chunks through a directory the writer grows by
  // publishing a copy; a block read before the growth is the same memory after.
  holder_arena a;
  const holder_arena& reader = a;
  const uint32_t first = a.allocate(1);
  a.data(1, first)[0] = 41;
  a.data(1, first)[1] = 42;
  const uint64_t* before = reader.data(1, first);
  const size_t per_chunk = holder_arena::chunk_words / 2;
  std::vector<uint32_t> later;
  for (size_t i = 0; i < per_chunk * 40; ++i) // 40 chunks: the directory grows 4 -> 64
    later.push_back(a.allocate(1));
  EXPECT_EQ(reader.data(1, first), before);
  EXPECT_EQ(reader.data(1, first)[0], 41u);
  EXPECT_EQ(reader.data(1, first)[1], 42u);
  const uint32_t last = later.back();
  a.data(1, last)[0] = 7;
  EXPECT_EQ(reader.data(1, last), a.data(1, last));
  EXPECT_EQ(reader.data(1, last)[0], 7u);
}

} // namespace
} // namespace lmcc::actors
