// store: a real RocksDB in a temp dir. Open and its format stamp, batches
// (one RocksDB write each), the start-up reads, log truncation, injected
// failures, and every kind of data dir that must be refused.
#include "persistence/store.hpp"
#include "test_util.hpp"

#include <gtest/gtest.h>
#include <rocksdb/db.h>

#include <algorithm>
#include <thread>

using namespace lmcc::persistence;
using namespace lmcc::persistence::test;
using lmcc::msg::wire_int;

namespace {

std::string record_at(uint64_t position) {
  log_record r;
  r.holder = position;
  r.ops = {{position * 31, true}};
  std::string out;
  encode_log_record(r, out);
  return out;
}

std::string slot_value(uint32_t slot, uint64_t position, uint64_t key) {
  slot_snapshot_writer w{slot, position};
  w.add(key, std::vector<uint64_t>{1, 2});
  std::string out;
  w.finish(out);
  return out;
}

/// The value of `key` in the default family, read with raw RocksDB (read-only).
std::optional<std::string> raw_get(const std::string& path, const std::string& key) {
  rocksdb::DB* raw = nullptr;
  std::vector<rocksdb::ColumnFamilyDescriptor> families{{rocksdb::kDefaultColumnFamilyName, {}},
                                                        {log_column_family, {}}};
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  if (!rocksdb::DB::OpenForReadOnly(rocksdb::DBOptions{}, path, families, &handles, &raw).ok())
    return std::nullopt;
  std::unique_ptr<rocksdb::DB> db{raw};
  std::string v;
  auto s = db->Get(rocksdb::ReadOptions{}, handles[0], key, &v);
  for (auto* h : handles)
    (void)db->DestroyColumnFamilyHandle(h);
  return s.ok() ? std::optional<std::string>{v} : std::nullopt;
}

std::vector<std::string> families_of(const std::string& path) {
  std::vector<std::string> names;
  EXPECT_TRUE(rocksdb::DB::ListColumnFamilies(rocksdb::DBOptions{}, path, &names).ok());
  std::sort(names.begin(), names.end());
  return names;
}

} // namespace

TEST(persistence_store, open_creates_the_db_and_stamps_format_and_node) {
  temp_dir tmp;
  {
    auto s = must_open(tmp.sub("a/b/db"), "node-1"); // parents are created
    ASSERT_TRUE(s);
    EXPECT_TRUE(s->created());
    EXPECT_EQ(s->node_id(), "node-1");
    EXPECT_EQ(s->path(), tmp.sub("a/b/db"));
    EXPECT_EQ(s->write_count(), 1u); // the stamp
    EXPECT_EQ(read_all(*s), contents{});
  }
  EXPECT_EQ(raw_get(tmp.sub("a/b/db"), "Fformat_version"), std::string("\0\0\0\x03", 4));
  EXPECT_EQ(raw_get(tmp.sub("a/b/db"), "Fnode_id"), "node-1");
  EXPECT_EQ(families_of(tmp.sub("a/b/db")), (std::vector<std::string>{"default", "log"}));
  auto again = must_open(tmp.sub("a/b/db"), "node-1");
  ASSERT_TRUE(again);
  EXPECT_FALSE(again->created());
  EXPECT_EQ(again->write_count(), 0u);
}

