#include "registry/full_sync_session.hpp"

#include <gtest/gtest.h>

using namespace lmcc::actors;

TEST(full_sync_session, reports_the_batches_not_yet_received) {
  full_sync_session s{"sync-1", 10000, 5, 100.0};
  EXPECT_EQ(s.missing_batches(), (std::vector<uint64_t>{0, 1, 2, 3, 4}));
  s.record_batch(0, 2000, 101.0);
  s.record_batch(2, 2000, 102.0);
  s.record_batch(4, 2000, 103.0);
  EXPECT_EQ(s.missing_batches(), (std::vector<uint64_t>{1, 3}));
  EXPECT_EQ(s.missing_batch_count(), 2u);
  s.record_batch(1, 2000, 104.0);
  s.record_batch(3, 2000, 105.0);
  EXPECT_TRUE(s.missing_batches().empty());
}

TEST(full_sync_session, counts_duplicate_batches_again_like_lmcache) {
  full_sync_session s{"s", 4, 2, 0.0};
  s.record_batch(0, 2, 1.0);
  s.record_batch(0, 2, 2.0);
  EXPECT_EQ(s.received_keys(), 4u);
  EXPECT_EQ(s.missing_batches(), (std::vector<uint64_t>{1}));
}

TEST(full_sync_session, completes_and_flags_a_key_count_mismatch) {
  full_sync_session s{"s", 4, 2, 0.0};
  s.record_batch(0, 2, 1.0);
  EXPECT_FALSE(s.complete(4, 2.0));
  EXPECT_EQ(s.phase(), sync_phase::completed);
  EXPECT_TRUE(s.missing_batches().empty()); // only a SYNCING session reports missing batches
}

TEST(full_sync_session, fails_after_idling_longer_than_the_timeout) {
  full_sync_session s{"s", 4, 2, 0.0};
  s.record_batch(0, 2, 10.0);
  EXPECT_FALSE(s.expire(300.0, 300.0)); // idle 290 s
  EXPECT_TRUE(s.expire(310.5, 300.0));
  EXPECT_EQ(s.phase(), sync_phase::failed);
  EXPECT_FALSE(s.expire(1000.0, 300.0)); // already failed
}

TEST(full_sync_session, never_expires_once_completed) {
  full_sync_session s{"s", 0, 1, 0.0};
  s.complete(0, 1.0);
  EXPECT_FALSE(s.expire(1e9, 300.0));
  EXPECT_EQ(s.phase(), sync_phase::completed);
}

TEST(full_sync_session, ignores_batch_ids_outside_the_announced_range) {
  full_sync_session s{"s", 4, 2, 0.0};
  s.record_batch(7, 2, 1.0);
  EXPECT_EQ(s.missing_batches(), (std::vector<uint64_t>{0, 1}));
  EXPECT_EQ(s.received_keys(), 2u);
}
