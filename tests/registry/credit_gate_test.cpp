// credit_gate: the ingest bound between the PULL socket and the store. The
// wake-up goes through a real eventfd, given from another thread; waits are
// on the fd (poll), never sleeps. CAF-free: linked with lmcc_registry only.
#include "registry/credit_gate.hpp"

#if defined(CAF_VERSION)
#error "credit_gate pulls in CAF"
#endif

#include <gtest/gtest.h>

#include <poll.h>
#include <thread>

namespace lmcc::actors {
namespace {

/// True when the fd becomes readable within `ms` (a bound for a failing test,
/// not a timing assertion: a passing one returns as soon as it is readable).
bool readable_within(int fd, int ms) {
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, ms) == 1 && (p.revents & POLLIN) != 0;
}

TEST(credit_gate, take_and_give_move_in_flight_and_the_peak) {
  credit_gate g{100, 50};
  EXPECT_EQ(g.limit(), 100u);
  EXPECT_EQ(g.in_flight(), 0u);
  EXPECT_FALSE(g.exhausted());
  g.take(60);
  g.take(39);
  EXPECT_FALSE(g.exhausted());
  g.take(1);
  EXPECT_TRUE(g.exhausted()); // at the limit
  g.take(25);                 // a round may overshoot
  EXPECT_EQ(g.in_flight(), 125u);
  EXPECT_EQ(g.peak(), 125u);
  g.give(100);
  EXPECT_EQ(g.in_flight(), 25u);
  EXPECT_FALSE(g.exhausted());
  EXPECT_EQ(g.peak(), 125u); // the highest seen stays
  EXPECT_EQ(g.stalls(), 0u);
  EXPECT_FALSE(readable_within(g.wake_fd(), 0)); // nobody armed: no wake-up
}

TEST(credit_gate, arm_refuses_to_wait_when_credits_came_back_meanwhile) {
  credit_gate g{100, 50};
  g.take(100);
  ASSERT_TRUE(g.exhausted());
  g.give(60); // between exhausted() and arm(): 40 in flight, below resume_below
  EXPECT_FALSE(g.arm());
  EXPECT_EQ(g.stalls(), 0u);
  // Between resume_below and the limit the thread may wait: it resumes only
  // below resume_below.
  g.take(30); // 70
  EXPECT_TRUE(g.arm());
  EXPECT_EQ(g.stalls(), 1u);
  g.disarm();
}

TEST(credit_gate, an_armed_gate_wakes_once_in_flight_falls_below_resume_below) {
  credit_gate g{100, 50};
  g.take(120);
  ASSERT_TRUE(g.arm());
  EXPECT_FALSE(readable_within(g.wake_fd(), 0));
  std::thread giver([&] {
    g.give(30); // 90: not yet
    g.give(30); // 60: not yet
    g.give(11); // 49: wake
  });
  giver.join();
  EXPECT_TRUE(readable_within(g.wake_fd(), 5000));
  EXPECT_EQ(g.in_flight(), 49u);
  g.disarm();
  EXPECT_FALSE(readable_within(g.wake_fd(), 0)); // cleared
  // Disarmed: more credits coming back wake nobody.
  g.give(40);
  EXPECT_FALSE(readable_within(g.wake_fd(), 0));
}

TEST(credit_gate, the_wake_up_is_not_lost_to_a_give_racing_the_arm) {
  // Many rounds of: the PULL thread takes, finds the gate exhausted and arms
  // while another thread gives everything back. Each round must either refuse
  // to wait (arm() false) or find the fd readable: never a lost wake-up.
  credit_gate g{10, 5};
  for (int round = 0; round < 2000; ++round) {
    g.take(10);
    ASSERT_TRUE(g.exhausted());
    std::thread giver([&] { g.give(10); });
    if (g.arm()) {
      ASSERT_TRUE(readable_within(g.wake_fd(), 5000)) << "lost wake-up in round " << round;
      g.disarm();
    }
    giver.join();
    ASSERT_EQ(g.in_flight(), 0u);
  }
}

TEST(credit_gate, credits_given_from_many_threads_add_up) {
  credit_gate g{1'000'000, 1};
  g.take(800'000);
  ASSERT_TRUE(g.arm());
  std::vector<std::thread> givers;
  for (int t = 0; t < 4; ++t)
    givers.emplace_back([&] {
      for (int i = 0; i < 100'000; ++i)
        g.give(2);
    });
  for (auto& t : givers)
    t.join();
  EXPECT_EQ(g.in_flight(), 0u);
  EXPECT_TRUE(readable_within(g.wake_fd(), 5000));
  EXPECT_EQ(g.peak(), 800'000u);
}

} // namespace
} // namespace lmcc::actors
