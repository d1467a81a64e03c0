// The value kinds of node_config_values.hpp on their own: what each accepts
// and refuses, and that what it emits reads back as the same value. The
// structured kinds are what the cluster options will need (a member list
// given in YAML as a list of {id, host, port} maps).
#include "apps/lmcc/node_config_values.hpp"

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <chrono>
#include <string>
#include <vector>

namespace lmcc::apps::config {
namespace {

using namespace std::chrono_literals;

/// Parses YAML text the way a config file value arrives.
template <class Kind>
refusal parse_yaml(const Kind& kind, const std::string& yaml, typename Kind::value_type& out) {
  return kind.parse(yaml_to_json(YAML::Load(yaml)), out);
}

template <class Kind>
void expect_round_trip(const Kind& kind, const typename Kind::value_type& value) {
  std::string text = emit_text(kind, value);
  typename Kind::value_type again{};
  ASSERT_EQ(parse_yaml(kind, text, again), std::nullopt) << text;
  EXPECT_EQ(emit_text(kind, again), text);
}

TEST(NodeConfigValues, IntegersKeepTheirRangeAndSayIt) {
  integer_kind<uint16_t> port{.min = 1, .max = 65535};
  uint16_t p = 0;
  EXPECT_EQ(port.parse(json(" +8300 "), p), std::nullopt);
  EXPECT_EQ(p, 8300);
  EXPECT_EQ(port.parse(json("65536"), p), "expected an integer in 1..65535, got '65536'");
  EXPECT_EQ(port.parse(json("1.5"), p), "expected an integer in 1..65535, got '1.5'");
  EXPECT_EQ(port.parse(json::array(), p), "expected an integer in 1..65535, got a list");
  EXPECT_EQ(port.accepts(), "an integer in 1..65535");
  EXPECT_EQ((integer_kind<size_t>{.min = 1}.accepts()), "an integer >= 1");
  EXPECT_EQ(integer_kind<int64_t>{}.accepts(), "an integer");

  integer_kind<uint32_t> slots{.min = 1, .max = 1 << 20, .power_of_two = true};
  uint32_t s = 0;
  EXPECT_EQ(slots.parse(json("1000"), s), "expected a power of two, got 1000");
  EXPECT_EQ(slots.parse(json("1024"), s), std::nullopt);
  expect_round_trip(slots, 4096U);
}

TEST(NodeConfigValues, ByteSizesAndMebibytes) {
  byte_size_kind bytes{{.min = 1}};
  EXPECT_EQ(bytes.show(size_t{8} << 20), "8388608 (8 MiB)");
  EXPECT_EQ(bytes.show(size_t{3} << 10), "3072 (3 KiB)");
  EXPECT_EQ(bytes.show(1000), "1000");
  expect_round_trip(bytes, size_t{64} << 20);

  mebibytes_kind mib{.max_mib = 64};
  size_t b = 0;
  EXPECT_EQ(mib.parse(json("2"), b), std::nullopt);
  EXPECT_EQ(b, size_t{2} << 20);
  EXPECT_EQ(emit_text(mib, b), "2");
  EXPECT_EQ(mib.parse(json("65"), b), "expected an integer in 1..64, got '65'");
}

TEST(NodeConfigValues, Durations) {
  seconds_kind seconds;
  std::chrono::milliseconds d{};
  EXPECT_EQ(seconds.parse(json("1.5"), d), std::nullopt);
  EXPECT_EQ(d, 1500ms);
  EXPECT_EQ(emit_text(seconds, d), "1.5");
  EXPECT_EQ(emit_text(seconds, 300s), "300");
  EXPECT_EQ(seconds.parse(json("0"), d), "expected a number of seconds > 0 (at most 1e9), got '0'");
  EXPECT_EQ(seconds.parse(json("0.0001"), d),
            "expected a number of seconds > 0 (at most 1e9), got '0.0001'");

  milliseconds_kind ms;
  EXPECT_EQ(ms.parse(json("250"), d), std::nullopt);
  EXPECT_EQ(d, 250ms);
  EXPECT_EQ(ms.parse(json("1.5"), d), "expected an integer in 1..1000000000000, got '1.5'");

  seconds_or_off_kind interval;
  double i = 0;
  EXPECT_EQ(interval.parse(json("-1"), i), std::nullopt);
  EXPECT_EQ(interval.parse(json("0.5"), i),
            "must be -1 (disabled) or a number of seconds >= 1, got '0.5'");
}

TEST(NodeConfigValues, SwitchesTextAndChoices) {
  bool on = false;
  EXPECT_EQ(switch_kind{}.parse(json("Yes"), on), std::nullopt);
  EXPECT_TRUE(on);
  EXPECT_EQ(emit_text(switch_kind{}, false), "off");
  EXPECT_EQ(switch_kind{}.parse(json("maybe"), on), "expected on or off, got 'maybe'");

  std::string text;
  EXPECT_EQ((text_kind{.non_empty = true}.parse(json(" "), text)),
            "expected a non-empty string, got ''");
  EXPECT_EQ((text_kind{.trim_blanks = true, .null_is_empty = true}.parse(json(nullptr), text)),
            std::nullopt);
  EXPECT_EQ(text, "");
  EXPECT_EQ(text_kind{}.parse(json(nullptr), text), "expected a string, got null");
  expect_round_trip(text_kind{}, std::string("null")); // quoted, stays a string
  expect_round_trip(text_kind{}, std::string(""));

  constexpr std::array<std::string_view, 2> colours = {"red", "blue"};
  constexpr std::array<std::pair<std::string_view, std::string_view>, 1> aliases = {
      {{"crimson", "red"}}};
  choice_kind colour{.choices = colours, .aliases = aliases};
  EXPECT_EQ(colour.parse(json(" Crimson "), text), std::nullopt);
  EXPECT_EQ(text, "red");
  EXPECT_EQ(colour.parse(json("green"), text), "expected one of red, blue, got 'green'");
}

TEST(NodeConfigValues, ListsComeAsYamlSequencesJsonOrCommaSeparatedText) {
  list_kind<integer_kind<uint16_t>> ports{.element = {.min = 1, .max = 65535}};
  std::vector<uint16_t> v;
  ASSERT_EQ(parse_yaml(ports, "[8300, 8301]", v), std::nullopt);
  EXPECT_EQ(v, (std::vector<uint16_t>{8300, 8301}));
  ASSERT_EQ(parse_yaml(ports, "- 1\n- 2\n- 3\n", v), std::nullopt);
  EXPECT_EQ(v, (std::vector<uint16_t>{1, 2, 3}));
  ASSERT_EQ(ports.parse(json("8300, 8302"), v), std::nullopt); // environment or flag
  EXPECT_EQ(v, (std::vector<uint16_t>{8300, 8302}));
  ASSERT_EQ(ports.parse(json("[7, 8]"), v), std::nullopt);
  EXPECT_EQ(v, (std::vector<uint16_t>{7, 8}));
  ASSERT_EQ(ports.parse(json(""), v), std::nullopt);
  EXPECT_TRUE(v.empty());
  EXPECT_EQ(ports.parse(json("1, 0"), v), "[1]: expected an integer in 1..65535, got '0'");
  EXPECT_EQ(ports.parse(json::object(), v),
            "expected a list of an integer in 1..65535, got a mapping");
  expect_round_trip(ports, {8300, 8400});
  EXPECT_EQ(emit_text(ports, {}), "[]");
}

/// What a cluster member list will hold.
struct member_address {
  std::string id;
  std::string host;
  uint16_t port = 0;
  uint32_t weight = 1;
};

list_kind<record_kind<member_address>> member_list() {
  return {.element = {.fields = {
                          field_of("id", &member_address::id, text_kind{.non_empty = true}),
                          field_of("host", &member_address::host, text_kind{.non_empty = true}),
                          field_of("port", &member_address::port,
                                   integer_kind<uint16_t>{.min = 1, .max = 65535}),
                          field_of("weight", &member_address::weight,
                                   integer_kind<uint32_t>{.min = 1, .max = 100}, false),
                      }}};
}

TEST(NodeConfigValues, AMemberListIsAYamlListOfMaps) {
  auto kind = member_list();
  std::vector<member_address> members;
  ASSERT_EQ(parse_yaml(kind, R"(
- {id: n1, host: 10.0.0.1, port: 7000}
- id: n2
  host: 10.0.0.2
  port: 7001
  weight: 3
)",
                       members),
            std::nullopt);
  ASSERT_EQ(members.size(), 2U);
  EXPECT_EQ(members[0].id, "n1");
  EXPECT_EQ(members[0].port, 7000);
  EXPECT_EQ(members[0].weight, 1U); // optional field: the struct's initializer
  EXPECT_EQ(members[1].host, "10.0.0.2");
  EXPECT_EQ(members[1].weight, 3U);
  EXPECT_EQ(emit_text(kind, members), R"([{id: "n1", host: "10.0.0.1", port: 7000, weight: 1}, )"
                                      R"({id: "n2", host: "10.0.0.2", port: 7001, weight: 3}])");
  expect_round_trip(kind, members);

