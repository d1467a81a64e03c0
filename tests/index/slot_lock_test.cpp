// slot_lock: readers share it, the writer excludes them and waits for the
// readers inside, nobody is left asleep, with real threads (each wait is on a
// condition, bounded, never a sleep). CAF-free.
#include "index/internal/slot_lock.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <mutex>
#include <shared_mutex>
#include <thread>
#include <vector>

namespace lmcc::actors::internal {
namespace {

using namespace std::chrono_literals;

TEST(slot_lock, readers_hold_it_together) {
  slot_lock l;
  std::shared_lock first{l};
  auto second = std::async(std::launch::async, [&] {
    std::shared_lock r{l};
    return true;
  });
  ASSERT_EQ(second.wait_for(10s), std::future_status::ready) << "a reader waited for a reader";
}

TEST(slot_lock, a_reader_waits_for_the_writer_and_gets_in_once_it_leaves) {
  slot_lock l;
  std::unique_lock writer{l};
  std::atomic<bool> entered{false};
  auto reader = std::async(std::launch::async, [&] {
    std::shared_lock r{l};
    entered = true;
  });
  // Long enough for the reader to pass its spin and sleep on the word.
  EXPECT_EQ(reader.wait_for(50ms), std::future_status::timeout);
  EXPECT_FALSE(entered.load());
  writer.unlock();
  ASSERT_EQ(reader.wait_for(10s), std::future_status::ready) << "the reader was never woken";
  EXPECT_TRUE(entered.load());
}

TEST(slot_lock, the_writer_waits_for_the_readers_inside) {
  slot_lock l;
  std::shared_lock r1{l};
  std::shared_lock r2{l};
  std::atomic<bool> entered{false};
  auto writer = std::async(std::launch::async, [&] {
    std::unique_lock w{l};
    entered = true;
  });
  EXPECT_EQ(writer.wait_for(50ms), std::future_status::timeout);
  r1.unlock();
  EXPECT_EQ(writer.wait_for(20ms), std::future_status::timeout) << "in with a reader inside";
  EXPECT_FALSE(entered.load());
  r2.unlock();
  ASSERT_EQ(writer.wait_for(10s), std::future_status::ready) << "the writer was never woken";
  EXPECT_TRUE(entered.load());
}

TEST(slot_lock, readers_never_see_the_writer_half_way_and_nobody_is_left_asleep) {
  // The writer keeps two counters equal outside its critical section; readers
  // check them. Short and long holds on both sides exercise the spin and the
  // sleep paths.
  slot_lock l;
  uint64_t a = 0, b = 0;
  std::atomic<bool> done{false};
  std::atomic<bool> torn{false};
  std::atomic<uint64_t> reads{0};
  std::vector<std::thread> readers;
  for (int t = 0; t < 3; ++t)
    readers.emplace_back([&, t] {
      uint64_t n = 0;
      while (!done.load(std::memory_order_relaxed)) {
        std::shared_lock r{l};
        if (a != b)
          torn = true;
        if (++n % (64 + t) == 0) // now and then a long read
          for (int i = 0; i < 2000; ++i)
            cpu_relax();
        reads.fetch_add(1, std::memory_order_relaxed);
      }
    });
  for (int i = 0; i < 200'000; ++i) {
    std::unique_lock w{l};
    ++a;
    if (i % 1000 == 0) // now and then a long write
      for (int j = 0; j < 5000; ++j)
        cpu_relax();
    ++b;
  }
  done = true;
  for (auto& t : readers)
    t.join(); // a reader left asleep would hang here (ctest's timeout)
  EXPECT_FALSE(torn.load());
  EXPECT_GT(reads.load(), 0u);
  EXPECT_EQ(a, 200'000u);
  EXPECT_EQ(b, 200'000u);
}

} // namespace
} // namespace lmcc::actors::internal
