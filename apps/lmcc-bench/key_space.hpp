// key_space: the keys simulated workers admit, and the ground truth of which
// keys each worker holds, so that every result is checked, not assumed.
//
// Two kinds of key:
//  * random keys: key(i) = mix64(base + i) for a per-instance base. mix64 is a
//    bijection, so keys never repeat, and because eviction is FIFO (oldest
//    first, as an LRU cache does under a steady stream) the live random keys of
//    a worker are exactly key(lo) .. key(hi-1): no set is stored, and 10M keys
//    cost nothing to track.
//  * prompt keys: the 256-token chunk hashes (spec 4.4, messages/chunk_hash.hpp)
//    of deterministic token lists, so HTTP /lookup of those tokens has a known
//    expected answer. They are never evicted.
//
// TP ranks of one instance share the base: like real ranks they admit the same
// chunk hashes.
//
// Context: ground_truth's counters may be read from any thread; everything else
// about it belongs to the worker's driver thread.
#pragma once

#include "messages/chunk_hash.hpp"

#include <atomic>
#include <cstdint>
#include <random>
#include <span>
#include <vector>

namespace lmcc::bench {

/// splitmix64's finaliser: a bijection on 64-bit values.
constexpr uint64_t mix64(uint64_t x) noexcept {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

/// The random-key base of instance `index` under `seed`: 2^40 keys apart.
uint64_t instance_key_base(uint64_t seed, uint64_t index) noexcept;

/// A deterministic generator for one stream (seed, stream id).
std::mt19937_64 make_rng(uint64_t seed, uint64_t stream) noexcept;

class ground_truth {
public:
  explicit ground_truth(uint64_t base) noexcept : base_(base) {}

  int64_t random_key(uint64_t i) const noexcept { return static_cast<int64_t>(mix64(base_ + i)); }

  /// Keys this worker holds now (pinned + live random).
  uint64_t size() const noexcept {
    return pinned_count_.load(std::memory_order_relaxed) + hi_.load(std::memory_order_relaxed) -
           lo_.load(std::memory_order_relaxed);
  }

  uint64_t lo() const noexcept { return lo_.load(std::memory_order_relaxed); }
  uint64_t hi() const noexcept { return hi_.load(std::memory_order_relaxed); }

  /// Records that random keys [lo, hi) are now live (after a send succeeded).
  void commit_range(uint64_t lo, uint64_t hi) noexcept {
    hi_.store(hi, std::memory_order_relaxed);
    lo_.store(lo, std::memory_order_relaxed);
  }

  void add_pinned(std::span<const int64_t> keys);

  /// The pinned keys (driver thread).
  const std::vector<int64_t>& pinned() const noexcept { return pinned_; }

  /// Holds nothing any more (a worker process that restarted): random keys
  /// continue after the last one admitted, so none is reused.
  void clear() noexcept {
    pinned_.clear();
    pinned_count_.store(0, std::memory_order_relaxed);
    lo_.store(hi_.load(std::memory_order_relaxed), std::memory_order_relaxed);
  }

  /// Every key held, pinned first (what a full sync resends).
  std::vector<int64_t> snapshot() const;

private:
  uint64_t base_;
  std::vector<int64_t> pinned_;
  std::atomic<uint64_t> pinned_count_{0};
  std::atomic<uint64_t> lo_{0};
  std::atomic<uint64_t> hi_{0};
};

/// One prompt: its tokens and the chain hash of each full chunk.
struct prompt {
  std::vector<int64_t> tokens;
  std::vector<int64_t> keys;
};

/// The prompts each instance admits; prompt (i, j) is the same for a seed.
class prompt_corpus {
public:
  prompt_corpus(uint64_t seed, size_t instances, size_t prompts_per_instance, uint32_t chunks,
                const msg::chunk_hasher& hasher);

  const std::vector<prompt>& of_instance(size_t i) const { return prompts_[i]; }
  size_t instances() const { return prompts_.size(); }

private:
  std::vector<std::vector<prompt>> prompts_;
};

/// A lookup with a known answer: `held_chunks` leading chunks of a prompt of
/// `instance`, then a tail that nobody holds.
struct lookup_query {
  size_t instance = 0;
  uint32_t held_chunks = 0;
  uint64_t expected_tokens = 0;      ///< held_chunks * chunk_size
  std::vector<int64_t> tokens;       ///< for HTTP /lookup
  std::vector<int64_t> chunk_hashes; ///< for BatchedP2PLookupMsg (held + one miss)
};

lookup_query make_query(const prompt_corpus& corpus, std::mt19937_64& rng, uint32_t chunk_size,
                        const msg::chunk_hasher& hasher);

} // namespace lmcc::bench