TEST(persistence_store, everything_written_survives_a_reopen_in_key_order) {
  temp_dir tmp;
  contents written;
  written.workers = {sample_worker(1, "inst-a", wire_int{0}),
                     sample_worker(2, "inst-a", wire_int{-7}),
                     sample_worker(UINT64_MAX, "inst-b", wire_int::from_unsigned(UINT64_MAX))};
  written.holders = {sample_holder(3, 1, {seq_state::tracking, 41}),
                     sample_holder(0x7fffffffffffffffULL, 2, {seq_state::gap, 0})};
  written.slots = {{0, slot_value(0, 5, 10)}, {4095, slot_value(4095, 6, 11)}};
  written.log = {{7, record_at(7)}, {8, record_at(8)}, {256, record_at(256)}};
  {
    auto s = must_open(tmp.sub("db"));
    ASSERT_TRUE(s);
    auto b = s->new_batch();
    // Written out of order: reads come back in key (uid, holder, slot, position) order.
    for (auto it = written.workers.rbegin(); it != written.workers.rend(); ++it)
      b.put_worker(*it);
    for (auto it = written.holders.rbegin(); it != written.holders.rend(); ++it)
      b.put_holder(*it);
    for (auto it = written.slots.rbegin(); it != written.slots.rend(); ++it)
      b.put_slot(it->first, it->second);
    for (auto it = written.log.rbegin(); it != written.log.rend(); ++it)
      b.append_log(it->first, it->second);
    EXPECT_EQ(b.count(), 10u);
    EXPECT_GT(b.bytes(), 0u);
    ASSERT_TRUE(s->commit(b));
  }
  auto s = must_open(tmp.sub("db"));
  ASSERT_TRUE(s);
  EXPECT_EQ(read_all(*s), written);
  auto dir = s->load_directory();
  ASSERT_TRUE(dir);
  EXPECT_TRUE(dir->workers[1].worker_id.is_negative());
  EXPECT_EQ(dir->workers[2].worker_id, wire_int::from_unsigned(UINT64_MAX));
  EXPECT_EQ(*s->last_log_position(), 256u);
}

TEST(persistence_store, later_puts_replace_and_deletes_remove) {
  temp_dir tmp;
  auto s = must_open(tmp.sub("db"));
  ASSERT_TRUE(s);
  auto b = s->new_batch();
  b.put_worker(sample_worker(1, "a", 0));
  b.put_worker(sample_worker(2, "a", 1));
  b.put_holder(sample_holder(10, 1));
  b.put_holder(sample_holder(11, 2));
  b.put_slot(3, slot_value(3, 1, 1));
  b.put_slot(4, slot_value(4, 1, 1));
  ASSERT_TRUE(s->commit(b));
  auto moved = sample_worker(1, "a", 0);
  moved.port = 9999;
  auto c = s->new_batch();
  c.put_worker(moved);
  c.delete_worker(2);
  c.put_holder(sample_holder(10, 1, {seq_state::resynced, 0}));
  c.delete_holder(11);
  c.put_slot(3, slot_value(3, 2, 2));
  c.delete_slot(4);
  c.delete_slot(99); // absent: harmless
  ASSERT_TRUE(s->commit(c));
  auto all = read_all(*s);
  EXPECT_EQ(all.workers, (std::vector<worker_row>{moved}));
  EXPECT_EQ(all.holders,
            (std::vector<holder_state>{sample_holder(10, 1, {seq_state::resynced, 0})}));
  EXPECT_EQ(all.slots, (std::map<uint32_t, std::string>{{3, slot_value(3, 2, 2)}}));
}

TEST(persistence_store, truncate_log_deletes_below_the_floor_and_records_it) {
  temp_dir tmp;
  auto s = must_open(tmp.sub("db"));
  ASSERT_TRUE(s);
  EXPECT_EQ(*s->last_log_position(), 0u);
  auto b = s->new_batch();
  for (uint64_t p = 1; p <= 10; ++p)
    b.append_log(p, record_at(p));
  ASSERT_TRUE(s->commit(b));
  EXPECT_EQ(*s->last_log_position(), 10u);
  auto t = s->new_batch();
  t.truncate_log(6);
  t.append_log(11, record_at(11)); // the same commit may append above the floor
  EXPECT_EQ(t.count(), 3u);
  ASSERT_TRUE(s->commit(t));
  auto all = read_all(*s);
  EXPECT_EQ(all.log_floor, 6u);
  std::vector<uint64_t> positions;
  for (const auto& [p, v] : all.log) {
    positions.push_back(p);
    EXPECT_EQ(v, record_at(p));
  }
  EXPECT_EQ(positions, (std::vector<uint64_t>{6, 7, 8, 9, 10, 11}));
  // From a position: that one and everything above, in order.
  std::vector<uint64_t> from8;
  auto n = s->for_each_log_record(8, [&](uint64_t p, std::string_view) { from8.push_back(p); });
  ASSERT_TRUE(n);
  EXPECT_EQ(*n, 4u);
  EXPECT_EQ(from8, (std::vector<uint64_t>{8, 9, 10, 11}));
  auto none = s->for_each_log_record(12, [](uint64_t, std::string_view) { ADD_FAILURE(); });
  ASSERT_TRUE(none);
  EXPECT_EQ(*none, 0u);
  // Truncating everything empties the log; the floor survives a reopen.
  auto all_gone = s->new_batch();
  all_gone.truncate_log(12);
  ASSERT_TRUE(s->commit(all_gone));
  EXPECT_EQ(*s->last_log_position(), 0u);
  s.reset();
  s = must_open(tmp.sub("db"));
  ASSERT_TRUE(s);
  EXPECT_EQ(read_all(*s).log_floor, 12u);
  EXPECT_TRUE(read_all(*s).log.empty());
}

