// Round-trip properties over random messages of every type in lmcc::msg::Msg.
//
// A seeded generator fills every field of every message through the struct's
// own `fields()` walk, so a field added to lmcache_msgs.hpp is covered without
// touching this file. For each of the 51 types, 200 random messages must
// survive msgpack encode -> decode unchanged, re-encode to the same bytes, and
// be written in msgspec's canonical form (checked by an independent reader);
// the same holds for JSON, for messages without the two things msgspec's JSON
// cannot carry back (see `random_filler::json_safe`; json_lossy_cases pins
// what happens to them).
//
// The seed is printed; rerun a failure with LMCC_TEST_SEED=<seed>.
#include "messages/codec_json.hpp"
#include "messages/codec_msgpack.hpp"
#include "tests/conformance/test_support.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <type_traits>
#include <variant>
#include <vector>

namespace {

namespace msg = lmcc::msg;
using lmcc::test::to_hex;
using msg::wire_int;

constexpr int messages_per_type = 200;

static_assert(std::variant_size_v<msg::Msg> == 51, "message.py's Msg union has 51 members");

// -- seed ---------------------------------------------------------------------------

uint64_t base_seed() {
  static const uint64_t seed = [] {
    uint64_t s = 0x6c6d6363'5eed0001; // fixed default: every run checks the same messages
    if (const char* env = std::getenv("LMCC_TEST_SEED"); env != nullptr && *env != '\0')
      s = std::strtoull(env, nullptr, 0);
    std::printf("roundtrip_property: seed %llu (rerun with LMCC_TEST_SEED=%llu)\n",
                static_cast<unsigned long long>(s), static_cast<unsigned long long>(s));
    return s;
  }();
  return seed;
}

/// One stream per message type, so that a type's messages do not depend on
/// which other types ran before it (FNV-1a of the tag, mixed into the seed).
uint64_t seed_for(std::string_view tag) {
  uint64_t h = 0xcbf29ce484222325;
  for (char c : tag)
    h = (h ^ static_cast<unsigned char>(c)) * 0x100000001b3;
  return base_seed() ^ h;
}

// -- the generator ------------------------------------------------------------------

template <class T>
concept has_fields = requires(T& t) {
  T::fields(t, [](std::string_view, auto&, msg::field_kind) {});
};

template <class T>
struct is_tuple_like : std::false_type {};
template <class A, class B>
struct is_tuple_like<std::pair<A, B>> : std::true_type {};
template <class... Ts>
struct is_tuple_like<std::tuple<Ts...>> : std::true_type {};

const std::array<wire_int, 26> edge_ints = {
    wire_int{std::numeric_limits<int64_t>::min()},
    wire_int{std::numeric_limits<int64_t>::min() + 1},
    wire_int{INT64_C(-2147483649)},
    wire_int{INT64_C(-2147483648)},
    wire_int{-32769},
    wire_int{-32768},
    wire_int{-129},
    wire_int{-128},
    wire_int{-33},
    wire_int{-32},
    wire_int{-1},
    wire_int{0},
    wire_int{1},
    wire_int{127},
    wire_int{128},
    wire_int{255},
    wire_int{256},
    wire_int{65535},
    wire_int{65536},
    wire_int::from_unsigned(UINT64_C(4294967295)),
    wire_int::from_unsigned(UINT64_C(1) << 32),
    wire_int{std::numeric_limits<int64_t>::max()},
    wire_int::from_unsigned(UINT64_C(1) << 63),
    wire_int::from_unsigned((UINT64_C(1) << 63) + 1),
    wire_int::from_unsigned(std::numeric_limits<uint64_t>::max() - 1),
    wire_int::from_unsigned(std::numeric_limits<uint64_t>::max()),
};

const std::array<double, 15> edge_doubles = {
    0.0,
    -0.0,
    1.0,
    -2.5,
    0.5,
    0.1,
    1e300,
    -1e300,
    5e-324,                  // smallest subnormal
    2.2250738585072014e-308, // smallest normal
    1.7976931348623157e308,  // largest finite
    9007199254740993.0,      // 2^53 + 1, not representable: rounds to 2^53
    1700000000.123456,
    -108576034.87448525,
    18446744073709551616.0, // 2^64
};

std::vector<std::string> edge_strings() {
  return {
      "",
      "\xc3\xa9\xf0\x9f\x98\x80", // "é😀"
      "h\xc3\xa9llo",
      "\xe4\xb8\xad\xe6\x96\x87", // "中文"
      "tab\tnl\n\"q\"\\/",
      std::string("nul\0byte", 8),
      "\x01\x1f\x7f",
      std::string(31, 'a'),  // longest fixstr
      std::string(32, 'b'),  // shortest str8
      std::string(255, 'c'), // longest str8
      std::string(256, 'd'), // shortest str16
      [] {
        std::string s; // 300 characters, mixed widths
        for (int i = 0; i < 100; ++i)
          s += "x\xc3\xa9\xf0\x9f\x98\x80";
        return s;
      }(),
  };
}

/// Fills any message field with random content, walking structs through their
/// static `fields()`.
class random_filler {
public:
  /// With `json_safe`, leaves out what msgspec's JSON cannot carry back:
  /// bytes inside an `Any` value (JSON has only base64 text for them) and
  /// non-string keys in an `Any` map (JSON keys are text).
  random_filler(std::mt19937_64& rng, bool json_safe)
    : rng_(rng), edge_strings_(edge_strings()), json_safe_(json_safe) {}

