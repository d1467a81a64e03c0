// refill_leftovers: slots a refill could not copy wait for an owner that can
// give its copy; an owner that came back empty too is never that source, and
// a slot every other owner lost is reported lost (the workers must resync).
// CAF-free: linked with lmcc_actor_logic.
#include "actors/refill_leftovers.hpp"

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
  left.leave(4); // owner 1
  left.leave(5); // owner 2
  auto none_up = [](node_index) { return false; };
  auto step = left.take(other_owner, none_up);
  EXPECT_TRUE(step.copy.empty());
  EXPECT_TRUE(step.lost.empty());
  EXPECT_EQ(left.size(), 2u);
  // Node 1 is back with its disk (greets settled).
  step = left.take(other_owner, [](node_index n) { return n == 1; });
  EXPECT_EQ(step.copy, (copy_list{{4, 1}}));
  EXPECT_TRUE(step.lost.empty());
  EXPECT_EQ(left.size(), 1u);
}

TEST(refill_leftovers, an_owner_back_empty_is_not_a_source_and_the_slot_is_lost) {
  refill_leftovers left{3};
  left.leave(4);
  left.leave(5);
  // Node 1 came back with an empty store: its refill copies from this node,
  // and may settle before this node looks again (it can give, by the table).
  left.seen_unsettled(1);
  auto step = left.take(other_owner, [](node_index) { return true; });
  EXPECT_EQ(step.copy, (copy_list{{5, 2}}));
  EXPECT_EQ(step.lost, (std::vector<uint32_t>{4}));
  EXPECT_TRUE(left.empty());
}

TEST(refill_leftovers, a_slot_is_lost_only_when_every_other_owner_lost_it) {
  refill_leftovers left{4};
  auto two_others = [](uint32_t) { return std::vector<node_index>{1, 2}; };
  left.leave(9);
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
  left.leave(3); // one replica: nobody else held it
  const auto step = left.take([](uint32_t) { return std::vector<node_index>{}; },
                              [](node_index) { return true; });
  EXPECT_EQ(step.lost, (std::vector<uint32_t>{3}));
}

} // namespace
} // namespace lmcc::actors