/// Appends records from..to (200 bytes of padding each) and flushes them into
/// one SST; `compact`: then compacts them out of level 0.
void write_log_file(store& s, uint64_t from, uint64_t to, bool compact = false) {
  auto b = s.new_batch();
  for (uint64_t p = from; p <= to; ++p)
    b.append_log(p, record_at(p) + std::string(200, 'x'));
  ASSERT_TRUE(s.commit(b));
  ASSERT_TRUE(s.flush());
  if (compact) {
    ASSERT_TRUE(s.compact());
  }
}

TEST(persistence_store, release_log_files_drops_only_files_wholly_below_the_floor) {
  temp_dir tmp;
  auto s = must_open(tmp.sub("db"));
  ASSERT_TRUE(s);
  ASSERT_TRUE(s->set_auto_compactions(false));
  write_log_file(*s, 1, 2000, true); // compacted: below level 0
  write_log_file(*s, 2001, 4000);    // the floor falls inside this one
  const uint64_t before = *s->disk_bytes();
  auto t = s->new_batch();
  t.truncate_log(3000);
  ASSERT_TRUE(s->commit(t));
  ASSERT_TRUE(s->release_log_files(3000));
  EXPECT_LT(*s->disk_bytes(), before - 2000 * 200); // the first file went, unread
  std::vector<uint64_t> seen;
  ASSERT_TRUE(s->for_each_log_record(0, [&](uint64_t p, std::string_view) { seen.push_back(p); }));
  ASSERT_EQ(seen.size(), 1001u); // the file holding the floor stays: 3000..4000 are there
  EXPECT_EQ(seen.front(), 3000u);
  EXPECT_EQ(seen.back(), 4000u);
  EXPECT_EQ(*s->last_log_position(), 4000u);
  ASSERT_TRUE(s->release_log_files(3000)); // nothing left to release: fine
  s.reset();
  s = must_open(tmp.sub("db")); // and it all holds after a reopen
  ASSERT_TRUE(s);
  auto all = read_all(*s);
  EXPECT_EQ(all.log_floor, 3000u);
  EXPECT_EQ(all.log.size(), 1001u);
}

