#include "index/memory_release.hpp"

#include <gtest/gtest.h>

namespace lmcc::actors {
namespace {

constexpr size_t mib = size_t{1} << 20;

TEST(memory_release_policy, growth_alone_never_releases) {
  memory_release_policy p{{.threshold_bytes = 64 * mib, .min_interval_ms = 5000}};
  for (size_t bytes = 0; bytes <= 1024 * mib; bytes += 16 * mib)
    EXPECT_FALSE(p.should_release(bytes, 0)) << bytes;
}

TEST(memory_release_policy, a_drop_past_the_threshold_releases_once) {
  memory_release_policy p{{.threshold_bytes = 64 * mib, .min_interval_ms = 5000}};
  EXPECT_FALSE(p.should_release(500 * mib, 0));
  EXPECT_FALSE(p.should_release(437 * mib, 10)); // 63 MiB below the high-water mark
  EXPECT_FALSE(p.should_release(436 * mib, 20)); // 64 MiB below, but still falling
  EXPECT_TRUE(p.should_release(436 * mib, 30));  // settled
  // The mark restarts at the level released to: the same size again is no drop.
  EXPECT_FALSE(p.should_release(436 * mib, 10'000));
}

TEST(memory_release_policy, releases_are_spaced_by_the_minimum_interval) {
  memory_release_policy p{{.threshold_bytes = 64 * mib, .min_interval_ms = 5000}};
  EXPECT_FALSE(p.should_release(1000 * mib, 0));
  EXPECT_FALSE(p.should_release(900 * mib, 1000));
  EXPECT_TRUE(p.should_release(900 * mib, 1001));
  EXPECT_FALSE(p.should_release(800 * mib, 5000));
  EXPECT_FALSE(p.should_release(800 * mib, 6000)); // 100 MiB more gone, but too soon
  EXPECT_TRUE(p.should_release(800 * mib, 6001));
}

TEST(memory_release_policy, a_drop_still_in_progress_is_left_to_finish) {
  memory_release_policy p{{.threshold_bytes = 64 * mib, .min_interval_ms = 0}};
  EXPECT_FALSE(p.should_release(1000 * mib, 0));
  for (size_t bytes = 900 * mib; bytes >= 100 * mib; bytes -= 100 * mib)
    EXPECT_FALSE(p.should_release(bytes, 1)) << bytes;
  EXPECT_TRUE(p.should_release(100 * mib, 2));
  EXPECT_FALSE(p.should_release(120 * mib, 3)); // growth again is no drop
}

TEST(memory_release_policy, the_first_release_needs_no_waiting) {
  memory_release_policy p{{.threshold_bytes = 1 * mib, .min_interval_ms = 60'000}};
  EXPECT_FALSE(p.should_release(10 * mib, 0));
  EXPECT_FALSE(p.should_release(0, 1));
  EXPECT_TRUE(p.should_release(0, 2));
}

TEST(memory_release_policy, it_owes_a_release_until_the_shrunk_index_got_one) {
  memory_release_policy p{{.threshold_bytes = 64 * mib, .min_interval_ms = 2'000}};
  EXPECT_FALSE(p.should_release(1000 * mib, 0));
  EXPECT_FALSE(p.owes()) << "growing";
  EXPECT_FALSE(p.should_release(100 * mib, 1)) << "still falling";
  EXPECT_TRUE(p.owes()) << "asked again, it releases once the drop ends";
  EXPECT_TRUE(p.should_release(100 * mib, 2));
  EXPECT_FALSE(p.owes());
  EXPECT_FALSE(p.should_release(10 * mib, 3));
  EXPECT_FALSE(p.should_release(10 * mib, 4)) << "within the interval of the last release";
  EXPECT_TRUE(p.owes()) << "so it must be asked again later";
  EXPECT_TRUE(p.should_release(10 * mib, 2'002));
  EXPECT_FALSE(p.owes());
}

} // namespace
} // namespace lmcc::actors
