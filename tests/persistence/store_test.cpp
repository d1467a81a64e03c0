#include "persistence/store.hpp"
#include "test_util.hpp"

#include <gtest/gtest.h>
#include <rocksdb/db.h>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <thread>
#include <tuple>

using namespace lmcc::persistence;
using namespace lmcc::persistence::test;
using lmcc::msg::wire_int;

namespace {

constexpr uint32_t holder(uint32_t worker_num, uint32_t location) {
  return (worker_num << 8) | location;
}

} // namespace

TEST(persistence_store, workers_entries_and_watermarks_survive_a_reopen) {
  temp_dir tmp;
  auto w1 = sample_worker(1, "inst-a", wire_int{0});
  auto w2 = sample_worker(2, "inst-a", wire_int{-7});
  auto w3 = sample_worker(3, "inst-b", wire_int::from_unsigned(18446744073709551615ULL));
  {
    auto s = must_open(tmp.sub("db"));
    ASSERT_TRUE(s);
    store::batch b;
    // Written out of order: the store returns registration (worker_num) order.
    b.put_worker(w3);
    b.put_worker(w1);
    b.put_worker(w2);
    b.admit(4095, 0xffffffffffffffffULL, holder(3, 0));
    b.admit(7, 42, holder(1, 1));
    b.admit(7, 42, holder(2, 0));
    b.admit(0, 9, holder(1, 0));
    b.put_watermark({1, 0, 2, 100});
    b.put_watermark({1, 0, 0, 99});
    b.put_watermark({3, 0, 1, 5});
    ASSERT_TRUE(s->commit(std::move(b)));
  }
  auto s = must_open(tmp.sub("db"));
  ASSERT_TRUE(s);
  auto c = read_all(*s);
  EXPECT_EQ(c.workers, (std::vector<worker_row>{w1, w2, w3}));
  EXPECT_EQ(c.entries, (std::vector<entry>{{0, 9, holder(1, 0)},
                                           {7, 42, holder(1, 1)},
                                           {7, 42, holder(2, 0)},
                                           {4095, 0xffffffffffffffffULL, holder(3, 0)}}));
  EXPECT_EQ(c.watermarks, (std::vector<watermark>{{1, 0, 0, 99}, {1, 0, 2, 100}, {3, 0, 1, 5}}));
  EXPECT_TRUE(c.workers[2].worker_id == wire_int::from_unsigned(18446744073709551615ULL));
  EXPECT_TRUE(c.workers[1].worker_id.is_negative());
}

TEST(persistence_store, later_writes_replace_and_evict_removes) {
  temp_dir tmp;
  auto s = must_open(tmp.sub("db"));
  ASSERT_TRUE(s);
  auto w = sample_worker(1, "inst-a", 0);
  store::batch b1;
  b1.put_worker(w);
  b1.admit(1, 10, holder(1, 0));
  b1.admit(1, 11, holder(1, 0));
  b1.admit(2, 20, holder(1, 0));
  b1.put_watermark({1, 0, 0, 10});
  ASSERT_TRUE(s->commit(std::move(b1)));

  w.last_heartbeat_time = 1800000000.0;
  w.locations.push_back("GPU");
  store::batch b2;
  b2.put_worker(w);
  b2.evict(1, 11, holder(1, 0));
  b2.evict(3, 99, holder(1, 0)); // absent: a no-op
  b2.put_watermark({1, 0, 0, 12});
  ASSERT_TRUE(s->commit(std::move(b2)));

  auto c = read_all(*s);
  EXPECT_EQ(c.workers, (std::vector<worker_row>{w}));
  EXPECT_EQ(c.entries, (std::vector<entry>{{1, 10, holder(1, 0)}, {2, 20, holder(1, 0)}}));
  EXPECT_EQ(c.watermarks, (std::vector<watermark>{{1, 0, 0, 12}}));

  store::batch b3;
  b3.delete_worker(1);
  b3.clear_watermarks(1, std::nullopt);
  ASSERT_TRUE(s->commit(std::move(b3)));
  c = read_all(*s);
  EXPECT_TRUE(c.workers.empty());
  EXPECT_TRUE(c.watermarks.empty());
  EXPECT_EQ(c.entries.size(), 2u); // entries go with clear_holder, not delete_worker
}