TEST(persistence_store, release_log_files_also_releases_files_still_in_level_0) {
  // Level-0 files are left to RocksDB's background compaction: the caller
  // never waits for it, and the bytes go once level 0 reaches its compaction
  // trigger (4 files), so the log's disk use stays bounded without a scan.
  temp_dir tmp;
  auto s = must_open(tmp.sub("db"));
  ASSERT_TRUE(s);
  write_log_file(*s, 1, 2000);
  write_log_file(*s, 2001, 4000);
  const uint64_t before = *s->disk_bytes();
  auto t = s->new_batch();
  t.truncate_log(3000);
  ASSERT_TRUE(s->commit(t));
  ASSERT_TRUE(s->release_log_files(3000));
  for (uint64_t p = 4001; p <= 4031; p += 10)
    write_log_file(*s, p, p + 9); // later appends, as the running node makes
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (*s->disk_bytes() >= before - 2000 * 200 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::yield();
  EXPECT_LT(*s->disk_bytes(), before - 2000 * 200) << "the file of records 1..2000 is still there";
}

TEST(persistence_store, memory_usage_counts_both_families_memtables_until_a_flush) {
  temp_dir tmp;
  auto s = must_open(tmp.sub("db"));
  const auto fresh = s->memory_usage();
  auto b = s->new_batch();
  for (uint64_t p = 1; p <= 100; ++p)
    b.append_log(p, record_at(p) + std::string(1000, 'x'));
  ASSERT_TRUE(s->commit(b));
  const auto logged = s->memory_usage();
  EXPECT_GE(logged.memtable_bytes, fresh.memtable_bytes + 100 * 1000);
  auto slots = s->new_batch();
  slots.put_slot(7, slot_value(7, 100, 42) + std::string(50'000, 'y'));
  ASSERT_TRUE(s->commit(slots));
  const auto both = s->memory_usage();
  EXPECT_GE(both.memtable_bytes, logged.memtable_bytes + 50'000) << "the default family counts too";
  ASSERT_TRUE(s->flush());
  const auto flushed = s->memory_usage();
  EXPECT_LT(flushed.memtable_bytes, fresh.memtable_bytes + 100 * 1000)
      << "a flush gives the memtables' memory back";
  EXPECT_LE(flushed.block_cache_bytes, store_options{}.block_cache_bytes);
}

TEST(persistence_store, positions_of_every_width_sort_numerically) {
  temp_dir tmp;
  auto s = must_open(tmp.sub("db"));
  ASSERT_TRUE(s);
  const std::vector<uint64_t> positions = {1, 255, 256, 65536, uint64_t{1} << 40, UINT64_MAX - 1};
  auto b = s->new_batch();
  for (auto it = positions.rbegin(); it != positions.rend(); ++it)
    b.append_log(*it, record_at(*it));
  ASSERT_TRUE(s->commit(b));
  std::vector<uint64_t> seen;
  ASSERT_TRUE(s->for_each_log_record(0, [&](uint64_t p, std::string_view) { seen.push_back(p); }));
  EXPECT_EQ(seen, positions);
  EXPECT_EQ(*s->last_log_position(), UINT64_MAX - 1);
  seen.clear();
  ASSERT_TRUE(
      s->for_each_log_record(257, [&](uint64_t p, std::string_view) { seen.push_back(p); }));
  EXPECT_EQ(seen, (std::vector<uint64_t>{65536, uint64_t{1} << 40, UINT64_MAX - 1}));
}

TEST(persistence_store, for_each_slot_reads_a_range_and_disjoint_ranges_in_parallel) {
  temp_dir tmp;
  auto s = must_open(tmp.sub("db"));
  ASSERT_TRUE(s);
  auto b = s->new_batch();
  std::map<uint32_t, std::string> written;
  for (uint32_t slot : {0U, 1U, 9U, 10U, 255U, 256U, 4095U, 65536U}) {
    written[slot] = slot_value(slot, slot + 1, slot * 7ULL);
    b.put_slot(slot, written[slot]);
  }
  b.put_worker(sample_worker(1, "a", 0)); // other prefixes are never visited
  b.put_holder(sample_holder(5, 1));
  b.append_log(1, record_at(1));
  ASSERT_TRUE(s->commit(b));

  auto range = [&](uint32_t lo, uint32_t hi) {
    std::vector<uint32_t> seen;
    auto n = s->for_each_slot(lo, hi, [&](uint32_t slot, std::string_view v) {
      seen.push_back(slot);
      EXPECT_EQ(v, written.at(slot));
    });
    EXPECT_TRUE(n);
    EXPECT_EQ(n ? *n : 0, seen.size());
    return seen;
  };
  EXPECT_EQ(range(0, 0xffffffffU), (std::vector<uint32_t>{0, 1, 9, 10, 255, 256, 4095, 65536}));
  EXPECT_EQ(range(1, 10), (std::vector<uint32_t>{1, 9})); // hi is exclusive
  EXPECT_EQ(range(10, 256), (std::vector<uint32_t>{10, 255}));
  EXPECT_EQ(range(256, 4096), (std::vector<uint32_t>{256, 4095}));
  EXPECT_TRUE(range(11, 255).empty());
  EXPECT_TRUE(range(5, 5).empty());

  // Four threads over disjoint ranges see exactly the whole.
  const uint32_t bounds[] = {0, 10, 256, 4096, 0xffffffffU};
  std::vector<uint32_t> parts[4];
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      ASSERT_TRUE(s->for_each_slot(bounds[t], bounds[t + 1], [&](uint32_t slot, std::string_view) {
        parts[t].push_back(slot);
      }));
    });
  for (auto& th : threads)
    th.join();
  std::vector<uint32_t> merged;
  for (const auto& p : parts)
    merged.insert(merged.end(), p.begin(), p.end());
  EXPECT_EQ(merged, range(0, 0xffffffffU));
}

TEST(persistence_store, one_rocksdb_write_per_commit_and_none_for_an_empty_batch) {
  temp_dir tmp;
  auto s = must_open(tmp.sub("db"));
  ASSERT_TRUE(s);
  const uint64_t before = s->write_count();
  for (uint64_t i = 0; i < 5; ++i) {
    auto b = s->new_batch();
    for (uint64_t p = 1; p <= 1000; ++p)
      b.append_log(i * 1000 + p, record_at(p));
    b.put_slot(static_cast<uint32_t>(i), slot_value(static_cast<uint32_t>(i), i, i));
    b.put_holder(sample_holder(i + 1, 1));
    b.put_worker(sample_worker(1, "a", 0));
    if (i == 3)
      b.truncate_log(2000);
    ASSERT_TRUE(s->commit(b));
    EXPECT_EQ(s->write_count(), before + i + 1);
  }
  auto empty = s->new_batch();
  EXPECT_TRUE(empty.empty());
  ASSERT_TRUE(s->commit(empty));
  EXPECT_EQ(s->write_count(), before + 5);
}

#if LMCC_FAULT_INJECTION // injected commit failures: a test build only
TEST(persistence_store, injected_failures_keep_the_batch_for_a_retry) {
  temp_dir tmp;
  auto s = must_open(tmp.sub("db"));
  ASSERT_TRUE(s);
  auto b = s->new_batch();
  b.append_log(1, record_at(1));
  b.put_worker(sample_worker(1, "a", 0));
  const auto count = b.count();
  const auto bytes = b.bytes();
  s->faults().fail_commits = 2;
  for (int i = 0; i < 2; ++i) {
    auto r = s->commit(b);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().message, "commit " + tmp.sub("db") + ": injected failure (fail_commits)");
    EXPECT_EQ(b.count(), count);
    EXPECT_EQ(b.bytes(), bytes);
  }
  EXPECT_EQ(s->faults().fail_commits.load(), 0u);
  EXPECT_TRUE(read_all(*s).log.empty()); // nothing of a failed commit lands
  ASSERT_TRUE(s->commit(b));
  EXPECT_EQ(read_all(*s).log.size(), 1u);

  s->faults().fail_all_commits = true;
  auto c = s->new_batch();
  c.delete_worker(1);
  for (int i = 0; i < 3; ++i) {
    auto r = s->commit(c);
    ASSERT_FALSE(r);
    EXPECT_NE(r.error().message.find("fail_all_commits"), std::string::npos);
  }
  s->faults().fail_all_commits = false;
  s->faults().commit_delay_us = 1000; // a slow disk still commits
  ASSERT_TRUE(s->commit(c));
  EXPECT_TRUE(read_all(*s).workers.empty());
}
#endif

TEST(persistence_store, concurrent_writers_each_land_whole) {
  temp_dir tmp;
  auto s = must_open(tmp.sub("db"));
  ASSERT_TRUE(s);
  std::vector<std::thread> threads;
  for (uint64_t t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (uint64_t i = 0; i < 50; ++i) {
        auto b = s->new_batch();
        b.put_worker(sample_worker(t * 1000 + i, "a", 0));
        b.append_log(t * 1000 + i + 1, record_at(i));
        ASSERT_TRUE(s->commit(b));
      }
    });
  for (auto& th : threads)
    th.join();
  auto all = read_all(*s);
  EXPECT_EQ(all.workers.size(), 200u);
  EXPECT_EQ(all.log.size(), 200u);
}

