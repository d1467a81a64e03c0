// The request-body readers (gateway/http_body) called directly: the limits hold
// while a body is read (a wide object, a token list over max_tokens), every
// token spelling reads as the number it spells, and the 400/413/422 precedence
// and repeated-key rules of a body parsed as a whole are kept. The same bodies
// over real HTTP are in http_api_*_test.cpp.
#include "gateway/http_body.hpp"
#include "tests/json_text_util.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace lmcc::gateway {
namespace {

using msg::wire_int;

constexpr size_t default_max_tokens = size_t{1} << 20;

template <class T>
std::string outcome(const body_result<T>& r) {
  return r ? "<read>" : std::to_string(r.error().status) + " " + r.error().detail;
}

using test::distinct_entries;

std::string repeated(std::string_view piece, size_t n) {
  std::string out;
  out.reserve(piece.size() * n);
  for (size_t i = 0; i < n; ++i)
    out += piece;
  return out;
}

// -- limits while reading -------------------------------------------------------------------------

TEST(http_body_limits, a_body_with_an_object_of_a_million_keys_is_read_past_it) {
  // ~12 MB: FastAPI ignores the unknown field, and so does lmcc, in one pass.
  std::string body = R"({"instance_id": "A", "extra": {)";
  body += distinct_entries(1'000'000);
  body += R"(}, "location": "L"})";
  auto m = read_clear_body(body);
  ASSERT_TRUE(m) << outcome(m);
  EXPECT_EQ(m->instance_id, "A");
  EXPECT_EQ(m->location, "L");
}

TEST(http_body_limits, the_token_past_max_tokens_is_413_whatever_follows_it) {
  // A million tokens and then the body just stops: the limit answers, not the
  // malformed end, so a reader that stored every token before counting fails.
  const std::string tokens = repeated("7,", 1'000'000);
  auto pin = read_pin_body(R"({"instance_id": "A", "location": "L", "tokens": [)" + tokens, 1000);
  ASSERT_FALSE(pin);
  EXPECT_EQ(pin.error().status, 413);
  EXPECT_EQ(pin.error().detail, "field 'tokens' has more than 1000 entries");

  auto lookup = read_lookup_body(R"({"tokens": [)" + tokens, 1000);
  ASSERT_FALSE(lookup);
  EXPECT_EQ(lookup.error().status, 413);

  auto worker_ids = read_query_worker_info_body(
      R"({"instance_id": "all", "worker_ids": [)" + tokens + "0]}", 1000);
  ASSERT_FALSE(worker_ids);
  EXPECT_EQ(worker_ids.error().status, 413);
  EXPECT_EQ(worker_ids.error().detail, "field 'worker_ids' has more than 1000 entries");
}

TEST(http_body_limits, a_token_list_at_max_tokens_is_read_whole) {
  std::string tokens = repeated("7,", 999) + "8";
  auto m = read_lookup_body(R"({"tokens": [)" + tokens + "]}", 1000);
  ASSERT_TRUE(m) << outcome(m);
  ASSERT_EQ(m->tokens.size(), 1000u);
  EXPECT_EQ(m->tokens.back(), wire_int{8});
}

TEST(http_body_limits, containers_nested_past_64_levels_are_400) {
  auto nested = [](size_t depth) { return std::string(depth, '[') + std::string(depth, ']'); };
  // The body is level 1: an unknown field may hold 63 more levels.
  EXPECT_TRUE(read_health_body(R"({"instance_id": "A", "x": )" + nested(63) + "}"));
  auto deep = read_health_body(R"({"instance_id": "A", "x": )" + nested(64) + "}");
  ASSERT_FALSE(deep);
  EXPECT_EQ(deep.error().status, 400);
  EXPECT_EQ(deep.error().detail, "request body nests deeper than 64 levels");
}

TEST(http_body_limits, a_membership_change_past_its_bound_is_413_before_it_is_parsed) {
  // The members body is read as a whole document, which costs ~40 bytes of
  // memory per byte of `[[[[...`: a 64 MiB body would have taken gigabytes.
  const std::string nested(max_members_body_bytes + 1, '[');
  auto deep = read_members_body(nested);
  ASSERT_FALSE(deep);
  EXPECT_EQ(deep.error().status, 413);
  EXPECT_EQ(deep.error().detail, "a membership change body is larger than 65536 bytes");
  // Any real change is far smaller: 64 members (a cluster's most) of long ids.
  std::string body = R"({"members": [)";
  for (int i = 0; i < 64; ++i)
    body += (i ? ",\"" : "\"") + std::string(200, 'n') + std::to_string(i) + "\"";
  body += "]}";
  auto members = read_members_body(body);
  ASSERT_TRUE(members) << outcome(members);
  EXPECT_EQ(members->size(), 64u);
}

// -- token spellings ------------------------------------------------------------------------------

TEST(http_body_tokens, every_width_sign_and_spacing_reads_as_the_number_it_spells) {
  // Short tokens take a fast path and the rest simdjson's general one: seeded
  // random widths from 1 to 20 digits, both signs and every JSON whitespace.
  std::mt19937_64 rng{20261201};
  const char* spaces[] = {"", " ", "\n", "\t", "\r\n  "};
  for (int round = 0; round < 200; ++round) {
    std::vector<wire_int> expected;
    std::string body = R"({"tokens":[)";
    const int count = 1 + static_cast<int>(rng() % 64);
    for (int i = 0; i < count; ++i) {
      const int digits = 1 + static_cast<int>(rng() % 20);
      uint64_t value = rng();
      if (digits < 20) {
        uint64_t bound = 1;
        for (int d = 0; d < digits; ++d)
          bound *= 10;
        value %= bound;
      }
      const bool negative = rng() % 4 == 0 && value <= uint64_t{1} << 63;
      if (negative && value != 0)
        expected.emplace_back(static_cast<int64_t>(~value + 1));
      else
        expected.push_back(wire_int::from_unsigned(value));
      body += spaces[rng() % 5];
      body += negative ? "-" : "";
      body += std::to_string(value);
      body += spaces[rng() % 5];
      body += i + 1 < count ? "," : "";
    }
    body += "]}";
    SCOPED_TRACE(body);
    auto m = read_lookup_body(body, default_max_tokens);
    ASSERT_TRUE(m) << outcome(m);
    ASSERT_EQ(m->tokens, expected);
  }
}

TEST(http_body_tokens, the_edges_of_the_wire_range_and_of_eight_digits_read_exactly) {
  const std::string body = R"({"tokens": [0, -0, 9, -9, 99999999, -99999999, 100000000,)"
                           R"( 12345678, 9223372036854775807, -9223372036854775808,)"
                           R"( 9223372036854775808, 18446744073709551615]})";
  auto m = read_lookup_body(body, default_max_tokens);
  ASSERT_TRUE(m) << outcome(m);
  const std::vector<wire_int> expected = {
      0,
      0,
      9,
      -9,
      99999999,
      -99999999,
      100000000,
      12345678,
      std::numeric_limits<int64_t>::max(),
      std::numeric_limits<int64_t>::min(),
      wire_int::from_unsigned(uint64_t{1} << 63),
      wire_int::from_unsigned(std::numeric_limits<uint64_t>::max()),
  };
  EXPECT_EQ(m->tokens, expected);
}

TEST(http_body_tokens, spellings_json_does_not_allow_are_400_and_other_types_422) {
  for (const char* malformed :
       {"[01]", "[-01]", "[1x]", "[-]", "[1.]", "[.5]", "[+1]", "[1 2]", "[1,]", "[0x10]"}) {
    SCOPED_TRACE(malformed);
    auto m = read_lookup_body(std::string(R"({"tokens": )") + malformed + "}", default_max_tokens);
    ASSERT_FALSE(m);
    EXPECT_EQ(m.error().status, 400) << m.error().detail;
  }
  const std::pair<const char*, const char*> mistyped[] = {
      {"[1, 1e2]", "field 'tokens' item 1 must be an integer, not a float"},
      {"[1, 2.0]", "field 'tokens' item 1 must be an integer, not a float"},
      {"[18446744073709551616]",
       "field 'tokens' item 0 is outside the range of token ids [-2^63, 2^64-1]"},
      {"[-9223372036854775809]",
       "field 'tokens' item 0 is outside the range of token ids [-2^63, 2^64-1]"},
      {R"([1, "2"])", "field 'tokens' item 1 must be an integer"},
      {"[1, 2, [3]]", "field 'tokens' item 2 must be an integer"},
  };
  for (const auto& [tokens, detail] : mistyped) {
    SCOPED_TRACE(tokens);
    auto m = read_lookup_body(std::string(R"({"tokens": )") + tokens + "}", default_max_tokens);
    ASSERT_FALSE(m);
    EXPECT_EQ(m.error().status, 422);
    EXPECT_EQ(m.error().detail, detail);
  }
}

TEST(http_body_tokens, an_integer_beyond_a_double_is_a_mistyped_item_not_a_server_error) {
  // 400 digits: Python reads it as an int, out of the wire range: 422.
  const std::string huge(400, '9');
  auto pin = read_pin_body(R"({"instance_id": "A", "location": "L", "tokens": [)" + huge + "]}",
                           default_max_tokens);
  ASSERT_FALSE(pin);
  EXPECT_EQ(pin.error().status, 422);
  EXPECT_EQ(pin.error().detail, "field 'tokens' item 0 must be an integer in [-2^63, 2^64-1]");
}

TEST(http_body_tokens, a_count_beyond_64_bits_is_a_mistyped_field_not_malformed_json) {
  // simdjson classifies such an integer by its sign and then cannot read it:
  // the body is JSON, so the field is mistyped (422), as FastAPI's would be.
  for (const char* body : {R"({"fail_commits": 18446744073709551616})",
                           R"({"commit_delay_us": 25011111111111111111111})",
                           R"({"clock_jump_ms": -9223372036854775809})",
                           R"({"clock_jump_ms": 18446744073709551616})"}) {
    SCOPED_TRACE(body);
    auto faults = read_faults_body(body);
    ASSERT_FALSE(faults);
    EXPECT_EQ(faults.error().status, 422) << faults.error().detail;
  }
  auto named = read_faults_body(R"({"fail_commits": 18446744073709551616})");
  ASSERT_FALSE(named);
  EXPECT_EQ(named.error().detail, "field 'fail_commits' must be an integer >= 0");
}

// -- precedence and repeated keys -----------------------------------------------------------------

TEST(http_body_rules, a_body_that_is_not_json_is_400_even_after_a_mistyped_field) {
  auto m = read_clear_body(R"({"instance_id": 5, "location": "L", "x": tru})");
  ASSERT_FALSE(m);
  EXPECT_EQ(m.error().status, 400);
  auto lookup = read_lookup_body(R"({"tokens": [1.5], "x": [1 2]})", default_max_tokens);
  ASSERT_FALSE(lookup);
  EXPECT_EQ(lookup.error().status, 400);
  // nlohmann stopped reading at a NUL byte and took what came before it.
  auto after_nul = read_clear_body(std::string(R"({"instance_id": "A", "location": "L"})"
                                               "\0 junk",
                                               43));
  ASSERT_FALSE(after_nul);
  EXPECT_EQ(after_nul.error().status, 400);
  auto not_object = read_clear_body("[1, 2] x");
  ASSERT_FALSE(not_object);
  EXPECT_EQ(not_object.error().status, 400) << "malformed before it is judged not an object";
}

TEST(http_body_rules, the_first_missing_or_mistyped_field_in_model_order_is_named) {
  auto both = read_clear_body(R"({"location": 1})");
  ASSERT_FALSE(both);
  EXPECT_EQ(both.error().detail, "field 'instance_id' is required");
  auto second = read_pin_body(R"({"tokens": [1, "x"], "location": 7, "instance_id": "A"})",
                              default_max_tokens);
  ASSERT_FALSE(second);
  EXPECT_EQ(second.error().detail, "field 'location' must be a string");
  auto move = read_move_body(R"({"old_position": ["A"], "new_position": 3, "tokens": null})",
                             default_max_tokens);
  ASSERT_FALSE(move);
  EXPECT_EQ(move.error().detail, "field 'tokens' must be a list of integers")
      << "/move reads its tokens first, as before";
}

TEST(http_body_rules, a_repeated_key_takes_its_last_value_and_the_earlier_is_never_checked) {
  auto clear = read_clear_body(
      R"({"instance_id": 5, "location": "L", "instance_id": "A", "location": "M"})");
  ASSERT_TRUE(clear) << outcome(clear);
  EXPECT_EQ(clear->instance_id, "A");
  EXPECT_EQ(clear->location, "M");

  auto tokens = read_lookup_body(R"({"tokens": ["x"], "tokens": [4, 5]})", default_max_tokens);
  ASSERT_TRUE(tokens) << outcome(tokens);
  EXPECT_EQ(tokens->tokens, (std::vector<wire_int>{4, 5}));

  auto last_bad = read_lookup_body(R"({"tokens": [4, 5], "tokens": null})", default_max_tokens);
  ASSERT_FALSE(last_bad);
  EXPECT_EQ(last_bad.error().detail, "field 'tokens' must be a list of integers");
}

TEST(http_body_rules, keys_are_compared_unescaped) {
  auto m = read_health_body(R"({"instance\u005fid": "A"})");
  ASSERT_TRUE(m) << outcome(m);
  EXPECT_EQ(m->instance_id, "A");
}

} // namespace
} // namespace lmcc::gateway
