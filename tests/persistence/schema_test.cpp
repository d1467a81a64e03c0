// schema: the key codecs (prefix + big-endian integers, so RocksDB's bytewise
// order is numeric order) and the msgpack worker rows of schema.hpp.
#include "persistence/schema.hpp"

#include <gtest/gtest.h>
#include <msgpack.hpp>

#include <algorithm>
#include <cmath>
#include <limits>

using namespace lmcc::persistence;
using lmcc::msg::wire_int;

namespace {

/// A row's 11 msgpack fields with field `bad` replaced by the integer 7 (or
/// nil when `nil`), to prove each field's type is checked.
std::string row_with(size_t bad, bool nil = false) {
  msgpack::sbuffer buf;
  msgpack::packer<msgpack::sbuffer> pk{buf};
  pk.pack_array(11);
  for (size_t i = 0; i < 11; ++i) {
    if (i == bad) {
      if (nil)
        pk.pack_nil();
      else
        pk.pack_int(7);
      continue;
    }
    switch (i) {
    case 0:
    case 2:
      pk.pack(std::string{"x"});
      break;
    case 4:
      pk.pack_nil();
      break;
    case 5:
    case 6:
      pk.pack_double(0.5);
      break;
    case 7:
      pk.pack_true();
      break;
    default:
      pk.pack_uint64(3);
    }
  }
  return {buf.data(), buf.size()};
}

} // namespace

TEST(persistence_schema, every_key_kind_sorts_numerically_inside_its_prefix) {
  std::vector<std::string> slots = {slot_key(0), slot_key(1), slot_key(0x100), slot_key(0xffff),
                                    slot_key(0xffffffffU)};
  EXPECT_TRUE(std::is_sorted(slots.begin(), slots.end()));
  std::vector<std::string> log = {
      log_key(0),         log_key(1), log_key(255), log_key(256), log_key(uint64_t{1} << 40),
      log_key(UINT64_MAX)};
  EXPECT_TRUE(std::is_sorted(log.begin(), log.end()));
  std::vector<std::string> holders = {holder_key(1), holder_key(0x7fffffffffffffffULL),
                                      holder_key(0x8000000000000000ULL)};
  EXPECT_TRUE(std::is_sorted(holders.begin(), holders.end()));
  // The exact bytes: a one-byte prefix then big-endian.
  EXPECT_EQ(slot_key(258), std::string("S\x00\x00\x01\x02", 5));
  EXPECT_EQ(log_key(1), std::string("L") + std::string(7, '\0') + "\x01");
  EXPECT_EQ(worker_key(0x0102030405060708ULL), std::string("W\x01\x02\x03\x04\x05\x06\x07\x08"));
  EXPECT_EQ(holder_key(0x0a), std::string("H") + std::string(7, '\0') + "\x0a");
  EXPECT_EQ(format_version_key(), "Fformat_version");
  EXPECT_EQ(node_id_key(), "Fnode_id");
  EXPECT_EQ(log_floor_key(), "Plog_floor");
  // The prefixes keep the kinds apart in one column family.
  EXPECT_LT(format_version_key(), holder_key(0));
  EXPECT_LT(holder_key(UINT64_MAX), log_floor_key());
  EXPECT_LT(log_floor_key(), slot_key(0));
  EXPECT_LT(slot_key(0xffffffffU), worker_key(0));
}

TEST(persistence_schema, keys_decode_to_what_was_encoded_and_refuse_anything_else) {
  for (uint64_t v : {uint64_t{0}, uint64_t{1}, uint64_t{0x8000000000000001ULL}, UINT64_MAX}) {
    EXPECT_EQ(decode_worker_key(worker_key(v)), v);
    EXPECT_EQ(decode_holder_key(holder_key(v)), v);
    EXPECT_EQ(decode_log_key(log_key(v)), v);
    EXPECT_EQ(decode_u64(encode_u64(v)), v);
  }
  for (uint32_t v : {0U, 4095U, 0xffffffffU}) {
    EXPECT_EQ(decode_slot_key(slot_key(v)), v);
    EXPECT_EQ(decode_u32(encode_u32(v)), v);
  }
  EXPECT_EQ(encode_u32(1), std::string("\x00\x00\x00\x01", 4));
  // A wrong prefix or size is refused, not misread.
  EXPECT_FALSE(decode_worker_key(holder_key(1)));
  EXPECT_FALSE(decode_holder_key(worker_key(1)));
  EXPECT_FALSE(decode_slot_key(log_key(1)));
  EXPECT_FALSE(decode_log_key(slot_key(1)));
  EXPECT_FALSE(decode_worker_key("W123"));
  EXPECT_FALSE(decode_log_key(log_key(1) + "x"));
  EXPECT_FALSE(decode_slot_key(""));
  EXPECT_FALSE(decode_u32("abc"));
  EXPECT_FALSE(decode_u64(encode_u32(1)));
}

