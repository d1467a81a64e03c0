// hash: the functions every node must compute identically. The expected values
// were computed by a separate Python implementation of FNV-1a + splitmix64
// (not by this code), so a change to the hash is a test failure here, not a
// silent disagreement between nodes of different versions.
#include "cluster/hash.hpp"
#include "cluster/ring.hpp"

#if defined(CAF_VERSION)
#error "cluster/hash pulls in CAF"
#endif

#include <gtest/gtest.h>

namespace lmcc::cluster {
namespace {

TEST(hash, mix64_and_fnv1a_match_an_independent_implementation) {
  EXPECT_EQ(mix64(1), 6238072747940578789ULL);
  EXPECT_EQ(fnv1a_hasher{}.finish(), 17665956581633026203ULL);
  EXPECT_EQ(fnv1a_hasher{}.add("").finish(), 9313164154874788883ULL); // 8 length bytes
  static_assert(fnv1a_hasher{}.add("a").finish() == fnv1a_hasher{}.add("a").finish());
}

TEST(hash, virtual_node_points_are_pinned) {
  EXPECT_EQ(hash_ring::vnode_point("n1", 0), 3214113037083475810ULL);
  EXPECT_EQ(hash_ring::vnode_point("n2", 1023), 12187959533730429644ULL);
}

TEST(hash, fields_are_length_prefixed) {
  EXPECT_NE(fnv1a_hasher{}.add("ab").add("c").finish(), fnv1a_hasher{}.add("a").add("bc").finish());
  EXPECT_NE(hash_ring::vnode_point("n1", 1), hash_ring::vnode_point("n11", 0));
}

TEST(hash, slot_points_are_evenly_spaced) {
  EXPECT_EQ(hash_ring::slot_point(0, 4096), 0u);
  EXPECT_EQ(hash_ring::slot_point(1, 4096), uint64_t{1} << 52);
  EXPECT_EQ(hash_ring::slot_point(4095, 4096), uint64_t{4095} << 52);
  EXPECT_EQ(hash_ring::slot_point(1, 2), uint64_t{1} << 63);
  EXPECT_EQ(hash_ring::slot_point(0, 1), 0u);
}

} // namespace
} // namespace lmcc::cluster