TEST(persistence_store, clear_holder_drops_one_location_or_a_whole_worker) {
  temp_dir tmp;
  auto s = must_open(tmp.sub("db"));
  ASSERT_TRUE(s);
  store::batch b;
  for (uint32_t slot : {0u, 17u, 4095u}) {
    b.admit(slot, 100 + slot, holder(1, 0));
    b.admit(slot, 100 + slot, holder(1, 1));
    b.admit(slot, 100 + slot, holder(2, 0));
    b.admit(slot, 200 + slot, holder(257, 0)); // worker 257's low byte is worker 1's
  }
  ASSERT_TRUE(s->commit(std::move(b)));

  store::batch one_location;
  one_location.clear_holder(1, 1u);
  ASSERT_TRUE(s->commit(std::move(one_location)));
  auto c = read_all(*s);
  EXPECT_EQ(c.entries, (std::vector<entry>{{0, 100, holder(1, 0)},
                                           {0, 100, holder(2, 0)},
                                           {0, 200, holder(257, 0)},
                                           {17, 117, holder(1, 0)},
                                           {17, 117, holder(2, 0)},
                                           {17, 217, holder(257, 0)},
                                           {4095, 4195, holder(1, 0)},
                                           {4095, 4195, holder(2, 0)},
                                           {4095, 4295, holder(257, 0)}}));

  // Whole worker, in a batch that also admits for it before (dropped) and
  // after (kept) the clear: order inside a batch is respected.
  store::batch whole;
  whole.admit(5, 555, holder(1, 3));
  whole.clear_holder(1, std::nullopt);
  whole.admit(6, 666, holder(1, 0));
  ASSERT_TRUE(s->commit(std::move(whole)));
  c = read_all(*s);
  EXPECT_EQ(c.entries, (std::vector<entry>{{0, 100, holder(2, 0)},
                                           {0, 200, holder(257, 0)},
                                           {6, 666, holder(1, 0)},
                                           {17, 117, holder(2, 0)},
                                           {17, 217, holder(257, 0)},
                                           {4095, 4195, holder(2, 0)},
                                           {4095, 4295, holder(257, 0)}}));
}

TEST(persistence_store, clear_watermarks_of_one_location) {
  temp_dir tmp;
  auto s = must_open(tmp.sub("db"));
  ASSERT_TRUE(s);
  store::batch b;
  b.put_watermark({1, 0, 0, 10});
  b.put_watermark({1, 1, 0, 11});
  b.put_watermark({1, 1, 3, 12});
  b.put_watermark({2, 1, 0, 13});
  b.put_watermark({0xffffffff, 0xffffffff, 0, 14});
  ASSERT_TRUE(s->commit(std::move(b)));
  store::batch clear;
  clear.clear_watermarks(1, 1u);
  clear.clear_watermarks(0xffffffff, 0xffffffffu); // the top of the key range
  ASSERT_TRUE(s->commit(std::move(clear)));
  EXPECT_EQ(read_all(*s).watermarks, (std::vector<watermark>{{1, 0, 0, 10}, {2, 1, 0, 13}}));
}

TEST(persistence_store, delete_watermark_removes_one_shards_value_only) {
  temp_dir tmp;
  auto s = must_open(tmp.sub("db"));
  ASSERT_TRUE(s);
  store::batch b;
  b.put_watermark({1, 0, 0, 10});
  b.put_watermark({1, 0, 1, 11});
  b.put_watermark({1, 1, 1, 12});
  ASSERT_TRUE(s->commit(b));
  store::batch del;
  del.delete_watermark(1, 0, 1);
  del.delete_watermark(9, 9, 9); // absent: a no-op
  ASSERT_TRUE(s->commit(del));
  EXPECT_EQ(read_all(*s).watermarks, (std::vector<watermark>{{1, 0, 0, 10}, {1, 1, 1, 12}}));
}

TEST(persistence_store, created_tells_a_new_store_from_a_reopened_one) {
  temp_dir tmp;
  {
    auto s = must_open(tmp.sub("db"));
    ASSERT_TRUE(s);
    EXPECT_TRUE(s->created());
  }
  auto again = must_open(tmp.sub("db"));
  ASSERT_TRUE(again);
  EXPECT_FALSE(again->created());
}

