// chunk_hasher and the CPython hash functions against values computed by
// CPython: shared/conformance/token-hash.jsonl and the table of spec 4.4.1.
#include "messages/chunk_hash.hpp"
#include "tests/hashing/test_support.hpp"

#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <string_view>
#include <vector>

namespace {

using lmcc::msg::chunk_hash_options;
using lmcc::msg::chunk_hasher;
using lmcc::msg::chunk_tuple_shape;
using lmcc::msg::none_hash_from_python_hash_seed;
using lmcc::msg::python_hash_int;
using lmcc::msg::python_hash_latin1_str;
using lmcc::msg::python_hash_tuple;
using lmcc::msg::token_chunk;
using lmcc::msg::wire_int;

constexpr uint64_t u64_max = std::numeric_limits<uint64_t>::max();
constexpr int64_t i64_min = std::numeric_limits<int64_t>::min();

// Spec 4.4.1: hash("0") under PYTHONHASHSEED=0 and hash("123") under 123.
constexpr int64_t none_hash_seed_0 = 5313149338359954478;
constexpr int64_t none_hash_seed_123 = -6197052367682486848;

std::vector<int64_t> iota_tokens(int64_t n) {
  std::vector<int64_t> out(static_cast<size_t>(n));
  std::iota(out.begin(), out.end(), int64_t{0});
  return out;
}

std::vector<token_chunk> chunks_of(const std::vector<int64_t>& tokens, chunk_hash_options options) {
  return chunk_hasher{options}.chunks(std::span<const int64_t>(tokens));
}

TEST(chunk_hasher, reproduces_every_cpython_chain_in_token_hash_jsonl) {
  auto vectors = lmcc::test::load_token_hash_vectors();
  ASSERT_EQ(vectors.size(), 27u) << lmcc::test::token_hash_path;
  for (size_t line = 0; line < vectors.size(); ++line) {
    const auto& v = vectors[line];
    SCOPED_TRACE("token-hash.jsonl line " + std::to_string(line + 1));
    chunk_hash_options options{.chunk_size = v.at("chunk_size").get<uint32_t>(),
                               .none_hash = v.at("none_hash").get<int64_t>()};
    auto tokens = lmcc::test::to_tokens(v.at("tokens"));
    auto expected = lmcc::test::to_chunks(v.at("hashes"));
    EXPECT_EQ(chunk_hasher{options}.chunks(tokens), expected);
  }
}

TEST(chunk_hasher, int64_overload_reproduces_every_vector_whose_tokens_fit_int64) {
  auto vectors = lmcc::test::load_token_hash_vectors();
  ASSERT_EQ(vectors.size(), 27u);
  size_t checked = 0;
  for (size_t line = 0; line < vectors.size(); ++line) {
    const auto& v = vectors[line];
    std::vector<int64_t> tokens;
    bool fits = true;
    for (const auto& t : lmcc::test::to_tokens(v.at("tokens"))) {
      fits = fits && t.fits_int64();
      if (fits)
        tokens.push_back(t.as_int64());
    }
    if (!fits)
      continue;
    SCOPED_TRACE("token-hash.jsonl line " + std::to_string(line + 1));
    chunk_hash_options options{.chunk_size = v.at("chunk_size").get<uint32_t>(),
                               .none_hash = v.at("none_hash").get<int64_t>()};
    EXPECT_EQ(chunks_of(tokens, options), lmcc::test::to_chunks(v.at("hashes")));
    ++checked;
  }
  EXPECT_GE(checked, 20u);
}

TEST(chunk_hasher, reproduces_the_spec_table_for_tokens_0_to_599) {
  auto tokens = iota_tokens(600);
  EXPECT_EQ(chunks_of(tokens, {.none_hash = 0}),
            (std::vector<token_chunk>{{0, 256, 3131758554629441992},
                                      {256, 512, 8783757053568497755},
                                      {512, 600, 4356085038892181893}}));
  EXPECT_EQ(chunks_of(tokens, {.none_hash = none_hash_seed_0}),
            (std::vector<token_chunk>{{0, 256, 6847123751949154252},
                                      {256, 512, -782556766413655621},
                                      {512, 600, 668996179211929659}}));
  EXPECT_EQ(chunks_of(tokens, {.none_hash = none_hash_seed_123}),
            (std::vector<token_chunk>{{0, 256, -1861538014839272852},
                                      {256, 512, -7207617353701294609},
                                      {512, 600, 5397448431534121468}}));
}

TEST(chunk_hasher, two_tuple_shape_reproduces_the_spec_values) {
  EXPECT_EQ(
      chunks_of(iota_tokens(600), {.none_hash = 0, .shape = chunk_tuple_shape::prefix_tokens}),
      (std::vector<token_chunk>{{0, 256, -3056368036007599741},
                                {256, 512, -3547436652045006391},
                                {512, 600, 7775722389791987095}}));
}

TEST(chunk_hasher, default_options_are_chunk_size_256_none_hash_0_and_three_tuples) {
  auto tokens = iota_tokens(600);
  EXPECT_EQ(chunk_hasher{}.chunks(std::span<const int64_t>(tokens)),
            (std::vector<token_chunk>{{0, 256, 3131758554629441992},
                                      {256, 512, 8783757053568497755},
                                      {512, 600, 4356085038892181893}}));
}

// Expected values printed by CPython 3.11 (/usr/bin/python3):
//   def chain(toks, n, none=0):
//     p = none; out = []
//     for s in range(0, len(toks), n):
//       p = hash((p, tuple(toks[s:s+n]), ())); out.append((s, min(s+n, len(toks)), p))
//     return out
TEST(chunk_hasher, honours_chunk_sizes_other_than_256) {
  auto tokens = iota_tokens(600);
  EXPECT_EQ(chunks_of(tokens, {.chunk_size = 100}),
            (std::vector<token_chunk>{{0, 100, -211972067194618715},
                                      {100, 200, 4020936084537658233},
                                      {200, 300, -7451172961840487286},
                                      {300, 400, -8212961398709427913},
                                      {400, 500, 6445439969525197499},
                                      {500, 600, -6629815895086673298}}));
  EXPECT_EQ(chunks_of(tokens, {.chunk_size = 1000}),
            (std::vector<token_chunk>{{0, 600, -4216248536964300948}}));
  EXPECT_EQ(chunks_of(iota_tokens(3), {.chunk_size = 1}),
            (std::vector<token_chunk>{{0, 1, 1104624474442002995},
                                      {1, 2, -3596667649900045613},
                                      {2, 3, -6945651731188645011}}));
  // chain([2**64-1, -2**63, 2**63, -1, -2, 2**61-1, 2**61, 2**61-2, 0, 1], 3, none=-5)
  std::vector<wire_int> extreme{wire_int::from_unsigned(u64_max),
                                wire_int{i64_min},
                                wire_int::from_unsigned(uint64_t{1} << 63),
                                wire_int{-1},
                                wire_int{-2},
                                wire_int{(int64_t{1} << 61) - 1},
                                wire_int{int64_t{1} << 61},
                                wire_int{(int64_t{1} << 61) - 2},
                                wire_int{0},
                                wire_int{1}};
  EXPECT_EQ(chunk_hasher({.chunk_size = 3, .none_hash = -5}).chunks(extreme),
            (std::vector<token_chunk>{{0, 3, 1907472686250134112},
                                      {3, 6, 7003056412088132439},
                                      {6, 9, -3975342773758356937},
                                      {9, 10, -7620997730073949404}}));
}

TEST(chunk_hasher, a_chunk_size_of_256_or_more_over_a_short_list_is_one_vector_chunk) {
  // A list no longer than the chunk size is one chunk whatever the size, so the
  // single-chunk vectors of token-hash.jsonl hold for larger chunk sizes too.
  auto vectors = lmcc::test::load_token_hash_vectors();
  ASSERT_EQ(vectors.size(), 27u);
  size_t checked = 0;
  for (const auto& v : vectors) {
    if (v.at("hashes").size() != 1)
      continue;
    auto tokens = lmcc::test::to_tokens(v.at("tokens"));
    for (uint32_t size : {static_cast<uint32_t>(tokens.size()), 257U, 4096U}) {
      chunk_hash_options options{.chunk_size = size, .none_hash = v.at("none_hash").get<int64_t>()};
      EXPECT_EQ(chunk_hasher{options}.chunks(tokens), lmcc::test::to_chunks(v.at("hashes")))
          << "chunk size " << size << ", " << tokens.size() << " tokens";
    }
    ++checked;
  }
  EXPECT_GE(checked, 10u);
}

TEST(chunk_hasher, an_empty_token_list_gives_no_chunks) {
  for (int64_t none_hash : {int64_t{0}, none_hash_seed_123}) {
    chunk_hasher hasher{{.none_hash = none_hash}};
    EXPECT_TRUE(hasher.chunks(std::span<const int64_t>{}).empty());
    EXPECT_TRUE(hasher.chunks(std::span<const wire_int>{}).empty());
  }
}

TEST(chunk_hasher, int64_overload_equals_wire_int_overload_on_random_tokens) {
  std::mt19937_64 rng{20240601};
  std::uniform_int_distribution<int64_t> any_int64;
  std::uniform_int_distribution<int64_t> small(-3, 200000);
  for (int round = 0; round < 50; ++round) {
    std::vector<int64_t> plain(rng() % 1200);
    for (auto& t : plain)
      t = rng() % 4 == 0 ? any_int64(rng) : small(rng);
    if (!plain.empty())
      plain[rng() % plain.size()] = i64_min;
    std::vector<wire_int> wide(plain.begin(), plain.end());
    chunk_hash_options options{.chunk_size = static_cast<uint32_t>(1 + rng() % 300),
                               .none_hash = any_int64(rng),
                               .shape = round % 2 == 0 ? chunk_tuple_shape::prefix_tokens_extra
                                                       : chunk_tuple_shape::prefix_tokens};
    chunk_hasher hasher{options};
    EXPECT_EQ(hasher.chunks(std::span<const int64_t>(plain)), hasher.chunks(wide))
        << "round " << round;
  }
}

// hash(2**61-1), hash(2**64-1), hash(-1), hash(-2**63), hash(2**63), hash(2**61)
// printed by CPython 3.11.
TEST(python_hash_int, wraps_at_the_mersenne_modulus_like_cpython) {
  EXPECT_EQ(python_hash_int(wire_int{(int64_t{1} << 61) - 1}), 0);
  EXPECT_EQ(python_hash_int(wire_int::from_unsigned(u64_max)), 7);
  EXPECT_EQ(python_hash_int(wire_int{-1}), -2);
  EXPECT_EQ(python_hash_int(wire_int{-2}), -2);
  EXPECT_EQ(python_hash_int(wire_int{i64_min}), -4);
  EXPECT_EQ(python_hash_int(wire_int::from_unsigned(uint64_t{1} << 63)), 4);
  EXPECT_EQ(python_hash_int(wire_int{int64_t{1} << 61}), 1);
  EXPECT_EQ(python_hash_int(wire_int{0}), 0);
  EXPECT_EQ(python_hash_int(wire_int{123456}), 123456);
}

// hash(()), hash((1, 2, 3)) printed by CPython 3.11.
TEST(python_hash_tuple, matches_cpython_for_the_empty_tuple_and_a_small_tuple) {
  EXPECT_EQ(python_hash_tuple({}), 5740354900026072187);
  std::vector<int64_t> items{1, 2, 3};
  EXPECT_EQ(python_hash_tuple(items), 529344067295497451);
}

TEST(python_hash_latin1_str, hashes_the_empty_string_to_zero_under_any_seed) {
  for (uint32_t seed : {0U, 1U, 123U, 4294967295U})
    EXPECT_EQ(python_hash_latin1_str("", seed), 0) << "seed " << seed;
}

// Printed by CPython 3.11 for each seed s:
//   PYTHONHASHSEED=s python3 -c 'a = "abcdefghijklmnopq"
//   print([hash(a[:n]) for n in (7, 8, 9, 15, 16, 17)], hash("\xe9\xff\x00abc"))'
TEST(python_hash_latin1_str, matches_cpython_around_siphash_block_boundaries) {
  const std::string_view alphabet = "abcdefghijklmnopq";
  const std::array<size_t, 6> lengths{7, 8, 9, 15, 16, 17};
  const std::string latin1{"\xe9\xff\x00"
                           "abc",
                           6};
  struct expectation {
    uint32_t seed;
    std::array<int64_t, 6> prefixes;
    int64_t latin1;
  };
  const std::array<expectation, 3> table{{
      {0,
       {7904145750247929094, 4574395652268504554, -532774252720507163, 2293029479765367930,
        -7712962755478248686, 7044894726457044172},
       -7803187954975172491},
      {12345678,
       {1116758676991934397, 7607424073611577020, -5104428289615676736, 3233991276417035800,
        5182096977804960412, 6060227199011992788},
       5753424607470084683},
      {4294967295U,
       {233998310040276482, 3424456984880118976, 6340115119033867570, -5500695372073021396,
        -5571389692811639442, -3460654184156011089},
       4105629093322214993},
  }};
  for (const auto& e : table) {
    for (size_t i = 0; i < lengths.size(); ++i)
      EXPECT_EQ(python_hash_latin1_str(alphabet.substr(0, lengths[i]), e.seed), e.prefixes[i])
          << "seed " << e.seed << ", length " << lengths[i];
    EXPECT_EQ(python_hash_latin1_str(latin1, e.seed), e.latin1) << "seed " << e.seed;
  }
}

TEST(none_hash_from_python_hash_seed, equals_cpython_hash_of_the_seed_string) {
  EXPECT_EQ(none_hash_from_python_hash_seed(0), none_hash_seed_0);
  EXPECT_EQ(none_hash_from_python_hash_seed(123), none_hash_seed_123);
  // PYTHONHASHSEED=4294967295 python3 -c 'import os; print(hash(os.environ["PYTHONHASHSEED"]))'
  EXPECT_EQ(none_hash_from_python_hash_seed(4294967295U), 8891781246207573802);
  // An eight-digit seed is exactly one SipHash block.
  EXPECT_EQ(none_hash_from_python_hash_seed(12345678), 1156688265350646103);
  EXPECT_EQ(python_hash_latin1_str("0", 0), none_hash_seed_0);
  EXPECT_EQ(python_hash_latin1_str("123", 123), none_hash_seed_123);
}

} // namespace
