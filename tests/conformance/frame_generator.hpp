// Random msgpack frames for the differential decoder test: mostly messages
// written from the schema, each with a few of the deviations a decoder must
// judge (wrong types, every header width, missing, repeated and unknown
// fields, the tag anywhere or absent, invalid UTF-8, ext and bin values, deep
// nesting, wrong tuple lengths), plus documents of any shape and byte-level
// mutations of both.
//
// The bytes are written here by hand, not by codec_msgpack: a generator that
// shared the encoder could only write what the encoder writes.
//
//   std::mt19937_64 rng{seed};
//   frame_generator gen{rng};
//   std::string frame = gen.message();      // or gen.document(), gen.mutate(frame)
//
// Thread-compatible: one generator per thread; it holds a reference to `rng`.
#pragma once

#include "messages/lmcache_msgs.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

namespace lmcc::test {

class frame_generator {
public:
  explicit frame_generator(std::mt19937_64& rng) : rng_(rng) {}

  /// A random member of msg::Msg as a map, usually (not always) well-formed.
  std::string message() {
    out_.clear();
    size_t which = below(std::variant_size_v<msg::Msg>);
    write_message(which, std::make_index_sequence<std::variant_size_v<msg::Msg>>{});
    return std::move(out_);
  }

  /// A msgpack document of any shape: scalars, bins, exts, nested containers.
  std::string document() {
    out_.clear();
    any_value(0, 1 + below(6));
    return std::move(out_);
  }

  /// `frame` with one to four libFuzzer-style edits: bit flips, header bytes
  /// written over it, inserted, erased or repeated bytes, truncation, and
  /// splices of `donor`.
  std::string mutate(std::string frame, std::string_view donor) {
    static constexpr std::array<unsigned char, 30> interesting = {
        0x00, 0x01, 0x7f, 0x80, 0x81, 0x8f, 0x90, 0x91, 0x9f, 0xa0, 0xbf, 0xc0, 0xc1, 0xc2, 0xc3,
        0xc4, 0xc7, 0xca, 0xcb, 0xcf, 0xd3, 0xd4, 0xd9, 0xda, 0xdc, 0xdd, 0xde, 0xdf, 0xe0, 0xff};
    int rounds = 1 + static_cast<int>(below(4));
    for (int i = 0; i < rounds; ++i) {
      switch (below(8)) {
      case 0:
        if (!frame.empty())
          frame[below(frame.size())] ^= static_cast<char>(1u << below(8));
        break;
      case 1:
        if (!frame.empty())
          frame[below(frame.size())] = static_cast<char>(interesting[below(interesting.size())]);
        break;
      case 2:
        frame.insert(frame.begin() + static_cast<std::ptrdiff_t>(below(frame.size() + 1)),
                     static_cast<char>(interesting[below(interesting.size())]));
        break;
      case 3:
        if (!frame.empty()) {
          size_t at = below(frame.size());
          frame.erase(at, 1 + below(std::min<size_t>(8, frame.size() - at)));
        }
        break;
      case 4:
        if (!frame.empty()) {
          std::string piece = frame.substr(below(frame.size()), 1 + below(16));
          frame.insert(below(frame.size() + 1), piece);
        }
        break;
      case 5:
        frame.resize(below(frame.size() + 1));
        break;
      case 6:
        if (!donor.empty())
          frame.insert(below(frame.size() + 1), donor.substr(below(donor.size()), 1 + below(32)));
        break;
      default:
        if (!frame.empty())
          frame[below(frame.size())] = static_cast<char>(below(256));
        break;
      }
    }
    return frame;
  }

private:
  // -- randomness ------------------------------------------------------------------

  size_t below(size_t n) {
    return n == 0 ? 0 : std::uniform_int_distribution<size_t>{0, n - 1}(rng_);
  }
  bool chance(int percent) { return below(100) < static_cast<size_t>(percent); }

  // -- msgpack primitives, in every width that can hold the value -----------------

  void byte(unsigned v) { out_.push_back(static_cast<char>(v & 0xff)); }
  void big_endian(uint64_t v, int width) {
    for (int i = width - 1; i >= 0; --i)
      byte(static_cast<unsigned>(v >> (8 * i)));
  }