TEST(persistence_store, a_failed_or_retried_commit_leaves_the_batch_as_it_was) {
  temp_dir tmp;
  auto s = must_open(tmp.sub("db"));
  ASSERT_TRUE(s);
  store::batch b;
  b.admit(3, 42, holder(1, 0));
  b.put_worker(sample_worker(1, "a", 0));
  ASSERT_TRUE(s->commit(b));
  EXPECT_EQ(b.size(), 2U); // kept for a retry: committing again is idempotent
  ASSERT_TRUE(s->commit(b));
  auto c = read_all(*s);
  EXPECT_EQ(c.entries, (std::vector<entry>{{3, 42, holder(1, 0)}}));
  EXPECT_EQ(c.workers, (std::vector<worker_row>{sample_worker(1, "a", 0)}));
}

TEST(persistence_store, concurrent_writers_each_land_whole) {
  // The node's shards commit from their own threads; commits without clears run
  // concurrently, one with a clear runs alone. Nothing may be lost or torn.
  temp_dir tmp;
  auto s = must_open(tmp.sub("db"));
  ASSERT_TRUE(s);
  constexpr uint32_t writers = 4;
  constexpr uint64_t commits = 200;
  std::vector<std::thread> threads;
  for (uint32_t w = 0; w < writers; ++w)
    threads.emplace_back([&, w] {
      for (uint64_t i = 0; i < commits; ++i) {
        store::batch b;
        for (uint64_t k = 0; k < 10; ++k)
          b.admit(w, (i * 10 + k) << 8 | w, holder(w + 1, 0));
        b.put_watermark({w + 1, 0, w, i});
        if (w == 0 && i % 50 == 49)
          b.clear_holder(99, std::nullopt); // exclusive, holds nothing of the others
        ASSERT_TRUE(s->commit(b));
      }
    });
  for (auto& t : threads)
    t.join();
  auto c = read_all(*s);
  EXPECT_EQ(c.entries.size(), writers * commits * 10);
  ASSERT_EQ(c.watermarks.size(), writers);
  for (const auto& wm : c.watermarks)
    EXPECT_EQ(wm.seq, commits - 1) << wm.worker_num;
}

TEST(persistence_store, slots_load_apart_and_in_parallel_like_the_whole) {
  temp_dir tmp;
  auto s = must_open(tmp.sub("db"));
  ASSERT_TRUE(s);
  store::batch b;
  for (uint64_t k = 0; k < 5000; ++k)
    b.admit(static_cast<uint32_t>(k % 97), k * 2654435761ULL, holder(1 + k % 3, 0));
  b.put_worker(sample_worker(1, "a", 0));
  b.put_watermark({1, 0, 0, 9});
  ASSERT_TRUE(s->commit(b));
  auto whole = read_all(*s);

  // Two threads, disjoint slot lists (even and odd slots), as a node loads.
  std::vector<entry> parts[2];
  std::vector<std::thread> threads;
  for (uint32_t t = 0; t < 2; ++t)
    threads.emplace_back([&, t] {
      std::vector<uint32_t> slots;
      for (uint32_t slot = t; slot < 97; slot += 2)
        slots.push_back(slot);
      auto n = s->load_slots(slots, [&](uint32_t slot, uint64_t key, uint32_t h) {
        parts[t].push_back({slot, key, h});
      });
      ASSERT_TRUE(n);
      EXPECT_EQ(*n, parts[t].size());
    });
  for (auto& th : threads)
    th.join();
  std::vector<entry> merged = parts[0];
  merged.insert(merged.end(), parts[1].begin(), parts[1].end());
  std::sort(merged.begin(), merged.end(), [](const entry& x, const entry& y) {
    return std::tie(x.slot, x.key, x.holder) < std::tie(y.slot, y.key, y.holder);
  });
  EXPECT_EQ(merged, whole.entries);

  auto dir = s->load_directory();
  ASSERT_TRUE(dir);
  EXPECT_EQ(dir->workers, whole.workers);
  EXPECT_EQ(dir->watermarks, whole.watermarks);
  EXPECT_EQ(dir->entries, 0U);

  // first_entry_from finds entries beyond a slot count, or none.
  auto beyond = s->first_entry_from(96);
  ASSERT_TRUE(beyond);
  ASSERT_TRUE(beyond->has_value());
  EXPECT_EQ((*beyond)->slot, 96U);
  auto none = s->first_entry_from(97);
  ASSERT_TRUE(none);
  EXPECT_FALSE(none->has_value());
  EXPECT_FALSE(s->load_slots({max_slot + 1}, [](uint32_t, uint64_t, uint32_t) {}));
}

