// deadline_book: deadlines expire in order at the time passed in, a settled
// deadline never expires, and an expired one cannot be settled afterwards (its
// late answer is ignored). CAF-free.
#include "actors/deadline_book.hpp"

#include <gtest/gtest.h>

#include <string>

namespace lmcc::actors {
namespace {

using namespace std::chrono_literals;
using clock = deadline_book<std::string>::clock;

TEST(deadline_book, expires_what_is_due_oldest_first_and_nothing_settled) {
  deadline_book<std::string> book;
  const auto t0 = clock::time_point{} + 1h;
  const auto a = book.add(t0 + 10ms, "a");
  const auto b = book.add(t0 + 20ms, "b");
  const auto c = book.add(t0 + 30ms, "c");
  EXPECT_TRUE(book.settle(b));
  EXPECT_TRUE(book.expire(t0 + 9ms).empty());
  EXPECT_EQ(book.expire(t0 + 25ms), std::vector<std::string>{"a"});
  EXPECT_FALSE(book.pending(a));
  EXPECT_TRUE(book.pending(c));
  EXPECT_EQ(book.expire(t0 + 1s), std::vector<std::string>{"c"});
  EXPECT_TRUE(book.empty());
  // Late answers of expired or settled deadlines are not outstanding.
  EXPECT_FALSE(book.settle(a));
  EXPECT_FALSE(book.settle(b));
  EXPECT_FALSE(book.settle(c));
}

TEST(deadline_book, deadlines_out_of_add_order_expire_when_due) {
  deadline_book<int> book;
  const auto t0 = clock::time_point{} + 1h;
  book.add(t0 + 50ms, 1); // a longer timeout filed first
  book.add(t0 + 10ms, 2);
  EXPECT_EQ(book.expire(t0 + 10ms), std::vector<int>{2});
  EXPECT_EQ(book.size(), 1u);
  EXPECT_EQ(book.expire(t0 + 50ms), std::vector<int>{1});
}

TEST(deadline_book, the_check_interval_is_an_eighth_of_the_timeout_within_bounds) {
  EXPECT_EQ(expiry_check_interval(800ms), 100ms);
  EXPECT_EQ(expiry_check_interval(10s), 250ms);
  EXPECT_EQ(expiry_check_interval(2ms), 1ms);
}

} // namespace
} // namespace lmcc::actors