  template <class T>
  T make() {
    T value{};
    fill(value);
    return value;
  }

  // -- scalars ---------------------------------------------------------------------

  void fill(wire_int& out) {
    switch (below(3)) {
    case 0:
      out = edge_ints[below(edge_ints.size())];
      return;
    case 1:
      out = wire_int{between(-40000, 70000)};
      return;
    default: {
      uint64_t bits = rng_();
      bool negative = (bits >> 63) != 0 && coin();
      out = negative ? wire_int{static_cast<int64_t>(bits)} : wire_int::from_unsigned(bits);
    }
    }
  }

  void fill(double& out) {
    switch (below(3)) {
    case 0:
      out = edge_doubles[below(edge_doubles.size())];
      return;
    case 1:
      out = std::uniform_real_distribution<double>{-1e6, 1e6}(rng_);
      return;
    default:
      do
        out = std::bit_cast<double>(rng_());
      while (!std::isfinite(out));
    }
  }

  void fill(bool& out) { out = coin(); }

  void fill(std::string& out) {
    switch (below(4)) {
    case 0:
      out = edge_strings_[below(edge_strings_.size())];
      return;
    case 1:
      out = random_ascii(below(40));
      return;
    case 2:
      out = random_unicode(below(20));
      return;
    default:
      // Now and then one long enough for str32 (65536 bytes and more).
      out = below(400) == 0 ? std::string(65536 + below(3), 'L') : random_ascii(below(8));
    }
  }

  void fill(msg::OpType& out) { out = coin() ? msg::OpType::admit : msg::OpType::evict; }

  // -- containers ------------------------------------------------------------------

  template <class T>
  void fill(std::optional<T>& out) {
    if (below(10) < 3) {
      out.reset();
      return;
    }
    T value{};
    fill(value);
    out = std::move(value);
  }

  template <class T>
  void fill(std::vector<T>& out) {
    out.resize(random_length());
    for (auto& x : out)
      fill(x);
  }

  /// ordered_map: distinct keys, as a Python dict has.
  template <class K, class V>
  void fill(std::vector<std::pair<K, V>>& out) {
    size_t want = random_length();
    out.clear();
    for (int attempt = 0; out.size() < want && attempt < 200; ++attempt) {
      K key{};
      fill(key);
      if (contains_key(out, key))
        continue;
      V value{};
      fill(value);
      out.emplace_back(std::move(key), std::move(value));
    }
  }

