// JSON frames through the real decoder (decode_frame / decode_json): the
// limits hold while the text is read, not after (issue 9), and the rules
// LMCache's json.loads + msgspec.convert apply to JSON are kept: repeated keys,
// numbers, and the malformed texts json.loads refuses.
#include "messages/codec_json.hpp"
#include "messages/codec_msgpack.hpp"
#include "messages/json_text_reader.hpp"
#include "tests/json_text_util.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace {

namespace msg = lmcc::msg;

std::string error_of(const msg::expected<msg::Msg>& r) {
  return r ? std::string("<accepted as ") + std::string(msg::type_tag_of(r.value())) + ">"
           : r.error().message;
}

using lmcc::test::distinct_entries;

/// `{entries}`. Appended piece by piece: g++ 12 warns (-Wrestrict, falsely) on
/// `"literal" + std::string` here.
std::string object_of(std::string_view entries) {
  std::string text = "{";
  text += entries;
  text += '}';
  return text;
}

std::string key_name(int i) {
  std::string name = "k";
  name += std::to_string(i);
  return name;
}

/// An ErrorMsg whose unknown field `extra` holds `value`: only the reader and
/// the limits ever look at it.
std::string error_msg_with_extra(std::string_view value) {
  return R"({"type":"ErrorMsg","error":"x","extra":)" + std::string(value) + "}";
}

/// A HeartbeatRetMsg whose one command carries `args` (a Dict[str, Any]).
std::string heartbeat_ret_with_args(std::string_view args) {
  return R"({"type":"HeartbeatRetMsg","commands":[{"command_type":"full_sync",)"
         R"("reason":null,"args":)" +
         std::string(args) + "}]}";
}

using args_map = msg::ordered_map<std::string, msg::any_value>;

const args_map& args_of(const msg::Msg& m) {
  const auto& command = std::get<msg::HeartbeatRetMsg>(m).commands.at(0);
  const auto& args = std::get<msg::FullSyncCommand>(command).args;
  static const args_map none;
  return args ? *args : none;
}

std::string key_of(const std::pair<std::string, msg::any_value>& entry) {
  return entry.first;
}

msg::any_value any_int(int64_t v) {
  msg::any_value a;
  a.value = msg::wire_int{v};
  return a;
}

// -- wide objects and long arrays: refused while they are read ------------------------------

TEST(json_wide_objects, an_object_of_a_million_keys_is_refused_at_the_map_limit) {
  // ~12 MB of text: the frame limit is raised so that only the map limit stands.
  // The old DOM decoder spent minutes inserting the keys before it looked.
  msg::decode_limits limits;
  limits.max_frame_bytes = size_t{16} << 20;
  const std::string frame = error_msg_with_extra(object_of(distinct_entries(1'000'000)));
  auto r = msg::decode_frame(frame, limits);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message, "Map exceeds the limit of 65536 entries");
}

TEST(json_wide_objects, the_entry_past_the_map_limit_is_refused_whatever_follows_it) {
  // Unterminated: a decoder that checks a map's length only once the map is
  // complete would call this malformed, after reading all of it.
  const std::string frame =
      R"({"type":"ErrorMsg","error":"x","extra":{)" + distinct_entries(100'000) + ",";
  auto r = msg::decode_frame(frame);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message, "Map exceeds the limit of 65536 entries");
}

