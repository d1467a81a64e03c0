// cluster_table::read_owner: which owner a lookup reads a slot from, while
// this node or a peer copies the slots a membership change gave it.
#include "actors/cluster_table.hpp"

#include <gtest/gtest.h>

#include <memory>

namespace lmcc::actors {
namespace {

constexpr uint32_t slots = 64;

/// Two members, n2 and n3, each owning every slot (R = 2), committed; this
/// node is n3. n2 is live with a key-read endpoint.
cluster_table two_owner_table() {
  cluster::ring_options ro;
  ro.slot_count = slots;
  ro.replicas = 2;
  auto owners = cluster::placement::compute({"n2", "n3"}, {"n2", "n3"}, ro);
  EXPECT_TRUE(owners) << owners.error().message;
  cluster_table t;
  t.owners = std::make_shared<const cluster::placement>(std::move(*owners));
  t.previous = t.owners;
  t.record.committed = true;
  t.self = *t.owners->members().index_of("n3");
  t.peers.resize(2);
  const node_index peer = t.self == 0 ? 1 : 0;
  t.peers[peer].live = true;
  t.peers[peer].handles.read = "127.0.0.1:1";
  t.peers[t.self].live = true;
  return t;
}

node_index peer_of(const cluster_table& t) {
  return t.self == 0 ? 1 : 0;
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

TEST(cluster_table, a_ready_node_reads_its_own_slots) {
  auto t = two_owner_table();
  t.peers[peer_of(t)].copying = true;
  for (uint32_t s = 0; s < slots; ++s)
    EXPECT_EQ(t.read_owner(s), t.self) << "slot " << s;
}

} // namespace
} // namespace lmcc::actors
