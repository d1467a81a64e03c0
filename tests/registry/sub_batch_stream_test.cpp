// sub_batch_stream: per-destination numbering, cumulative acks turning back
// into credits, and what is outstanding when a sender quits.
// CAF-free: linked with lmcc_registry only.
#include "registry/sub_batch_stream.hpp"

#if defined(CAF_VERSION)
#error "sub_batch_stream pulls in CAF"
#endif

#include <gtest/gtest.h>

namespace lmcc::actors {
namespace {

/// out.ack(stream, up_to), kept out of line: with the constants of these tests
/// inlined, GCC 12 -O3 reports a false -Warray-bounds inside std::deque.
[[gnu::noinline]] uint64_t ack(sub_batch_stream& out, uint64_t stream, uint64_t up_to) {
  return out.ack(stream, up_to);
}

TEST(sub_batch_stream, numbers_each_destination_from_one_under_its_own_stream) {
  sub_batch_stream out{700, 3};
  EXPECT_TRUE(out.idle());
  std::vector<std::pair<uint64_t, uint64_t>> got;
  for (uint32_t d : {0U, 2U, 0U, 0U, 2U}) {
    kv_sub_batch sb;
    out.stamp(d, sb, 10);
    got.emplace_back(sb.stream, sb.number);
  }
  EXPECT_EQ(got, (std::vector<std::pair<uint64_t, uint64_t>>{
                     {700, 1}, {702, 1}, {700, 2}, {700, 3}, {702, 2}}));
  EXPECT_EQ(out.unacked(), 5u);
  EXPECT_EQ(out.outstanding_credits(), 50u);
  EXPECT_EQ(out.base(), 700u);
  EXPECT_EQ(out.destinations(), 3u);
}

TEST(sub_batch_stream, acks_are_cumulative_per_stream_and_release_credits_once) {
  sub_batch_stream out{10, 2};
  for (uint64_t credits : {1, 2, 4}) {
    kv_sub_batch sb;
    out.stamp(0, sb, credits);
  }
  kv_sub_batch other;
  out.stamp(1, other, 100);
  EXPECT_EQ(ack(out, 10, 2), 3u);
  EXPECT_EQ(ack(out, 10, 2), 0u); // again: nothing new
  EXPECT_EQ(ack(out, 10, 1), 0u); // older: nothing
  EXPECT_EQ(ack(out, 9, 5), 0u);  // not ours
  EXPECT_EQ(ack(out, 12, 5), 0u); // not ours
  EXPECT_FALSE(out.idle());
  EXPECT_EQ(out.outstanding_credits(), 104u);
  EXPECT_EQ(ack(out, 11, 1), 100u);
  EXPECT_EQ(ack(out, 10, 99), 4u); // beyond the last sent: everything
  EXPECT_TRUE(out.idle());
  EXPECT_EQ(out.outstanding_credits(), 0u);
  kv_sub_batch next;
  out.stamp(0, next, 1);
  EXPECT_EQ(next.number, 4u); // numbering goes on after acks
}

} // namespace
} // namespace lmcc::actors
