// The strict corners of the decoders, with hand-written frames: every error
// names the offending field by its path (msgpack and JSON alike), invalid UTF-8
// is refused wherever it sits, and ints and floats take every width msgspec
// accepts and re-encode in the smallest.
#include "messages/codec_json.hpp"
#include "messages/codec_msgpack.hpp"
#include "tests/conformance/test_support.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace {

namespace msg = lmcc::msg;
using lmcc::test::from_hex;
using lmcc::test::mp;
using lmcc::test::to_hex;

// -- errors name the field ----------------------------------------------------------------------

mp kv_op(std::string_view op, int64_t key, int64_t seq) {
  mp m;
  m.map(3).str("op_type").str(op).str("key").sint(key).str("seq_num").sint(seq);
  return m;
}

TEST(field_paths, a_bad_value_deep_inside_lists_and_structs_is_named_by_its_path) {
  struct path_case {
    std::string bytes;
    std::string error;
  };
  const mp batch_prefix = mp{}.map(5)
                              .str("type")
                              .str("BatchedKVOperationMsg")
                              .str("instance_id")
                              .str("i")
                              .str("worker_id")
                              .uint(0)
                              .str("location")
                              .str("L")
                              .str("operations")
                              .array(4);
  const std::vector<path_case> cases = {
      {mp{batch_prefix}
           .raw(kv_op("admit", 1, 0))
           .raw(kv_op("evict", 2, 1))
           .raw(kv_op("admit", 3, 2))
           .map(3)
           .str("op_type")
           .str("admit")
           .str("key")
           .str("7")
           .str("seq_num")
           .uint(3),
       "Expected `int`, got `str` - at `$.operations[3].key`"},
      {mp{batch_prefix}
           .raw(kv_op("admit", 1, 0))
           .raw(kv_op("evict", 2, 1))
           .map(2)
           .str("op_type")
           .str("admit")
           .str("key")
           .uint(3)
           .raw(kv_op("admit", 4, 3)),
       "Object missing required field `seq_num` - at `$.operations[2]`"},
      {mp{}.map(3)
           .str("type")
           .str("QueryWorkerInfoRetMsg")
           .str("event_id")
           .str("e")
           .str("worker_infos")
           .array(2)
           .map(7)
           .str("instance_id")
           .str("i")
           .str("worker_id")
           .uint(0)
           .str("ip")
           .str("1.2.3.4")
           .str("port")
           .uint(1)
           .str("peer_init_url")
           .nil()
           .str("registration_time")
           .f64(1.5)
           .str("last_heartbeat_time")
           .f64(2.5)
           .map(7)
           .str("instance_id")
           .str("i")
           .str("worker_id")
           .uint(1)
           .str("ip")
           .str("1.2.3.4")
           .str("port")
           .uint(1)
           .str("peer_init_url")
           .nil()
           .str("registration_time")
           .str("yesterday")
           .str("last_heartbeat_time")
           .f64(2.5),
       "Expected `float`, got `str` - at `$.worker_infos[1].registration_time`"},
      {mp{}.map(2)
           .str("type")
           .str("HeartbeatRetMsg")
           .str("commands")
           .array(2)
           .map(1)
           .str("command_type")
           .str("HeartbeatCommand")
           .map(2)
           .str("command_type")
           .str("full_sync")
           .str("reason")
           .uint(5),
       "Expected `str`, got `int` - at `$.commands[1].reason`"},
      {mp{}.map(2)
           .str("type")
           .str("BatchedP2PLookupRetMsg")
           .str("layout_info")
           .array(1)
           .array(4)
           .str("a")
           .str("b")
           .str("3")
           .str("c"),
       "Expected `int`, got `str` - at `$.layout_info[0][2]`"},
      {mp{}.map(4)
           .str("type")
           .str("MoveMsg")
           .str("event_id")
           .str("e")
           .str("old_position")
           .array(2)
           .str("a")
           .str("L")
           .str("new_position")
           .array(2)
           .str("b")
           .nil(),
       "Expected `str`, got `None` - at `$.new_position[1]`"},
  };
  for (const auto& [bytes, error] : cases) {
    SCOPED_TRACE(error);
    auto r = msg::decode_msgpack(bytes);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().message, error);
  }
}

