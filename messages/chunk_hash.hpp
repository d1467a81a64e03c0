// CPython-compatible chunk hashing for LookupMsg and /lookup (spec section 4.4).
//
// LMCache's controller splits a prompt's tokens into 256-token chunks and keys
// each chunk by the chain h_i = hash((h_{i-1}, tuple(tokens_i), ())) with
// Python's builtin hash and h_{-1} = NONE_HASH. Workers compute the same chain,
// so a router's lookup only matches when every piece agrees: chunk size, tuple
// shape and NONE_HASH (0 without vLLM; hash(str(PYTHONHASHSEED)) with vLLM).
// This file reproduces CPython's int, tuple (xxHash) and str (SipHash-1-3 keyed
// from PYTHONHASHSEED) hashes on 64-bit builds, bit for bit.
//
//   chunk_hasher h{chunk_hash_options{.none_hash = none_hash_from_python_hash_seed(123)}};
//   for (auto [start, end, key] : h.chunks(tokens)) ...
//
// Thread-safety: a chunk_hasher is immutable after construction; share freely.
#pragma once

#include "messages/wire_int.hpp"

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace lmcc::msg {

/// How a chunk's tuple is shaped before hashing.
enum class chunk_tuple_shape {
  /// (prefix, tokens, ()) -- LMCache 0.4.x, the default.
  prefix_tokens_extra,
  /// (prefix, tokens) -- the Ascend fork.
  prefix_tokens,
};

struct chunk_hash_options {
  /// Tokens per chunk. LMCache requires 256 for controller lookups to match.
  /// Default: 256
  uint32_t chunk_size = 256;

  /// The chain's initial prefix (vLLM's NONE_HASH). 0 when vLLM is not
  /// importable where the hashes are made; see none_hash_from_python_hash_seed.
  /// Default: 0
  int64_t none_hash = 0;

  /// Default: prefix_tokens_extra
  chunk_tuple_shape shape = chunk_tuple_shape::prefix_tokens_extra;
};

/// One chunk of a token list: tokens [start, end) hash to `key`.
struct token_chunk {
  uint64_t start = 0;
  uint64_t end = 0;
  int64_t key = 0;
  friend bool operator==(const token_chunk&, const token_chunk&) = default;
};

// -- CPython's hash functions (64-bit build) -------------------------------------

/// hash(int) for any int msgspec carries.
int64_t python_hash_int(const wire_int& v) noexcept;

/// hash(tuple) given the hashes of its items.
int64_t python_hash_tuple(std::span<const int64_t> item_hashes) noexcept;

/// hash(str) of an ASCII/Latin-1 string under PYTHONHASHSEED=`seed`
/// (SipHash-1-3, CPython >= 3.11). `seed` = 0 disables randomisation.
int64_t python_hash_latin1_str(std::string_view text, uint32_t seed) noexcept;

/// vLLM's NONE_HASH when PYTHONHASHSEED is set: hash(os.environ["PYTHONHASHSEED"])
/// evaluated in a process started with that seed.
int64_t none_hash_from_python_hash_seed(uint32_t seed) noexcept;

// -- the chunk chain -------------------------------------------------------------

class chunk_hasher {
public:
  explicit chunk_hasher(chunk_hash_options options = {}) : options_(options) {}

  /// Every chunk of `tokens`, the trailing partial one included.
  std::vector<token_chunk> chunks(std::span<const wire_int> tokens) const;

  /// Same, for plain int64 tokens (the /lookup fast path).
  std::vector<token_chunk> chunks(std::span<const int64_t> tokens) const;

  const chunk_hash_options& options() const noexcept { return options_; }

private:
  template <class Token>
  std::vector<token_chunk> chain(std::span<const Token> tokens) const;

  chunk_hash_options options_;
};

} // namespace lmcc::msg
