// POST /lookup over real HTTP against a fake controller: the reply's shape and
// event_id, token ranges, and the 400/413/422 answers to bad bodies, including
// bodies far past the limits (wide objects, endless token lists) and mutated
// ones.
#include "tests/gateway/http_api_fixture.hpp"

#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include <random>
#include <set>
#include <string>
#include <vector>

namespace lmcc::gateway {
namespace {

using namespace std::chrono_literals;
using namespace http_test;
using json = nlohmann::json;
using msg::Msg;
using msg::wire_int;

// -- /lookup ---------------------------------------------------------------------

TEST_F(http_api_test, lookup_answers_layout_info_with_a_lookup_event_id) {
  auto j = expect_json(post("/lookup", R"({"tokens": [1, 2, 3]})"), 200);
  auto m = last<msg::LookupMsg>();
  EXPECT_TRUE(has_prefix_and_uuid(m.event_id, "Lookup")) << m.event_id;
  EXPECT_EQ(m.tokens, (std::vector<wire_int>{1, 2, 3}));
  EXPECT_EQ(j["event_id"], m.event_id);
  EXPECT_EQ(j["layout_info"], json::parse(R"({"A": ["LocalCPUBackend", 512],
                                               "B": ["LocalDiskBackend", 256]})"));
  // Keys in the order the controller gave (first holder first).
  EXPECT_EQ(j.dump().find("\"A\""), j.dump().find("\"layout_info\":{") + 15);
}

TEST_F(http_api_test, lookup_says_from_where_its_prefixes_may_be_short_only_when_they_may) {
  auto whole = post("/lookup", R"({"tokens": [1, 2, 3]})");
  ASSERT_TRUE(whole);
  EXPECT_FALSE(whole->has_header(lookup_unsure_header));
  controller_.set_reply([](const Msg& request) -> Msg {
    msg::LookupRetMsg ret{.event_id = std::get<msg::LookupMsg>(request).event_id,
                          .layout_info = {{"A", {"LocalCPUBackend", 512}}}};
    ret.unsure_from_tokens = 256;
    return ret;
  });
  auto unsure = post("/lookup", R"({"tokens": [1, 2, 3]})");
  ASSERT_TRUE(unsure);
  EXPECT_EQ(unsure->get_header_value(lookup_unsure_header), "256");
  // The body stays LMCache's.
  EXPECT_EQ(json::parse(unsure->body)["layout_info"],
            json::parse(R"({"A": ["LocalCPUBackend", 512]})"));
}

TEST_F(http_api_test, lookup_keeps_negative_and_full_range_unsigned_tokens_intact) {
  auto body =
      R"({"tokens": [-1, 18446744073709551615, -9223372036854775808, 9223372036854775808, 0]})";
  expect_json(post("/lookup", body), 200);
  auto m = last<msg::LookupMsg>();
  ASSERT_EQ(m.tokens.size(), 5u);
  EXPECT_EQ(m.tokens[0], wire_int{-1});
  EXPECT_TRUE(m.tokens[0].is_negative());
  EXPECT_EQ(m.tokens[1], wire_int::from_unsigned(u64_max));
  EXPECT_FALSE(m.tokens[1].is_negative());
  EXPECT_EQ(m.tokens[2], wire_int{i64_min});
  EXPECT_EQ(m.tokens[3], wire_int::from_unsigned(uint64_t{1} << 63));
  EXPECT_EQ(m.tokens[4], wire_int{0});
}

TEST_F(http_api_test, lookup_accepts_unknown_fields_and_empty_token_lists) {
  expect_json(post("/lookup", R"({"x": {"y": [1, "z", null, true, 2.5]}, "tokens": []})"), 200);
  EXPECT_TRUE(last<msg::LookupMsg>().tokens.empty());
}

TEST_F(http_api_test, lookup_refuses_malformed_json_with_400) {
  for (const char* body :
       {"{not json", "", "   ", R"({"tokens": [1, 2)", R"({"tokens": [1 2]})",
        R"({"tokens": [1]} x)", R"({"tokens": [1]}], [)", R"({"tokens": [1]} {})",
        R"({"tokens": [1], "x": [1 2]})", R"({"tokens": [1], "x": tru})", R"({"tokens": [-]})",
        "{\"tokens\": [1], \"x\": \"\xff\"}"}) {
    SCOPED_TRACE(body);
    auto detail = expect_error(post("/lookup", body), 400);
    EXPECT_NE(detail.find("malformed JSON"), std::string::npos) << detail;
  }
  EXPECT_TRUE(controller_.requests().empty());
}

TEST_F(http_api_test, lookup_refuses_mistyped_or_missing_tokens_with_422) {
  struct {
    const char* body;
    const char* detail_part;
  } cases[] = {
      {"{}", "field 'tokens' is required"},
      {R"({"token": [1]})", "field 'tokens' is required"},
      {"[1, 2]", "must be a JSON object"},
      {"42", "must be a JSON object"},
      {R"({"tokens": "1 2"})", "field 'tokens' must be a list"},
      {R"({"tokens": null})", "field 'tokens' must be a list"},
      {R"({"tokens": [1, 2.5]})", "item 1 must be an integer"},
      {R"({"tokens": [1, "2"]})", "item 1 must be an integer"},
      {R"({"tokens": [true]})", "item 0 must be an integer"},
      {R"({"tokens": [18446744073709551616]})", "item 0 is outside the range"},
      {R"({"tokens": [-9223372036854775809]})", "item 0 is outside the range"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.body);
    auto detail = expect_error(post("/lookup", c.body), 422);
    EXPECT_NE(detail.find(c.detail_part), std::string::npos) << detail;
  }
  EXPECT_TRUE(controller_.requests().empty());
}

TEST_F(http_api_test, lookup_refuses_too_many_tokens_with_413) {
  start_with(http_options{.max_tokens = 3});
  expect_json(post("/lookup", R"({"tokens": [1, 2, 3]})"), 200);
  auto detail = expect_error(post("/lookup", R"({"tokens": [1, 2, 3, 4]})"), 413);
  EXPECT_NE(detail.find("more than 3"), std::string::npos) << detail;
  expect_error(post("/pin", R"({"instance_id": "A", "location": "L", "tokens": [1, 2, 3, 4]})"),
               413);
}

TEST_F(http_api_test, oversized_bodies_get_413) {
  start_with(http_options{.max_body_bytes = 64});
  std::string body = R"({"tokens": [)" + std::string(100, '1') + "]}";
  auto detail = expect_error(post("/lookup", body), 413);
  EXPECT_NE(detail.find("64 bytes"), std::string::npos) << detail;
  expect_json(post("/lookup", R"({"tokens": [1]})"), 200);
}

TEST_F(http_api_test, lookup_handles_many_tokens) {
  std::string body = R"({"tokens": [)";
  for (int i = 0; i < 20000; ++i) {
    if (i > 0)
      body += ',';
    body += std::to_string(i * 7919 - 50000);
  }
  body += "]}";
  expect_json(post("/lookup", body), 200);
  auto m = last<msg::LookupMsg>();
  ASSERT_EQ(m.tokens.size(), 20000u);
  EXPECT_EQ(m.tokens[19999], wire_int{int64_t{19999} * 7919 - 50000});
}

TEST_F(http_api_test, deeply_nested_bodies_are_refused_without_crashing) {
  std::string deep =
      R"({"tokens": [], "x": )" + std::string(100000, '[') + std::string(100000, ']') + "}";
  expect_error(post("/lookup", deep), 400);
  std::string deep2 =
      R"({"instance_id": "A", "x": )" + std::string(100000, '[') + std::string(100000, ']') + "}";
  expect_error(post("/health", deep2), 400);
}

TEST_F(http_api_test, mutated_bodies_never_crash_and_get_a_known_status) {
  // Seeded so that a failure replays; each body is a valid one with a few bytes
  // flipped, cut or duplicated.
  std::mt19937 rng{20240611};
  const std::vector<std::pair<std::string, std::string>> seeds = {
      {"/lookup", R"({"tokens": [1, -2, 18446744073709551615], "x": {"y": [null, true]}})"},
      {"/query_instance", R"({"event_id": "x", "ip": "10.0.0.1"})"},
      {"/pin", R"({"instance_id": "A", "location": "L", "tokens": [1, 2]})"},
      {"/move", R"({"old_position": ["A", "L"], "new_position": ["B", "L"], "should_copy": true})"},
      {"/query_worker_info", R"({"instance_id": "all", "worker_ids": [0, 1]})"},
  };
  // Sized explicitly: it holds a NUL byte, along with invalid UTF-8.
  static constexpr char raw_alphabet[] = "{}[]\",:0123456789-.eE \\\x00\xff\xc3tfnul";
  const std::string alphabet{raw_alphabet, sizeof(raw_alphabet) - 1};
  const std::set<int> allowed = {200, 400, 404, 413, 422, 500};
  for (int round = 0; round < 60; ++round) {
    for (const auto& [path, seed] : seeds) {
      std::string body = seed;
      int edits = 1 + static_cast<int>(rng() % 4);
      for (int e = 0; e < edits && !body.empty(); ++e) {
        size_t at = rng() % body.size();
        switch (rng() % 3) {
        case 0:
          body[at] = alphabet[rng() % alphabet.size()];
          break;
        case 1:
          body.erase(at, 1 + rng() % 3);
          break;
        default:
          body.insert(at, body.substr(at, rng() % 8));
        }
      }
      auto r = post(path, body);
      ASSERT_TRUE(r) << path << " " << body;
      EXPECT_TRUE(allowed.contains(r->status)) << r->status << " " << path << " " << body;
      auto j = json::parse(r->body, nullptr, false);
      EXPECT_TRUE(j.is_object()) << r->body;
    }
  }
  EXPECT_EQ(expect_json(get("/healthz"), 200), (json{{"status", "ok"}}));
}

// -- bodies far past the limits (issue 9) -------------------------------------------------

TEST_F(http_api_test, a_body_holding_an_object_of_a_million_keys_is_answered) {
  // ~12 MB, under max_body_bytes: the unknown field is read past in one pass.
  // Read into a DOM that inserts keys by a linear scan, it held a server thread
  // for minutes and this client's 20 s read timeout gave up.
  std::string body = R"({"instance_id": "A", "location": "L", "extra": {)";
  for (int i = 0; i < 1'000'000; ++i) {
    body += i > 0 ? ",\"k" : "\"k";
    body += std::to_string(i);
    body += "\":0";
  }
  body += "}}";
  auto j = expect_json(post("/clear", body), 200);
  EXPECT_EQ(j["num_tokens"], 7);
  EXPECT_EQ(last<msg::ClearMsg>().instance_id, "A");
}

TEST_F(http_api_test, a_token_list_past_max_tokens_is_413_before_the_rest_is_read) {
  start_with(http_options{.max_tokens = 1000});
  // Two million bytes of tokens, and the body never ends the list.
  std::string tokens;
  for (int i = 0; i < 1'000'000; ++i)
    tokens += "7,";
  EXPECT_EQ(expect_error(
                post("/pin", R"({"instance_id": "A", "location": "L", "tokens": [)" + tokens), 413),
            "field 'tokens' has more than 1000 entries");
  EXPECT_EQ(expect_error(post("/lookup", R"({"tokens": [)" + tokens), 413),
            "field 'tokens' has more than 1000 entries");
  EXPECT_TRUE(controller_.requests().empty());
}

} // namespace
} // namespace lmcc::gateway
