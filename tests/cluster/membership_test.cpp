// membership: the heartbeat failure detector (live from the first greeting,
// down after failure_timeout of silence or at once on a lost connection, self
// always live) and static ownership (the placement over every configured
// member, whatever is live). Time is passed in; nothing sleeps. Owners are
// checked against the ring's preference lists and ring versions against a
// placement computed here, never read back from the code under test.
#include "cluster/membership.hpp"

#if defined(CAF_VERSION)
#error "cluster/membership pulls in CAF"
#endif

#include "cluster/hash.hpp"

#include <gtest/gtest.h>

#include <bit>
#include <set>

namespace lmcc::cluster {
namespace {

using namespace std::chrono_literals;
using time_point = membership::time_point;

// Slots kept small so that every slot can be walked cheaply.
constexpr uint32_t ring_slots = 256;

// A point well away from the clock's epoch (last_seen starts there).
const time_point t0 = time_point{} + 1h;

// The members listed out of id order: node indices follow the sorted ids.
cluster_options options(uint32_t replicas = 2) {
  cluster_options opts;
  opts.members = {{"n3", "10.0.0.3", 7003}, {"n1", "10.0.0.1", 7001}, {"n2", "10.0.0.2", 7002}};
  opts.replicas = replicas;
  opts.failure_timeout = 2000ms;
  return opts;
}

membership make_membership(const cluster_options& opts, const std::string& self) {
  expected<membership> m = membership::make(opts, self, ring_slots);
  EXPECT_TRUE(m) << m.error().message;
  return std::move(*m);
}

node_index node_of(const membership& m, std::string_view id) {
  auto i = m.index_of(id);
  EXPECT_TRUE(i) << id;
  return i.value_or(0);
}

// The slot's static owners: the first R entries of its preference list.
std::vector<node_index> expected_owners(const membership& m, uint32_t slot, uint32_t replicas) {
  std::vector<node_index> list = m.owners().ring().preference(slot);
  list.resize(std::min<std::size_t>(replicas, list.size()));
  return list;
}

// A slot whose owners do not include `who`.
uint32_t slot_not_held_by(const membership& m, node_index who) {
  for (uint32_t s = 0; s < ring_slots; ++s)
    if (!((m.owner_mask(s) >> who) & 1U))
      return s;
  ADD_FAILURE() << "every slot is held by " << who;
  return 0;
}

uint64_t fingerprint_of(const std::vector<std::string>& live, uint32_t replicas = 2) {
  ring_options ro;
  ro.slot_count = ring_slots;
  ro.replicas = replicas;
  expected<placement> p = placement::compute({"n1", "n2", "n3"}, live, ro);
  EXPECT_TRUE(p) << p.error().message;
  return p->fingerprint();
}

// -- construction --------------------------------------------------------------------------

TEST(membership, a_fresh_membership_has_only_itself_live) {
  const membership m = make_membership(options(), "n2");
  ASSERT_EQ(m.size(), 3u);
  EXPECT_EQ(m.address(m.self()).id, "n2");
  EXPECT_EQ(m.live_count(), 1u);
  EXPECT_FALSE(m.all_live());
  for (node_index i = 0; i < m.size(); ++i)
    EXPECT_EQ(m.live(i), i == m.self()) << i;
}

TEST(membership, a_single_member_cluster_is_all_live) {
  cluster_options opts;
  opts.members = {{"solo", "localhost", 7000}};
  opts.replicas = 1;
  const membership m = make_membership(opts, "solo");
  EXPECT_EQ(m.live_count(), 1u);
  EXPECT_TRUE(m.all_live());
}

TEST(membership, addresses_are_in_sorted_id_order_whatever_the_config_order) {
  const membership m = make_membership(options(), "n1");
  ASSERT_EQ(m.size(), 3u);
  EXPECT_EQ(m.address(0), (member_address{"n1", "10.0.0.1", 7001}));
  EXPECT_EQ(m.address(1), (member_address{"n2", "10.0.0.2", 7002}));
  EXPECT_EQ(m.address(2), (member_address{"n3", "10.0.0.3", 7003}));
  EXPECT_EQ(m.index_of("n3"), node_index{2});
  EXPECT_FALSE(m.index_of("n4"));
}

TEST(membership, make_refuses_a_self_id_that_is_not_a_member) {
  expected<membership> m = membership::make(options(), "n4", ring_slots);
  ASSERT_FALSE(m);
  EXPECT_EQ(m.error().code, errc::unknown_node);
  EXPECT_NE(m.error().message.find("n4"), std::string::npos) << m.error().message;
}

TEST(membership, make_refuses_what_the_placement_refuses) {
  cluster_options none = options();
  none.members.clear();
  expected<membership> empty = membership::make(none, "n1", ring_slots);
  ASSERT_FALSE(empty);
  EXPECT_EQ(empty.error().code, errc::empty_member_set);

  expected<membership> zero_r = membership::make(options(0), "n1", ring_slots);
  ASSERT_FALSE(zero_r);
  EXPECT_EQ(zero_r.error().code, errc::zero_replicas);

  expected<membership> odd_slots = membership::make(options(), "n1", 100);
  ASSERT_FALSE(odd_slots);
  EXPECT_EQ(odd_slots.error().code, errc::bad_slot_count);
}

// -- failure detector ----------------------------------------------------------------------

TEST(membership, a_greeting_makes_a_peer_live_once) {
  membership m = make_membership(options(), "n1");
  EXPECT_TRUE(m.on_greeting("n2", t0));
  EXPECT_TRUE(m.live(node_of(m, "n2")));
  EXPECT_EQ(m.live_count(), 2u);
  EXPECT_FALSE(m.all_live());

  EXPECT_FALSE(m.on_greeting("n2", t0 + 100ms)); // already live
  EXPECT_EQ(m.live_count(), 2u);

  EXPECT_TRUE(m.on_greeting("n3", t0 + 200ms));
  EXPECT_EQ(m.live_count(), 3u);
  EXPECT_TRUE(m.all_live());
}

TEST(membership, unknown_ids_and_self_are_ignored) {
  membership m = make_membership(options(), "n1");
  const uint64_t version = m.ring_version();
  EXPECT_FALSE(m.on_greeting("n4", t0));
  EXPECT_FALSE(m.on_greeting("", t0));
  EXPECT_FALSE(m.on_greeting("n1", t0));
  EXPECT_EQ(m.live_count(), 1u);
  EXPECT_EQ(m.ring_version(), version);

  EXPECT_FALSE(m.on_lost("n4"));
  EXPECT_FALSE(m.on_lost("n1")); // self never goes down
  EXPECT_TRUE(m.live(m.self()));
  EXPECT_FALSE(m.on_lost("n2")); // not live: nothing to take down
  EXPECT_EQ(m.live_count(), 1u);
  EXPECT_EQ(m.ring_version(), version);
}

TEST(membership, tick_takes_a_peer_down_only_after_the_timeout) {
  membership m = make_membership(options(), "n1");
  ASSERT_TRUE(m.on_greeting("n2", t0));
  const node_index n2 = node_of(m, "n2");

  EXPECT_FALSE(m.tick(t0 + 1999ms));
  EXPECT_FALSE(m.tick(t0 + 2000ms)); // silent exactly the timeout: still live
  EXPECT_TRUE(m.live(n2));

  EXPECT_TRUE(m.tick(t0 + 2001ms));
  EXPECT_FALSE(m.live(n2));
  EXPECT_EQ(m.live_count(), 1u);
  EXPECT_FALSE(m.tick(t0 + 5000ms)); // already down: no change to report
}

TEST(membership, the_next_silence_deadline_is_the_first_live_peers_last_greeting_plus_the_timeout) {
  membership m = make_membership(options(), "n1");
  // Not greeted yet and not presumed live: nobody to wait for.
  EXPECT_EQ(m.next_silence_deadline(), std::nullopt);
  ASSERT_TRUE(m.on_greeting("n2", t0));
  ASSERT_TRUE(m.on_greeting("n3", t0 + 700ms));
  EXPECT_EQ(m.next_silence_deadline(), t0 + 2000ms);
  EXPECT_FALSE(m.on_greeting("n2", t0 + 1000ms));
  EXPECT_EQ(m.next_silence_deadline(), t0 + 2700ms) << "n3's is now the first";
  // A tick just past it takes n3 down, and the deadline moves to n2's.
  EXPECT_TRUE(m.tick(t0 + 2701ms));
  EXPECT_EQ(m.next_silence_deadline(), t0 + 3000ms);
  EXPECT_TRUE(m.on_lost("n2"));
  EXPECT_EQ(m.next_silence_deadline(), std::nullopt) << "no live peer left";
}

TEST(membership, a_node_that_stood_still_gives_its_peers_a_fresh_timeout) {
  membership m = make_membership(options(), "n1");
  ASSERT_TRUE(m.on_greeting("n2", t0));
  ASSERT_TRUE(m.on_greeting("n3", t0));
  EXPECT_FALSE(m.tick(t0 + 250ms));
  EXPECT_EQ(m.stalls(), 0u);
  // Frozen for 10 s: the first tick after it takes no one down ...
  EXPECT_FALSE(m.tick(t0 + 10'250ms));
  EXPECT_EQ(m.stalls(), 1u); // ... and says it stood still, and how long
  EXPECT_EQ(m.last_stall(), 10'000ms);
  EXPECT_TRUE(m.live(node_of(m, "n2")));
  EXPECT_FALSE(m.on_greeting("n2", t0 + 10'300ms)); // its queued greetings arrive
  EXPECT_FALSE(m.tick(t0 + 12'000ms));
  EXPECT_EQ(m.stalls(), 1u); // 1.75 s between ticks is within the timeout
  // ... but a peer still silent a full timeout later is down.
  EXPECT_TRUE(m.tick(t0 + 12'251ms));
  EXPECT_TRUE(m.live(node_of(m, "n2")));
  EXPECT_FALSE(m.live(node_of(m, "n3")));
}

TEST(membership, greetings_keep_a_peer_live) {
  membership m = make_membership(options(), "n1");
  ASSERT_TRUE(m.on_greeting("n2", t0));
  EXPECT_FALSE(m.on_greeting("n2", t0 + 1500ms)); // refreshes last seen
  EXPECT_FALSE(m.tick(t0 + 3000ms));              // 1500 ms since the last one
  EXPECT_TRUE(m.live(node_of(m, "n2")));
  EXPECT_TRUE(m.tick(t0 + 3501ms));
  EXPECT_FALSE(m.live(node_of(m, "n2")));
}

TEST(membership, tick_takes_down_only_the_silent_peers) {
  membership m = make_membership(options(), "n1");
  ASSERT_TRUE(m.on_greeting("n2", t0));
  ASSERT_TRUE(m.on_greeting("n3", t0 + 1000ms));
  EXPECT_TRUE(m.tick(t0 + 2500ms));
  EXPECT_FALSE(m.live(node_of(m, "n2")));
  EXPECT_TRUE(m.live(node_of(m, "n3")));
  EXPECT_TRUE(m.live(m.self()));
}

TEST(membership, tick_never_takes_self_down) {
  membership m = make_membership(options(), "n1");
  EXPECT_FALSE(m.tick(t0 + 24h));
  EXPECT_TRUE(m.live(m.self()));
  EXPECT_EQ(m.live_count(), 1u);
}

TEST(membership, a_lost_connection_takes_a_peer_down_at_once) {
  membership m = make_membership(options(), "n1");
  ASSERT_TRUE(m.on_greeting("n2", t0));
  EXPECT_TRUE(m.on_lost("n2"));
  EXPECT_FALSE(m.live(node_of(m, "n2")));
  EXPECT_EQ(m.live_count(), 1u);
  EXPECT_FALSE(m.on_lost("n2"));
}

TEST(membership, a_peer_taken_down_comes_back_with_its_next_greeting) {
  membership m = make_membership(options(), "n1");
  ASSERT_TRUE(m.on_greeting("n2", t0));
  ASSERT_TRUE(m.tick(t0 + 3s));
  EXPECT_TRUE(m.on_greeting("n2", t0 + 4s));
  EXPECT_TRUE(m.live(node_of(m, "n2")));
  EXPECT_FALSE(m.tick(t0 + 5s)); // timed from the new greeting
  EXPECT_TRUE(m.tick(t0 + 6001ms));
}

// -- ring version --------------------------------------------------------------------------

TEST(membership, ring_version_is_the_fingerprint_of_the_live_set) {
  membership m = make_membership(options(), "n1");
  EXPECT_EQ(m.ring_version(), fingerprint_of({"n1"}));
  m.on_greeting("n3", t0);
  EXPECT_EQ(m.ring_version(), fingerprint_of({"n1", "n3"}));
  m.on_greeting("n2", t0);
  EXPECT_EQ(m.ring_version(), fingerprint_of({"n1", "n2", "n3"}));
  m.on_lost("n3");
  EXPECT_EQ(m.ring_version(), fingerprint_of({"n1", "n2"}));
  m.tick(t0 + 3s);
  EXPECT_EQ(m.ring_version(), fingerprint_of({"n1"}));
}

TEST(membership, ring_version_changes_with_the_live_set_and_returns_with_it) {
  membership m = make_membership(options(), "n1");
  const uint64_t alone = m.ring_version();
  m.on_greeting("n2", t0);
  const uint64_t with_n2 = m.ring_version();
  EXPECT_NE(with_n2, alone);
  m.on_greeting("n2", t0 + 1s); // no change in the live set
  EXPECT_EQ(m.ring_version(), with_n2);
  m.on_greeting("n3", t0 + 1s);
  const uint64_t all = m.ring_version();
  EXPECT_NE(all, with_n2);
  EXPECT_NE(all, alone);
  m.on_lost("n3");
  EXPECT_EQ(m.ring_version(), with_n2);
  m.on_lost("n2");
  EXPECT_EQ(m.ring_version(), alone);
}

TEST(membership, nodes_that_see_the_same_live_set_agree_on_the_ring_version) {
  membership a = make_membership(options(), "n1");
  membership b = make_membership(options(), "n2");
  membership c = make_membership(options(), "n3");
  EXPECT_NE(a.ring_version(), b.ring_version()); // each sees only itself
  a.on_greeting("n2", t0);
  b.on_greeting("n1", t0);
  EXPECT_EQ(a.ring_version(), b.ring_version());
  c.on_greeting("n1", t0);
  EXPECT_NE(c.ring_version(), a.ring_version()); // {n1, n3} vs {n1, n2}
  a.on_greeting("n3", t0);
  b.on_greeting("n3", t0);
  c.on_greeting("n2", t0);
  EXPECT_EQ(a.ring_version(), b.ring_version());
  EXPECT_EQ(a.ring_version(), c.ring_version());
}

TEST(membership, ring_version_depends_on_the_options) {
  membership r2 = make_membership(options(2), "n1");
  membership r3 = make_membership(options(3), "n1");
  EXPECT_NE(r2.ring_version(), r3.ring_version());
}

// -- ownership -----------------------------------------------------------------------------

TEST(membership, every_slot_has_exactly_r_owners_its_preference_lists_first) {
  for (uint32_t replicas : {1u, 2u, 3u}) {
    const membership m = make_membership(options(replicas), "n1");
    const std::vector<uint64_t> masks = m.owner_masks();
    ASSERT_EQ(masks.size(), ring_slots);
    for (uint32_t s = 0; s < ring_slots; ++s) {
      const uint64_t mask = m.owner_mask(s);
      EXPECT_EQ(masks[s], mask) << s;
      EXPECT_EQ(std::popcount(mask), static_cast<int>(replicas)) << "R=" << replicas << " " << s;
      uint64_t want = 0;
      for (node_index n : expected_owners(m, s, replicas))
        want |= uint64_t{1} << n;
      EXPECT_EQ(mask, want) << "R=" << replicas << " slot " << s;
      EXPECT_TRUE((mask >> m.owners().ring().preference(s).front()) & 1U) << "primary of " << s;
    }
  }
}

TEST(membership, ownership_is_static_whatever_is_live) {
  membership m = make_membership(options(), "n1");
  const std::vector<uint64_t> before = m.owner_masks();
  m.on_greeting("n2", t0);
  EXPECT_EQ(m.owner_masks(), before);
  m.on_greeting("n3", t0);
  m.on_lost("n2");
  EXPECT_EQ(m.owner_masks(), before);
}

TEST(membership, every_node_computes_the_same_owners) {
  const membership a = make_membership(options(), "n1");
  const membership b = make_membership(options(), "n2");
  const membership c = make_membership(options(), "n3");
  EXPECT_EQ(a.owner_masks(), b.owner_masks());
  EXPECT_EQ(a.owner_masks(), c.owner_masks());
}

TEST(membership, holds_agrees_with_owner_mask) {
  for (const char* self : {"n1", "n2", "n3"}) {
    const membership m = make_membership(options(), self);
    uint32_t held = 0;
    for (uint32_t s = 0; s < ring_slots; ++s) {
      const bool in_mask = (m.owner_mask(s) >> m.self()) & 1U;
      EXPECT_EQ(m.holds(s), in_mask) << self << " slot " << s;
      held += m.holds(s) ? 1 : 0;
    }
    // R = 2 of 3: a node holds some slots and not others.
    EXPECT_GT(held, 0u) << self;
    EXPECT_LT(held, ring_slots) << self;
  }
}

TEST(membership, read_owner_is_self_when_self_holds_the_slot) {
  membership m = make_membership(options(), "n2");
  uint32_t checked = 0;
  for (uint32_t s = 0; s < ring_slots; ++s)
    if (m.holds(s)) {
      EXPECT_EQ(m.read_owner(s), m.self()) << s; // even as a replica, all alone
      ++checked;
    }
  m.on_greeting("n1", t0);
  m.on_greeting("n3", t0);
  for (uint32_t s = 0; s < ring_slots; ++s) {
    if (m.holds(s)) {
      EXPECT_EQ(m.read_owner(s), m.self()) << s;
    }
  }
  EXPECT_GT(checked, 0u);
}

TEST(membership, read_owner_is_self_even_when_self_is_only_a_replica) {
  const membership m = make_membership(options(), "n2");
  bool found = false;
  for (uint32_t s = 0; s < ring_slots && !found; ++s) {
    const std::vector<node_index> owners = expected_owners(m, s, 2);
    if (owners[1] == m.self()) {
      found = true;
      EXPECT_EQ(m.read_owner(s), m.self()) << s;
    }
  }
  EXPECT_TRUE(found);
}

TEST(membership, read_owner_of_a_slot_held_elsewhere_is_the_first_live_owner) {
  membership m = make_membership(options(), "n1");
  const uint32_t s = slot_not_held_by(m, m.self());
  const std::vector<node_index> owners = expected_owners(m, s, 2);
  ASSERT_EQ(owners.size(), 2u);
  const std::string& primary = m.address(owners[0]).id;
  const std::string& replica = m.address(owners[1]).id;

  // No owner live: the primary.
  EXPECT_EQ(m.read_owner(s), owners[0]);
  // Both live: the primary.
  m.on_greeting(primary, t0);
  m.on_greeting(replica, t0);
  EXPECT_EQ(m.read_owner(s), owners[0]);
  // The primary down: the replica.
  ASSERT_TRUE(m.on_lost(primary));
  EXPECT_EQ(m.read_owner(s), owners[1]);
  // Both down: the primary again.
  ASSERT_TRUE(m.on_lost(replica));
  EXPECT_EQ(m.read_owner(s), owners[0]);
  // Only the primary back.
  m.on_greeting(primary, t0 + 1s);
  EXPECT_EQ(m.read_owner(s), owners[0]);
  // The primary timed out, the replica greeting on: the replica.
  m.on_greeting(replica, t0 + 2s);
  ASSERT_TRUE(m.tick(t0 + 3500ms));
  EXPECT_FALSE(m.live(owners[0]));
  EXPECT_EQ(m.read_owner(s), owners[1]);
}

TEST(membership, read_owner_walks_every_slot_in_preference_order) {
  // R = 2 of 3, self n1 with n3 down and n2 live: slots n1 does not hold are
  // read from n2 whichever of n2 and n3 is primary.
  membership m = make_membership(options(), "n1");
  m.on_greeting("n2", t0);
  const node_index n2 = node_of(m, "n2");
  uint32_t elsewhere = 0;
  for (uint32_t s = 0; s < ring_slots; ++s) {
    if (m.holds(s))
      continue;
    ++elsewhere;
    EXPECT_EQ(m.read_owner(s), n2) << s;
  }
  EXPECT_GT(elsewhere, 0u);
}

TEST(membership, home_of_is_the_primary_of_the_uids_slot_on_every_node_that_sees_all_live) {
  membership a = make_membership(options(), "n1");
  membership b = make_membership(options(), "n2");
  membership c = make_membership(options(), "n3");
  for (membership* m : {&a, &b, &c})
    m->presume_live(t0);
  std::set<node_index> homes;
  for (uint64_t uid = 0; uid < 1000; ++uid) {
    const uint64_t key = uid * 0x9e3779b97f4a7c15ULL + 12345;
    const uint32_t s = slot_of(key, ring_slots);
    const node_index home = a.home_of(key);
    EXPECT_TRUE((a.owner_mask(s) >> home) & 1U) << key;
    EXPECT_EQ(home, a.owners().ring().preference(s).front()) << key;
    EXPECT_EQ(b.home_of(key), home) << key;
    EXPECT_EQ(c.home_of(key), home) << key;
    homes.insert(home);
  }
  EXPECT_EQ(homes.size(), 3u); // every node is home to some worker
}

TEST(membership, a_dead_homes_workers_go_to_the_next_owner_of_their_slot_and_come_back) {
  membership m = make_membership(options(), "n1");
  m.presume_live(t0);
  const node_index n2 = node_of(m, "n2");
  std::vector<node_index> before;
  for (uint64_t uid = 0; uid < 2000; ++uid)
    before.push_back(m.home_of(uid));
  m.on_lost("n2");
  uint32_t moved = 0;
  for (uint64_t uid = 0; uid < 2000; ++uid) {
    const auto pref = m.owners().ring().preference(slot_of(uid, ring_slots));
    if (before[uid] != n2) {
      EXPECT_EQ(m.home_of(uid), before[uid]) << uid; // only the dead node's workers move
      continue;
    }
    ++moved;
    // The next member of the slot's preference list: its replica, which
    // holds the worker's watermarks.
    ASSERT_GE(pref.size(), 2u);
    EXPECT_EQ(m.home_of(uid), pref[1]) << uid;
    EXPECT_TRUE((m.owner_mask(slot_of(uid, ring_slots)) >> m.home_of(uid)) & 1U) << uid;
  }
  EXPECT_GT(moved, 0u);
  m.on_greeting("n2", t0);
  for (uint64_t uid = 0; uid < 2000; ++uid)
    EXPECT_EQ(m.home_of(uid), before[uid]) << uid;
}

TEST(membership, forwarding_towards_the_home_never_loops_whatever_each_node_sees) {
  // Each node forwards to the home it sees; every view has the node itself
  // live. Following the hops from any node must end at a node that sees
  // itself as the home, within the member count.
  const std::vector<std::string> ids{"n1", "n2", "n3"};
  for (int pattern = 0; pattern < 64; ++pattern) {
    std::vector<membership> nodes;
    for (size_t i = 0; i < ids.size(); ++i) {
      nodes.push_back(make_membership(options(), ids[i]));
      nodes.back().presume_live(t0);
      for (size_t j = 0, bit = i * 2; j < ids.size(); ++j)
        if (j != i && ((pattern >> bit++) & 1))
          nodes.back().on_lost(ids[j]);
    }
    for (uint64_t uid = 0; uid < 300; ++uid)
      for (size_t start = 0; start < nodes.size(); ++start) {
        node_index at = nodes[start].self();
        int hops = 0;
        while (nodes[at].home_of(uid) != at && hops <= 3) {
          at = nodes[at].home_of(uid);
          ++hops;
        }
        EXPECT_LE(hops, 2) << "pattern " << pattern << " uid " << uid;
      }
  }
}

TEST(membership, a_presumed_peer_is_down_after_the_timeout_unless_it_greets) {
  membership m = make_membership(options(), "n1");
  m.presume_live(t0);
  EXPECT_TRUE(m.all_live());
  EXPECT_FALSE(m.tick(t0 + 2000ms));
  m.on_greeting("n2", t0 + 1500ms);
  EXPECT_TRUE(m.tick(t0 + 2001ms));
  EXPECT_TRUE(m.live(node_of(m, "n2")));
  EXPECT_FALSE(m.live(node_of(m, "n3")));
}

// -- view ----------------------------------------------------------------------------------

TEST(membership, view_reports_every_member_its_liveness_and_its_slots) {
  for (uint32_t replicas : {1u, 2u, 3u}) {
    membership m = make_membership(options(replicas), "n2");
    m.on_greeting("n3", t0);
    const std::vector<membership::member_view> v = m.view();
    ASSERT_EQ(v.size(), 3u);
    uint32_t primaries = 0, replica_slots = 0;
    for (node_index i = 0; i < v.size(); ++i) {
      EXPECT_EQ(v[i].address, m.address(i));
      EXPECT_EQ(v[i].self, i == m.self()) << i;
      EXPECT_EQ(v[i].live, m.live(i)) << i;
      uint32_t as_primary = 0, as_replica = 0;
      for (uint32_t s = 0; s < ring_slots; ++s) {
        const std::vector<node_index> owners = expected_owners(m, s, replicas);
        as_primary += owners[0] == i ? 1 : 0;
        as_replica += std::count(owners.begin() + 1, owners.end(), i) != 0 ? 1 : 0;
      }
      EXPECT_EQ(v[i].primary_slots, as_primary) << "R=" << replicas << " " << i;
      EXPECT_EQ(v[i].replica_slots, as_replica) << "R=" << replicas << " " << i;
      primaries += v[i].primary_slots;
      replica_slots += v[i].replica_slots;
    }
    EXPECT_EQ(primaries, ring_slots) << "R=" << replicas;
    EXPECT_EQ(replica_slots, ring_slots * (replicas - 1)) << "R=" << replicas;
    EXPECT_FALSE(v[0].live); // n1 never greeted
    EXPECT_TRUE(v[1].self);
    EXPECT_TRUE(v[2].live);
    EXPECT_GT(v[0].primary_slots, 0u); // a down member keeps its slots (static)
  }
}

} // namespace
} // namespace lmcc::cluster

TEST(MembershipLimits, RefusesMoreMembersThanAnOwnerMaskHasBits) {
  lmcc::cluster::cluster_options opts;
  for (int i = 0; i < 65; ++i) {
    lmcc::cluster::member_address m;
    m.id = std::to_string(100 + i);
    m.id.insert(m.id.begin(), 'm');
    m.host = "127.0.0.1";
    m.port = static_cast<uint16_t>(20000 + i);
    opts.members.push_back(m);
  }
  auto m = lmcc::cluster::membership::make(opts, "m164", 256);
  ASSERT_FALSE(m);
  EXPECT_EQ(m.error().code, lmcc::cluster::errc::too_many_members);
  opts.members.pop_back();
  EXPECT_TRUE(lmcc::cluster::membership::make(opts, "m163", 256));
}
