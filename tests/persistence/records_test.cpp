// records: the checksummed op-log records, slot snapshots and holder states
// of records.hpp, plus the crc32c that guards them. Every damage a disk or a
// torn write can do must be an error (or a classified damage), never a
// misread value.
#include "persistence/crc32c.hpp"
#include "persistence/records.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>

using namespace lmcc::persistence;

namespace {

std::string encode(const log_record& r) {
  std::string out;
  encode_log_record(r, out);
  return out;
}

log_record sample_record(size_t ops) {
  log_record r;
  r.holder = 0x7123456789abcdefULL;
  r.incarnation = (uint64_t{1735689600000} << 16) + 3;
  r.mark = seq_mark{seq_state::tracking, UINT64_MAX};
  r.intro = holder_intro{0xfedcba9876543210ULL, "LocalCPUBackend"};
  for (size_t i = 0; i < ops; ++i)
    r.ops.push_back(kv_op{i * 0x9e3779b97f4a7c15ULL, i % 3 != 1});
  return r;
}

/// Replaces the trailing crc32c (of v[from..]) so that a deliberately changed
/// body passes it.
void reseal(std::string& v, size_t from = 0) {
  const uint32_t c = crc32c::value(std::string_view{v}.substr(from, v.size() - 4 - from));
  for (int i = 0; i < 4; ++i)
    v[v.size() - 4 + static_cast<size_t>(i)] = static_cast<char>(c >> (8 * i));
}

/// Every (key, holders) a snapshot value yields, in the order read.
struct read_back {
  slot_read_result result;
  std::vector<std::pair<uint64_t, std::vector<uint64_t>>> keys;
  std::vector<uint64_t> counts;
};

read_back read(std::string_view value) {
  read_back b;
  b.result = read_slot_snapshot(
      value,
      [&](uint64_t key, std::span<const uint64_t> hs) {
        b.keys.emplace_back(key, std::vector<uint64_t>(hs.begin(), hs.end()));
      },
      [&](uint64_t n) { b.counts.push_back(n); });
  return b;
}

} // namespace

// -- crc32c --------------------------------------------------------------------------

TEST(crc32c, matches_the_castagnoli_check_values_and_extends_across_any_split) {
  EXPECT_EQ(crc32c::value(""), 0u);
  EXPECT_EQ(crc32c::value("123456789"), 0xe3069283u);           // the standard check value
  EXPECT_EQ(crc32c::value(std::string(32, '\0')), 0x8a9136aau); // RFC 3720 B.4
  EXPECT_EQ(crc32c::value(std::string(32, '\xff')), 0x62a8ab43u);
  std::mt19937_64 rng{7};
  std::string data(1000, '\0');
  for (auto& c : data)
    c = static_cast<char>(rng());
  const uint32_t whole = crc32c::value(data);
  for (size_t split : {size_t{0}, size_t{1}, size_t{7}, size_t{8}, size_t{9}, size_t{500},
                       size_t{999}, size_t{1000}}) {
    const std::string_view v{data};
    EXPECT_EQ(crc32c::extend(crc32c::value(v.substr(0, split)), v.substr(split)), whole) << split;
  }
  // Unaligned starts give the same value as aligned copies of the same bytes.
  for (size_t off = 1; off < 8; ++off)
    EXPECT_EQ(crc32c::value(std::string_view{data}.substr(off, 100)),
              crc32c::value(std::string{data.substr(off, 100)}));
}

// -- op-log records ------------------------------------------------------------------

TEST(log_records, round_trip_with_and_without_mark_intro_drop_and_ops) {
  std::vector<log_record> cases;
  cases.push_back(sample_record(0));
  cases.push_back(sample_record(1));
  cases.push_back(sample_record(9)); // a bitmap byte and one bit more
  cases.push_back(sample_record(2000));
  log_record plain; // no mark, no intro
  plain.holder = 1;
  plain.ops = {{0, true}, {UINT64_MAX, false}, {UINT64_MAX, true}};
  cases.push_back(plain);
  log_record placed = plain; // stream positions and a placement epoch
  placed.prev = stream_pos{7, 1 << 20, UINT64_MAX, 3};
  placed.end = stream_pos{UINT64_MAX, UINT64_MAX, UINT64_MAX, UINT64_MAX};
  placed.placement_epoch = 12;
  placed.placement_since = stream_pos{7, 1, 2, 3};
  cases.push_back(placed);
  log_record drop;
  drop.holder = 0x7fffffffffffffffULL;
  drop.incarnation = UINT64_MAX;
  drop.drop = true;
  drop.mark = seq_mark{seq_state::none, 0};
  cases.push_back(drop);
  log_record gap_only = plain;
  gap_only.ops.clear();
  gap_only.mark = seq_mark{seq_state::gap, 0};
  gap_only.intro = holder_intro{9, ""};
  cases.push_back(gap_only);
  for (const auto& rec : cases) {
    SCOPED_TRACE(rec.ops.size());
    const std::string bytes = encode(rec);
    log_record back;
    auto r = decode_log_record(bytes, back);
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_EQ(back, rec);
  }
  // 8 bytes a key and a bit an op: keys as raw bytes are as small as they get.
  EXPECT_LT(encode(sample_record(2000)).size(), 2000u * 8 + 2000 / 8 + 96);
}

