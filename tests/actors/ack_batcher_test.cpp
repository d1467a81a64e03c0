// ack_batcher: held acks to senders on other nodes, with simulated time.
#include "actors/ack_batcher.hpp"

#if defined(CAF_VERSION)
#error "ack_batcher pulls in CAF"
#endif

#include <gtest/gtest.h>

#include <string>

namespace lmcc::actors {
namespace {

using namespace std::chrono_literals;
using batcher = ack_batcher<std::string>;
using ack_list = std::vector<cluster::stream_ack>;

const batcher::clock::time_point t0 = batcher::clock::time_point{} + 1h;

TEST(ack_batcher, the_first_acks_go_at_once_then_at_most_one_message_per_delay) {
  batcher acks{20ms};
  EXPECT_FALSE(acks.next_due());
  acks.add("n2", 7, 1);
  auto due = acks.take_due(t0, false);
  ASSERT_EQ(due.size(), 1u);
  EXPECT_EQ(due[0].sender, "n2");
  EXPECT_EQ(due[0].acks, (ack_list{{7, 1}}));
  // Three commits within the delay: held, cumulative per stream.
  acks.add("n2", 7, 3);
  acks.add("n2", 9, 4);
  acks.add("n2", 7, 2); // a lower number never lowers the ack
  EXPECT_TRUE(acks.take_due(t0 + 5ms, false).empty());
  EXPECT_EQ(acks.next_due(), t0 + 20ms);
  EXPECT_TRUE(acks.take_due(t0 + 19ms, false).empty());
  due = acks.take_due(t0 + 20ms, false);
  ASSERT_EQ(due.size(), 1u);
  EXPECT_EQ(due[0].acks, (ack_list{{7, 3}, {9, 4}})); // one message for both streams
  EXPECT_FALSE(acks.next_due());                      // nothing held: no wake-up
}

TEST(ack_batcher, senders_are_held_apart_and_a_drain_takes_everything) {
  batcher acks{20ms};
  acks.add("n2", 1, 1);
  acks.add("n3", 2, 1);
  EXPECT_EQ(acks.take_due(t0, false).size(), 2u);
  acks.add("n2", 1, 2);
  EXPECT_TRUE(acks.take_due(t0 + 10ms, false).empty());
  acks.add("n3", 2, 5);
  auto due = acks.take_due(t0 + 10ms, true); // a drain: no waiting
  ASSERT_EQ(due.size(), 2u);
  EXPECT_EQ(due[0].acks, (ack_list{{1, 2}}));
  EXPECT_EQ(due[1].acks, (ack_list{{2, 5}}));
  // The drain counts as a send: n2's next acks wait for the delay again.
  acks.add("n2", 1, 3);
  EXPECT_TRUE(acks.take_due(t0 + 20ms, false).empty());
  EXPECT_EQ(acks.take_due(t0 + 30ms, false).size(), 1u);
}

TEST(ack_batcher, no_delay_sends_every_commit) {
  batcher acks{0ms};
  for (uint64_t n = 1; n <= 3; ++n) {
    acks.add("n2", 4, n);
    auto due = acks.take_due(t0, false); // the same instant: still due
    ASSERT_EQ(due.size(), 1u);
    EXPECT_EQ(due[0].acks, (ack_list{{4, n}}));
  }
}

} // namespace
} // namespace lmcc::actors