TEST(persistence_store, damaged_holder_states_are_reported_and_the_rest_still_load) {
  temp_dir tmp;
  {
    auto s = must_open(tmp.sub("db"));
    ASSERT_TRUE(s);
    auto b = s->new_batch();
    b.put_holder(sample_holder(1, 1));
    b.put_holder(sample_holder(2, 1));
    b.put_holder(sample_holder(3, 1));
    ASSERT_TRUE(s->commit(b));
  }
  std::string bad = encode_holder_state(sample_holder(2, 1));
  bad[3] = static_cast<char>(bad[3] ^ 0x40);
  raw_put(tmp.sub("db"), "default", holder_key(2), bad);
  auto s = must_open(tmp.sub("db"));
  ASSERT_TRUE(s);
  auto dir = s->load_directory();
  ASSERT_TRUE(dir) << dir.error().message;
  EXPECT_EQ(dir->holders, (std::vector<holder_state>{sample_holder(1, 1), sample_holder(3, 1)}));
  ASSERT_EQ(dir->damaged_holders.size(), 1u);
  EXPECT_EQ(dir->damaged_holders[0].first, 2u);
  EXPECT_NE(dir->damaged_holders[0].second.find("checksum"), std::string::npos);
}

TEST(persistence_store, a_malformed_worker_row_or_floor_fails_the_load) {
  temp_dir tmp;
  ASSERT_TRUE(must_open(tmp.sub("db")));
  raw_put(tmp.sub("db"), "default", worker_key(5), "\xc1");
  {
    auto s = must_open(tmp.sub("db"));
    ASSERT_TRUE(s);
    auto d = s->load_directory();
    ASSERT_FALSE(d);
    EXPECT_NE(d.error().message.find("worker row 5"), std::string::npos) << d.error().message;
    auto b = s->new_batch();
    b.delete_worker(5);
    ASSERT_TRUE(s->commit(b));
    EXPECT_TRUE(s->load_directory());
  }
  raw_put(tmp.sub("db"), "default", log_floor_key(), "xyz");
  auto s = must_open(tmp.sub("db"));
  ASSERT_TRUE(s);
  auto d = s->load_directory();
  ASSERT_FALSE(d);
  EXPECT_NE(d.error().message.find("log floor"), std::string::npos) << d.error().message;
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

TEST(persistence_store, a_format_1_data_dir_is_refused_with_a_message_saying_so) {
  temp_dir tmp;
  {
    // lmcc before the op log: the default family only, "Fformat_version" = be32(1).
    rocksdb::Options o;
    o.create_if_missing = true;
    rocksdb::DB* raw = nullptr;
    ASSERT_TRUE(rocksdb::DB::Open(o, tmp.sub("db"), &raw).ok());
    std::unique_ptr<rocksdb::DB> db{raw};
    ASSERT_TRUE(
        db->Put(rocksdb::WriteOptions{}, "Fformat_version", std::string("\0\0\0\x01", 4)).ok());
    ASSERT_TRUE(db->Put(rocksdb::WriteOptions{}, "Fnode_id", "n1").ok());
    ASSERT_TRUE(
        db->Put(rocksdb::WriteOptions{}, std::string("E\0\0", 3) + std::string(12, 'k'), "").ok());
  }
  auto s = store::open(options_at(tmp.sub("db")), "n1");
  ASSERT_FALSE(s);
  const std::string& m = s.error().message;
  EXPECT_EQ(m.rfind("open " + tmp.sub("db") + ": format version 1, this build reads 3", 0), 0u)
      << m;
  EXPECT_NE(m.find("format 1 kept one RocksDB key per entry"), std::string::npos) << m;
  EXPECT_NE(m.find("full-sync"), std::string::npos) << m;
  // Refusing it changed nothing: no "log" family was added to the old DB.
  EXPECT_EQ(families_of(tmp.sub("db")), (std::vector<std::string>{"default"}));
}

TEST(persistence_store, another_format_version_is_refused) {
  temp_dir tmp;
  ASSERT_TRUE(must_open(tmp.sub("db")));
  raw_put(tmp.sub("db"), "default", format_version_key(), encode_u32(4));
  auto s = store::open(options_at(tmp.sub("db")), "n1");
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().message, "open " + tmp.sub("db") + ": format version 4, this build reads 3");
  // The format before stream positions says what to do about it.
  raw_put(tmp.sub("db"), "default", format_version_key(), encode_u32(2));
  auto two = store::open(options_at(tmp.sub("db")), "n1");
  ASSERT_FALSE(two);
  EXPECT_NE(two.error().message.find("copies its slots from its peers"), std::string::npos);
  raw_put(tmp.sub("db"), "default", format_version_key(), "xx");
  auto garbled = store::open(options_at(tmp.sub("db")), "n1");
  ASSERT_FALSE(garbled);
  EXPECT_NE(garbled.error().message.find("unreadable format version"), std::string::npos);
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
  EXPECT_NE(s.error().message.find("not an lmcc store"), std::string::npos) << s.error().message;
}