TEST(field_paths, json_errors_name_the_same_paths) {
  const std::pair<std::string, std::string> cases[] = {
      {R"({"type":"BatchedKVOperationMsg","instance_id":"i","worker_id":0,"location":"L",)"
       R"("operations":[{"op_type":"admit","key":1,"seq_num":0},)"
       R"({"op_type":"admit","key":2,"seq_num":1},{"op_type":"admit","key":3,"seq_num":2},)"
       R"({"op_type":"admit","key":"7","seq_num":3}]})",
       "Expected `int`, got `str` - at `$.operations[3].key`"},
      {R"({"type":"HeartbeatRetMsg","commands":[{"command_type":"HeartbeatCommand"},)"
       R"({"command_type":"full_sync","reason":5}]})",
       "Expected `str`, got `int` - at `$.commands[1].reason`"},
      {R"({"type":"BatchedP2PLookupRetMsg","layout_info":[["a","b",1.5,"c"]]})",
       "Expected `int`, got `float` - at `$.layout_info[0][2]`"},
      {R"({"type":"HealthRetMsg","event_id":"e","error_codes":{"x1":0}})",
       "Expected `int`, got `str` - at `key` in `$.error_codes`"},
  };
  for (const auto& [text, error] : cases) {
    SCOPED_TRACE(error);
    auto r = msg::decode_json(text);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().message, error);
  }
}

// -- strings --------------------------------------------------------------------------------------

TEST(strict_values, invalid_utf8_in_a_str_is_rejected_wherever_it_sits) {
  const std::string bad = "ok\xc3\x28"; // 0xc3 needs a continuation byte
  const std::string overlong = "\xc0\xaf";
  const std::string surrogate = "\xed\xa0\x80";
  for (const auto& s : {bad, overlong, surrogate}) {
    SCOPED_TRACE(to_hex(s));
    EXPECT_FALSE(msg::decode_msgpack(mp{}.map(2).str("type").str("ErrorMsg").str("error").str(s)));
    EXPECT_FALSE(msg::decode_msgpack(
        mp{}.map(2).str("type").str("RegisterRetMsg").str("extra_config").map(1).str(s).str("v")))
        << "in a dict key";
    EXPECT_FALSE(msg::decode_msgpack(mp{}.map(2)
                                         .str("type")
                                         .str("HeartbeatRetMsg")
                                         .str("commands")
                                         .array(1)
                                         .map(2)
                                         .str("command_type")
                                         .str("full_sync")
                                         .str("args")
                                         .map(1)
                                         .str("a")
                                         .str(s)))
        << "in an Any value";
    EXPECT_FALSE(msg::decode_json(R"({"type":"ErrorMsg","error":")" + s + "\"}"));
  }
  auto r = msg::decode_msgpack(mp{}.map(2).str("type").str("ErrorMsg").str("error").str(bad));
  ASSERT_FALSE(r);
  EXPECT_FALSE(r.error().message.empty());
  EXPECT_TRUE(msg::decode_msgpack(
      mp{}.map(2).str("type").str("ErrorMsg").str("error").str("\xf0\x9f\x98\x80\xc3\xa9")));
}

// -- ints and floats ------------------------------------------------------------------------------

std::string clear_worker_ret(std::string_view encoded_int) {
  return mp{}.map(2).str("type").str("ClearWorkerRetMsg").str("num_tokens").raw(encoded_int);
}

TEST(strict_values, int_fields_accept_every_msgpack_int_width_and_re_encode_in_the_smallest) {
  struct width_case {
    const char* hex;
    msg::wire_int value;
    std::string canonical;
  };
  const width_case cases[] = {
      {"05", 5, mp{}.uint(5)},
      {"cc05", 5, mp{}.uint(5)},
      {"cd0005", 5, mp{}.uint(5)},
      {"ce00000005", 5, mp{}.uint(5)},
      {"cf0000000000000005", 5, mp{}.uint(5)},
      {"d005", 5, mp{}.uint(5)},
      {"d10005", 5, mp{}.uint(5)},
      {"d200000005", 5, mp{}.uint(5)},
      {"d30000000000000005", 5, mp{}.uint(5)},
      {"fb", -5, from_hex("fb")},
      {"d0fb", -5, from_hex("fb")},
      {"d1fffb", -5, from_hex("fb")},
      {"d2fffffffb", -5, from_hex("fb")},
      {"d3fffffffffffffffb", -5, from_hex("fb")},
      {"d10080", 128, from_hex("cc80")},
      {"cf0000000000010000", 65536, from_hex("ce00010000")},
      {"d2ffff7fff", -32769, from_hex("d2ffff7fff")},
      {"d3ffffffff7fffffff", INT64_C(-2147483649), from_hex("d3ffffffff7fffffff")},
      {"d38000000000000000", std::numeric_limits<int64_t>::min(), from_hex("d38000000000000000")},
      {"d37fffffffffffffff", std::numeric_limits<int64_t>::max(), from_hex("cf7fffffffffffffff")},
      {"cfffffffffffffffff", msg::wire_int::from_unsigned(UINT64_MAX),
       from_hex("cfffffffffffffffff")},
  };
  for (const auto& [hex, value, canonical] : cases) {
    SCOPED_TRACE(hex);
    auto r = msg::decode_msgpack(clear_worker_ret(from_hex(hex)));
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_EQ(std::get<msg::ClearWorkerRetMsg>(*r).num_tokens, value)
        << std::get<msg::ClearWorkerRetMsg>(*r).num_tokens.to_string();
    EXPECT_EQ(to_hex(msg::encode_msgpack(*r)), to_hex(clear_worker_ret(canonical)));
  }
}