  template <class T>
  requires is_tuple_like<T>::value void fill(T& out) {
    std::apply([&](auto&... xs) { (fill(xs), ...); }, out);
  }

  // -- structs and the heartbeat command union ---------------------------------------

  template <class T>
  requires has_fields<T>
  void fill(T& out) {
    T::fields(out, [&](std::string_view, auto& member, msg::field_kind) { fill(member); });
  }

  void fill(msg::AnyCommand& out) {
    if (coin()) {
      msg::FullSyncCommand c;
      fill(c);
      out = std::move(c);
    } else {
      msg::HeartbeatCommand c;
      fill(c);
      out = std::move(c);
    }
  }

  // -- Any -----------------------------------------------------------------------------

  void fill(msg::any_value& out) { fill_any(out, 0); }

private:
  void fill_any(msg::any_value& out, int depth) {
    switch (below(depth >= 3 ? 6 : 8)) {
    case 0:
      out.value = std::monostate{};
      return;
    case 1:
      out.value = coin();
      return;
    case 2: {
      wire_int i;
      fill(i);
      out.value = i;
      return;
    }
    case 3: {
      double d = 0;
      fill(d);
      out.value = d;
      return;
    }
    case 4: {
      std::string s;
      fill(s);
      out.value = std::move(s);
      return;
    }
    case 5: {
      if (json_safe_) {
        out.value = std::string("not bytes: JSON would return base64 text");
        return;
      }
      out.value = msg::any_bytes{random_binary(below(3) == 0 ? 300 : below(10))};
      return;
    }
    case 6: {
      msg::any_array items(below(5));
      for (auto& x : items)
        fill_any(x, depth + 1);
      out.value = std::move(items);
      return;
    }
    default: {
      msg::any_map entries;
      size_t want = below(5);
      for (int attempt = 0; entries.size() < want && attempt < 50; ++attempt) {
        msg::any_value key;
        fill_any_key(key);
        if (contains_key(entries, key))
          continue;
        msg::any_value value;
        fill_any(value, depth + 1);
        entries.emplace_back(std::move(key), std::move(value));
      }
      out.value = std::move(entries);
    }
    }
  }

  void fill_any_key(msg::any_value& key) {
    if (json_safe_ || below(6) != 0) {
      std::string s;
      fill(s);
      key.value = std::move(s);
      return;
    }
    wire_int i;
    fill(i);
    key.value = i;
  }

  template <class K, class V>
  static bool contains_key(const std::vector<std::pair<K, V>>& entries, const K& key) {
    for (const auto& [k, v] : entries)
      if (k == key)
        return true;
    return false;
  }

  size_t random_length() {
    auto r = below(20);
    if (r < 3)
      return 0;
    if (r < 13)
      return 1 + below(4);
    if (r < 18)
      return 5 + below(4);
    return 15 + below(3); // fixarray/fixmap -> array16/map16 boundary
  }

  std::string random_ascii(size_t n) {
    std::string s(n, ' ');
    for (auto& c : s)
      c = static_cast<char>(between(0, 127));
    return s;
  }

  std::string random_binary(size_t n) {
    std::string s(n, ' ');
    for (auto& c : s)
      c = static_cast<char>(between(0, 255));
    return s;
  }

  /// Valid UTF-8 of `n` code points from every encoded width (no surrogates).
  std::string random_unicode(size_t n) {
    std::string s;
    for (size_t i = 0; i < n; ++i) {
      uint32_t cp = 0;
      switch (below(4)) {
      case 0:
        cp = static_cast<uint32_t>(between(0x20, 0x7e));
        break;
      case 1:
        cp = static_cast<uint32_t>(between(0x80, 0x7ff));
        break;
      case 2:
        do
          cp = static_cast<uint32_t>(between(0x800, 0xffff));
        while (cp >= 0xd800 && cp <= 0xdfff);
        break;
      default:
        cp = static_cast<uint32_t>(between(0x10000, 0x10ffff));
      }
      append_utf8(s, cp);
    }
    return s;
  }

