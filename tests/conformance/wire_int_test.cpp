// wire_int: the full msgspec int range -2^63 .. 2^64-1, ordered by value,
// keyed by bit pattern.
#include "messages/wire_int.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <unordered_set>
#include <vector>

namespace {

using lmcc::msg::wire_int;

constexpr int64_t int64_min = std::numeric_limits<int64_t>::min();
constexpr int64_t int64_max = std::numeric_limits<int64_t>::max();
constexpr uint64_t uint64_max = std::numeric_limits<uint64_t>::max();

// Usable at compile time, as the header promises.
static_assert(wire_int{-1} < wire_int{0});
static_assert(wire_int{int64_max} < wire_int::from_unsigned(uint64_t{1} << 63));
static_assert(wire_int{-1}.bits() == wire_int::from_unsigned(uint64_max).bits());
static_assert(wire_int{-1} != wire_int::from_unsigned(uint64_max));
static_assert(!wire_int::from_unsigned(uint64_max).fits_int64());

/// Every edge value, in ascending order of value.
std::vector<wire_int> ascending_edges() {
  return {
      wire_int{int64_min},
      wire_int{int64_min + 1},
      wire_int{INT64_C(-4294967296)},
      wire_int{-65536},
      wire_int{-256},
      wire_int{-129},
      wire_int{-128},
      wire_int{-33},
      wire_int{-32},
      wire_int{-2},
      wire_int{-1},
      wire_int{0},
      wire_int{1},
      wire_int{127},
      wire_int{128},
      wire_int{255},
      wire_int{256},
      wire_int{65535},
      wire_int{65536},
      wire_int::from_unsigned(UINT64_C(4294967296)),
      wire_int{int64_max - 1},
      wire_int{int64_max},
      wire_int::from_unsigned(uint64_t{1} << 63),
      wire_int::from_unsigned((uint64_t{1} << 63) + 1),
      wire_int::from_unsigned(uint64_max - 1),
      wire_int::from_unsigned(uint64_max),
  };
}

TEST(wire_int, orders_every_edge_value_by_its_mathematical_value) {
  const auto edges = ascending_edges();
  for (size_t i = 0; i < edges.size(); ++i) {
    for (size_t j = 0; j < edges.size(); ++j) {
      SCOPED_TRACE(edges[i].to_string() + " vs " + edges[j].to_string());
      EXPECT_EQ(edges[i] < edges[j], i < j);
      EXPECT_EQ(edges[i] == edges[j], i == j);
      EXPECT_EQ((edges[i] <=> edges[j]) == std::strong_ordering::greater, i > j);
    }
  }
}

TEST(wire_int, sorting_a_shuffled_list_yields_ascending_values) {
  auto edges = ascending_edges();
  auto shuffled = edges;
  std::mt19937_64 rng{20240611};
  std::shuffle(shuffled.begin(), shuffled.end(), rng);
  std::sort(shuffled.begin(), shuffled.end());
  EXPECT_TRUE(shuffled == edges);
}

TEST(wire_int, keeps_the_sign_of_values_that_share_a_bit_pattern) {
  const wire_int minus_one{-1};
  const auto max_unsigned = wire_int::from_unsigned(uint64_max);
  EXPECT_EQ(minus_one.bits(), UINT64_C(0xffffffffffffffff));
  EXPECT_EQ(max_unsigned.bits(), UINT64_C(0xffffffffffffffff));
  EXPECT_TRUE(minus_one.is_negative());
  EXPECT_FALSE(max_unsigned.is_negative());
  EXPECT_NE(minus_one, max_unsigned);
  EXPECT_LT(minus_one, max_unsigned);

  const wire_int lowest{int64_min};
  const auto two_to_63 = wire_int::from_unsigned(uint64_t{1} << 63);
  EXPECT_EQ(lowest.bits(), two_to_63.bits());
  EXPECT_NE(lowest, two_to_63);
  EXPECT_LT(lowest, two_to_63);
}

TEST(wire_int, bits_are_the_twos_complement_pattern) {
  EXPECT_EQ(wire_int{0}.bits(), 0u);
  EXPECT_EQ(wire_int{127}.bits(), 127u);
  EXPECT_EQ(wire_int{-2}.bits(), UINT64_C(0xfffffffffffffffe));
  EXPECT_EQ(wire_int{int64_min}.bits(), UINT64_C(0x8000000000000000));
  EXPECT_EQ(wire_int{int64_max}.bits(), UINT64_C(0x7fffffffffffffff));
  EXPECT_EQ(wire_int::from_unsigned(UINT64_C(0x123456789abcdef0)).bits(),
            UINT64_C(0x123456789abcdef0));
}

TEST(wire_int, fits_int64_for_everything_below_2_to_the_63) {
  for (int64_t v : {int64_min, int64_t{-1}, int64_t{0}, int64_t{1}, int64_max}) {
    SCOPED_TRACE(v);
    EXPECT_TRUE(wire_int{v}.fits_int64());
    EXPECT_EQ(wire_int{v}.as_int64(), v);
    EXPECT_EQ(wire_int{v}.to_int64(), v);
  }
  EXPECT_TRUE(wire_int::from_unsigned(static_cast<uint64_t>(int64_max)).fits_int64());
  EXPECT_EQ(wire_int::from_unsigned(5).to_int64(), 5);
  for (uint64_t v : {uint64_t{1} << 63, (uint64_t{1} << 63) + 1, uint64_max}) {
    SCOPED_TRACE(v);
    EXPECT_FALSE(wire_int::from_unsigned(v).fits_int64());
    EXPECT_EQ(wire_int::from_unsigned(v).to_int64(), std::nullopt);
  }
}

TEST(wire_int, to_string_prints_the_value_as_python_does) {
  EXPECT_EQ(wire_int{int64_min}.to_string(), "-9223372036854775808");
  EXPECT_EQ(wire_int{-1}.to_string(), "-1");
  EXPECT_EQ(wire_int{0}.to_string(), "0");
  EXPECT_EQ(wire_int{}.to_string(), "0");
  EXPECT_EQ(wire_int{65536}.to_string(), "65536");
  EXPECT_EQ(wire_int{int64_max}.to_string(), "9223372036854775807");
  EXPECT_EQ(wire_int::from_unsigned(uint64_t{1} << 63).to_string(), "9223372036854775808");
  EXPECT_EQ(wire_int::from_unsigned(uint64_max).to_string(), "18446744073709551615");
}

TEST(wire_int, a_small_value_is_the_same_whether_built_signed_or_unsigned) {
  EXPECT_EQ(wire_int{}, wire_int{0});
  EXPECT_EQ(wire_int::from_unsigned(0), wire_int{0});
  EXPECT_EQ(wire_int::from_unsigned(12345), wire_int{12345});
  EXPECT_EQ(wire_int::from_unsigned(static_cast<uint64_t>(int64_max)), wire_int{int64_max});
}

TEST(wire_int, from_bits_builds_the_same_value_as_the_signed_and_unsigned_constructors) {
  for (const wire_int& v : ascending_edges()) {
    SCOPED_TRACE(v.to_string());
    wire_int rebuilt = wire_int::from_bits(v.bits(), v.is_negative());
    EXPECT_EQ(rebuilt, v);
    EXPECT_EQ(rebuilt.is_negative(), v.is_negative());
    EXPECT_EQ(rebuilt.to_string(), v.to_string());
  }
  static_assert(wire_int::from_bits(uint64_max, true) == wire_int{-1});
  static_assert(wire_int::from_bits(uint64_max, false) == wire_int::from_unsigned(uint64_max));
}

TEST(wire_int, hashes_tell_minus_one_from_two_to_the_64_minus_one) {
  std::unordered_set<wire_int> set;
  for (const auto& v : ascending_edges())
    EXPECT_TRUE(set.insert(v).second) << v.to_string();
  EXPECT_EQ(set.size(), ascending_edges().size());
  EXPECT_TRUE(set.contains(wire_int{-1}));
  EXPECT_TRUE(set.contains(wire_int::from_unsigned(uint64_max)));
  EXPECT_FALSE(set.contains(wire_int{42}));
}

TEST(wire_int, hashes_spread_keys_chosen_to_share_a_bucket) {
  // A hash table's bucket is hash % bucket_count. With the identity hash, all
  // multiples of libstdc++'s bucket count for ~65k elements shared bucket 0.
  constexpr uint64_t bucket_count = 85229;
  std::unordered_set<size_t> buckets;
  for (uint64_t i = 0; i < 10000; ++i)
    buckets.insert(std::hash<wire_int>{}(wire_int::from_unsigned(i * bucket_count)) % bucket_count);
  // 10,000 random hashes fill ~9,440 of 85,229 buckets.
  EXPECT_GT(buckets.size(), 9000u);
}

} // namespace
