#include "apps/lmcc-bench/key_space.hpp"

#include <algorithm>

namespace lmcc::bench {
namespace {

/// Llama-3's vocabulary size: token ids look like real ones.
constexpr int64_t vocabulary = 128256;

std::vector<int64_t> random_tokens(std::mt19937_64& rng, size_t n) {
  std::uniform_int_distribution<int64_t> token{0, vocabulary - 1};
  std::vector<int64_t> out(n);
  for (auto& t : out)
    t = token(rng);
  return out;
}

} // namespace

uint64_t instance_key_base(uint64_t seed, uint64_t index) noexcept {
  return mix64(seed ^ 0x6b65792d62617365ULL) + (index << 40);
}

std::mt19937_64 make_rng(uint64_t seed, uint64_t stream) noexcept {
  return std::mt19937_64{mix64(seed * 0x100000001b3ULL + mix64(stream))};
}

void ground_truth::add_pinned(std::span<const int64_t> keys) {
  pinned_.insert(pinned_.end(), keys.begin(), keys.end());
  pinned_count_.store(pinned_.size(), std::memory_order_relaxed);
}

std::vector<int64_t> ground_truth::snapshot() const {
  std::vector<int64_t> keys = pinned_;
  uint64_t lo = lo_.load(std::memory_order_relaxed);
  uint64_t hi = hi_.load(std::memory_order_relaxed);
  keys.reserve(keys.size() + (hi - lo));
  for (uint64_t i = lo; i < hi; ++i)
    keys.push_back(random_key(i));
  return keys;
}

prompt_corpus::prompt_corpus(uint64_t seed, size_t instances, size_t prompts_per_instance,
                             uint32_t chunks, const msg::chunk_hasher& hasher) {
  const size_t chunk_size = hasher.options().chunk_size;
  prompts_.resize(instances);
  for (size_t i = 0; i < instances; ++i) {
    for (size_t j = 0; j < prompts_per_instance; ++j) {
      auto rng = make_rng(seed, (uint64_t{1} << 48) + (i << 24) + j);
      prompt p;
      p.tokens = random_tokens(rng, chunks * chunk_size);
      for (const auto& c : hasher.chunks(std::span<const int64_t>{p.tokens}))
        p.keys.push_back(c.key);
      prompts_[i].push_back(std::move(p));
    }
  }
}

lookup_query make_query(const prompt_corpus& corpus, std::mt19937_64& rng, uint32_t chunk_size,
                        const msg::chunk_hasher& hasher) {
  lookup_query q;
  q.instance = std::uniform_int_distribution<size_t>{0, corpus.instances() - 1}(rng);
  const auto& prompts = corpus.of_instance(q.instance);
  const prompt& p = prompts[std::uniform_int_distribution<size_t>{0, prompts.size() - 1}(rng)];
  const auto chunks = static_cast<uint32_t>(p.keys.size());
  // Uniform over 0..chunks held chunks: full, partial and zero hits all occur.
  q.held_chunks = std::uniform_int_distribution<uint32_t>{0, chunks}(rng);
  q.expected_tokens = uint64_t{q.held_chunks} * chunk_size;
  q.tokens.assign(p.tokens.begin(), p.tokens.begin() + q.expected_tokens);
  // A tail of 1..chunk_size fresh tokens: its chunk (partial or not) is held by
  // nobody, so the walk must stop right after the held prefix.
  size_t tail = std::uniform_int_distribution<size_t>{1, chunk_size}(rng);
  auto extra = random_tokens(rng, tail);
  q.tokens.insert(q.tokens.end(), extra.begin(), extra.end());
  q.chunk_hashes.assign(p.keys.begin(), p.keys.begin() + q.held_chunks);
  // The P2P asker sends the hashes of every chunk it misses locally: the held
  // prefix plus the tail's chunk, which must end the contiguous run.
  auto all = hasher.chunks(std::span<const int64_t>{q.tokens});
  if (all.size() > q.held_chunks)
    q.chunk_hashes.push_back(all[q.held_chunks].key);
  return q;
}

} // namespace lmcc::bench
