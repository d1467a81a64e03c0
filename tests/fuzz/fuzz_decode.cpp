#include "tests/fuzz/fuzz_decode.hpp"

#include "messages/codec_json.hpp"
#include "messages/codec_msgpack.hpp"
#include "messages/lmcache_msgs.hpp"
#include "tests/conformance/reference_msgpack_decoder.hpp"

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstddef>
#include <fstream>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <variant>
#include <vector>

namespace lmcc::fuzz {
namespace {

using namespace lmcc::msg;

template <class T>
concept has_fields = requires(const T& t) {
  T::fields(t, [](std::string_view, const auto&, field_kind) {});
};

/// What the invariants need to know about a decoded message.
struct msg_facts {
  size_t longest_string = 0; ///< str and bytes values and keys, in bytes
  size_t longest_array = 0;
  size_t largest_map = 0;
  bool has_nan = false;          ///< anywhere: operator== is false for NaN
  bool typed_non_finite = false; ///< in a typed float field: JSON cannot carry it
  bool has_any = false;          ///< an `Any` value: JSON changes bytes and non-str keys
};

class fact_walk {
public:
  msg_facts facts;

  void walk(const wire_int&) {}
  void walk(bool) {}
  void walk(OpType) {}
  void walk(double v) {
    facts.has_nan |= std::isnan(v);
    facts.typed_non_finite |= !std::isfinite(v);
  }
  void walk(const std::string& s) { note(facts.longest_string, s.size()); }
  void walk(const any_value& v) {
    facts.has_any = true;
    std::visit([&](const auto& x) { walk_any(x); }, v.value);
  }

  template <class T>
  void walk(const std::optional<T>& v) {
    if (v)
      walk(*v);
  }
  template <class T>
  void walk(const std::vector<T>& v) {
    note(facts.longest_array, v.size());
    for (const auto& x : v)
      walk(x);
  }
  template <class K, class V>
  void walk(const std::vector<std::pair<K, V>>& v) {
    note(facts.largest_map, v.size());
    for (const auto& [k, x] : v) {
      walk(k);
      walk(x);
    }
  }
  template <class A, class B>
  void walk(const std::pair<A, B>& p) {
    walk(p.first);
    walk(p.second);
  }
  template <class... Ts>
  void walk(const std::tuple<Ts...>& t) {
    std::apply([&](const auto&... xs) { (walk(xs), ...); }, t);
  }
  template <class... Ts>
  void walk(const std::variant<Ts...>& v) {
    std::visit([&](const auto& x) { walk(x); }, v);
  }
  template <class T>
  requires has_fields<T>
  void walk(const T& v) {
    T::fields(v, [&](std::string_view, const auto& member, field_kind) { walk(member); });
  }

private:
  static void note(size_t& most, size_t n) {
    if (n > most)
      most = n;
  }
  void walk_any(std::monostate) {}
  void walk_any(double v) { facts.has_nan |= std::isnan(v); }
  void walk_any(const any_bytes& b) { note(facts.longest_string, b.data.size()); }
  template <class T>
  void walk_any(const T& x) {
    walk(x);
  }
};

msg_facts facts_of(const Msg& m) {
  fact_walk w;
  w.walk(m);
  return w.facts;
}

std::string hex(std::string_view s, size_t most = 96) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < s.size() && i < most; ++i) {
    out += digits[static_cast<unsigned char>(s[i]) >> 4];
    out += digits[static_cast<unsigned char>(s[i]) & 15];
  }
  if (s.size() > most)
    out += "...";
  return out;
}

/// Same message, NaN included: compared by canonical encoding when == cannot.
bool same_message(const Msg& a, const Msg& b, const msg_facts& facts) {
  if (facts.has_nan)
    return encode_msgpack(a) == encode_msgpack(b);
  return a == b;
}

/// What a decoder made of a frame, in one comparable line.
std::string outcome(const expected<Msg>& r) {
  if (!r)
    return "refused: " + r.error().message;
  return "accepted " + std::string(type_tag_of(*r)) + " " + hex(encode_msgpack(*r), 4096);
}

/// decode_msgpack must decide, decode and word errors exactly as the decoder
/// it replaced (tests/conformance/reference_msgpack_decoder.hpp).
std::string check_same_as_reference(std::string_view frame, const decode_limits& lim,
                                    const std::string& label) {
  std::string before = outcome(lmcc::test::reference_decode_msgpack(frame, lim));
  std::string now = outcome(decode_msgpack(frame, lim));
  if (before == now)
    return {};
  return label + ": decode_msgpack differs from the reference decoder: before " +
         before.substr(0, 300) + ", now " + now.substr(0, 300);
}

} // namespace

