// Every vector of shared/conformance/wire-golden.jsonl, made by msgspec (the
// encoder LMCache runs), against lmcc's msgpack and JSON codecs.
//
// Valid vectors carry `type`, `json` (msgspec's JSON form) and `msgpack` (the
// exact bytes as hex); hostile or lenient inputs are named `input/*` and carry
// `expect` (accept/reject), `why` (msgspec's error text) and, when accepted,
// `canonical` (the hex of msgspec's re-encoding) and usually `json`.
#include "messages/codec_json.hpp"
#include "messages/codec_msgpack.hpp"
#include "tests/conformance/test_support.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <bit>
#include <fstream>
#include <set>
#include <string>
#include <vector>

namespace {

namespace msg = lmcc::msg;
using lmcc::test::from_hex;
using lmcc::test::to_hex;
using ojson = nlohmann::ordered_json;

constexpr const char* golden_path = LMCC_SHARED_DIR "/conformance/wire-golden.jsonl";

const std::vector<ojson>& all_vectors() {
  static const std::vector<ojson> vectors = [] {
    std::vector<ojson> out;
    std::ifstream in{golden_path};
    std::string line;
    while (std::getline(in, line))
      if (!line.empty())
        out.push_back(ojson::parse(line));
    return out;
  }();
  return vectors;
}

bool is_input(const ojson& v) {
  return v.contains("expect");
}

std::vector<ojson> valid_vectors() {
  std::vector<ojson> out;
  for (const auto& v : all_vectors())
    if (!is_input(v))
      out.push_back(v);
  return out;
}

std::vector<ojson> input_vectors() {
  std::vector<ojson> out;
  for (const auto& v : all_vectors())
    if (is_input(v))
      out.push_back(v);
  return out;
}

std::string name_of(const ojson& v) {
  return v.at("name").get<std::string>();
}

// -- JSON comparison that keeps number kinds and key order apart ----------------

enum class json_kind { null, boolean, integer, floating, string, array, object, other };

json_kind kind_of(const ojson& j) {
  switch (j.type()) {
  case ojson::value_t::null:
    return json_kind::null;
  case ojson::value_t::boolean:
    return json_kind::boolean;
  case ojson::value_t::number_integer:
  case ojson::value_t::number_unsigned:
    return json_kind::integer;
  case ojson::value_t::number_float:
    return json_kind::floating;
  case ojson::value_t::string:
    return json_kind::string;
  case ojson::value_t::array:
    return json_kind::array;
  case ojson::value_t::object:
    return json_kind::object;
  default:
    return json_kind::other;
  }
}

/// Empty when `got` equals `want` as msgspec JSON: same values, ints stay ints
/// and floats stay floats, object keys in the same order. Otherwise the path
/// of the first difference and both values.
std::string json_difference(const ojson& want, const ojson& got, const std::string& path = "$") {
  auto differ = [&](const std::string& what) {
    return what + " at " + path + ": want " + want.dump() + ", got " + got.dump();
  };
  if (kind_of(want) != kind_of(got))
    return differ("different kind");
  switch (kind_of(want)) {
  case json_kind::integer: {
    // is_number_integer() is also true for unsigned values: ask for the type.
    auto negative = [](const ojson& j) {
      return j.type() == ojson::value_t::number_integer && j.get<int64_t>() < 0;
    };
    bool want_negative = negative(want);
    bool got_negative = negative(got);
    auto bits = [](const ojson& j) {
      return j.is_number_unsigned() ? j.get<uint64_t>() : static_cast<uint64_t>(j.get<int64_t>());
    };
    if (want_negative != got_negative || bits(want) != bits(got))
      return differ("different int");
    return {};
  }
  case json_kind::floating:
    if (std::bit_cast<uint64_t>(want.get<double>()) != std::bit_cast<uint64_t>(got.get<double>()))
      return differ("different float");
    return {};
  case json_kind::array:
    if (want.size() != got.size())
      return differ("different array length");
    for (size_t i = 0; i < want.size(); ++i)
      if (auto d = json_difference(want[i], got[i], path + "[" + std::to_string(i) + "]");
          !d.empty())
        return d;
    return {};
  case json_kind::object: {
    if (want.size() != got.size())
      return differ("different number of keys");
    auto w = want.begin();
    auto g = got.begin();
    for (; w != want.end(); ++w, ++g) {
      if (w.key() != g.key())
        return differ("key `" + g.key() + "` where `" + w.key() + "` belongs");
      if (auto d = json_difference(w.value(), g.value(), path + "." + w.key()); !d.empty())
        return d;
    }
    return {};
  }
  default:
    if (want != got)
      return differ("different value");
    return {};
  }
}

// -- the vector file itself -------------------------------------------------------

TEST(wire_conformance, the_vector_file_holds_more_than_200_vectors_of_both_sorts) {
  const auto& vectors = all_vectors();
  ASSERT_GT(vectors.size(), 200u) << "could not read enough vectors from " << golden_path;
  EXPECT_GE(valid_vectors().size(), 200u);
  EXPECT_GE(input_vectors().size(), 40u);
  std::set<std::string> names;
  for (const auto& v : vectors) {
    ASSERT_TRUE(v.contains("name") && v.contains("msgpack")) << v.dump();
    EXPECT_TRUE(names.insert(name_of(v)).second) << "duplicate vector name " << name_of(v);
    if (is_input(v)) {
      const auto expect = v.at("expect").get<std::string>();
      EXPECT_TRUE(expect == "accept" || expect == "reject") << name_of(v);
    } else {
      EXPECT_TRUE(v.contains("type") && v.contains("json")) << name_of(v);
    }
  }
}

TEST(wire_conformance, the_canonical_form_checker_agrees_with_msgspec_on_every_vector) {
  // The round-trip property test relies on this checker; msgspec's own bytes
  // show that it neither misses a width rule nor invents one.
  for (const auto& v : all_vectors()) {
    SCOPED_TRACE(name_of(v));
    const char* field = is_input(v) ? "canonical" : "msgpack";
    if (v.contains(field)) {
      EXPECT_EQ(lmcc::test::msgspec_canonical_problem(from_hex(v.at(field).get<std::string>())),
                "");
    }
  }
  EXPECT_NE(lmcc::test::msgspec_canonical_problem(from_hex("cc05")), "");
  EXPECT_NE(lmcc::test::msgspec_canonical_problem(from_hex("d005")), "");
  EXPECT_NE(lmcc::test::msgspec_canonical_problem(from_hex("d1ff80")), "");
  EXPECT_NE(lmcc::test::msgspec_canonical_problem(from_hex("d9026869")), "");
  EXPECT_NE(lmcc::test::msgspec_canonical_problem(from_hex("ca3f000000")), "");
  EXPECT_NE(lmcc::test::msgspec_canonical_problem(from_hex("de0000")), "");
  EXPECT_NE(lmcc::test::msgspec_canonical_problem(from_hex("0000")), "");
}

// -- valid vectors --------------------------------------------------------------------

TEST(wire_conformance,
     every_valid_vector_decodes_to_its_type_and_encodes_to_the_exact_msgspec_bytes) {
  for (const auto& v : valid_vectors()) {
    SCOPED_TRACE(name_of(v));
    const std::string hex = v.at("msgpack").get<std::string>();
    const std::string bytes = from_hex(hex);

    auto decoded = msg::decode_msgpack(bytes);
    ASSERT_TRUE(decoded) << decoded.error().message;
    EXPECT_EQ(msg::type_tag_of(*decoded), v.at("type").get<std::string>());
    EXPECT_EQ(to_hex(msg::encode_msgpack(*decoded)), hex);

    std::string appended = "prefix";
    msg::encode_msgpack(*decoded, appended);
    EXPECT_EQ(to_hex(appended), to_hex("prefix") + hex) << "encode_msgpack(m, out) must append";

    auto framed = msg::decode_frame(bytes);
    ASSERT_TRUE(framed) << framed.error().message;
    EXPECT_TRUE(*framed == *decoded) << "decode_frame must read msgpack frames as msgpack";
  }
}

TEST(wire_conformance, every_valid_vector_decodes_from_msgspec_json_to_the_same_message) {
  for (const auto& v : valid_vectors()) {
    SCOPED_TRACE(name_of(v));
    const std::string hex = v.at("msgpack").get<std::string>();
    auto from_msgpack = msg::decode_msgpack(from_hex(hex));
    ASSERT_TRUE(from_msgpack) << from_msgpack.error().message;

    // Raw UTF-8 and \u-escaped text (emoji as surrogate pairs) must both decode.
    for (bool ensure_ascii : {false, true}) {
      const std::string text = v.at("json").dump(-1, ' ', ensure_ascii);
      SCOPED_TRACE(text);
      auto from_json = msg::decode_json(text);
      ASSERT_TRUE(from_json) << from_json.error().message;
      EXPECT_EQ(to_hex(msg::encode_msgpack(*from_json)), hex);
      EXPECT_TRUE(*from_json == *from_msgpack);

      auto framed = msg::decode_frame(text);
      ASSERT_TRUE(framed) << framed.error().message;
      EXPECT_TRUE(*framed == *from_msgpack) << "decode_frame must read `{` frames as JSON";
    }
  }
}

TEST(wire_conformance, every_valid_vector_encodes_to_msgspec_json_with_the_same_number_kinds) {
  for (const auto& v : valid_vectors()) {
    SCOPED_TRACE(name_of(v));
    auto decoded = msg::decode_msgpack(from_hex(v.at("msgpack").get<std::string>()));
    ASSERT_TRUE(decoded) << decoded.error().message;
    const std::string text = msg::encode_json(*decoded);
    ojson ours;
    ASSERT_NO_THROW(ours = ojson::parse(text)) << text;
    EXPECT_EQ(json_difference(v.at("json"), ours), "");
  }
}

TEST(wire_conformance, json_comparison_tells_ints_from_floats_and_notices_key_order) {
  // The comparison above must be able to fail on exactly what it claims to check.
  EXPECT_NE(json_difference(ojson::parse(R"({"a":1})"), ojson::parse(R"({"a":1.0})")), "");
  EXPECT_NE(json_difference(ojson::parse(R"({"a":1.0})"), ojson::parse(R"({"a":1})")), "");
  EXPECT_NE(json_difference(ojson::parse(R"({"a":1,"b":2})"), ojson::parse(R"({"b":2,"a":1})")),
            "");
  EXPECT_NE(json_difference(ojson::parse("[18446744073709551615]"), ojson::parse("[-1]")), "");
  EXPECT_EQ(json_difference(ojson::parse(R"({"a":[1,2.5,"x",null,true]})"),
                            ojson::parse(R"({"a":[1,2.5,"x",null,true]})")),
            "");
}

// -- hostile and lenient inputs ---------------------------------------------------------

TEST(wire_conformance, every_input_vector_is_accepted_or_rejected_as_msgspec_does) {
  for (const auto& v : input_vectors()) {
    SCOPED_TRACE(name_of(v));
    auto decoded = msg::decode_msgpack(from_hex(v.at("msgpack").get<std::string>()));
    if (v.at("expect") == "accept") {
      EXPECT_TRUE(decoded) << decoded.error().message;
    } else {
      EXPECT_FALSE(decoded) << "accepted as " << msg::type_tag_of(*decoded);
    }
  }
}

TEST(wire_conformance, every_accepted_input_re_encodes_to_the_canonical_bytes_and_json) {
  size_t accepted = 0;
  for (const auto& v : input_vectors()) {
    if (v.at("expect") != "accept")
      continue;
    ++accepted;
    SCOPED_TRACE(name_of(v));
    auto decoded = msg::decode_msgpack(from_hex(v.at("msgpack").get<std::string>()));
    ASSERT_TRUE(decoded) << decoded.error().message;
    EXPECT_EQ(msg::type_tag_of(*decoded), v.at("type").get<std::string>());
    EXPECT_EQ(to_hex(msg::encode_msgpack(*decoded)), v.at("canonical").get<std::string>());
    if (v.contains("json")) {
      EXPECT_EQ(json_difference(v.at("json"), ojson::parse(msg::encode_json(*decoded))), "");
    }
  }
  EXPECT_GE(accepted, 10u);
}

TEST(wire_conformance, every_rejected_input_reports_msgspec_error_text) {
  // Inputs where lmcc words its refusal differently from msgspec; the message
  // must still say something. A hostile length header may be refused by a
  // limit before msgspec's "Input data was truncated" would apply.
  const std::set<std::string> own_wording = {"input/huge-array-header"};
  size_t rejected = 0;
  for (const auto& v : input_vectors()) {
    if (v.at("expect") != "reject")
      continue;
    ++rejected;
    SCOPED_TRACE(name_of(v));
    auto decoded = msg::decode_msgpack(from_hex(v.at("msgpack").get<std::string>()));
    ASSERT_FALSE(decoded);
    EXPECT_FALSE(decoded.error().message.empty());
    if (!own_wording.contains(name_of(v))) {
      EXPECT_EQ(decoded.error().message, v.at("why").get<std::string>());
    }
  }
  EXPECT_GE(rejected, 20u);
}

} // namespace