  // JSON text works too, e.g. from an environment variable.
  ASSERT_EQ(kind.parse(json(R"([{"id": "n3", "host": "h", "port": 1}])"), members), std::nullopt);
  EXPECT_EQ(members.at(0).id, "n3");
}

TEST(NodeConfigValues, AMemberListNamesTheBadEntryAndField) {
  auto kind = member_list();
  std::vector<member_address> members;
  EXPECT_EQ(parse_yaml(kind, "- {id: n1, host: h, port: 1}\n- {id: n2, host: h}\n", members),
            "[1]: \"port\" is missing");
  EXPECT_EQ(parse_yaml(kind, "- {id: n1, host: h, port: 0}\n", members),
            "[0]: \"port\": expected an integer in 1..65535, got '0'");
  auto why = parse_yaml(kind, "- {id: n1, host: h, port: 1, prot: 2}\n", members);
  ASSERT_TRUE(why.has_value());
  EXPECT_TRUE(why->starts_with("[0]: unknown field \"prot\" (expected {id: a non-empty string, "
                               "host: a non-empty string, port: an integer in 1..65535, weight?: "))
      << *why;
  EXPECT_EQ(parse_yaml(kind, "- n1\n", members),
            "[0]: expected {id: a non-empty string, host: a non-empty string, port: an integer in "
            "1..65535, weight?: an integer in 1..100}, got 'n1'");
}

} // namespace
} // namespace lmcc::apps::config