TEST(persistence_store, one_rocksdb_write_per_commit) {
  temp_dir tmp;
  auto s = must_open(tmp.sub("db"));
  ASSERT_TRUE(s);
  uint64_t before = s->write_count();
  for (int i = 0; i < 5; ++i) {
    store::batch b;
    for (uint64_t k = 0; k < 1000; ++k)
      b.admit(static_cast<uint32_t>(k % 64), k * 7919 + static_cast<uint64_t>(i), holder(1, 0));
    b.put_worker(sample_worker(1, "a", 0));
    b.put_watermark({1, 0, 0, static_cast<uint64_t>(i)});
    if (i == 3)
      b.clear_holder(1, 0u); // reads, but still one write
    ASSERT_TRUE(s->commit(std::move(b)));
    EXPECT_EQ(s->write_count(), before + static_cast<uint64_t>(i) + 1);
  }
  // An empty batch writes nothing.
  ASSERT_TRUE(s->commit(store::batch{}));
  EXPECT_EQ(s->write_count(), before + 5);
}

TEST(persistence_store, invalid_batches_are_refused_whole) {
  temp_dir tmp;
  auto s = must_open(tmp.sub("db"));
  ASSERT_TRUE(s);
  store::batch b;
  b.admit(1, 1, holder(1, 0));
  b.admit(65536, 2, holder(1, 0));
  uint64_t before = s->write_count();
  auto r = s->commit(std::move(b));
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("slot 65536"), std::string::npos) << r.error().message;
  EXPECT_EQ(s->write_count(), before);
  EXPECT_TRUE(read_all(*s).entries.empty());
}

TEST(persistence_store, another_node_id_is_refused) {
  temp_dir tmp;
  ASSERT_TRUE(must_open(tmp.sub("db"), "n1"));
  auto other = store::open(options_at(tmp.sub("db")), "n2");
  ASSERT_FALSE(other);
  EXPECT_EQ(other.error().message,
            "open " + tmp.sub("db") + ": the store belongs to node 'n1', not 'n2'");
  // The refused open released the DB: the right node opens it.
  EXPECT_TRUE(must_open(tmp.sub("db"), "n1"));
}

TEST(persistence_store, another_format_version_is_refused) {
  temp_dir tmp;
  ASSERT_TRUE(must_open(tmp.sub("db")));
  {
    // Stamp version 2 behind the store's back.
    rocksdb::DB* raw = nullptr;
    ASSERT_TRUE(rocksdb::DB::Open(rocksdb::Options{}, tmp.sub("db"), &raw).ok());
    std::unique_ptr<rocksdb::DB> db{raw};
    ASSERT_TRUE(db->Put(rocksdb::WriteOptions{}, format_version_key(), encode_u32(2)).ok());
  }
  auto s = store::open(options_at(tmp.sub("db")), "n1");
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().message, "open " + tmp.sub("db") + ": format version 2, this build reads 1");
}

TEST(persistence_store, a_foreign_rocksdb_is_refused) {
  temp_dir tmp;
  {
    rocksdb::Options o;
    o.create_if_missing = true;
    rocksdb::DB* raw = nullptr;
    ASSERT_TRUE(rocksdb::DB::Open(o, tmp.sub("db"), &raw).ok());
    std::unique_ptr<rocksdb::DB> db{raw};
    ASSERT_TRUE(db->Put(rocksdb::WriteOptions{}, "somebody", "else").ok());
  }
  auto s = store::open(options_at(tmp.sub("db")), "n1");
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().message.find("not an lmcc store"), std::string::npos);
}

