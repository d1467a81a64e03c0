// node_clock (injected jumps, in a build with fault injection) and
// peer_clock_offsets (a peer's offset from greetings whose delays vary):
// CAF-free, linked with lmcc_cluster.
#include "clock/clock.hpp"
#include "cluster/peer_clock_offsets.hpp"

#if defined(CAF_VERSION)
#error "clock pulls in CAF"
#endif

#include <gtest/gtest.h>

namespace lmcc::actors {
namespace {

#if LMCC_FAULT_INJECTION // injected clock jumps: a test build only
TEST(node_clock, jumps_add_up_and_move_the_wall_clock_only) {
  node_clock c;
  const double before = c.wall_s();
  c.injected().jump(std::chrono::milliseconds{-600'000});
  c.injected().jump(std::chrono::milliseconds{100'000});
  EXPECT_EQ(c.offset_ms(), -500'000);
  EXPECT_NEAR(c.wall_s(), before - 500.0, 5.0);
  EXPECT_NEAR(static_cast<double>(c.wall_ms()) / 1000.0, c.wall_s(), 1.0);
}
#endif

TEST(peer_clock_offsets, delayed_greetings_do_not_lower_the_estimate) {
  cluster::peer_clock_offsets p;
  EXPECT_EQ(p.of("n2"), 0);                // unknown: clocks taken as in step
  EXPECT_TRUE(p.add_sample("n2", -5'000)); // first known, 5 s off: worth a log line
  EXPECT_FALSE(p.add_sample("n2", -5'001));
  EXPECT_FALSE(p.add_sample("n2", -5'002));
  EXPECT_EQ(p.of("n2"), 0); // behind, by too few greetings yet: one may have waited
  EXPECT_FALSE(p.add_sample("n2", -5'010));
  EXPECT_EQ(p.of("n2"), -5'000);
  EXPECT_TRUE(p.add_sample("n2", 5'000)); // stepped ahead: counts at once
  EXPECT_FALSE(p.add_sample("n2", 4'999));
  EXPECT_EQ(p.of("n2"), 5'000);
  // A burst of greetings that waited while this node was frozen.
  EXPECT_FALSE(p.add_sample("n2", -5'225));
  EXPECT_FALSE(p.add_sample("n2", 1'000));
  EXPECT_EQ(p.of("n2"), 5'000);
  EXPECT_EQ(p.of("n3"), 0); // per peer
}

TEST(peer_clock_offsets, a_peer_ahead_counts_from_its_first_greeting) {
  // A node that just started knows a peer far ahead from one greeting: a
  // sample is the offset minus the greeting's delay, never above it, so
  // using it cannot make a deadline later than the peer's clock allows.
  cluster::peer_clock_offsets p;
  p.add_sample("n2", 472'660);
  EXPECT_EQ(p.of("n2"), 472'660);
  p.add_sample("n3", 800); // within the deadband: in step
  EXPECT_EQ(p.of("n3"), 0);
}

TEST(peer_clock_offsets, clocks_within_a_second_count_as_in_step) {
  cluster::peer_clock_offsets p;
  for (int i = 0; i < 8; ++i)
    p.add_sample("n2", -900);
  EXPECT_EQ(p.of("n2"), 0);
  p.add_sample("n2", 1'200);
  EXPECT_EQ(p.of("n2"), 1'200);
}

TEST(peer_clock_offsets, a_step_ahead_counts_at_once_a_step_back_after_the_window) {
  cluster::peer_clock_offsets p;
  for (size_t i = 0; i < cluster::peer_clock_offsets::min_samples; ++i)
    p.add_sample("n2", 0);
  EXPECT_TRUE(p.add_sample("n2", 600'000)); // noticed (and logged by the caller)
  EXPECT_EQ(p.of("n2"), 600'000);
  for (size_t i = 0; i + 1 < cluster::peer_clock_offsets::window; ++i) {
    EXPECT_FALSE(p.add_sample("n2", -2));
    EXPECT_EQ(p.of("n2"), 600'000);
  }
  EXPECT_TRUE(p.add_sample("n2", -2)); // the step ahead left the window
  EXPECT_EQ(p.of("n2"), 0);
}

} // namespace
} // namespace lmcc::actors
