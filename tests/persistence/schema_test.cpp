#include "persistence/schema.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

using namespace lmcc::persistence;
using lmcc::msg::wire_int;

TEST(persistence_schema, entry_keys_sort_by_slot_then_key_then_holder) {
  // Bytewise order (RocksDB's) must be numeric order, field by field.
  std::vector<std::string> keys = {
      entry_key(0, 0xffffffffffffffffULL, 0xffffffff),
      entry_key(1, 0, 0),
      entry_key(1, 0, 1),
      entry_key(1, 0x100, 0),
      entry_key(0x100, 0, 0),
      entry_key(max_slot, 0, 0),
  };
  EXPECT_TRUE(std::is_sorted(keys.begin(), keys.end()));
  EXPECT_EQ(keys[0].size(), entry_key_size);
  EXPECT_EQ(keys[1], std::string("E\x00\x01", 3) + std::string(8, '\0') + std::string(4, '\0'));
}

TEST(persistence_schema, keys_decode_to_what_was_encoded) {
  auto e = decode_entry_key(entry_key(4095, 0x8000000000000001ULL, (7u << 8) | 3));
  ASSERT_TRUE(e);
  EXPECT_EQ(*e, (entry{4095, 0x8000000000000001ULL, (7u << 8) | 3}));
  EXPECT_EQ(decode_worker_key(worker_key(123456)), 123456u);
  auto w = decode_watermark_key(watermark_key(9, 2, 31));
  ASSERT_TRUE(w);
  EXPECT_EQ(*w, (watermark{9, 2, 31, 0}));
  EXPECT_EQ(decode_u64(encode_u64(0x0102030405060708ULL)), 0x0102030405060708ULL);
  EXPECT_EQ(encode_u32(1), std::string("\x00\x00\x00\x01", 4));
  // Wrong prefix or size is refused, not misread.
  EXPECT_FALSE(decode_entry_key(worker_key(1)));
  EXPECT_FALSE(decode_worker_key("W123"));
  EXPECT_FALSE(decode_u32("abc"));
}

TEST(persistence_schema, worker_rows_round_trip_and_keep_the_sign) {
  worker_row a;
  a.worker_num = 5;
  a.instance_id = "vllm-0";
  a.worker_id = wire_int{-1};
  a.ip = "10.1.2.3";
  a.port = wire_int::from_unsigned(std::numeric_limits<uint64_t>::max());
  a.peer_init_url = "10.1.2.3:8200";
  a.registration_time = 1700000000.123456789;
  a.last_heartbeat_time = 0.1;
  a.has_heartbeated = true;
  a.locations = {"LocalCPUBackend", "", "disk:/nvme0"};
  a.reset_pending = true;

  auto back = decode_worker_row(5, encode_worker_row(a));
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(*back, a);
  EXPECT_TRUE(back->worker_id.is_negative());
  EXPECT_FALSE(back->port.is_negative());
  EXPECT_EQ(back->port.bits(), back->worker_id.bits()); // same pattern, different values

  worker_row b; // defaults: no peer URL, integral and negative-zero times
  b.worker_num = 6;
  b.registration_time = -0.0;
  b.last_heartbeat_time = 1800000000.0;
  auto back_b = decode_worker_row(6, encode_worker_row(b));
  ASSERT_TRUE(back_b) << back_b.error().message;
  EXPECT_EQ(*back_b, b);
  EXPECT_FALSE(back_b->peer_init_url);
  EXPECT_TRUE(std::signbit(back_b->registration_time));
}

TEST(persistence_schema, malformed_worker_rows_are_errors) {
  auto garbage = decode_worker_row(3, "\xc1");
  ASSERT_FALSE(garbage);
  EXPECT_NE(garbage.error().message.find("worker row 3"), std::string::npos);
  EXPECT_FALSE(decode_worker_row(3, ""));
  EXPECT_FALSE(decode_worker_row(3, "\x91\x01")); // an array of one int
  worker_row r;
  auto bytes = encode_worker_row(r);
  EXPECT_FALSE(decode_worker_row(3, bytes + std::string(1, '\0'))); // trailing bytes
}