  /// A non-negative int: the smallest width usually, else any wider one,
  /// unsigned or signed.
  void uint(uint64_t v) {
    if (!chance(20)) {
      if (v <= 0x7f)
        return byte(static_cast<unsigned>(v));
      int width = v <= 0xff ? 1 : v <= 0xffff ? 2 : v <= 0xffffffff ? 4 : 8;
      byte(0xcc + static_cast<unsigned>(std::countr_zero(static_cast<unsigned>(width))));
      return big_endian(v, width);
    }
    std::vector<std::pair<unsigned, int>> fits;
    for (auto [code, width] : {std::pair{0xccu, 1}, {0xcdu, 2}, {0xceu, 4}, {0xcfu, 8}})
      if (width == 8 || v >> (8 * width) == 0)
        fits.emplace_back(code, width);
    for (auto [code, width] : {std::pair{0xd0u, 1}, {0xd1u, 2}, {0xd2u, 4}, {0xd3u, 8}})
      if (v >> (8 * width - 1) == 0)
        fits.emplace_back(code, width);
    auto [code, width] = fits[below(fits.size())];
    byte(code);
    big_endian(v, width);
  }

  /// A negative int in its smallest width or any wider signed one.
  void negative(int64_t v) {
    std::vector<std::pair<unsigned, int>> fits;
    if (v >= -32)
      fits.emplace_back(0, 0);
    if (v >= INT8_MIN)
      fits.emplace_back(0xd0u, 1);
    if (v >= INT16_MIN)
      fits.emplace_back(0xd1u, 2);
    if (v >= INT32_MIN)
      fits.emplace_back(0xd2u, 4);
    fits.emplace_back(0xd3u, 8);
    auto [code, width] = chance(80) ? fits.front() : fits[below(fits.size())];
    if (width == 0)
      return byte(static_cast<unsigned>(v));
    byte(code);
    big_endian(static_cast<uint64_t>(v), width);
  }

  void integer() {
    switch (below(4)) {
    case 0: {
      static constexpr std::array<int64_t, 14> edges = {
          INT64_MIN, INT64_MIN + 1, -2147483649, -2147483648, -32769, -32768, -129,
          -128,      -33,           -32,         -1,          0,      127,    128};
      int64_t v = edges[below(edges.size())];
      return v < 0 ? negative(v) : uint(static_cast<uint64_t>(v));
    }
    case 1:
      return uint(below(70000));
    case 2:
      return negative(-1 - static_cast<int64_t>(below(70000)));
    default: {
      uint64_t bits = rng_();
      return chance(50) ? uint(bits) : negative(static_cast<int64_t>(bits | (uint64_t{1} << 63)));
    }
    }
  }

  void float64(double v) {
    byte(0xcb);
    big_endian(std::bit_cast<uint64_t>(v), 8);
  }
  void float32(float v) {
    byte(0xca);
    big_endian(std::bit_cast<uint32_t>(v), 4);
  }
  void floating() {
    static constexpr std::array<double, 7> edges = {
        0.0, -0.0, 0.5, -2.5, 1e300, 5e-324, std::numeric_limits<double>::infinity()};
    switch (below(4)) {
    case 0:
      return float64(edges[below(edges.size())]);
    case 1:
      return float32(static_cast<float>(below(1000)) / 8.0f);
    case 2:
      return float64(std::bit_cast<double>(rng_())); // NaNs and infinities too
    default:
      return float64(std::uniform_real_distribution<double>{-1e6, 1e6}(rng_));
    }
  }

  /// A str/bin/array/map header: the smallest width usually, else any wider.
  void header(uint64_t n, unsigned fix_code, unsigned fix_max, unsigned code8, unsigned code16,
              unsigned code32) {
    std::vector<int> widths;
    if (fix_code != 0 && n <= fix_max) // bin has no fix form
      widths.push_back(0);
    if (code8 != 0 && n <= 0xff)
      widths.push_back(1);
    if (n <= 0xffff)
      widths.push_back(2);
    widths.push_back(4);
    int width = chance(80) ? widths.front() : widths[below(widths.size())];
    if (width == 0)
      return byte(fix_code | static_cast<unsigned>(n));
    byte(width == 1 ? code8 : width == 2 ? code16 : code32);
    big_endian(n, width);
  }
  void array_header(uint64_t n) { header(n, 0x90, 15, 0, 0xdc, 0xdd); }
  void map_header(uint64_t n) { header(n, 0x80, 15, 0, 0xde, 0xdf); }
  void str(std::string_view s) {
    header(s.size(), 0xa0, 31, 0xd9, 0xda, 0xdb);
    out_.append(s);
  }
  void bin(std::string_view s) {
    header(s.size(), 0, 0, 0xc4, 0xc5, 0xc6);
    out_.append(s);
  }
  void ext() {
    static constexpr std::array<std::pair<unsigned, size_t>, 5> fixed = {
        {{0xd4, 1}, {0xd5, 2}, {0xd6, 4}, {0xd7, 8}, {0xd8, 16}}};
    std::string data(below(20), 'e');
    if (chance(50)) {
      auto [code, size] = fixed[below(fixed.size())];
      byte(code);
      byte(static_cast<unsigned>(below(256))); // the ext type
      out_.append(std::string(size, 'x'));
      return;
    }
    unsigned code = 0xc7 + static_cast<unsigned>(below(3));
    byte(code);
    big_endian(data.size(), code == 0xc7 ? 1 : code == 0xc8 ? 2 : 4);
    byte(static_cast<unsigned>(below(256)));
    out_.append(data);
  }