std::string check_decoded_message(const msg::Msg& m, const msg::decode_limits& lim,
                                  const std::string& label) {
  msg_facts facts = facts_of(m);
  if (facts.longest_string > lim.max_string_bytes)
    return label + ": decoded a string of " + std::to_string(facts.longest_string) +
           " bytes past max_string_bytes " + std::to_string(lim.max_string_bytes);
  if (facts.longest_array > lim.max_array_length)
    return label + ": decoded an array of " + std::to_string(facts.longest_array) +
           " past max_array_length " + std::to_string(lim.max_array_length);
  if (facts.largest_map > lim.max_map_length)
    return label + ": decoded a map of " + std::to_string(facts.largest_map) +
           " past max_map_length " + std::to_string(lim.max_map_length);

  // msgpack: decode(encode(m)) == m, and the encoding is a fixed point.
  std::string packed = encode_msgpack(m);
  expected<Msg> again = decode_msgpack(packed);
  if (!again)
    return label + ": encode_msgpack output refused: " + again.error().message +
           " (packed: " + hex(packed) + ")";
  if (!same_message(m, *again, facts))
    return label + ": msgpack round trip changed the message (packed: " + hex(packed) + ")";
  std::string repacked = encode_msgpack(*again);
  if (repacked != packed)
    return label + ": msgpack re-encoding is not stable: " + hex(packed) + " then " + hex(repacked);

  // JSON: decode_json(encode_json(m)) succeeds; without `Any` values it is the
  // same message (bytes become base64 text there, non-str keys become text).
  std::string text = encode_json(m);
  expected<Msg> from_json = decode_json(text);
  if (facts.typed_non_finite)
    return {};
  if (!from_json)
    return label + ": encode_json output refused: " + from_json.error().message +
           " (json: " + text.substr(0, 200) + ")";
  if (!facts.has_any && !same_message(m, *from_json, facts))
    return label + ": JSON round trip changed the message (json: " + text.substr(0, 200) + ")";
  return {};
}

std::string check_decode(std::string_view frame) {
  static const decode_limits strict = strict_limits();
  static const decode_limits defaults{};

  for (const auto& [lim, label] :
       {std::pair{&strict, "strict limits"}, {&defaults, "default limits"}}) {
    std::string why = check_same_as_reference(frame, *lim, label);
    if (!why.empty())
      return why;
  }

  expected<Msg> under_strict = decode_frame(frame, strict);
  if (under_strict) {
    std::string why = check_decoded_message(*under_strict, strict, "strict limits");
    if (!why.empty())
      return why;
  } else if (under_strict.error().message.empty()) {
    return "strict limits: refused with an empty error message";
  }

  expected<Msg> under_defaults = decode_frame(frame, defaults);
  if (!under_defaults) {
    if (under_defaults.error().message.empty())
      return "default limits: refused with an empty error message";
    // Limits only ever refuse more: what passes strict limits passes the defaults.
    if (under_strict)
      return "accepted under strict limits but refused under the defaults: " +
             under_defaults.error().message;
    return {};
  }
  if (under_strict && !same_message(*under_strict, *under_defaults, facts_of(*under_defaults)))
    return "strict and default limits decoded different messages";
  return check_decoded_message(*under_defaults, defaults, "default limits");
}

std::vector<std::string> decode_seeds(const std::string& golden_path) {
  std::ifstream in{golden_path};
  if (!in)
    throw std::runtime_error("cannot open " + golden_path);
  auto from_hex = [&](const std::string& text) {
    std::string out;
    for (size_t i = 0; i + 1 < text.size(); i += 2)
      out += static_cast<char>(std::stoi(text.substr(i, 2), nullptr, 16));
    return out;
  };
  std::vector<std::string> frames;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty())
      continue;
    auto vec = nlohmann::json::parse(line);
    for (const char* field : {"msgpack", "canonical"})
      if (vec.contains(field))
        frames.push_back(from_hex(vec[field].get<std::string>()));
    if (vec.contains("json"))
      frames.push_back(vec["json"].dump());
  }
  return frames;
}

} // namespace lmcc::fuzz