  static void append_utf8(std::string& s, uint32_t cp) {
    if (cp < 0x80) {
      s.push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
      s.push_back(static_cast<char>(0xc0 | (cp >> 6)));
      s.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
    } else if (cp < 0x10000) {
      s.push_back(static_cast<char>(0xe0 | (cp >> 12)));
      s.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
      s.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
    } else {
      s.push_back(static_cast<char>(0xf0 | (cp >> 18)));
      s.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3f)));
      s.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
      s.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
    }
  }

  bool coin() { return (rng_() & 1) != 0; }
  size_t below(size_t n) { return std::uniform_int_distribution<size_t>{0, n - 1}(rng_); }
  int64_t between(int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>{lo, hi}(rng_);
  }

  std::mt19937_64& rng_;
  std::vector<std::string> edge_strings_;
  bool json_safe_;
};

// -- one typed suite over every Msg alternative --------------------------------------

template <class V>
struct as_gtest_types;
template <class... Ts>
struct as_gtest_types<std::variant<Ts...>> {
  using type = ::testing::Types<Ts...>;
};

struct tag_name {
  template <class T>
  static std::string GetName(int) {
    return std::string(T::type_tag);
  }
};

template <class T>
class roundtrip_property : public ::testing::Test {};

TYPED_TEST_SUITE(roundtrip_property, as_gtest_types<msg::Msg>::type, tag_name);

TYPED_TEST(roundtrip_property,
           random_messages_survive_msgpack_and_re_encode_to_the_same_canonical_bytes) {
  const uint64_t seed = seed_for(TypeParam::type_tag);
  SCOPED_TRACE("stream seed " + std::to_string(seed) + ", base seed " +
               std::to_string(base_seed()));
  std::mt19937_64 rng{seed};
  random_filler filler{rng, /*json_safe=*/false};
  for (int i = 0; i < messages_per_type; ++i) {
    SCOPED_TRACE("message #" + std::to_string(i));
    const msg::Msg original{filler.make<TypeParam>()};
    const std::string bytes = msg::encode_msgpack(original);
    ASSERT_EQ(lmcc::test::msgspec_canonical_problem(bytes), "") << to_hex(bytes);

    auto decoded = msg::decode_msgpack(bytes);
    ASSERT_TRUE(decoded) << decoded.error().message << "\n" << to_hex(bytes);
    ASSERT_TRUE(std::holds_alternative<TypeParam>(*decoded));
    ASSERT_TRUE(*decoded == original) << "decoded message differs from the original\n"
                                      << to_hex(bytes);
    ASSERT_EQ(to_hex(msg::encode_msgpack(*decoded)), to_hex(bytes));
  }
}

TYPED_TEST(roundtrip_property, random_messages_without_any_bytes_or_any_int_keys_survive_json) {
  const uint64_t seed = seed_for(TypeParam::type_tag) + 1;
  SCOPED_TRACE("stream seed " + std::to_string(seed) + ", base seed " +
               std::to_string(base_seed()));
  std::mt19937_64 rng{seed};
  random_filler filler{rng, /*json_safe=*/true};
  for (int i = 0; i < messages_per_type; ++i) {
    SCOPED_TRACE("message #" + std::to_string(i));
    const msg::Msg original{filler.make<TypeParam>()};
    const std::string text = msg::encode_json(original);

    nlohmann::ordered_json doc;
    ASSERT_NO_THROW(doc = nlohmann::ordered_json::parse(text)) << text;
    ASSERT_TRUE(doc.is_object() && !doc.empty()) << text;
    EXPECT_EQ(doc.begin().key(), "type") << "the tag comes first";
    EXPECT_EQ(doc.begin().value(), std::string(TypeParam::type_tag));

    auto decoded = msg::decode_json(text);
    ASSERT_TRUE(decoded) << decoded.error().message << "\n" << text;
    ASSERT_TRUE(*decoded == original) << "decoded message differs from the original\n" << text;
    ASSERT_EQ(msg::encode_json(*decoded), text);
  }
}