TEST(persistence_schema, worker_rows_round_trip_every_field_and_keep_the_sign) {
  worker_row a;
  a.uid = 0xdeadbeefcafef00dULL;
  a.instance_id = "vllm-0";
  a.worker_id = wire_int{-1};
  a.ip = "10.1.2.3";
  a.port = wire_int::from_unsigned(std::numeric_limits<uint64_t>::max());
  a.peer_init_url = "10.1.2.3:8200";
  a.registration_time = 1700000000.123456789;
  a.last_heartbeat_time = 0.1;
  a.has_heartbeated = true;
  a.registration_order = UINT64_MAX;
  a.instance_order = uint64_t{1} << 63;
  a.incarnation = 0x123456789abcULL;

  auto back = decode_worker_row(a.uid, encode_worker_row(a));
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(*back, a);
  EXPECT_TRUE(back->worker_id.is_negative());
  EXPECT_FALSE(back->port.is_negative());
  EXPECT_EQ(back->port.bits(), back->worker_id.bits()); // same pattern, different values

  worker_row b; // defaults: no peer URL, zero orders, integral and negative-zero times
  b.uid = 6;
  b.registration_time = -0.0;
  b.last_heartbeat_time = 1800000000.0;
  auto back_b = decode_worker_row(6, encode_worker_row(b));
  ASSERT_TRUE(back_b) << back_b.error().message;
  EXPECT_EQ(*back_b, b);
  EXPECT_FALSE(back_b->peer_init_url);
  EXPECT_TRUE(std::signbit(back_b->registration_time));
  // The uid comes from the key, not the value.
  EXPECT_EQ(decode_worker_row(77, encode_worker_row(b))->uid, 77u);
}

TEST(persistence_schema, a_row_is_an_array_of_eleven_fields_in_the_documented_order) {
  worker_row r;
  r.instance_id = "i";
  r.worker_id = 2;
  r.ip = "h";
  r.port = 3;
  r.registration_order = 4;
  r.instance_order = 5;
  r.incarnation = 6;
  const std::string bytes = encode_worker_row(r);
  auto handle = msgpack::unpack(bytes.data(), bytes.size());
  const auto& o = handle.get();
  ASSERT_EQ(o.type, msgpack::type::ARRAY);
  ASSERT_EQ(o.via.array.size, 11u);
  const auto* f = o.via.array.ptr;
  EXPECT_EQ(f[0].as<std::string>(), "i");
  EXPECT_EQ(f[1].as<uint64_t>(), 2u);
  EXPECT_EQ(f[2].as<std::string>(), "h");
  EXPECT_EQ(f[3].as<uint64_t>(), 3u);
  EXPECT_EQ(f[4].type, msgpack::type::NIL);
  EXPECT_EQ(f[5].type, msgpack::type::FLOAT64); // always float64, even for 0.0
  EXPECT_EQ(f[6].type, msgpack::type::FLOAT64);
  EXPECT_EQ(f[7].type, msgpack::type::BOOLEAN);
  EXPECT_EQ(f[8].as<uint64_t>(), 4u);
  EXPECT_EQ(f[9].as<uint64_t>(), 5u);
  EXPECT_EQ(f[10].as<uint64_t>(), 6u);
}

TEST(persistence_schema, malformed_worker_rows_are_errors_naming_the_row) {
  auto garbage = decode_worker_row(3, "\xc1");
  ASSERT_FALSE(garbage);
  EXPECT_NE(garbage.error().message.find("worker row 3"), std::string::npos);
  EXPECT_FALSE(decode_worker_row(3, ""));
  EXPECT_FALSE(decode_worker_row(3, "\x91\x01")); // an array of one int
  worker_row r;
  auto bytes = encode_worker_row(r);
  EXPECT_FALSE(decode_worker_row(3, bytes + std::string(1, '\0')));      // trailing bytes
  EXPECT_FALSE(decode_worker_row(3, bytes.substr(0, bytes.size() - 1))); // truncated
  ASSERT_TRUE(decode_worker_row(3, row_with(99))) << "the template row itself is valid";
  // Each field of the wrong type is refused: strings, ints as strings,
  // floats, the bool and the three unsigned orders.
  for (size_t bad : {0, 2, 5, 6, 7}) {
    SCOPED_TRACE(bad);
    EXPECT_FALSE(decode_worker_row(3, row_with(bad)));
  }
  for (size_t bad : {1, 3, 8, 9, 10}) {
    SCOPED_TRACE(bad);
    EXPECT_FALSE(decode_worker_row(3, row_with(bad, true)));
  }
  EXPECT_FALSE(decode_worker_row(3, row_with(4))); // peer_init_url neither str nor nil
}

TEST(persistence_schema, seq_states_have_names) {
  EXPECT_STREQ(to_string(seq_state::none), "none");
  EXPECT_STREQ(to_string(seq_state::tracking), "tracking");
  EXPECT_STREQ(to_string(seq_state::syncing), "syncing");
  EXPECT_STREQ(to_string(seq_state::resynced), "resynced");
  EXPECT_STREQ(to_string(seq_state::gap), "gap");
  EXPECT_EQ(static_cast<uint8_t>(seq_state::gap), max_seq_state);
}
