// cluster_table::read_owner: which owner a lookup reads a slot from, while
// this node or a peer copies the slots a membership change gave it, or every
// slot it owns after it came back empty (refill_gate.hpp); and move_source:
// which previous owner a node that gained a slot copies it from.
#include "actors/cluster/cluster_table.hpp"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

namespace lmcc::actors {
namespace {

constexpr uint32_t slots = 64;

cluster::placement placement_of(std::vector<std::string> members) {
  cluster::ring_options ro;
  ro.slot_count = slots;
  ro.replicas = 2;
  auto p = cluster::placement::compute({"n1", "n2", "n3"}, std::move(members), ro);
  EXPECT_TRUE(p) << p.error().message;
  return std::move(*p);
}

/// n1, n2, n3 on the ring; a committed change from {n1, n2} to {n2, n3}
/// (R = 2): n3 gained every slot, n2 held every slot before and after. This
/// node is n3; n2 is live with a key-read endpoint, n1 is gone.
cluster_table two_owner_table() {
  cluster_table t;
  t.owners = std::make_shared<const cluster::placement>(placement_of({"n2", "n3"}));
  t.previous = std::make_shared<const cluster::placement>(placement_of({"n1", "n2"}));
  t.record.committed = true;
  t.self = *t.owners->members().index_of("n3");
  t.peers.resize(3);
  const node_index peer = *t.owners->members().index_of("n2");
  t.peers[peer].live = true;
  t.peers[peer].handles.read = "127.0.0.1:1";
  t.peers[t.self].live = true;
  return t;
}

node_index peer_of(const cluster_table& t) {
  return *t.owners->members().index_of("n2");
}

TEST(cluster_table, a_node_copying_its_gained_slots_reads_them_from_a_peer) {
  auto t = two_owner_table();
  t.peers[t.self].copying = true;
  for (uint32_t s = 0; s < slots; ++s)
    EXPECT_EQ(t.read_owner(s), peer_of(t)) << "slot " << s;
}

// Right after a node adopts a change it re-learns whether each peer is ready
// from the peer's next greeting, so the peer is marked copying too. This node
// is known to lack what it gained; the peer may not: read the peer. (A node
// that restarted into a committed change answered lookups partially from its
// own uncopied slots here.)
TEST(cluster_table, a_copying_node_prefers_a_peer_whose_readiness_is_not_confirmed_yet) {
  auto t = two_owner_table();
  t.peers[t.self].copying = true;
  t.peers[peer_of(t)].copying = true;
  for (uint32_t s = 0; s < slots; ++s)
    EXPECT_EQ(t.read_owner(s), peer_of(t)) << "slot " << s;
}

TEST(cluster_table, a_copying_node_reads_itself_when_no_peer_can_answer) {
  auto t = two_owner_table();
  t.peers[t.self].copying = true;
  t.peers[peer_of(t)].live = false; // a partial answer beats none
  for (uint32_t s = 0; s < slots; ++s)
    EXPECT_EQ(t.read_owner(s), t.self) << "slot " << s;
}

// A node removed from the member set reads every slot from its owners. When
// a lookup hedges away from a slow owner, an owner still copying the slot (it
// gained it) is no choice: its partial answer would win the race with the
// complete one. Given up on (the owner is down), a partial answer beats none.
TEST(cluster_table, a_hedge_never_goes_to_an_owner_still_copying_the_slot) {
  cluster_table t;
  t.owners = std::make_shared<const cluster::placement>(placement_of({"n2", "n3"}));
  t.previous = std::make_shared<const cluster::placement>(placement_of({"n1", "n2", "n3"}));
  t.record.committed = true;
  t.self = *t.owners->members().index_of("n1");
  const node_index n2 = *t.owners->members().index_of("n2");
  const node_index n3 = *t.owners->members().index_of("n3");
  t.peers.resize(3);
  for (node_index n : {n2, n3}) {
    t.peers[n].live = true;
    t.peers[n].handles.read = "127.0.0.1:1";
  }
  t.peers[t.self].live = true;
  t.peers[n3].copying = true;
  const std::vector<node_index> slow{n2};
  size_t gained = 0;
  for (uint32_t s = 0; s < slots; ++s) {
    // The slot's primary, unless that is n3 and it has not copied the slot yet.
    const node_index primary = t.owners->owner_indices(s).front();
    EXPECT_EQ(t.read_owner(s), t.gained(n3, s) ? n2 : primary) << "slot " << s;
    EXPECT_EQ(t.read_owner(s, slow), n3) << "slot " << s;
    if (t.gained(n3, s)) {
      ++gained;
      EXPECT_EQ(t.read_owner(s, slow, /*complete_only=*/true), cluster::no_node) << "slot " << s;
    } else {
      EXPECT_EQ(t.read_owner(s, slow, /*complete_only=*/true), n3) << "slot " << s << " held";
    }
  }
  EXPECT_GT(gained, 0u);
}

// Adopting a change, a node marks every node copying (itself until its own
// copy ends, its peers until their next greeting). A node removed by the
// change gains nothing: the slots it held are whole here, and the new owner
// that gained one has not copied it yet (n2 answered with no holders for a
// slot it had just gained: test_membership, under load).
TEST(cluster_table, a_node_marked_copying_reads_itself_for_the_slots_it_held) {
  cluster_table t;
  t.owners = std::make_shared<const cluster::placement>(placement_of({"n2", "n3"}));
  t.previous = std::make_shared<const cluster::placement>(placement_of({"n1", "n2", "n3"}));
  t.record.committed = false; // joint
  t.self = *t.owners->members().index_of("n1");
  const node_index n2 = *t.owners->members().index_of("n2");
  t.peers.resize(3);
  t.peers[n2].live = true;
  t.peers[n2].handles.read = "127.0.0.1:1";
  t.peers[t.self].live = true; // n3 is down
  for (auto& p : t.peers)
    p.copying = true;
  size_t held = 0;
  for (uint32_t s = 0; s < slots; ++s) {
    if (!cluster::owns(*t.previous, t.self, s))
      continue;
    ++held;
    EXPECT_EQ(t.read_owner(s), t.self)
        << "slot " << s << " (n2 gained it: " << t.gained(n2, s) << ")";
  }
  EXPECT_GT(held, 0u);
}

TEST(cluster_table, a_ready_node_reads_its_own_slots) {
  auto t = two_owner_table();
  t.peers[peer_of(t)].copying = true;
  for (uint32_t s = 0; s < slots; ++s)
    EXPECT_EQ(t.read_owner(s), t.self) << "slot " << s;
}

// A node back with an empty store reads every slot it owns from the other
// owner while it copies them, and so do its peers (it greets as refilling).
TEST(cluster_table, a_refilling_node_is_read_for_none_of_its_slots) {
  auto t = two_owner_table();
  t.record.committed = true;
  t.previous = t.owners; // no membership change: only the refill counts
  t.peers[t.self].refilling = true;
  for (uint32_t s = 0; s < slots; ++s) {
    EXPECT_FALSE(t.complete(t.self, s));
    EXPECT_EQ(t.read_owner(s), peer_of(t)) << "slot " << s;
  }
  t.peers[t.self].refilling = false;
  t.peers[peer_of(t)].refilling = true; // a peer refilling: this node reads itself
  for (uint32_t s = 0; s < slots; ++s)
    EXPECT_EQ(t.read_owner(s), t.self) << "slot " << s;
  // With no other owner reachable, the refilling node still answers what it has.
  t.peers[peer_of(t)].refilling = false;
  t.peers[peer_of(t)].live = false;
  t.peers[t.self].refilling = true;
  for (uint32_t s = 0; s < slots; ++s)
    EXPECT_EQ(t.read_owner(s), t.self) << "slot " << s;
}

/// two_owner_table with n1 live too, both peers greeted, the change still
/// joint: n2 keeps every slot, n1 gives every slot up.
cluster_table gained_from_two_table() {
  auto t = two_owner_table();
  t.record.committed = false;
  for (const char* id : {"n1", "n2"}) {
    auto& p = t.peers[*t.owners->members().index_of(id)];
    p.live = true;
    p.greeted = true;
  }
  return t;
}

node_index n1_of(const cluster_table& t) {
  return *t.owners->members().index_of("n1");
}

TEST(cluster_table, a_gained_slot_comes_from_the_previous_owner_that_keeps_it) {
  const auto t = gained_from_two_table();
  auto everyone = [](node_index) { return true; };
  for (uint32_t s = 0; s < slots; ++s)
    EXPECT_EQ(t.move_source(s, everyone), peer_of(t)) << "slot " << s;
}

// n2 came back with an empty store and is still refilling (or has slots left
// over, or has not greeted yet): its copy lacks entries n1 still holds, and
// after the commit n1 empties the slot. While joint, copy n1's.
TEST(cluster_table, a_gained_slot_comes_from_a_whole_owner_before_one_back_empty) {
  auto everyone = [](node_index) { return true; };
  for (int how = 0; how < 3; ++how) {
    auto t = gained_from_two_table();
    auto& n2 = t.peers[peer_of(t)];
    if (how == 0)
      n2.refilling = true;
    else if (how == 1)
      n2.unsettled = true;
    else
      n2.greeted = false;
    for (uint32_t s = 0; s < slots; ++s)
      EXPECT_EQ(t.move_source(s, everyone), n1_of(t)) << "case " << how << " slot " << s;
  }
}

// After the commit n1 may have emptied the slots it gave up: the keeper it is,
// whole or not (a node that gains slots after the commit was down during it).
TEST(cluster_table, after_the_commit_a_gained_slot_comes_from_the_keeper) {
  auto t = gained_from_two_table();
  t.record.committed = true;
  t.peers[peer_of(t)].refilling = true;
  for (uint32_t s = 0; s < slots; ++s)
    EXPECT_EQ(t.move_source(s, [](node_index) { return true; }), peer_of(t)) << "slot " << s;
}

TEST(cluster_table, with_no_whole_previous_owner_a_gained_slot_comes_from_the_keeper) {
  auto t = gained_from_two_table();
  t.peers[peer_of(t)].refilling = true;
  const node_index n1 = n1_of(t);
  auto not_n1 = [n1](node_index n) { return n != n1; };
  EXPECT_EQ(t.move_source(0, not_n1), peer_of(t));
  EXPECT_EQ(t.move_source(0, [](node_index) { return false; }), std::nullopt);
}

} // namespace
} // namespace lmcc::actors