// -- what JSON cannot carry, pinned to msgspec's behaviour ----------------------------

/// An any_value holding exactly a T.
template <class T>
msg::any_value any(T x) {
  msg::any_value v;
  v.value.template emplace<T>(std::move(x));
  return v;
}

msg::HeartbeatRetMsg command_with_arg(std::string key, msg::any_value value) {
  msg::FullSyncCommand c;
  c.args = msg::ordered_map<std::string, msg::any_value>{{std::move(key), std::move(value)}};
  return msg::HeartbeatRetMsg{.commands = {c}};
}

TEST(json_lossy_cases, bytes_inside_args_travel_as_base64_text_and_come_back_as_text) {
  const msg::Msg m = command_with_arg("b", any(msg::any_bytes{"hi!?"}));
  const std::string text = msg::encode_json(m);
  EXPECT_EQ(text, R"({"type":"HeartbeatRetMsg","commands":[{"command_type":"full_sync",)"
                  R"("reason":null,"args":{"b":"aGkhPw=="}}]})");
  auto back = msg::decode_json(text);
  ASSERT_TRUE(back) << back.error().message;
  const auto& args =
      *std::get<msg::FullSyncCommand>(std::get<msg::HeartbeatRetMsg>(*back).commands[0]).args;
  EXPECT_TRUE(args[0].second == any(std::string("aGkhPw==")));

  // msgpack keeps them as bytes: c4 04 "hi!?".
  auto packed = msg::decode_msgpack(msg::encode_msgpack(m));
  ASSERT_TRUE(packed);
  EXPECT_TRUE(*packed == m);
}

TEST(json_lossy_cases, base64_pads_every_tail_length) {
  const std::pair<std::string, std::string> cases[] = {
      {"", ""},        {"f", "Zg=="},        {"fo", "Zm8="},
      {"foo", "Zm9v"}, {"foob", "Zm9vYg=="}, {std::string("\xff\xfe\x00", 3), "//4A"},
  };
  for (const auto& [raw, b64] : cases) {
    const std::string text = msg::encode_json(command_with_arg("b", any(msg::any_bytes{raw})));
    EXPECT_NE(text.find("\"b\":\"" + b64 + "\""), std::string::npos) << text;
  }
}

TEST(json_lossy_cases, int_keys_inside_args_travel_as_digits_and_come_back_as_strings) {
  msg::any_map inner;
  inner.emplace_back(any(wire_int{-5}), any(true));
  const msg::Msg m = command_with_arg("m", any(inner));
  const std::string text = msg::encode_json(m);
  EXPECT_NE(text.find(R"("args":{"m":{"-5":true}})"), std::string::npos) << text;
  auto back = msg::decode_json(text);
  ASSERT_TRUE(back) << back.error().message;
  const auto& args =
      *std::get<msg::FullSyncCommand>(std::get<msg::HeartbeatRetMsg>(*back).commands[0]).args;
  const auto& map = std::get<msg::any_map>(args[0].second.value);
  ASSERT_EQ(map.size(), 1u);
  EXPECT_TRUE(map[0].first == any(std::string("-5")));
}

// -- the generator itself ----------------------------------------------------------------

struct any_census {
  bool bytes = false;
  bool int_key = false;
  bool nested = false;
  void count(const msg::any_value& v) {
    if (std::holds_alternative<msg::any_bytes>(v.value))
      bytes = true;
    if (const auto* a = std::get_if<msg::any_array>(&v.value)) {
      for (const auto& x : *a) {
        nested |= std::holds_alternative<msg::any_array>(x.value) ||
                  std::holds_alternative<msg::any_map>(x.value);
        count(x);
      }
    }
    if (const auto* m = std::get_if<msg::any_map>(&v.value)) {
      for (const auto& [k, x] : *m) {
        int_key |= std::holds_alternative<wire_int>(k.value);
        count(x);
      }
    }
  }
};