TEST(log_records, encoding_from_the_parts_equals_encoding_the_struct) {
  const auto rec = sample_record(17);
  std::string from_parts = "prefix";
  encode_log_record(log_header{rec.holder, rec.incarnation, rec.drop, rec.prev, rec.end,
                               rec.placement_epoch, rec.placement_since},
                    rec.mark, &*rec.intro, rec.ops, from_parts);
  EXPECT_EQ(from_parts, "prefix" + encode(rec)); // appends, leaves what was there
}

TEST(log_records, decoding_into_a_used_record_resets_what_the_new_one_lacks) {
  log_record rec;
  ASSERT_TRUE(decode_log_record(encode(sample_record(5)), rec));
  log_record bare;
  bare.holder = 3;
  bare.drop = true;
  ASSERT_TRUE(decode_log_record(encode(bare), rec));
  EXPECT_EQ(rec, bare);
}

TEST(log_records, every_flipped_bit_is_detected) {
  const std::string good = encode(sample_record(10));
  for (size_t byte = 0; byte < good.size(); ++byte)
    for (int bit = 0; bit < 8; ++bit) {
      std::string bad = good;
      bad[byte] = static_cast<char>(bad[byte] ^ (1 << bit));
      log_record rec;
      ASSERT_FALSE(decode_log_record(bad, rec)) << "byte " << byte << " bit " << bit;
    }
}

TEST(log_records, every_truncation_and_extension_is_detected) {
  const std::string good = encode(sample_record(10));
  for (size_t n = 0; n < good.size(); ++n) {
    log_record rec;
    auto r = decode_log_record(good.substr(0, n), rec);
    ASSERT_FALSE(r) << n;
    EXPECT_NE(r.error().message.find("op-log record"), std::string::npos);
  }
  log_record rec;
  EXPECT_FALSE(decode_log_record(good + "x", rec));
}

TEST(log_records, a_sealed_record_with_bad_contents_says_what_is_wrong) {
  const std::string good = encode(sample_record(3));
  auto error_of = [](std::string v) {
    reseal(v);
    log_record rec;
    auto r = decode_log_record(v, rec);
    return r ? std::string{"decoded"} : r.error().message;
  };
  std::string format = good;
  format[0] = 3;
  EXPECT_NE(error_of(format).find("unknown format 3"), std::string::npos);
  std::string flags = good;
  flags[1] = static_cast<char>(flags[1] | 8);
  EXPECT_NE(error_of(flags).find("unknown flags"), std::string::npos);
  auto small = sample_record(3);
  small.incarnation = 1;
  std::string state = encode(small);
  // After format, flags, holder, a 1-byte incarnation, three positions and an
  // epoch of 1-byte varints: the mark's state.
  state[2 + 8 + 1 + 13] = 5;
  EXPECT_NE(error_of(state).find("bad seq mark"), std::string::npos);
  std::string count = good.substr(0, good.size() - 4 - 3 * 8 - 1) + std::string(5, '\0');
  EXPECT_NE(error_of(count).find("op"), std::string::npos);
}

// -- slot snapshots --------------------------------------------------------------------

