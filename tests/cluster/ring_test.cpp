// ring: member sets are validated and ordered, options are checked, and each
// slot's preference list is every member once in clockwise order from the
// slot's point. The lists are checked against a walk written here from the
// definition, and four of them against lists computed by a separate Python
// implementation.
#include "cluster/ring.hpp"

#if defined(CAF_VERSION)
#error "cluster/ring pulls in CAF"
#endif

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <random>
#include <set>
#include <utility>

namespace lmcc::cluster {
namespace {

// "n" + std::to_string(i) trips g++ 12's false -Wrestrict at -O3.
std::string ring_node_id(std::size_t i) {
  std::string id(1, 'n');
  id += std::to_string(i);
  return id;
}

std::vector<std::string> node_ids(int n) {
  std::vector<std::string> ids;
  for (int i = 1; i <= n; ++i)
    ids.push_back(ring_node_id(i));
  return ids;
}

hash_ring make_ring(std::vector<std::string> ids, ring_options opts = {}) {
  expected<member_set> m = member_set::make(std::move(ids));
  EXPECT_TRUE(m) << m.error().message;
  expected<hash_ring> r = hash_ring::make(std::move(*m), opts);
  EXPECT_TRUE(r) << r.error().message;
  return std::move(*r);
}

std::vector<std::string> ids_of(const hash_ring& r, const std::vector<node_index>& list) {
  std::vector<std::string> out;
  for (node_index n : list)
    out.push_back(r.members().id(n));
  return out;
}

// -- member set ------------------------------------------------------------------------

TEST(member_set, sorts_ids_so_that_listing_order_does_not_matter) {
  expected<member_set> a = member_set::make({"n3", "n1", "n2"});
  expected<member_set> b = member_set::make({"n2", "n3", "n1"});
  ASSERT_TRUE(a);
  ASSERT_TRUE(b);
  EXPECT_EQ(a->ids(), (std::vector<std::string>{"n1", "n2", "n3"}));
  EXPECT_TRUE(*a == *b);
  EXPECT_EQ(a->index_of("n2"), std::optional<node_index>{1});
  EXPECT_EQ(a->index_of("n4"), std::nullopt);
  EXPECT_FALSE(a->contains("n"));
}

TEST(member_set, refuses_empty_duplicate_and_blank_ids) {
  expected<member_set> empty = member_set::make({});
  ASSERT_FALSE(empty);
  EXPECT_EQ(empty.error().code, errc::empty_member_set);

  expected<member_set> dup = member_set::make({"n1", "n2", "n1"});
  ASSERT_FALSE(dup);
  EXPECT_EQ(dup.error().code, errc::duplicate_node_id);
  EXPECT_EQ(dup.error().message, "node id \"n1\" is listed twice");

  expected<member_set> blank = member_set::make({"n1", ""});
  ASSERT_FALSE(blank);
  EXPECT_EQ(blank.error().code, errc::empty_node_id);

  std::vector<std::string> many;
  for (std::size_t i = 0; i <= max_members; ++i)
    many.push_back(ring_node_id(i));
  expected<member_set> too_many = member_set::make(many);
  ASSERT_FALSE(too_many);
  EXPECT_EQ(too_many.error().code, errc::too_many_members);
  many.pop_back();
  EXPECT_TRUE(member_set::make(many));
}

// -- options -----------------------------------------------------------------------------

TEST(ring_options, defaults_are_the_documented_ones_and_valid) {
  const ring_options o;
  EXPECT_EQ(o.slot_count, 4096u);
  EXPECT_EQ(o.virtual_nodes, 1024u);
  EXPECT_EQ(o.replicas, 2u);
  EXPECT_TRUE(check(o));
}

TEST(ring_options, slot_counts_must_be_powers_of_two_within_the_limit) {
  for (uint32_t bad : {0u, 3u, 6000u, 4095u, max_slot_count * 2, 0x80000001u}) {
    expected<void> r = check(ring_options{.slot_count = bad});
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(r.error().code, errc::bad_slot_count) << bad;
  }
  for (uint32_t good : {1u, 2u, 64u, 4096u, max_slot_count})
    EXPECT_TRUE(check(ring_options{.slot_count = good})) << good;
}

TEST(ring_options, replicas_and_virtual_nodes_must_be_positive) {
  expected<void> r0 = check(ring_options{.replicas = 0});
  ASSERT_FALSE(r0);
  EXPECT_EQ(r0.error().code, errc::zero_replicas);
  expected<void> v0 = check(ring_options{.virtual_nodes = 0});
  ASSERT_FALSE(v0);
  EXPECT_EQ(v0.error().code, errc::bad_virtual_nodes);
  expected<void> vbig = check(ring_options{.virtual_nodes = max_virtual_nodes + 1});
  ASSERT_FALSE(vbig);
  EXPECT_EQ(vbig.error().code, errc::bad_virtual_nodes);
  // A ring refuses the same options.
  expected<member_set> m = member_set::make({"n1"});
  ASSERT_TRUE(m);
  expected<hash_ring> r = hash_ring::make(*m, ring_options{.slot_count = 12});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, errc::bad_slot_count);
}

// -- preference lists ----------------------------------------------------------------------

// The definition, written out: all points sorted by (point, id), the first at
// or after the slot's point (wrapping), then distinct ids in walk order.
std::vector<std::string> reference_preference(const std::vector<std::string>& ids, uint32_t v,
                                              uint32_t slot, uint32_t slots) {
  std::vector<std::pair<uint64_t, std::string>> points;
  for (const std::string& id : ids)
    for (uint32_t i = 0; i < v; ++i)
      points.emplace_back(hash_ring::vnode_point(id, i), id);
  std::sort(points.begin(), points.end());
  // slot * 2^64 / slots, slots a power of two (> 1 here)
  const uint64_t at = uint64_t{slot} << (64 - std::countr_zero(slots));
  std::size_t start = 0;
  while (start < points.size() && points[start].first < at)
    ++start;
  std::vector<std::string> out;
  for (std::size_t k = 0; out.size() < ids.size(); ++k) {
    const std::string& id = points[(start + k) % points.size()].second;
    if (std::find(out.begin(), out.end(), id) == out.end())
      out.push_back(id);
  }
  return out;
}

TEST(hash_ring, preference_lists_follow_the_definition) {
  const std::vector<std::string> ids = {"alpha", "beta", "gamma", "delta", "eps"};
  const ring_options opts{.slot_count = 256, .virtual_nodes = 16};
  const hash_ring r = make_ring(ids, opts);
  for (uint32_t s = 0; s < opts.slot_count; ++s)
    ASSERT_EQ(ids_of(r, r.preference(s)), reference_preference(ids, 16, s, 256)) << s;
}

TEST(hash_ring, preference_lists_match_an_independent_python_implementation) {
  // Computed with Python (FNV-1a + splitmix64, sort, bisect, walk) for
  // n1..n4 at the default 1024 virtual nodes and 4096 slots.
  const hash_ring r = make_ring({"n4", "n2", "n1", "n3"});
  using v = std::vector<std::string>;
  EXPECT_EQ(ids_of(r, r.preference(0)), (v{"n1", "n2", "n4", "n3"}));
  EXPECT_EQ(ids_of(r, r.preference(1)), (v{"n2", "n4", "n1", "n3"}));
  EXPECT_EQ(ids_of(r, r.preference(1000)), (v{"n2", "n4", "n3", "n1"}));
  EXPECT_EQ(ids_of(r, r.preference(2047)), (v{"n4", "n2", "n1", "n3"}));
  EXPECT_EQ(ids_of(r, r.preference(4095)), (v{"n1", "n2", "n4", "n3"}));
}

TEST(hash_ring, every_list_names_every_member_once) {
  for (int n : {1, 2, 7}) {
    const hash_ring r = make_ring(node_ids(n));
    for (uint32_t s = 0; s < r.slot_count(); ++s) {
      const std::vector<node_index> list = r.preference(s);
      ASSERT_EQ(list.size(), static_cast<std::size_t>(n));
      ASSERT_EQ(std::set<node_index>(list.begin(), list.end()).size(), list.size());
    }
  }
}

TEST(hash_ring, first_live_skips_dead_members_without_reordering) {
  const hash_ring r = make_ring(node_ids(6));
  const std::vector<uint8_t> live = {1, 0, 1, 1, 0, 1}; // n2 and n5 dead
  for (uint32_t s = 0; s < r.slot_count(); ++s) {
    std::vector<node_index> expect;
    for (node_index n : r.preference(s))
      if (live[n] && expect.size() < 3)
        expect.push_back(n);
    std::vector<node_index> got = {99}; // appends, keeps what was there
    r.first_live(s, live, 3, got);
    ASSERT_EQ(got.front(), 99);
    ASSERT_EQ(std::vector<node_index>(got.begin() + 1, got.end()), expect) << s;
  }
}

TEST(hash_ring, the_ring_does_not_depend_on_the_listing_order) {
  std::vector<std::string> ids = node_ids(8);
  const hash_ring a = make_ring(ids);
  std::mt19937 rng(7);
  for (int round = 0; round < 5; ++round) {
    std::shuffle(ids.begin(), ids.end(), rng);
    const hash_ring b = make_ring(ids);
    for (uint32_t s = 0; s < a.slot_count(); ++s)
      ASSERT_EQ(ids_of(a, a.preference(s)), ids_of(b, b.preference(s))) << s;
  }
}

TEST(hash_ring, one_slot_and_one_member_work) {
  const hash_ring r = make_ring({"solo"}, ring_options{.slot_count = 1, .virtual_nodes = 1});
  EXPECT_EQ(ids_of(r, r.preference(0)), (std::vector<std::string>{"solo"}));
}

} // namespace
} // namespace lmcc::cluster
