// refill_leftovers: slots a refill could not copy wait for an owner that can
// give its copy; an owner that came back empty too is never that source, nor
// is a node that became an owner since, and a slot every other owner lost is
// reported lost (the workers must resync).
// CAF-free: linked with lmcc_cluster.
#include "cluster/refill_leftovers.hpp"

#include <gtest/gtest.h>

namespace lmcc::actors {
namespace {

using copy_list = std::vector<std::pair<uint32_t, node_index>>;

// Three nodes, this one is 0; slot s's other owner is node 1 + s % 2 (R = 2).
std::vector<node_index> other_owner(uint32_t slot) {
  return {static_cast<node_index>(1 + slot % 2)};
}

TEST(refill_leftovers, a_slot_waits_while_its_other_owner_is_down_and_is_copied_when_it_is_back) {
  refill_leftovers left{3};
  left.leave(4, other_owner(4)); // owner 1
  left.leave(5, other_owner(5)); // owner 2
  auto none_up = [](node_index) { return false; };
  auto step = left.take(other_owner, none_up);
  EXPECT_TRUE(step.copy.empty());
  EXPECT_TRUE(step.lost.empty());
  EXPECT_EQ(left.size(), 2u);
  // Node 1 is back with its disk (greets settled).
  step = left.take(other_owner, [](node_index n) { return n == 1; });
  EXPECT_EQ(step.copy, (copy_list{{4, 1}}));
  EXPECT_TRUE(step.lost.empty());
  // Slot 4 is being copied: a second look offers only slot 5 (node 2 is back).
  step = left.take(other_owner, [](node_index) { return true; });
  EXPECT_EQ(step.copy, (copy_list{{5, 2}}));
  left.copied(4);
  EXPECT_EQ(left.size(), 1u);
}

TEST(refill_leftovers, an_owner_back_empty_is_not_a_source_and_the_slot_is_lost) {
  refill_leftovers left{3};
  left.leave(4, other_owner(4));
  left.leave(5, other_owner(5));
  // Node 1 came back with an empty store: its refill copies from this node,
  // and may settle before this node looks again (it can give, by the table).
  left.seen_unsettled(1);
  auto step = left.take(other_owner, [](node_index) { return true; });
  EXPECT_EQ(step.copy, (copy_list{{5, 2}}));
  EXPECT_EQ(step.lost, (std::vector<uint32_t>{4}));
  left.copied(5);
  EXPECT_TRUE(left.empty());
}

TEST(refill_leftovers, a_slot_is_lost_only_when_every_other_owner_lost_it) {
  refill_leftovers left{4};
  auto two_others = [](uint32_t) { return std::vector<node_index>{1, 2}; };
  left.leave(9, two_others(9));
  left.seen_unsettled(1);
  auto step = left.take(two_others, [](node_index) { return false; });
  EXPECT_TRUE(step.lost.empty()); // node 2 is down and may come back with it
  EXPECT_EQ(left.size(), 1u);
  left.seen_unsettled(2);
  step = left.take(two_others, [](node_index) { return true; });
  EXPECT_TRUE(step.copy.empty());
  EXPECT_EQ(step.lost, (std::vector<uint32_t>{9}));
}

TEST(refill_leftovers, a_slot_no_other_node_owns_is_lost_at_once) {
  refill_leftovers left{2};
  left.leave(3, {}); // one replica: nobody else held it
  const auto step = left.take([](uint32_t) { return std::vector<node_index>{}; },
                              [](node_index) { return true; });
  EXPECT_EQ(step.lost, (std::vector<uint32_t>{3}));
}

TEST(refill_leftovers, a_node_that_became_an_owner_since_is_not_a_source) {
  // Slot 9 was left with node 1 down. Node 1 is then removed from the
  // members: node 2 owns the slot now, with the copy the old owners gave
  // it -- this node's empty one. No owner from then is left: lost.
  refill_leftovers left{3};
  left.leave(9, std::vector<node_index>{1});
  EXPECT_FALSE(left.may_give(9, 2));
  EXPECT_TRUE(left.may_give(9, 1));
  EXPECT_TRUE(left.may_give(10, 2)) << "a slot not left over may come from any owner";
  const auto step = left.take([](uint32_t) { return std::vector<node_index>{2}; },
                              [](node_index) { return true; });
  EXPECT_TRUE(step.copy.empty());
  EXPECT_EQ(step.lost, (std::vector<uint32_t>{9}));
  EXPECT_TRUE(left.empty());
}

TEST(refill_leftovers, a_failed_copy_is_left_again_with_the_candidates_that_still_own_it) {
  refill_leftovers left{4};
  left.leave(9, std::vector<node_index>{1, 2});
  auto step = left.take(
      [](uint32_t) {
        return std::vector<node_index>{1, 2};
      },
      [](node_index) { return true; });
  EXPECT_EQ(step.copy, (copy_list{{9, 1}}));
  // The copy from node 1 failed, and node 1 no longer owns the slot (node 3
  // took its place): only node 2 may give it.
  left.leave(9, std::vector<node_index>{2, 3});
  EXPECT_FALSE(left.may_give(9, 3));
  step = left.take(
      [](uint32_t) {
        return std::vector<node_index>{2, 3};
      },
      [](node_index n) { return n != 2; }); // node 2 is down
  EXPECT_TRUE(step.copy.empty()) << "node 3 got its copy from the owners then";
  EXPECT_TRUE(step.lost.empty()) << "node 2 may come back with it";
  step = left.take(
      [](uint32_t) {
        return std::vector<node_index>{2, 3};
      },
      [](node_index) { return true; });
  EXPECT_EQ(step.copy, (copy_list{{9, 2}}));
}

} // namespace
} // namespace lmcc::actors
