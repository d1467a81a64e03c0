#include "tests/fuzz/fuzz_json.hpp"

#include "messages/codec_json.hpp"
#include "messages/codec_msgpack.hpp"
#include "messages/json_text_reader.hpp"
#include "tests/fuzz/fuzz_decode.hpp"

#include <nlohmann/json.hpp>
#include <simdjson.h>

#include <bit>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace lmcc::fuzz {
namespace {

namespace sj = simdjson::ondemand;
using json = nlohmann::json;

/// Deeper documents are not compared (see fuzz_json.hpp).
constexpr int max_compared_depth = 256;

struct reader_refused {
  simdjson::error_code code;
};
struct too_deep_to_compare {};

void check(simdjson::error_code e) {
  if (e != simdjson::SUCCESS)
    throw reader_refused{e};
}

/// For messages: never throws on invalid UTF-8, and stays short.
std::string show(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace).substr(0, 200);
}

/// The value as nlohmann would hold it, read the way lmcc's readers read JSON.
json to_json_value(sj::value& v, int depth) {
  if (depth > max_compared_depth)
    throw too_deep_to_compare{};
  sj::json_type type{}; // set by get() unless check() throws; GCC at -O1 cannot tell
  check(v.type().get(type));
  switch (type) {
  case sj::json_type::object: {
    sj::object object;
    check(v.get_object().get(object));
    json out = json::object();
    for (auto field : object) {
      std::string_view key;
      check(field.unescaped_key().get(key));
      sj::value child;
      check(field.value().get(child));
      out[std::string(key)] = to_json_value(child, depth + 1); // the last repeat wins
    }
    return out;
  }
  case sj::json_type::array: {
    sj::array array;
    check(v.get_array().get(array));
    json out = json::array();
    for (auto element : array) {
      sj::value child;
      check(element.get(child));
      out.push_back(to_json_value(child, depth + 1));
    }
    return out;
  }
  case sj::json_type::number: {
    msg::json_number n;
    check(msg::read_json_number(v, n));
    switch (n.kind) {
    case msg::json_number_kind::signed_integer:
      return json(n.signed_value);
    case msg::json_number_kind::unsigned_integer:
      return json(n.unsigned_value);
    case msg::json_number_kind::floating:
      return json(n.floating_value);
    }
    break;
  }
  case sj::json_type::string: {
    std::string_view s;
    check(v.get_string().get(s));
    return json(std::string(s));
  }
  case sj::json_type::boolean: {
    bool b = false;
    check(v.get_bool().get(b));
    return json(b);
  }
  case sj::json_type::null: {
    bool is_null = false;
    check(v.is_null().get(is_null));
    if (!is_null)
      throw reader_refused{simdjson::N_ATOM_ERROR};
    return json(nullptr);
  }
  }
  throw reader_refused{simdjson::TAPE_ERROR};
}

/// "" when `a` and `b` are the same value with the same number kinds
/// (integer or floating; an integer's sign and bits), else where they differ.
std::string difference(const json& a, const json& b, const std::string& at) {
  const bool a_int = a.is_number_integer(), b_int = b.is_number_integer();
  if (a_int || b_int) {
    if (a_int != b_int)
      return at + ": " + show(a) + " vs " + show(b) + " (integer vs floating)";
    const bool a_neg = a.is_number_unsigned() ? false : a.get<int64_t>() < 0;
    const bool b_neg = b.is_number_unsigned() ? false : b.get<int64_t>() < 0;
    const uint64_t a_bits =
        a.is_number_unsigned() ? a.get<uint64_t>() : static_cast<uint64_t>(a.get<int64_t>());
    const uint64_t b_bits =
        b.is_number_unsigned() ? b.get<uint64_t>() : static_cast<uint64_t>(b.get<int64_t>());
    if (a_neg != b_neg || a_bits != b_bits)
      return at + ": " + show(a) + " vs " + show(b);
    return {};
  }
  if (a.is_number_float() && b.is_number_float()) {
    if (std::bit_cast<uint64_t>(a.get<double>()) != std::bit_cast<uint64_t>(b.get<double>()))
      return at + ": " + show(a) + " vs " + show(b);
    return {};
  }
  if (a.type() != b.type())
    return at + ": " + std::string(a.type_name()) + " vs " + b.type_name();
  if (a.is_array()) {
    if (a.size() != b.size())
      return at + ": arrays of " + std::to_string(a.size()) + " vs " + std::to_string(b.size());
    for (size_t i = 0; i < a.size(); ++i)
      if (auto d = difference(a[i], b[i], at + "[" + std::to_string(i) + "]"); !d.empty())
        return d;
    return {};
  }
  if (a.is_object()) {
    if (a.size() != b.size())
      return at + ": objects of " + std::to_string(a.size()) + " vs " + std::to_string(b.size());
    for (auto it = a.begin(); it != a.end(); ++it) {
      auto other = b.find(it.key());
      if (other == b.end())
        return at + ": key " + show(json(it.key())) + " only on one side";
      if (auto d = difference(it.value(), *other, at + "." + it.key()); !d.empty())
        return d;
    }
    return {};
  }
  return a == b ? std::string{} : at + ": " + show(a) + " vs " + show(b);
}

bool starts_with_byte_order_mark(std::string_view text) {
  return text.starts_with("\xEF\xBB\xBF");
}

