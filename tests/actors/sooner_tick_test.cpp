// sooner_tick: a need sooner than the armed tick arms another, the later one
// is then ignored when it arrives, and nothing stays armed after a due tick.
#include "actors/sooner_tick.hpp"

#include <gtest/gtest.h>

namespace lmcc::actors {
namespace {

using namespace std::chrono_literals;
using time_point = sooner_tick::time_point;

const time_point t0 = time_point{} + 1h;

TEST(sooner_tick, a_sooner_need_supersedes_the_armed_tick_and_a_later_one_does_not) {
  sooner_tick tick;
  EXPECT_TRUE(tick.arm(t0, 1000ms)) << "nothing armed: send one";
  EXPECT_FALSE(tick.arm(t0 + 100ms, 1000ms)) << "the armed one comes sooner";
  EXPECT_TRUE(tick.arm(t0 + 100ms, 200ms)) << "sooner than the armed one";
  EXPECT_TRUE(tick.fire(t0 + 300ms)) << "the sooner tick is due";
  EXPECT_TRUE(tick.arm(t0 + 300ms, 1000ms)) << "nothing armed after a due tick";
  EXPECT_FALSE(tick.fire(t0 + 1000ms)) << "the first one, superseded: the re-armed one is to come";
  EXPECT_TRUE(tick.fire(t0 + 1300ms));
  EXPECT_TRUE(tick.fire(t0 + 5000ms)) << "with none armed, a stray tick runs (harmless)";
}

} // namespace
} // namespace lmcc::actors