TEST(slot_snapshots, round_trip_keys_sorted_with_their_holders_in_order) {
  slot_snapshot_writer w{4095, 123456789};
  std::map<uint64_t, std::vector<uint64_t>> expect;
  std::mt19937_64 rng{11};
  const uint64_t holders[] = {0x7000000000000001ULL, 5, 0x1234, 0x7fffffffffffffffULL};
  for (int i = 0; i < 3000; ++i) {
    const uint64_t key = rng();
    std::vector<uint64_t> hs;
    for (size_t j = 0; j <= static_cast<size_t>(i % 4); ++j)
      hs.push_back(holders[(static_cast<size_t>(i) + j * 3) % 4]);
    std::sort(hs.begin(), hs.end());
    hs.erase(std::unique(hs.begin(), hs.end()), hs.end());
    std::reverse(hs.begin(), hs.end()); // any order in, the same order out
    if (expect.emplace(key, hs).second)
      w.add(key, hs);
  }
  w.add(0, std::vector<uint64_t>{5});
  w.add(UINT64_MAX, std::vector<uint64_t>{5, 0x1234});
  expect[0] = {5};
  expect[UINT64_MAX] = {5, 0x1234};
  std::string v = "x";
  w.finish(v);
  auto b = read(std::string_view{v}.substr(1));
  ASSERT_EQ(b.result.damage, slot_damage::none) << b.result.what;
  EXPECT_EQ(b.result.header.slot, 4095u);
  EXPECT_EQ(b.result.header.position, 123456789u);
  auto dict = b.result.header.holders;
  std::sort(dict.begin(), dict.end());
  EXPECT_EQ(dict, (std::vector<uint64_t>{5, 0x1234, 0x7000000000000001ULL, 0x7fffffffffffffffULL}));
  EXPECT_EQ(b.counts, (std::vector<uint64_t>{expect.size()}));
  ASSERT_EQ(b.keys.size(), expect.size());
  size_t entries = 0;
  auto it = expect.begin();
  for (const auto& [key, hs] : b.keys) {
    EXPECT_EQ(key, it->first);
    EXPECT_EQ(hs, it->second);
    entries += hs.size();
    ++it;
  }
  EXPECT_EQ(b.result.entries, entries);
  // About 9 bytes an entry with one holder: far below a key per RocksDB entry.
  EXPECT_LT(v.size(), entries * 10);
}

TEST(slot_snapshots, keys_that_are_not_spread_evenly_still_come_out_sorted) {
  // The writer buckets keys by their high bits: here most keys crowd into a
  // few buckets (small consecutive values plus a handful near the top), the
  // other shapes of input its bucketing must survive.
  std::mt19937_64 rng{5};
  std::vector<uint64_t> keys;
  for (uint64_t k = 0; k < 2000; ++k)
    keys.push_back(k * 3);
  for (uint64_t k = 0; k < 5; ++k)
    keys.push_back(UINT64_MAX - k);
  for (int i = 0; i < 300; ++i)
    keys.push_back((uint64_t{1} << 40) + rng() % 1000 * 7919);
  std::sort(keys.begin(), keys.end());
  keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
  std::vector<uint64_t> shuffled = keys;
  std::shuffle(shuffled.begin(), shuffled.end(), rng);
  slot_snapshot_writer w{3, 9};
  for (uint64_t k : shuffled)
    w.add(k, std::vector<uint64_t>{k % 3 + 1});
  std::string v;
  w.finish(v);
  auto b = read(v);
  ASSERT_EQ(b.result.damage, slot_damage::none) << b.result.what;
  ASSERT_EQ(b.keys.size(), keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    ASSERT_EQ(b.keys[i].first, keys[i]) << i;
    ASSERT_EQ(b.keys[i].second, std::vector<uint64_t>{keys[i] % 3 + 1}) << i;
  }
}

TEST(slot_snapshots, covers_round_trip_in_the_header_even_without_entries) {
  const slot_cover_record pending{0x7fffffffffffffffULL, 2, true, stream_pos{1, 2, 3, 4},
                                  stream_pos{5, 6, UINT64_MAX, 8}};
  const slot_cover_record labeled{42, 1, false, stream_pos{9, 0, 1, 0}, stream_pos{}};
  slot_snapshot_writer w{12, 77};
  w.add(1000003, std::vector<uint64_t>{42});
  w.add_cover(pending);
  w.add_cover(labeled);
  std::string v;
  w.finish(v);
  auto b = read(v);
  ASSERT_EQ(b.result.damage, slot_damage::none) << b.result.what;
  EXPECT_EQ(b.result.header.covers, (std::vector<slot_cover_record>{pending, labeled}));
  EXPECT_EQ(b.keys.size(), 1u);
  slot_snapshot_writer empty{13, 78};
  empty.add_cover(labeled);
  std::string e;
  empty.finish(e);
  auto c = read(e);
  ASSERT_EQ(c.result.damage, slot_damage::none);
  EXPECT_EQ(c.result.header.covers, (std::vector<slot_cover_record>{labeled}));
  EXPECT_TRUE(c.keys.empty());
}

TEST(slot_snapshots, an_empty_slot_round_trips) {
  slot_snapshot_writer w{0, 0};
  EXPECT_EQ(w.entries(), 0u);
  std::string v;
  w.finish(v);
  auto b = read(v);
  EXPECT_EQ(b.result.damage, slot_damage::none);
  EXPECT_TRUE(b.keys.empty());
  EXPECT_TRUE(b.result.header.holders.empty());
}

