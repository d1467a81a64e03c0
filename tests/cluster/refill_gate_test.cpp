// refill_gate: a node that started empty reads its slots elsewhere until the
// first peer holding an index starts its copy (and the copy ends), or every
// live peer greeted without one (a new cluster: nothing to copy).
// CAF-free: linked with lmcc_cluster.
#include "cluster/refill_gate.hpp"

#include <gtest/gtest.h>

namespace lmcc::actors {
namespace {

using step = refill_gate::step;

TEST(refill_gate, a_node_that_restored_its_store_never_refills) {
  refill_gate g{false};
  EXPECT_FALSE(g.refilling());
  EXPECT_EQ(g.on_greeting(true, false), step::none);
  EXPECT_EQ(g.on_greeting(false, true), step::none);
  EXPECT_FALSE(g.refilling());
}

TEST(refill_gate, the_first_peer_holding_an_index_starts_the_copy_once) {
  refill_gate g{true};
  EXPECT_TRUE(g.refilling());
  EXPECT_EQ(g.on_greeting(false, false), step::none); // an empty peer; others not heard yet
  EXPECT_TRUE(g.refilling());
  EXPECT_EQ(g.on_greeting(true, false), step::start);
  EXPECT_TRUE(g.refilling()); // until the copy ends
  EXPECT_EQ(g.on_greeting(true, true), step::none);
  g.done();
  EXPECT_FALSE(g.refilling());
  EXPECT_EQ(g.on_greeting(true, true), step::none);
}

TEST(refill_gate, when_every_live_peer_greeted_without_an_index_there_is_nothing_to_copy) {
  refill_gate g{true};
  EXPECT_EQ(g.on_greeting(false, false), step::none);
  EXPECT_EQ(g.on_greeting(false, true), step::skip);
  EXPECT_FALSE(g.refilling());
  EXPECT_EQ(g.on_greeting(true, true), step::none); // a peer filled later: anti-entropy's job
}

} // namespace
} // namespace lmcc::actors