  /// Text for a str: ASCII mostly, sometimes multi-byte UTF-8, invalid UTF-8,
  /// or long enough for str16 and str32 headers and the string limit.
  std::string text() {
    static const std::array<std::string, 10> special = {
        "",
        "h\xc3\xa9llo \xf0\x9f\x98\x80",
        "\x80",
        "\xc0\x80",     // overlong NUL
        "\xed\xa0\x80", // a UTF-16 surrogate
        "ok\xff",
        std::string("nul\0byte", 8),
        std::string(300, 'm'),
        std::string(70000, 'L'),
        "\xe4\xb8\xad\xe6\x96\x87",
    };
    if (chance(15)) {
      size_t pick = below(special.size());
      return special[pick == 8 && !chance(10) ? 7 : pick]; // 70,000 bytes: rarely
    }
    std::string s(below(24), 'a');
    for (char& c : s)
      c = static_cast<char>('a' + below(26));
    return s;
  }

  // -- values of any shape ---------------------------------------------------------

  void any_value(int depth, int max_depth) {
    size_t kinds = depth >= max_depth ? 8 : 10;
    switch (below(kinds)) {
    case 0:
      return byte(0xc0);
    case 1:
      return byte(chance(50) ? 0xc3 : 0xc2);
    case 2:
    case 3:
      return integer();
    case 4:
      return floating();
    case 5:
      return str(text());
    case 6:
      return bin(std::string(below(40), 'b'));
    case 7:
      return ext();
    case 8: {
      size_t n = below(5);
      array_header(n);
      for (size_t i = 0; i < n; ++i)
        any_value(depth + 1, max_depth);
      return;
    }
    default: {
      size_t n = below(5);
      map_header(n);
      for (size_t i = 0; i < n; ++i) {
        if (chance(80))
          str(text());
        else
          any_value(depth + 1, max_depth);
        any_value(depth + 1, max_depth);
      }
      return;
    }
    }
  }

  /// An unknown field's value, now and then nested past the default depth limit.
  void unknown_value() {
    if (chance(3)) {
      size_t depth = 60 + below(10);
      for (size_t i = 0; i < depth; ++i)
        array_header(1);
      return byte(0x01);
    }
    any_value(0, 1 + below(3));
  }

  // -- values of a schema type, sometimes of the wrong kind -------------------------

  template <class T>
  void typed(std::type_identity<T> t) {
    if (chance(4))
      return any_value(0, 2); // a value of the wrong kind, most of the time
    typed_value(t);
  }

  void typed_value(std::type_identity<msg::wire_int>) { integer(); }
  void typed_value(std::type_identity<double>) { chance(80) ? floating() : integer(); }
  void typed_value(std::type_identity<bool>) { byte(chance(50) ? 0xc3 : 0xc2); }
  void typed_value(std::type_identity<std::string>) { str(text()); }
  void typed_value(std::type_identity<msg::OpType>) {
    static constexpr std::array<std::string_view, 5> names = {"admit", "evict", "ADMIT", "", "x"};
    str(chance(90) ? names[below(2)] : names[below(names.size())]);
  }
  void typed_value(std::type_identity<msg::any_value>) { any_value(0, 1 + below(4)); }

  template <class T>
  void typed_value(std::type_identity<std::optional<T>>) {
    if (chance(30))
      return byte(0xc0);
    typed(std::type_identity<T>{});
  }