TEST(persistence_store, bad_options_and_unopenable_paths_are_errors) {
  temp_dir tmp;
  auto o = options_at(tmp.sub("db"));
  o.sync = true;
  o.disable_wal = true;
  auto s = store::open(o, "n1");
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().message.find("sync needs the WAL"), std::string::npos);
  EXPECT_FALSE(store::open(options_at(""), "n1"));
  auto no_node = store::open(options_at(tmp.sub("db")), "");
  ASSERT_FALSE(no_node);
  EXPECT_NE(no_node.error().message.find("empty node id"), std::string::npos);

  auto missing = options_at(tmp.sub("nothing-here"));
  missing.create_if_missing = false;
  auto m = store::open(missing, "n1");
  ASSERT_FALSE(m);
  EXPECT_EQ(m.error().message.rfind("open " + tmp.sub("nothing-here") + ": ", 0), 0u)
      << m.error().message;

  // A second open of the same DB in this process fails on RocksDB's lock.
  auto first = must_open(tmp.sub("db2"));
  auto second = store::open(options_at(tmp.sub("db2")), "n1");
  ASSERT_FALSE(second);
  EXPECT_NE(second.error().message.find("lock"), std::string::npos) << second.error().message;
}

TEST(persistence_store, a_long_log_streams_from_any_position) {
  temp_dir tmp;
  auto s = must_open(tmp.sub("db"));
  ASSERT_TRUE(s);
  constexpr uint64_t total = 100'000;
  for (uint64_t base = 0; base < total; base += 20'000) {
    auto b = s->new_batch();
    for (uint64_t p = base + 1; p <= base + 20'000; ++p)
      b.append_log(p, record_at(p));
    ASSERT_TRUE(s->commit(b));
  }
  ASSERT_TRUE(s->flush());
  uint64_t expected = 50'001;
  bool in_order = true;
  auto n = s->for_each_log_record(50'001, [&](uint64_t p, std::string_view v) {
    in_order = in_order && p == expected++;
    log_record rec;
    in_order = in_order && decode_log_record(v, rec) && rec.holder == p;
  });
  ASSERT_TRUE(n);
  EXPECT_EQ(*n, 50'000u);
  EXPECT_TRUE(in_order);
  EXPECT_EQ(*s->last_log_position(), total);
  auto bytes = s->disk_bytes();
  ASSERT_TRUE(bytes);
  EXPECT_GT(*bytes, 0u);
  ASSERT_TRUE(s->set_auto_compactions(false));
  ASSERT_TRUE(s->set_auto_compactions(true));
  ASSERT_TRUE(s->compact());
}