TEST(strict_values, ints_inside_any_values_re_encode_in_the_smallest_width) {
  auto frame = [](std::string_view encoded) {
    return mp{}
        .map(2)
        .str("type")
        .str("HeartbeatRetMsg")
        .str("commands")
        .array(1)
        .map(3)
        .str("command_type")
        .str("full_sync")
        .str("reason")
        .nil()
        .str("args")
        .map(1)
        .str("n")
        .raw(encoded)
        .bytes();
  };
  auto r = msg::decode_msgpack(frame(from_hex("d30000000000000005")));
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(to_hex(msg::encode_msgpack(*r)), to_hex(frame(from_hex("05"))));
  auto f = msg::decode_msgpack(frame(from_hex("ca3f000000")));
  ASSERT_TRUE(f) << f.error().message;
  EXPECT_EQ(to_hex(msg::encode_msgpack(*f)), to_hex(frame(mp{}.f64(0.5))))
      << "float32 inside Any comes back as float64, as msgspec decodes it to a Python float";
}

std::string status_ret(std::string_view encoded_progress) {
  return mp{}
      .map(5)
      .str("type")
      .str("FullSyncStatusRetMsg")
      .str("sync_id")
      .str("s")
      .str("is_complete")
      .boolean(false)
      .str("global_progress")
      .raw(encoded_progress)
      .str("can_exit_freeze")
      .boolean(true);
}

std::string canonical_status_ret(double progress) {
  return mp{}
      .map(6)
      .str("type")
      .str("FullSyncStatusRetMsg")
      .str("sync_id")
      .str("s")
      .str("is_complete")
      .boolean(false)
      .str("global_progress")
      .f64(progress)
      .str("can_exit_freeze")
      .boolean(true)
      .str("missing_batches")
      .array(0);
}

TEST(strict_values, a_float_field_accepts_float32_and_every_int_and_re_encodes_float64) {
  const std::pair<const char*, double> cases[] = {
      {"ca3f000000", 0.5},
      {"cabf800000", -1.0},
      {"cb3fe0000000000000", 0.5},
      {"02", 2.0},
      {"d0fe", -2.0},
      {"cd2134", 8500.0},
      {"cfffffffffffffffff", 18446744073709551615.0},
      {"d38000000000000000", -9223372036854775808.0},
  };
  for (const auto& [hex, value] : cases) {
    SCOPED_TRACE(hex);
    auto r = msg::decode_msgpack(status_ret(from_hex(hex)));
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_EQ(std::get<msg::FullSyncStatusRetMsg>(*r).global_progress, value);
    EXPECT_EQ(to_hex(msg::encode_msgpack(*r)), to_hex(canonical_status_ret(value)));
  }
}

TEST(strict_values, a_bool_is_refused_for_an_int_field_and_an_int_for_a_bool_field) {
  auto r = msg::decode_msgpack(clear_worker_ret(from_hex("c3")));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message, "Expected `int`, got `bool` - at `$.num_tokens`");

  auto b = msg::decode_msgpack(mp{}.map(3)
                                   .str("type")
                                   .str("FullSyncStartRetMsg")
                                   .str("sync_id")
                                   .str("s")
                                   .str("accepted")
                                   .uint(1));
  ASSERT_FALSE(b);
  EXPECT_EQ(b.error().message, "Expected `bool`, got `int` - at `$.accepted`");

  auto f = msg::decode_msgpack(status_ret(from_hex("c2")));
  ASSERT_FALSE(f);
  EXPECT_EQ(f.error().message, "Expected `float`, got `bool` - at `$.global_progress`");

  auto j = msg::decode_json(R"({"type":"ClearWorkerRetMsg","num_tokens":true})");
  ASSERT_FALSE(j);
  EXPECT_EQ(j.error().message, "Expected `int`, got `bool` - at `$.num_tokens`");
}

} // namespace