  template <class T>
  void typed_value(std::type_identity<std::vector<T>>) {
    size_t n = chance(90) ? below(6) : chance(50) ? 14 + below(6) : below(200);
    array_header(n);
    for (size_t i = 0; i < n; ++i)
      typed(std::type_identity<T>{});
  }

  template <class K, class V>
  void typed_value(std::type_identity<std::vector<std::pair<K, V>>>) {
    size_t n = below(5);
    map_header(n);
    for (size_t i = 0; i < n; ++i) {
      if (i > 0 && chance(10)) { // a repeated key: the first position, the last value
        if constexpr (std::is_same_v<K, std::string>)
          str("k");
        else
          uint(1);
      } else {
        typed(std::type_identity<K>{});
      }
      typed(std::type_identity<V>{});
    }
  }

  template <class... Ts>
  void typed_value(std::type_identity<std::tuple<Ts...>>) {
    tuple_of(std::type_identity<Ts>{}...);
  }
  template <class A, class B>
  void typed_value(std::type_identity<std::pair<A, B>>) {
    tuple_of(std::type_identity<A>{}, std::type_identity<B>{});
  }
  template <class... Ts>
  void tuple_of(Ts... types) {
    if (chance(5)) { // the wrong length
      size_t n = below(6);
      array_header(n);
      for (size_t i = 0; i < n; ++i)
        any_value(0, 1);
      return;
    }
    array_header(sizeof...(Ts));
    (typed(types), ...);
  }

  void typed_value(std::type_identity<msg::AnyCommand>) {
    if (chance(50))
      struct_map<msg::FullSyncCommand>(msg::FullSyncCommand::tag_field);
    else
      struct_map<msg::HeartbeatCommand>(msg::HeartbeatCommand::tag_field);
  }

  template <class T>
  requires requires(T& t) {
    T::fields(t, [](std::string_view, auto&, msg::field_kind) {});
  }
  void typed_value(std::type_identity<T>) { struct_map<T>({}); }

  /// A struct as a map: fields in order or shuffled, some left out, some
  /// repeated, unknown ones added, and the tag (if any) anywhere or missing.
  template <class T>
  void struct_map(std::string_view tag_field) {
    using writer = void (frame_generator::*)();
    std::vector<std::pair<std::string, writer>> entries;
    T probe{};
    T::fields(probe, [&](std::string_view name, auto& member, msg::field_kind) {
      using member_type = std::remove_cvref_t<decltype(member)>;
      if (chance(6))
        return; // left out
      writer w = &frame_generator::typed_entry<member_type>;
      entries.emplace_back(std::string(name), w);
      if (chance(3))
        entries.emplace_back(std::string(name), w); // repeated
    });
    if (chance(10))
      entries.emplace_back(chance(50) ? "unknown" : text(), &frame_generator::unknown_value);
    if (chance(3))
      entries.emplace_back("", &frame_generator::non_str_key_entry);
    if (chance(20))
      std::shuffle(entries.begin(), entries.end(), rng_);
    if constexpr (requires { T::type_tag; }) {
      std::string_view field = tag_field.empty() ? std::string_view{"type"} : tag_field;
      if (!chance(3)) {
        size_t at = chance(85) ? 0 : below(entries.size() + 1);
        entries.insert(entries.begin() + static_cast<std::ptrdiff_t>(at),
                       {std::string(field), &frame_generator::tag_value<T>});
      }
    }
    map_header(entries.size());
    for (const auto& [name, write] : entries) {
      if (!name.empty())
        str(name);
      (this->*write)();
    }
  }

  template <class M>
  void typed_entry() {
    typed(std::type_identity<M>{});
  }
  void non_str_key_entry() {
    integer();
    any_value(0, 1);
  }
  template <class T>
  void tag_value() {
    static constexpr std::array<std::string_view, 4> wrong = {"MsgBase", "WorkerMsg", "", "x"};
    if (chance(96))
      return str(T::type_tag);
    if (chance(50))
      return str(wrong[below(wrong.size())]);
    any_value(0, 1);
  }

  template <size_t... Is>
  void write_message(size_t which, std::index_sequence<Is...>) {
    ((which == Is ? struct_map<std::variant_alternative_t<Is, msg::Msg>>({}) : void()), ...);
  }

  std::mt19937_64& rng_;
  std::string out_;
};

} // namespace lmcc::test