/// A number whose exponent has more than 19 digits (leading zeros included):
/// simdjson 3.0.1 refuses it where JSON, json.loads and nlohmann read it.
bool has_long_exponent(std::string_view text) {
  for (size_t i = 1; i < text.size(); ++i) {
    if ((text[i] != 'e' && text[i] != 'E') ||
        !((text[i - 1] >= '0' && text[i - 1] <= '9') || text[i - 1] == '.'))
      continue;
    size_t j = i + 1;
    if (j < text.size() && (text[j] == '+' || text[j] == '-'))
      ++j;
    size_t digits = 0;
    while (j < text.size() && text[j] >= '0' && text[j] <= '9') {
      ++j;
      ++digits;
    }
    if (digits > 19)
      return true;
  }
  return false;
}

enum class reader_verdict { accepted, refused, too_deep };

/// json_text_reader over the whole text against nlohmann; "" when they agree.
std::string check_reader(std::string_view text, reader_verdict& verdict) {
  json from_reader;
  simdjson::error_code refused = simdjson::SUCCESS;
  verdict = reader_verdict::accepted;
  try {
    msg::borrowed_json_reader reader;
    refused = reader->read(text, [&](sj::value root) { from_reader = to_json_value(root, 1); });
  } catch (const reader_refused& e) {
    refused = e.code;
  } catch (const too_deep_to_compare&) {
    verdict = reader_verdict::too_deep;
    return {};
  }
  if (refused != simdjson::SUCCESS)
    verdict = reader_verdict::refused;
  if (starts_with_byte_order_mark(text))
    return {};
  // nlohmann's lexer takes a NUL byte for the end of the input and ignores
  // what follows; JSON allows none anywhere (not even inside a string).
  if (text.find('\0') != std::string_view::npos) {
    if (refused == simdjson::SUCCESS)
      return "json_text_reader accepted a text holding a NUL byte: " + show(from_reader);
    return {};
  }
  const json from_nlohmann = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (from_nlohmann.is_discarded()) {
    if (refused == simdjson::SUCCESS)
      return "json_text_reader accepted a text nlohmann refuses: " + show(from_reader);
    return {};
  }
  if (refused != simdjson::SUCCESS && !has_long_exponent(text))
    return std::string("json_text_reader refused a text nlohmann reads (") +
           simdjson::error_message(refused) + "): " + show(from_nlohmann);
  if (refused != simdjson::SUCCESS)
    return {};
  if (auto d = difference(from_reader, from_nlohmann, "$"); !d.empty())
    return "json_text_reader and nlohmann read different values at " + d;
  return {};
}

std::string check_decoder(std::string_view text, reader_verdict verdict) {
  static const msg::decode_limits strict = strict_limits();
  static const msg::decode_limits defaults{};
  const auto under_strict = msg::decode_json(text, strict);
  const auto under_defaults = msg::decode_json(text, defaults);
  for (const auto* r : {&under_strict, &under_defaults}) {
    if (*r) {
      if (verdict == reader_verdict::refused)
        return "decode_json accepted a text json_text_reader refuses";
      continue;
    }
    const std::string& why = r->error().message;
    if (why.empty())
      return "decode_json refused with an empty message";
    if (why.starts_with("JSON is malformed") && verdict == reader_verdict::accepted)
      return "decode_json calls a text malformed that json_text_reader reads: " + why;
  }
  if (under_strict) {
    if (!under_defaults)
      return "accepted under strict limits but refused under the defaults: " +
             under_defaults.error().message;
    if (msg::encode_msgpack(*under_strict) != msg::encode_msgpack(*under_defaults))
      return "strict and default limits decoded different messages";
    if (auto why = check_decoded_message(*under_strict, strict, "strict limits"); !why.empty())
      return why;
  }
  if (under_defaults)
    return check_decoded_message(*under_defaults, defaults, "default limits");
  return {};
}

} // namespace

std::string check_json(std::string_view text) {
  reader_verdict verdict = reader_verdict::accepted;
  if (auto why = check_reader(text, verdict); !why.empty())
    return why;
  return check_decoder(text, verdict);
}

std::vector<std::string> json_seeds(const std::string& golden_path) {
  std::vector<std::string> texts;
  for (const auto& frame : decode_seeds(golden_path)) {
    if (!frame.empty() && frame.front() == '{') {
      texts.push_back(frame);
      continue;
    }
    // A msgpack vector the codec accepts: its JSON form, as lmcc writes it.
    if (auto m = msg::decode_msgpack(frame))
      texts.push_back(msg::encode_json(*m));
  }
  // The reader's edges: roots that are not objects, whitespace, escapes,
  // repeated keys, and numbers at the borders of their kinds.
  for (const char* text : {"null",
                           "true",
                           "false",
                           "0",
                           "-0",
                           "1.5",
                           "\"s\"",
                           "[]",
                           "{}",
                           " \t\r\n{} \n",
                           "[1, 2]",
                           "{\"a\": 1, \"a\": 2}",
                           "{\"k\": {\"k\": [[], {}]}}",
                           R"("\u0000\"\\\/\b\f\n\r\t\u00e9\ud83d\ude00")",
                           "9223372036854775807",
                           "9223372036854775808",
                           "-9223372036854775808",
                           "-9223372036854775809",
                           "18446744073709551615",
                           "18446744073709551616",
                           "1e308",
                           "1e-400",
                           "-1.5E+3",
                           "123456789012345678901234567890",
                           "{\"type\": \"LookupMsg\", \"tokens\": [1, -2, 3]}",
                           "{\"type\": \"ErrorMsg\", \"error\": \"\\u00e9\"} ",
                           "[1] [2]",
                           "{} x"})
    texts.emplace_back(text);
  return texts;
}

} // namespace lmcc::fuzz
