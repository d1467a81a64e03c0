// holder_arena: storage for the holder lists of keys held by more than one
// holder, without a heap allocation per key.
//
// A list lives in a block of 2^c holder ids (size class c = 1 .. max_class).
// Each class keeps its blocks in fixed 64 KiB chunks with an intrusive free
// list (a free block's first word links to the next free block), so allocating
// and releasing a block is O(1) and touches no allocator once the chunks exist.
// When the last block of a class is released, the class gives its chunks back
// (a deregistration of every TP rank returns the memory).
//
//   holder_arena arena;
//   uint32_t b = arena.allocate(1);        // 2 holders
//   arena.data(1, b)[0] = h0; arena.data(1, b)[1] = h1;
//   arena.release(1, b);
//
// Context: owned by one kv_index and changed by its one writer thread. data()
// may run on other threads at the same time as allocate() and release(), for
// a block that is live the whole time (the index's slot lock keeps it so):
// readers find a chunk through a directory that is never moved or freed while
// a block of its class is live (a grown directory is published and the old
// one kept), so carving a chunk for one slot never pulls memory from under a
// reader of another. CAF-free.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace lmcc::actors {

class holder_arena {
public:
  /// Largest size class: blocks of 2^25 holders (more than any key can have:
  /// the index caps a key's holders at max_holders_per_key).
  static constexpr uint8_t max_class = 25;

  /// Words per chunk (64 KiB); classes larger than a chunk get one block per chunk.
  static constexpr size_t chunk_words = 8192;

  /// A free block of class `cls`, carving a new chunk when none is free.
  uint32_t allocate(uint8_t cls);

  /// Gives a block back; REQUIRES: it was allocated with the same class.
  void release(uint8_t cls, uint32_t block) noexcept;

  uint64_t* data(uint8_t cls, uint32_t block) noexcept;
  const uint64_t* data(uint8_t cls, uint32_t block) const noexcept;

  /// Bytes of chunk memory held (for the memory gauge).
  size_t memory_bytes() const noexcept;

  /// Blocks in use, all classes.
  uint64_t live_blocks() const noexcept;

private:
  struct size_class {
    std::vector<std::unique_ptr<uint64_t[]>> chunks; ///< the writer's: owns the chunks
    /// Readers' way to a chunk: chunk i at directory[i]. Grown by publishing a
    /// bigger copy; the old copies stay in `directories` until the class is
    /// empty, so a reader holding an old pointer still finds its (older) chunk.
    std::atomic<uint64_t* const*> directory{nullptr};
    std::vector<std::unique_ptr<uint64_t*[]>> directories;
    size_t directory_capacity = 0;
    uint32_t carved = 0; ///< blocks ever handed out of the chunks (high-water mark)
    uint32_t free_head = 0;
    bool has_free = false;
    uint64_t live = 0;
  };

  static size_t block_words(uint8_t cls) noexcept { return size_t{1} << cls; }
  static size_t blocks_per_chunk(uint8_t cls) noexcept {
    return block_words(cls) >= chunk_words ? 1 : chunk_words / block_words(cls);
  }

  std::array<size_class, max_class + 1> classes_;
};

} // namespace lmcc::actors