TEST(roundtrip_generator, reaches_bytes_int_keys_and_nesting_inside_args_unless_json_safe) {
  for (bool json_safe : {false, true}) {
    std::mt19937_64 rng{base_seed()};
    random_filler filler{rng, json_safe};
    any_census census;
    for (int i = 0; i < 500; ++i)
      for (const auto& c : filler.make<msg::HeartbeatRetMsg>().commands)
        std::visit(
            [&](const auto& x) {
              if (x.args)
                for (const auto& [k, v] : *x.args)
                  census.count(v);
            },
            c);
    EXPECT_EQ(census.bytes, !json_safe);
    EXPECT_EQ(census.int_key, !json_safe);
    EXPECT_TRUE(census.nested);
  }
}

TEST(roundtrip_generator, reaches_every_edge_int_and_both_command_kinds) {
  std::mt19937_64 rng{base_seed()};
  random_filler filler{rng, /*json_safe=*/false};
  std::set<std::pair<bool, uint64_t>> seen_ints;
  bool full_sync = false;
  bool heartbeat = false;
  bool with_args = false;
  for (int i = 0; i < 2000; ++i) {
    for (const auto& k : filler.make<msg::BatchedP2PLookupMsg>().hashes)
      seen_ints.emplace(k.is_negative(), k.bits());
    for (const auto& c : filler.make<msg::HeartbeatRetMsg>().commands) {
      full_sync |= std::holds_alternative<msg::FullSyncCommand>(c);
      heartbeat |= std::holds_alternative<msg::HeartbeatCommand>(c);
      std::visit([&](const auto& x) { with_args |= x.args.has_value() && !x.args->empty(); }, c);
    }
  }
  for (const auto& e : edge_ints)
    EXPECT_TRUE(seen_ints.contains({e.is_negative(), e.bits()})) << e.to_string();
  EXPECT_TRUE(full_sync);
  EXPECT_TRUE(heartbeat);
  EXPECT_TRUE(with_args);
}

// -- every type has a golden vector, every golden type is a Msg ---------------------------

std::set<std::string> msg_type_tags() {
  std::set<std::string> tags;
  [&]<size_t... Is>(std::index_sequence<Is...>) {
    (tags.emplace(std::variant_alternative_t<Is, msg::Msg>::type_tag), ...);
  }
  (std::make_index_sequence<std::variant_size_v<msg::Msg>>{});
  return tags;
}

std::set<std::string> golden_valid_types() {
  std::set<std::string> types;
  std::ifstream in{LMCC_SHARED_DIR "/conformance/wire-golden.jsonl"};
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty())
      continue;
    auto v = nlohmann::json::parse(line);
    if (!v.contains("expect"))
      types.insert(v.at("type").get<std::string>());
  }
  return types;
}

TEST(roundtrip_coverage, msg_has_51_distinct_type_tags) {
  EXPECT_EQ(msg_type_tags().size(), 51u);
}

TEST(roundtrip_coverage, every_msg_alternative_has_a_valid_vector_in_wire_golden) {
  const auto golden = golden_valid_types();
  ASSERT_FALSE(golden.empty()) << "no valid vectors read";
  for (const auto& tag : msg_type_tags())
    EXPECT_TRUE(golden.contains(tag)) << tag << " has no valid vector in wire-golden.jsonl";
}

TEST(roundtrip_coverage, every_valid_vector_type_is_a_msg_alternative) {
  const auto tags = msg_type_tags();
  for (const auto& type : golden_valid_types())
    EXPECT_TRUE(tags.contains(type)) << type << " appears in wire-golden.jsonl but not in Msg";
}

} // namespace