TEST(slot_snapshots, damage_is_classified_by_the_checksum_that_fails) {
  slot_snapshot_writer w{7, 99};
  for (uint64_t k = 1; k <= 50; ++k)
    w.add(k * 1000003, std::vector<uint64_t>{k % 2 == 0 ? 11u : 22u});
  std::string good;
  w.finish(good);
  // slot 7 and 2 holders: u8 + varint(1) + u64 + varint(1) + 2 x u64 +
  // varint(0 covers) + u32.
  const size_t header_size = 1 + 1 + 8 + 1 + 16 + 1 + 4;
  for (size_t byte = 0; byte < good.size(); ++byte) {
    std::string bad = good;
    bad[byte] = static_cast<char>(bad[byte] ^ 0x10);
    auto b = read(bad);
    ASSERT_NE(b.result.damage, slot_damage::none) << byte;
    ASSERT_TRUE(b.keys.empty()) << "a damaged body yields no key, byte " << byte;
    if (byte < header_size) {
      EXPECT_EQ(b.result.damage, slot_damage::header) << byte;
    } else {
      ASSERT_EQ(b.result.damage, slot_damage::body) << byte;
      // The header is intact: its holders are the ones to resync.
      auto dict = b.result.header.holders;
      std::sort(dict.begin(), dict.end());
      EXPECT_EQ(dict, (std::vector<uint64_t>{11, 22})) << byte;
      EXPECT_EQ(b.result.header.slot, 7u);
    }
  }
  EXPECT_EQ(read(good.substr(0, 5)).result.damage, slot_damage::header);
  EXPECT_EQ(read(good.substr(0, header_size + 3)).result.damage, slot_damage::body);
  EXPECT_EQ(read("").result.damage, slot_damage::header);
}

TEST(slot_snapshots, a_sealed_body_that_lies_is_still_reported_not_misread) {
  slot_snapshot_writer w{1, 1};
  w.add(10, std::vector<uint64_t>{3});
  w.add(20, std::vector<uint64_t>{3});
  std::string v;
  w.finish(v);
  const size_t header_size = 1 + 1 + 8 + 1 + 8 + 1 + 4;
  // Body: varint(2) | varint(10) varint(0) | varint(10) varint(0) | crc.
  std::string bad_holder = v;
  bad_holder[header_size + 2] = 2; // dictionary index 1 of a 1-entry dictionary
  reseal(bad_holder, header_size);
  auto b = read(bad_holder);
  EXPECT_EQ(b.result.damage, slot_damage::body);
  EXPECT_NE(b.result.what.find("bad holder of key 0"), std::string::npos) << b.result.what;
  std::string trailing = v.substr(0, v.size() - 4) + "\x01" + "0000";
  reseal(trailing, header_size);
  EXPECT_EQ(read(trailing).result.damage, slot_damage::body);
  std::string count = v;
  count[header_size] = 100; // more keys than bytes
  reseal(count, header_size);
  EXPECT_EQ(read(count).result.damage, slot_damage::body);
}

// -- holder states -------------------------------------------------------------------

TEST(holder_states, round_trip_and_take_the_holder_from_the_key) {
  for (const auto& s : {holder_state{0, 0, "", 0, {}},
                        holder_state{0x7fffffffffffffffULL,
                                     UINT64_MAX,
                                     "disk:/nvme0",
                                     UINT64_MAX,
                                     {seq_state::tracking, UINT64_MAX}},
                        holder_state{5, 6, "LocalCPUBackend", 7, {seq_state::gap, 0}}}) {
    auto back = decode_holder_state(s.holder, encode_holder_state(s));
    ASSERT_TRUE(back) << back.error().message;
    EXPECT_EQ(*back, s);
  }
  auto moved = decode_holder_state(42, encode_holder_state(holder_state{5, 6, "x", 7, {}}));
  ASSERT_TRUE(moved);
  EXPECT_EQ(moved->holder, 42u);
}

TEST(holder_states, damage_is_an_error_naming_the_holder) {
  const std::string good =
      encode_holder_state(holder_state{5, 6, "LocalCPUBackend", 7, {seq_state::syncing, 0}});
  for (size_t byte = 0; byte < good.size(); ++byte) {
    std::string bad = good;
    bad[byte] = static_cast<char>(bad[byte] ^ 0x01);
    auto r = decode_holder_state(5, bad);
    ASSERT_FALSE(r) << byte;
    EXPECT_NE(r.error().message.find("holder state 5"), std::string::npos);
  }
  for (size_t n = 0; n < good.size(); ++n)
    ASSERT_FALSE(decode_holder_state(5, good.substr(0, n))) << n;
  std::string bad_state = good;
  // The mark's state byte, before varint(0) and two positions and an epoch of 1-byte varints.
  bad_state[bad_state.size() - 4 - 2 - 9] = 9;
  reseal(bad_state);
  EXPECT_FALSE(decode_holder_state(5, bad_state));
  std::string bad_format = good;
  bad_format[0] = 3;
  reseal(bad_format);
  auto r = decode_holder_state(5, bad_format);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("unknown format"), std::string::npos);
}