TEST(persistence_store, bad_options_and_unopenable_paths_are_errors) {
  temp_dir tmp;
  auto o = options_at(tmp.sub("db"));
  o.sync = true;
  o.disable_wal = true;
  auto s = store::open(o, "n1");
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().message.find("sync needs the WAL"), std::string::npos);

  auto missing = options_at(tmp.sub("nothing-here"));
  missing.create_if_missing = false;
  auto m = store::open(missing, "n1");
  ASSERT_FALSE(m);
  // RocksDB's status text, with the path in front.
  EXPECT_EQ(m.error().message.rfind("open " + tmp.sub("nothing-here") + ": ", 0), 0u)
      << m.error().message;

  // A second open of the same DB in this process fails on RocksDB's lock.
  auto first = must_open(tmp.sub("db2"));
  auto second = store::open(options_at(tmp.sub("db2")), "n1");
  ASSERT_FALSE(second);
  EXPECT_NE(second.error().message.find("lock"), std::string::npos) << second.error().message;
}

TEST(persistence_store, a_million_entries_load_by_streaming) {
  temp_dir tmp;
  constexpr uint64_t total = 1'000'000;
  constexpr uint32_t slots = 4096;
  uint64_t written_sum = 0;
  auto t0 = std::chrono::steady_clock::now();
  {
    auto s = must_open(tmp.sub("db"));
    ASSERT_TRUE(s);
    for (uint64_t base = 0; base < total; base += 100'000) {
      store::batch b;
      for (uint64_t i = base; i < base + 100'000; ++i) {
        uint64_t key = i * 0x9e3779b97f4a7c15ULL;
        uint32_t h = holder(1 + static_cast<uint32_t>(i % 4), 0);
        b.admit(static_cast<uint32_t>(key % slots), key, h);
        written_sum += key ^ h;
      }
      ASSERT_TRUE(s->commit(std::move(b)));
    }
    ASSERT_TRUE(s->flush());
    auto bytes = s->disk_bytes();
    ASSERT_TRUE(bytes);
    EXPECT_GT(*bytes, 0u);
    std::cout << "[ info ] 1M entries: disk_bytes=" << *bytes
              << " bytes_per_entry=" << static_cast<double>(*bytes) / total << "\n";
  }
  auto t1 = std::chrono::steady_clock::now();
  auto s = must_open(tmp.sub("db"));
  ASSERT_TRUE(s);
  uint64_t seen = 0;
  uint64_t loaded_sum = 0;
  uint32_t last_slot = 0;
  bool ordered = true;
  std::vector<uint64_t> progress;
  auto r = s->load(
      [&](uint32_t slot, uint64_t key, uint32_t h) {
        ++seen;
        loaded_sum += key ^ h;
        ordered = ordered && slot >= last_slot;
        last_slot = slot;
      },
      [&](const load_progress& p) { progress.push_back(p.entries); }, 250'000);
  auto t2 = std::chrono::steady_clock::now();
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->entries, total);
  EXPECT_EQ(seen, total);
  EXPECT_EQ(loaded_sum, written_sum);
  EXPECT_TRUE(ordered);
  EXPECT_EQ(progress, (std::vector<uint64_t>{250'000, 500'000, 750'000, 1'000'000}));
  std::cout << "[ info ] 1M entries: write+flush=" << std::chrono::duration<double>(t1 - t0).count()
            << "s open+load=" << std::chrono::duration<double>(t2 - t1).count() << "s\n";

  // clear_holder's full scan at this size (documented cost).
  auto t3 = std::chrono::steady_clock::now();
  store::batch clear;
  clear.clear_holder(1, std::nullopt);
  ASSERT_TRUE(s->commit(std::move(clear)));
  auto t4 = std::chrono::steady_clock::now();
  uint64_t left = 0;
  ASSERT_TRUE(s->load([&](uint32_t, uint64_t, uint32_t) { ++left; }));
  EXPECT_EQ(left, total - total / 4);
  std::cout << "[ info ] 1M entries: clear_holder(250k of them)="
            << std::chrono::duration<double>(t4 - t3).count() << "s\n";
}
