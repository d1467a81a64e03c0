// placement: owners are the first R live members of each preference list; the
// load is balanced, a join or leave moves about 1/N of the slots and nothing
// else, every node computes the same placement, and liveness only skips.
// Expectations are counted from the outputs or derived from the ring's lists,
// never read back from the code under test.
#include "cluster/placement.hpp"

#if defined(CAF_VERSION)
#error "cluster/placement pulls in CAF"
#endif

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <random>
#include <set>

namespace lmcc::cluster {
namespace {

// "n" + std::to_string(i) trips g++ 12's false -Wrestrict at -O3.
std::string node_id(std::size_t i) {
  std::string id(1, 'n');
  id += std::to_string(i);
  return id;
}

using ids = std::vector<std::string>;

ids node_ids(int n) {
  ids out;
  for (int i = 1; i <= n; ++i)
    out.push_back(node_id(i));
  return out;
}

placement place(ids members, const ids& live, ring_options opts = {}) {
  expected<placement> p = placement::compute(std::move(members), live, opts);
  EXPECT_TRUE(p) << p.error().message;
  return std::move(*p);
}

placement place_all_live(const ids& members, ring_options opts = {}) {
  return place(members, members, opts);
}

std::vector<std::string> as_strings(const std::vector<std::string_view>& v) {
  return {v.begin(), v.end()};
}

// -- balance -------------------------------------------------------------------------------

// Every node's slot count as primary, and as owner with R = 2, within ±10 % of
// the mean for 3..10 nodes at the default virtual-node count.
TEST(placement, slots_per_node_are_within_ten_percent_of_the_mean) {
  double worst_primary = 0, worst_owner = 0;
  for (int n = 3; n <= 10; ++n) {
    const placement p = place_all_live(node_ids(n)); // R = 2 by default
    std::map<std::string, int> primaries, owned;
    for (uint32_t s = 0; s < p.slot_count(); ++s) {
      const std::vector<std::string_view> o = p.owners(s);
      ASSERT_EQ(o.size(), 2u);
      ASSERT_NE(o[0], o[1]);
      ++primaries[std::string(o[0])];
      for (std::string_view id : o)
        ++owned[std::string(id)];
    }
    const double mean = 4096.0 / n;
    ASSERT_EQ(primaries.size(), static_cast<std::size_t>(n));
    for (const auto& [id, count] : primaries) {
      const double dev = count / mean - 1;
      worst_primary = std::max(worst_primary, std::fabs(dev));
      EXPECT_LE(std::fabs(dev), 0.10) << "N=" << n << " " << id << " primary of " << count;
      EXPECT_EQ(p.slots_of(id).primary.size(), static_cast<std::size_t>(count));
    }
    for (const auto& [id, count] : owned) {
      const double dev = count / (2 * mean) - 1;
      worst_owner = std::max(worst_owner, std::fabs(dev));
      EXPECT_LE(std::fabs(dev), 0.10) << "N=" << n << " " << id << " owns " << count;
      const slot_roles r = p.slots_of(id);
      EXPECT_EQ(r.primary.size() + r.replica.size(), static_cast<std::size_t>(count));
    }
  }
  std::printf("balance: worst deviation from the mean, N=3..10: primary %.1f %%, "
              "owner (R=2) %.1f %%\n",
              100 * worst_primary, 100 * worst_owner);
}

// -- movement ------------------------------------------------------------------------------

// A slot changes primary on a join iff the newcomer is first on its list, so
// the moved fraction is the newcomer's share: by the balance bound within
// ±10 % of 1/(N+1), hence asserted in [0.9/(N+1), 1.1/(N+1)] — tighter than
// "about 1/N". And every moved slot moves to the newcomer: nothing moves
// between the nodes that were already there.
TEST(placement, a_join_moves_about_one_nth_of_the_slots_all_to_the_newcomer) {
  double lo = 1, hi = 0;
  for (int n = 3; n <= 9; ++n) {
    const placement before = place_all_live(node_ids(n));
    const placement after = place_all_live(node_ids(n + 1));
    const std::string newcomer = node_id(n + 1);
    int moved = 0, owner_lists_with_newcomer = 0;
    for (uint32_t s = 0; s < before.slot_count(); ++s) {
      if (*before.primary(s) != *after.primary(s)) {
        ++moved;
        EXPECT_EQ(*after.primary(s), newcomer) << "slot " << s << " moved between old nodes";
      }
      const std::vector<std::string_view> o = after.owners(s);
      owner_lists_with_newcomer += std::find(o.begin(), o.end(), newcomer) != o.end();
    }
    const double fraction = moved / 4096.0;
    const double ideal = 1.0 / (n + 1);
    lo = std::min(lo, fraction / ideal);
    hi = std::max(hi, fraction / ideal);
    EXPECT_GE(fraction, 0.9 * ideal) << "N=" << n << "->" << n + 1;
    EXPECT_LE(fraction, 1.1 * ideal) << "N=" << n << "->" << n + 1;

    // With R = 2 an owner list changes iff the newcomer entered it (it pushes
    // the second owner out, or the first down); no other list changes.
    expected<std::vector<uint32_t>> changed = changed_slots(before, after);
    ASSERT_TRUE(changed);
    EXPECT_EQ(changed->size(), static_cast<std::size_t>(owner_lists_with_newcomer));
    for (uint32_t s : *changed) {
      const std::vector<std::string_view> o = after.owners(s);
      EXPECT_NE(std::find(o.begin(), o.end(), newcomer), o.end()) << s;
    }
  }
  std::printf("join: moved fraction / (1/N) in [%.3f, %.3f]\n", lo, hi);
}

// The mirror image: a leave moves exactly the leaver's primaries, a fraction
// within ±10 % of 1/N; each goes to the next node on the slot's list.
TEST(placement, a_leave_moves_about_one_nth_of_the_slots_all_from_the_leaver) {
  double lo = 1, hi = 0;
  for (int n = 4; n <= 10; ++n) {
    const ids all = node_ids(n);
    const placement before = place_all_live(all);
    for (const std::string& leaver : all) {
      ids rest;
      std::copy_if(all.begin(), all.end(), std::back_inserter(rest),
                   [&](const std::string& id) { return id != leaver; });
      const placement after = place_all_live(rest);
      int moved = 0;
      for (uint32_t s = 0; s < before.slot_count(); ++s) {
        if (*before.primary(s) == *after.primary(s))
          continue;
        ++moved;
        EXPECT_EQ(*before.primary(s), leaver) << "slot " << s << " moved between staying nodes";
        EXPECT_EQ(*after.primary(s), before.owners(s)[1]) << s; // the next on its list
      }
      const double fraction = moved / 4096.0;
      lo = std::min(lo, fraction * n);
      hi = std::max(hi, fraction * n);
      EXPECT_GE(fraction, 0.9 / n) << "N=" << n << " without " << leaver;
      EXPECT_LE(fraction, 1.1 / n) << "N=" << n << " without " << leaver;
    }
  }
  std::printf("leave: moved fraction / (1/N) in [%.3f, %.3f]\n", lo, hi);
}

// -- agreement -----------------------------------------------------------------------------

TEST(placement, every_node_computes_the_same_placement_from_shuffled_member_lists) {
  const ids members = {"n1", "n2", "n3", "n4", "n5", "n6", "n7"};
  const ids live = {"n1", "n3", "n4", "n6", "n7"};
  const placement reference = place(members, live);
  std::mt19937 rng(12345);
  for (int node = 0; node < 7; ++node) { // each "node" lists members its own way
    ids m = members, l = live;
    std::shuffle(m.begin(), m.end(), rng);
    std::shuffle(l.begin(), l.end(), rng);
    l.push_back(l.front()); // a repeated report of the same live node changes nothing
    const placement p = place(m, l);
    EXPECT_EQ(p.fingerprint(), reference.fingerprint());
    for (uint32_t s = 0; s < p.slot_count(); ++s)
      ASSERT_EQ(p.owners(s), reference.owners(s)) << "slot " << s;
    expected<std::vector<uint32_t>> changed = changed_slots(reference, p);
    ASSERT_TRUE(changed);
    EXPECT_TRUE(changed->empty());
  }
}

TEST(placement, the_fingerprint_changes_with_members_liveness_and_options) {
  const ids m = node_ids(4);
  std::set<uint64_t> seen = {
      place_all_live(m).fingerprint(),
      place(m, {"n1", "n2", "n3"}).fingerprint(),
      place(m, {"n1", "n2", "n4"}).fingerprint(),
      place_all_live(node_ids(5)).fingerprint(),
      place_all_live({"n1", "n2", "n3", "n5"}).fingerprint(),
      place_all_live(m, {.slot_count = 8192}).fingerprint(),
      place_all_live(m, {.virtual_nodes = 512}).fingerprint(),
      place_all_live(m, {.replicas = 3}).fingerprint(),
  };
  EXPECT_EQ(seen.size(), 8u);
  // Pinned: the value a separate Python implementation computes for
  // ("lmcc-placement-1", 4096, 1024, 2, 3 members, n1 live, n2 dead, n3 live).
  EXPECT_EQ(place({"n3", "n2", "n1"}, {"n3", "n1"}).fingerprint(), 1554903504537589838ULL);
}

// -- liveness ------------------------------------------------------------------------------

TEST(placement, a_dead_node_is_skipped_and_gets_the_same_slots_back) {
  const ids members = node_ids(5);
  const placement healthy = place_all_live(members);
  expected<placement> degraded =
      placement::compute(healthy.shared_ring(), {"n1", "n2", "n4", "n5"});
  ASSERT_TRUE(degraded);
  EXPECT_EQ(&degraded->ring(), &healthy.ring()); // liveness reuses the ring

  std::set<uint32_t> had_n3;
  for (uint32_t s = 0; s < healthy.slot_count(); ++s) {
    // Expected owners: the full preference list without n3, first two.
    ids expect;
    for (node_index n : healthy.ring().preference(s))
      if (healthy.members().id(n) != "n3" && expect.size() < 2)
        expect.push_back(healthy.members().id(n));
    ASSERT_EQ(as_strings(degraded->owners(s)), expect) << s;
    const std::vector<std::string_view> o = healthy.owners(s);
    if (std::find(o.begin(), o.end(), "n3") != o.end())
      had_n3.insert(s);
  }
  EXPECT_TRUE(degraded->slots_of("n3").primary.empty());
  EXPECT_FALSE(degraded->is_live("n3"));

  // Only the lists n3 was on changed.
  expected<std::vector<uint32_t>> changed = changed_slots(healthy, *degraded);
  ASSERT_TRUE(changed);
  EXPECT_EQ(std::set<uint32_t>(changed->begin(), changed->end()), had_n3);

  // n3 comes back: exactly the original placement, same slots as before.
  expected<placement> back = placement::compute(degraded->shared_ring(), members);
  ASSERT_TRUE(back);
  EXPECT_EQ(back->fingerprint(), healthy.fingerprint());
  for (uint32_t s = 0; s < healthy.slot_count(); ++s)
    ASSERT_EQ(back->owners(s), healthy.owners(s)) << s;
  EXPECT_EQ(back->slots_of("n3").primary, healthy.slots_of("n3").primary);
  EXPECT_EQ(back->slots_of("n3").replica, healthy.slots_of("n3").replica);
  expected<std::vector<uint32_t>> returned = changed_slots(degraded.value(), back.value());
  ASSERT_TRUE(returned);
  EXPECT_EQ(*returned, *changed);
}

TEST(placement, no_live_node_means_no_owner) {
  const placement p = place(node_ids(3), {});
  EXPECT_EQ(p.owners_per_slot(), 0u);
  EXPECT_TRUE(p.owners(0).empty());
  EXPECT_EQ(p.primary(0), std::nullopt);
  EXPECT_TRUE(p.live_members().empty());
}

// -- replica counts --------------------------------------------------------------------------

TEST(placement, r1_keeps_only_a_primary) {
  const placement p = place_all_live(node_ids(4), {.replicas = 1});
  std::size_t primaries = 0;
  for (const std::string& id : node_ids(4)) {
    const slot_roles r = p.slots_of(id);
    EXPECT_TRUE(r.replica.empty()) << id;
    primaries += r.primary.size();
  }
  EXPECT_EQ(primaries, 4096u); // every slot exactly once
  for (uint32_t s = 0; s < p.slot_count(); ++s)
    ASSERT_EQ(p.owners(s).size(), 1u);
}

TEST(placement, r3_gives_three_distinct_owners_in_list_order) {
  const placement p = place_all_live(node_ids(6), {.replicas = 3});
  std::size_t replica_entries = 0;
  for (uint32_t s = 0; s < p.slot_count(); ++s) {
    ids expect;
    for (node_index n : p.ring().preference(s))
      if (expect.size() < 3)
        expect.push_back(p.members().id(n));
    ASSERT_EQ(as_strings(p.owners(s)), expect) << s;
  }
  for (const std::string& id : node_ids(6))
    replica_entries += p.slots_of(id).replica.size();
  EXPECT_EQ(replica_entries, 2u * 4096u);
}

TEST(placement, r_above_the_live_count_gives_every_live_node) {
  // R = 7 > N = 4: every member owns every slot, in list order.
  const placement p = place_all_live(node_ids(4), {.replicas = 7});
  EXPECT_EQ(p.owners_per_slot(), 4u);
  for (uint32_t s = 0; s < p.slot_count(); ++s) {
    const std::vector<std::string_view> o = p.owners(s);
    ASSERT_EQ(std::set<std::string_view>(o.begin(), o.end()).size(), 4u);
    ASSERT_EQ(as_strings(o)[0], p.members().id(p.ring().preference(s)[0]));
  }
  // R = 3 with two of five live: both live nodes, nothing else.
  const placement q = place(node_ids(5), {"n2", "n5"}, {.replicas = 3});
  EXPECT_EQ(q.owners_per_slot(), 2u);
  for (uint32_t s = 0; s < q.slot_count(); ++s) {
    const std::vector<std::string_view> o = q.owners(s);
    ASSERT_EQ(std::set<std::string_view>(o.begin(), o.end()),
              (std::set<std::string_view>{"n2", "n5"}));
  }
}

// -- errors ------------------------------------------------------------------------------

TEST(placement, bad_input_is_refused_with_a_code) {
  auto code_of = [](ids members, const ids& live, ring_options o) {
    expected<placement> p = placement::compute(std::move(members), live, o);
    EXPECT_FALSE(p);
    return p ? errc{} : p.error().code;
  };
  EXPECT_EQ(code_of({}, {}, {}), errc::empty_member_set);
  EXPECT_EQ(code_of({"n1", "n2", "n2"}, {"n1"}, {}), errc::duplicate_node_id);
  EXPECT_EQ(code_of({"n1", ""}, {"n1"}, {}), errc::empty_node_id);
  EXPECT_EQ(code_of({"n1"}, {"n1"}, {.slot_count = 1000}), errc::bad_slot_count);
  EXPECT_EQ(code_of({"n1"}, {"n1"}, {.slot_count = 0}), errc::bad_slot_count);
  EXPECT_EQ(code_of({"n1"}, {"n1"}, {.replicas = 0}), errc::zero_replicas);
  EXPECT_EQ(code_of({"n1"}, {"n1"}, {.virtual_nodes = 0}), errc::bad_virtual_nodes);
  EXPECT_EQ(code_of({"n1", "n2"}, {"n1", "n9"}, {}), errc::unknown_node);

  expected<std::vector<uint32_t>> diff =
      changed_slots(place_all_live(node_ids(3)), place_all_live(node_ids(3), {.slot_count = 2048}));
  ASSERT_FALSE(diff);
  EXPECT_EQ(diff.error().code, errc::slot_count_mismatch);
}

TEST(placement, slots_of_a_stranger_or_a_dead_node_is_empty) {
  const placement p = place(node_ids(3), {"n1", "n2"});
  EXPECT_TRUE(p.slots_of("n9").primary.empty());
  EXPECT_TRUE(p.slots_of("n3").replica.empty());
  EXPECT_FALSE(p.is_live("n9"));
  EXPECT_EQ(p.live_members(), (std::vector<std::string_view>{"n1", "n2"}));
}

} // namespace
} // namespace lmcc::cluster