TEST(json_wide_objects, a_100k_key_object_decodes_when_the_map_limit_allows_it) {
  msg::decode_limits limits;
  limits.max_map_length = 1 << 20;
  auto skipped =
      msg::decode_frame(error_msg_with_extra(object_of(distinct_entries(100'000))), limits);
  ASSERT_TRUE(skipped) << error_of(skipped);
  EXPECT_EQ(std::get<msg::ErrorMsg>(*skipped).error, "x");

  auto kept =
      msg::decode_frame(heartbeat_ret_with_args(object_of(distinct_entries(100'000))), limits);
  ASSERT_TRUE(kept) << error_of(kept);
  const auto& args = args_of(*kept);
  ASSERT_EQ(args.size(), 100'000u);
  EXPECT_EQ(key_of(args[0]), "k0");
  EXPECT_EQ(key_of(args[99'999]), "k99999");
  EXPECT_TRUE(args[99'999].second == any_int(9));
}

TEST(json_long_arrays, the_element_past_max_array_length_is_refused_whatever_follows_it) {
  msg::decode_limits limits;
  limits.max_array_length = 10;
  std::string tokens;
  for (int i = 0; i < 1'000'000; ++i)
    tokens += "7,";
  const std::string head = R"({"type":"LookupMsg","event_id":"e","tokens":[)";
  // A million tokens, then the text just stops: the limit answers first.
  auto cut = msg::decode_frame(head + tokens, limits);
  ASSERT_FALSE(cut);
  EXPECT_EQ(cut.error().message, "Array exceeds the limit of 10 elements");
  tokens.pop_back();
  auto whole = msg::decode_frame(head + tokens + "]}", limits);
  ASSERT_FALSE(whole);
  EXPECT_EQ(whole.error().message, "Array exceeds the limit of 10 elements");
}

// -- repeated keys: json.loads keeps one entry per key, first position, last value --------------

TEST(json_repeated_keys, the_last_value_wins_and_the_values_it_replaced_are_never_checked) {
  auto r = msg::decode_json(R"({"type":"ErrorMsg","error":1,"error":"kept"})");
  ASSERT_TRUE(r) << error_of(r);
  EXPECT_EQ(std::get<msg::ErrorMsg>(*r).error, "kept");

  auto last_bad = msg::decode_json(R"({"type":"ErrorMsg","error":"x","error":1})");
  ASSERT_FALSE(last_bad);
  EXPECT_EQ(last_bad.error().message, "Expected `str`, got `int` - at `$.error`");
}

TEST(json_repeated_keys, a_repeated_tag_takes_its_last_value) {
  auto r = msg::decode_json(R"({"type":"NoSuchMsg","error":"x","type":"ErrorMsg"})");
  ASSERT_TRUE(r) << error_of(r);
  EXPECT_EQ(std::get<msg::ErrorMsg>(*r).error, "x");
  auto bad = msg::decode_json(R"({"type":"ErrorMsg","error":"x","type":"NoSuchMsg"})");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().message, "Invalid value 'NoSuchMsg' - at `$.type`");
}

TEST(json_repeated_keys, a_dict_keeps_the_first_position_of_each_key_with_its_last_value) {
  auto r = msg::decode_json(heartbeat_ret_with_args(R"({"b":1,"a":2,"b":3})"));
  ASSERT_TRUE(r) << error_of(r);
  const auto& args = args_of(*r);
  ASSERT_EQ(args.size(), 2u);
  EXPECT_EQ(key_of(args[0]), "b");
  EXPECT_TRUE(args[0].second == any_int(3));
  EXPECT_EQ(key_of(args[1]), "a");
  EXPECT_TRUE(args[1].second == any_int(2));
}

TEST(json_repeated_keys, wide_dicts_collapse_repeated_keys_the_same_way) {
  // 60 entries, 20 keys each three times: beyond the pairwise check, so sorted.
  std::string args = "{";
  for (int round = 0; round < 3; ++round)
    for (int k = 0; k < 20; ++k) {
      if (round + k > 0)
        args += ',';
      args += "\"k";
      args += std::to_string((k * 7) % 20);
      args += "\":";
      args += std::to_string(round * 100 + k);
    }
  args += "}";
  auto r = msg::decode_json(heartbeat_ret_with_args(args));
  ASSERT_TRUE(r) << error_of(r);
  const auto& entries = args_of(*r);
  ASSERT_EQ(entries.size(), 20u);
  for (int k = 0; k < 20; ++k) {
    SCOPED_TRACE(k);
    EXPECT_EQ(key_of(entries[k]), key_name((k * 7) % 20)) << "first-seen order";
    EXPECT_TRUE(entries[k].second == any_int(200 + k)) << "the last round's value";
  }
}

TEST(json_repeated_keys, every_entry_counts_toward_max_map_length) {
  // As the msgpack decoder counts every entry its map header announces: each
  // entry costs reading, repeated or not.
  msg::decode_limits limits;
  limits.max_map_length = 4;
  EXPECT_TRUE(msg::decode_json(error_msg_with_extra(R"({"a":1,"a":1,"a":1,"a":1})"), limits));
  auto r = msg::decode_json(error_msg_with_extra(R"({"a":1,"a":1,"a":1,"a":1,"a":1})"), limits);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message, "Map exceeds the limit of 4 entries");
}

// -- numbers -------------------------------------------------------------------------------------

std::string clear_worker_ret(std::string_view num_tokens) {
  return R"({"type":"ClearWorkerRetMsg","num_tokens":)" + std::string(num_tokens) + "}";
}

TEST(json_numbers, int_fields_take_the_full_wire_range_and_nothing_else) {
  const std::pair<const char*, msg::wire_int> accepted[] = {
      {"18446744073709551615", msg::wire_int::from_unsigned(UINT64_MAX)},
      {"9223372036854775808", msg::wire_int::from_unsigned(uint64_t{1} << 63)},
      {"-9223372036854775808", msg::wire_int{std::numeric_limits<int64_t>::min()}},
      {"-0", msg::wire_int{0}},
      {"42", msg::wire_int{42}},
  };
  for (const auto& [text, value] : accepted) {
    SCOPED_TRACE(text);
    auto r = msg::decode_json(clear_worker_ret(text));
    ASSERT_TRUE(r) << error_of(r);
    EXPECT_EQ(std::get<msg::ClearWorkerRetMsg>(*r).num_tokens, value);
  }
  // Beyond 64 bits an integer reads as a float, as it always did in lmcc.
  for (const char* text : {"18446744073709551616", "-9223372036854775809", "1.0", "1e2", "-0.0"}) {
    SCOPED_TRACE(text);
    auto r = msg::decode_json(clear_worker_ret(text));
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().message, "Expected `int`, got `float` - at `$.num_tokens`");
  }
}

TEST(json_numbers, float_fields_take_ints_and_big_ints_and_refuse_what_a_double_cannot_hold) {
  auto progress = [](std::string_view value) {
    return R"({"type":"FullSyncStatusRetMsg","sync_id":"s","is_complete":false,)"
           R"("global_progress":)" +
           std::string(value) + R"(,"can_exit_freeze":true})";
  };
  const std::pair<const char*, double> accepted[] = {
      {"1", 1.0},
      {"0.1", 0.1},
      {"18446744073709551616", 18446744073709551616.0},
      {"123456789012345678901234567890", 1.2345678901234568e29},
      {"1e-400", 0.0},
  };
  for (const auto& [text, value] : accepted) {
    SCOPED_TRACE(text);
    auto r = msg::decode_json(progress(text));
    ASSERT_TRUE(r) << error_of(r);
    EXPECT_EQ(std::get<msg::FullSyncStatusRetMsg>(*r).global_progress, value);
  }
  for (const char* text : {"1e400", "-1e400", "NaN", "Infinity", "01", "1.", "-", ".5"}) {
    SCOPED_TRACE(text);
    auto r = msg::decode_json(progress(text));
    ASSERT_FALSE(r);
    EXPECT_TRUE(r.error().message.starts_with("JSON is malformed: ")) << r.error().message;
  }
}

TEST(json_numbers, a_float_of_more_than_19_significant_digits_reads_as_python_reads_it) {
  // simdjson 3.0.1 misreads some of these (0.99999999999999999999 as 0.0777).
  // Expected values: Python's float() of the same text.
  auto progress = [](std::string_view value) {
    return R"({"type":"FullSyncStatusRetMsg","sync_id":"s","is_complete":false,)"
           R"("global_progress":)" +
           std::string(value) + R"(,"can_exit_freeze":true})";
  };
  const std::pair<const char*, double> cases[] = {
      {"0.99999999999999999999", 1.0},
      {"-0.99999999999999999999", -1.0},
      {"0.184467440737095516150", 0.1844674407370955},
      {"0.123456789012345678901", 0.12345678901234568},
      {"0.000184467440737095516150", 0.0001844674407370955},
      {"1.84467440737095516150", 1.8446744073709551},
      {"99999999999999999999", 1e20},
      {"0.1234567890123456789012e-400", 0.0},
  };
  for (const auto& [text, value] : cases) {
    SCOPED_TRACE(text);
    auto r = msg::decode_json(progress(text));
    ASSERT_TRUE(r) << error_of(r);
    EXPECT_EQ(std::get<msg::FullSyncStatusRetMsg>(*r).global_progress, value);
  }
}

// -- what json.loads refuses ----------------------------------------------------------------------

TEST(json_malformed, texts_json_loads_refuses_are_refused_as_malformed) {
  for (const std::string& text : {
           std::string(""),
           std::string(" \n"),
           std::string(R"({"type":"ErrorMsg","error":"x"} {})"),
           std::string(R"({"type":"ErrorMsg","error":"x"}])"),
           std::string(R"({"type":"ErrorMsg","error":"x"}, 1)"),
           std::string(R"({"type":"ErrorMsg","error":"x",})"),
           std::string(R"({"type":"ErrorMsg","error":"x","extra":[1,]})"),
           std::string(R"({"type":"ErrorMsg","error":"x","extra":nul})"),
           std::string(R"({"type":"ErrorMsg","error":"x","extra":truex})"),
           std::string(R"({"type":"ErrorMsg","error":"\ud800"})"),
           std::string(R"({"type":"ErrorMsg","error":"\udc00"})"),
           std::string("{\"type\":\"ErrorMsg\",\"error\":\"tab\there\"}"),
           std::string(R"({"type":"ErrorMsg","error":"x")"),
           std::string(R"({"type":"ErrorMsg" "error":"x"})"),
           // nlohmann stopped reading at a NUL byte and took what came before it.
           std::string("{\"type\":\"ErrorMsg\",\"error\":\"x\"}\0junk", 36),
           std::string("{\"type\":\"ErrorMsg\",\"error\":\"x\"}\0", 32),
       }) {
    SCOPED_TRACE(text);
    auto r = msg::decode_json(text);
    ASSERT_FALSE(r);
    EXPECT_TRUE(r.error().message.starts_with("JSON is malformed: ")) << r.error().message;
  }
}

TEST(json_malformed, whitespace_around_the_value_and_escapes_inside_strings_are_fine) {
  auto r = msg::decode_json(" \n\t{\"type\" : \"ErrorMsg\" , \"error\" : "
                            "\"\\u00e9\\ud83d\\ude00\\n\\\"\\u0000\"}\r\n ");
  ASSERT_TRUE(r) << error_of(r);
  EXPECT_EQ(std::get<msg::ErrorMsg>(*r).error, std::string("\xc3\xa9\xf0\x9f\x98\x80\n\"\0", 9));
}

// -- the per-thread reader
// --------------------------------------------------------------------------

TEST(json_text_reader, a_decode_inside_a_read_on_the_same_thread_leaves_the_outer_document_intact) {
  msg::borrowed_json_reader reader;
  std::vector<std::string> seen;
  auto e = reader->read(R"(["outer-1", "outer-2"])", [&](simdjson::ondemand::value v) {
    for (auto item : v.get_array()) {
      std::string_view s = item.get_string();
      seen.emplace_back(s);
      // The thread's reader is busy: this decode must use a reader of its own.
      auto inner = msg::decode_json(R"({"type":"ErrorMsg","error":"inner"})");
      ASSERT_TRUE(inner) << error_of(inner);
      EXPECT_EQ(std::get<msg::ErrorMsg>(*inner).error, "inner");
    }
  });
  EXPECT_EQ(e, simdjson::SUCCESS) << simdjson::error_message(e);
  EXPECT_EQ(seen, (std::vector<std::string>{"outer-1", "outer-2"}));
}

} // namespace
