// kv_shard_state with a real store: what a shard writes to disk for its ops,
// watermarks and erases, read back with store::load. No actor system.
#include "actors/kv_shard.hpp"
#include "tests/persistence/test_util.hpp"

#include <gtest/gtest.h>

namespace lmcc::actors {
namespace {

using persistence::test::temp_dir;

struct disk {
  std::vector<persistence::entry> entries;
  std::vector<persistence::watermark> watermarks;
};

disk read(const persistence::store& s) {
  disk d;
  auto r = s.load([&](uint32_t slot, uint64_t key, uint32_t h) {
    d.entries.push_back({slot, key, h});
  });
  EXPECT_TRUE(r) << (r ? "" : r.error().message);
  if (r)
    d.watermarks = r->watermarks;
  return d;
}

class kv_shard_state_test : public ::testing::Test {
protected:
  void SetUp() override {
    persistence::store_options o;
    o.path = tmp.sub("db");
    o.block_cache_bytes = size_t{4} << 20;
    o.write_buffer_bytes = size_t{4} << 20;
    auto s = persistence::store::open(o, "n1");
    ASSERT_TRUE(s) << s.error().message;
    store = std::shared_ptr<persistence::store>(std::move(*s));
    state.durability = shard_durability{store, 3, 64, 1'000'000};
  }

  temp_dir tmp;
  std::shared_ptr<persistence::store> store;
  kv_shard_state state;
};

TEST_F(kv_shard_state_test, ops_and_their_watermark_reach_the_disk_in_one_commit) {
  const holder_id h = make_holder(1, 0);
  state.apply(h, {{10, true}, {11, true}, {10, false}});
  state.set_watermark(h, 2);
  EXPECT_TRUE(read(*store).entries.empty()); // pending until commit
  uint64_t writes = store->write_count();
  state.commit();
  EXPECT_EQ(store->write_count(), writes + 1);
  auto d = read(*store);
  EXPECT_EQ(d.entries, (std::vector<persistence::entry>{{slot_of(11, 64), 11, h}}));
  EXPECT_EQ(d.watermarks, (std::vector<persistence::watermark>{{1, 0, 3, 2}}));
  EXPECT_EQ(state.index.entries(), 1U);
}

TEST_F(kv_shard_state_test, erase_removes_entries_and_this_shards_watermarks) {
  state.apply(make_holder(1, 0), {{1, true}, {2, true}});
  state.apply(make_holder(1, 1), {{3, true}});
  state.apply(make_holder(2, 0), {{1, true}});
  state.set_watermark(make_holder(1, 0), 5);
  state.set_watermark(make_holder(1, 1), 6);
  state.set_watermark(make_holder(2, 0), 7);
  state.commit();

  EXPECT_EQ(state.erase(1, 0), 2U);
  state.commit();
  auto d = read(*store);
  EXPECT_EQ(d.entries.size(), 2U); // (3, 1/1) and (1, 2/0)
  EXPECT_EQ(d.watermarks, (std::vector<persistence::watermark>{{1, 1, 3, 6}, {2, 0, 3, 7}}));

  EXPECT_EQ(state.erase(1, -1), 1U);
  state.commit();
  d = read(*store);
  EXPECT_EQ(d.entries, (std::vector<persistence::entry>{{slot_of(1, 64), 1, make_holder(2, 0)}}));
  EXPECT_EQ(d.watermarks, (std::vector<persistence::watermark>{{2, 0, 3, 7}}));
}

TEST_F(kv_shard_state_test, without_a_store_nothing_is_pending) {
  kv_shard_state mem;
  mem.apply(make_holder(1, 0), {{1, true}});
  mem.set_watermark(make_holder(1, 0), 1);
  EXPECT_FALSE(mem.pending);
  EXPECT_TRUE(mem.watermarks.empty());
  mem.commit(); // a no-op
  EXPECT_EQ(mem.index.entries(), 1U);
}

} // namespace
} // namespace lmcc::actors
