// decode_walk: the msgspec decoding rules, written once over a document tree.
//
// Both codecs first parse a frame into a document tree (msgpack: msgpack_tree's
// flat nodes; JSON: json_tree.hpp's json_node) and then walk it here into the
// typed message. The walk is generic over an Adapter that answers "what kind is this
// node and what does it hold", so msgpack and JSON share every rule: tag lookup
// anywhere in the map, unknown fields ignored, defaults for missing defaulted
// fields, exact tuple lengths, enum values, full-range ints, and the
// msgspec-worded errors with the field path.
//
// Private to messages/: include only from codec_*.cpp.
#pragma once

#include "messages/any_value.hpp"
#include "messages/expected.hpp"
#include "messages/lmcache_msgs.hpp"

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

namespace lmcc::msg::internal {

// One byte: msgpack_tree stores it in every node.
enum class node_kind : uint8_t {
  nil,
  boolean,
  integer,
  floating,
  string,
  bytes,
  array,
  object,
  other
};

/// msgspec's names for the kinds, as its errors print them.
constexpr std::string_view kind_name(node_kind k) noexcept {
  switch (k) {
  case node_kind::nil:
    return "None";
  case node_kind::boolean:
    return "bool";
  case node_kind::integer:
    return "int";
  case node_kind::floating:
    return "float";
  case node_kind::string:
    return "str";
  case node_kind::bytes:
    return "bytes";
  case node_kind::array:
    return "array";
  case node_kind::object:
    return "object";
  case node_kind::other:
    return "ext";
  }
  return "?";
}

/// Thrown inside a walk only; decode() turns it into a codec_error. `path`
/// collects segments innermost first while the exception unwinds.
struct walk_failure {
  std::string what;
  std::vector<std::string> path;
  bool at_key = false;
};

[[noreturn]] inline void fail(std::string what) {
  throw walk_failure{std::move(what), {}, false};
}

[[noreturn]] inline void fail_expected(std::string_view want, node_kind got) {
  fail("Expected `" + std::string(want) + "`, got `" + std::string(kind_name(got)) + "`");
}

/// Equality of short texts (field names, tags, enum values) without a call:
/// std::string_view's == goes through an out-of-line compare and memcmp,
/// which cost more than the comparison itself at these lengths, and field
/// lookup compares every key of every struct in a frame.
constexpr bool same_text(std::string_view a, std::string_view b) noexcept {
  if (a.size() != b.size())
    return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i] != b[i])
      return false;
  return true;
}

template <class T>
struct is_optional : std::false_type {};
template <class T>
struct is_optional<std::optional<T>> : std::true_type {};
template <class T>
struct is_vector : std::false_type {};
template <class T, class A>
struct is_vector<std::vector<T, A>> : std::true_type {};
template <class T>
struct is_pair_vector : std::false_type {};
template <class K, class V>
struct is_pair_vector<std::vector<std::pair<K, V>>> : std::true_type {};
template <class T>
struct is_tuple_like : std::false_type {};
template <class A, class B>
struct is_tuple_like<std::pair<A, B>> : std::true_type {};
template <class... Ts>
struct is_tuple_like<std::tuple<Ts...>> : std::true_type {};
template <class T>
struct is_variant : std::false_type {};
template <class... Ts>
struct is_variant<std::variant<Ts...>> : std::true_type {};

template <class T>
concept has_fields = requires(T& t) {
  T::fields(t, [](std::string_view, auto&, field_kind) {});
};

template <class T>
concept has_type_tag = requires {
  T::type_tag;
};

/// Adapter requirements (N = Adapter::node):
///   static node_kind kind(const N&);
///   static bool get_bool(const N&);               kind == boolean
///   static wire_int get_int(const N&);            kind == integer
///   static double get_double(const N&);           kind == floating
///   static std::string_view get_string(const N&); kind == string or bytes
///   static size_t size(const N&);                 kind == array or object
///   static const N& at(const N&, size_t);         array element
///   template <class F> static void for_each_entry(const N&, F&&);  F(const N& key, const N& value)
///   static std::string_view key_string(const N& key);  (key kind checked first)
///   static any_bytes get_bytes(const N&);         kind == bytes (JSON: never)
template <class Adapter>
class walker {
public:
  using node = typename Adapter::node;

  explicit walker(uint32_t max_depth) : max_depth_(max_depth) {}

  // -- scalars -----------------------------------------------------------------

  void read(const node& n, wire_int& out) {
    auto k = Adapter::kind(n);
    if (k != node_kind::integer)
      fail_expected("int", k);
    out = Adapter::get_int(n);
  }

  void read(const node& n, double& out) {
    auto k = Adapter::kind(n);
    if (k == node_kind::floating) {
      out = Adapter::get_double(n);
    } else if (k == node_kind::integer) {
      auto v = Adapter::get_int(n);
      out = v.is_negative() ? static_cast<double>(v.as_int64()) : static_cast<double>(v.bits());
    } else {
      fail_expected("float", k);
    }
  }

  void read(const node& n, bool& out) {
    auto k = Adapter::kind(n);
    if (k != node_kind::boolean)
      fail_expected("bool", k);
    out = Adapter::get_bool(n);
  }

  void read(const node& n, std::string& out) {
    auto k = Adapter::kind(n);
    if (k != node_kind::string)
      fail_expected("str", k);
    auto s = Adapter::get_string(n);
    out.assign(s.data(), s.size());
  }

  void read(const node& n, OpType& out) {
    auto k = Adapter::kind(n);
    if (k != node_kind::string)
      fail_expected("str", k);
    auto s = Adapter::get_string(n);
    if (same_text(s, "admit"))
      out = OpType::admit;
    else if (same_text(s, "evict"))
      out = OpType::evict;
    else
      fail("Invalid enum value '" + std::string(s) + "'");
  }

  void read(const node& n, any_value& out) {
    switch (Adapter::kind(n)) {
    case node_kind::nil:
      out.value = std::monostate{};
      return;
    case node_kind::boolean:
      out.value = Adapter::get_bool(n);
      return;
    case node_kind::integer:
      out.value = Adapter::get_int(n);
      return;
    case node_kind::floating:
      out.value = Adapter::get_double(n);
      return;
    case node_kind::string:
      out.value = std::string(Adapter::get_string(n));
      return;
    case node_kind::bytes:
      out.value = Adapter::get_bytes(n);
      return;
    case node_kind::array: {
      depth_guard guard{*this}; // containers count toward max_depth, scalars do not
      any_array items(Adapter::size(n));
      for (size_t i = 0; i < items.size(); ++i)
        at_index(i, [&] { read(Adapter::at(n, i), items[i]); });
      out.value = std::move(items);
      return;
    }
    case node_kind::object: {
      depth_guard guard{*this};
      any_map entries;
      entries.reserve(Adapter::size(n));
      Adapter::for_each_entry(n, [&](const node& k, const node& v) {
        std::pair<any_value, any_value> kv;
        read(k, kv.first);
        read(v, kv.second);
        entries.push_back(std::move(kv));
      });
      out.value = std::move(entries);
      return;
    }
    case node_kind::other:
      fail("Unsupported msgpack extension type");
    }
  }

  // -- containers ----------------------------------------------------------------

  template <class T>
  void read(const node& n, std::optional<T>& out) {
    if (Adapter::kind(n) == node_kind::nil) {
      out.reset();
      return;
    }
    T value{};
    read(n, value);
    out = std::move(value);
  }

  template <class T>
  requires(is_vector<T>::value && !is_pair_vector<T>::value) void read(const node& n, T& out) {
    auto k = Adapter::kind(n);
    if (k != node_kind::array)
      fail_expected("array", k);
    depth_guard guard{*this};
    size_t count = Adapter::size(n);
    out.clear();
    out.resize(count);
    for (size_t i = 0; i < count; ++i)
      at_index(i, [&] { read(Adapter::at(n, i), out[i]); });
  }

  /// dict[K, V]: insertion order kept; a repeated key keeps its first position
  /// and takes the last value, as a Python dict does.
  template <class K, class V>
  void read(const node& n, std::vector<std::pair<K, V>>& out) {
    auto k = Adapter::kind(n);
    if (k != node_kind::object)
      fail_expected("object", k);
    depth_guard guard{*this};
    out.clear();
    out.reserve(Adapter::size(n));
    std::unordered_map<K, size_t> position;
    Adapter::for_each_entry(n, [&](const node& key_node, const node& value_node) {
      K key{};
      try {
        read_key(key_node, key);
      } catch (walk_failure& f) {
        f.at_key = true;
        throw;
      }
      V value{};
      at_key(key, [&] { read(value_node, value); });
      auto [it, inserted] = position.emplace(key, out.size());
      if (inserted)
        out.emplace_back(std::move(key), std::move(value));
      else
        out[it->second].second = std::move(value);
    });
  }

  template <class T>
  requires is_tuple_like<T>::value void read(const node& n, T& out) {
    constexpr size_t arity = std::tuple_size_v<T>;
    auto k = Adapter::kind(n);
    if (k != node_kind::array)
      fail_expected("array", k);
    if (Adapter::size(n) != arity)
      fail("Expected `array` of length " + std::to_string(arity) + ", got " +
           std::to_string(Adapter::size(n)));
    depth_guard guard{*this};
    [&]<size_t... Is>(std::index_sequence<Is...>) {
      (at_index(Is, [&] { read(Adapter::at(n, Is), std::get<Is>(out)); }), ...);
    }
    (std::make_index_sequence<arity>{});
  }

  // -- structs -------------------------------------------------------------------

  /// Untagged structs (KVOpEvent, WorkerInfo) and the field part of tagged ones.
  template <class T>
  requires has_fields<T>
  void read(const node& n, T& out) {
    auto k = Adapter::kind(n);
    if (k != node_kind::object)
      fail_expected("object", k);
    depth_guard guard{*this};
    read_fields(n, out);
  }

  /// AnyCommand: tag field `command_type`, values "full_sync" / "HeartbeatCommand".
  void read(const node& n, AnyCommand& out) {
    auto k = Adapter::kind(n);
    if (k != node_kind::object)
      fail_expected("object", k);
    depth_guard guard{*this};
    auto tag = find_tag(n, HeartbeatCommand::tag_field);
    if (tag == FullSyncCommand::type_tag) {
      FullSyncCommand c;
      read_fields(n, c, HeartbeatCommand::tag_field);
      out = std::move(c);
    } else if (tag == HeartbeatCommand::type_tag) {
      HeartbeatCommand c;
      read_fields(n, c, HeartbeatCommand::tag_field);
      out = std::move(c);
    } else {
      at_field(HeartbeatCommand::tag_field,
               [&] { fail("Invalid value '" + std::string(tag) + "'"); });
    }
  }

  /// The top level: a map whose `type` names one member of Msg.
  Msg read_msg(const node& n) {
    auto k = Adapter::kind(n);
    if (k != node_kind::object)
      fail_expected("object", k);
    depth_guard guard{*this};
    auto tag = find_tag(n, "type");
    const auto& table = msg_decoders();
    auto it = table.find(tag);
    if (it == table.end())
      at_field("type", [&] { fail("Invalid value '" + std::string(tag) + "'"); });
    return (this->*(it->second))(n);
  }

private:
  // -- helpers -------------------------------------------------------------------

  template <class K>
  void read_key(const node& n, K& key) {
    if constexpr (std::is_same_v<K, wire_int> && Adapter::text_keys) {
      if (Adapter::kind(n) == node_kind::string) {
        key = parse_decimal(Adapter::get_string(n));
        return;
      }
    }
    read(n, key);
  }

  /// An int-keyed dict's key in JSON text ("-12"), as msgspec converts it.
  static wire_int parse_decimal(std::string_view s) {
    bool negative = !s.empty() && s.front() == '-';
    std::string_view digits = negative ? s.substr(1) : s;
    if (digits.empty() || digits.size() > 20)
      fail_expected("int", node_kind::string);
    uint64_t value = 0;
    for (char c : digits) {
      if (c < '0' || c > '9')
        fail_expected("int", node_kind::string);
      uint64_t next = value * 10 + static_cast<uint64_t>(c - '0');
      if (value > UINT64_MAX / 10 || next < value * 10)
        fail("Integer value out of range");
      value = next;
    }
    if (!negative)
      return wire_int::from_unsigned(value);
    if (value > uint64_t{1} << 63)
      fail("Integer value out of range");
    return wire_int{static_cast<int64_t>(~value + 1)};
  }

  struct depth_guard {
    walker& w;
    explicit depth_guard(walker& self) : w(self) {
      if (++w.depth_ > w.max_depth_)
        fail("Nesting deeper than the limit of " + std::to_string(w.max_depth_));
    }
    ~depth_guard() { --w.depth_; }
    depth_guard(const depth_guard&) = delete;
    depth_guard& operator=(const depth_guard&) = delete;
  };

  template <class F>
  static void at_index(size_t i, F&& f) {
    try {
      f();
    } catch (walk_failure& e) {
      e.path.push_back("[" + std::to_string(i) + "]");
      throw;
    }
  }

  template <class F>
  static void at_field(std::string_view name, F&& f) {
    try {
      f();
    } catch (walk_failure& e) {
      e.path.push_back("." + std::string(name));
      throw;
    }
  }

  template <class K, class F>
  static void at_key(const K& key, F&& f) {
    try {
      f();
    } catch (walk_failure& e) {
      if constexpr (std::is_same_v<K, std::string>)
        e.path.push_back("['" + key + "']");
      else
        e.path.push_back("[" + key.to_string() + "]");
      throw;
    }
  }

  /// The string value of `tag_field` wherever it sits in the map.
  std::string_view find_tag(const node& n, std::string_view tag_field) {
    std::optional<std::string_view> tag;
    Adapter::for_each_entry(n, [&](const node& key, const node& value) {
      if (tag || Adapter::kind(key) != node_kind::string ||
          !same_text(Adapter::key_string(key), tag_field))
        return;
      auto vk = Adapter::kind(value);
      if (vk != node_kind::string)
        at_field(tag_field, [&] { fail_expected("str", vk); });
      tag = Adapter::get_string(value);
    });
    if (!tag)
      fail("Object missing required field `" + std::string(tag_field) + "`");
    return *tag;
  }

  template <class T>
  void read_fields(const node& n, T& out, std::string_view skip_key = "type") {
    constexpr size_t max_fields = 16; // the widest message has 7 fields
    std::array<bool, max_fields> seen{};
    Adapter::for_each_entry(n, [&](const node& key, const node& value) {
      if (Adapter::kind(key) != node_kind::string)
        return; // msgspec ignores non-str keys of a struct as unknown fields
      auto name = Adapter::key_string(key);
      if (same_text(name, skip_key))
        return;
      size_t index = 0;
      T::fields(out, [&](std::string_view field, auto& member, field_kind) {
        if (same_text(field, name)) {
          at_field(field, [&] { read(value, member); });
          seen[index] = true;
        }
        ++index;
      });
    });
    size_t index = 0;
    T::fields(out, [&](std::string_view field, auto&, field_kind kind) {
      if (kind == field_kind::required && !seen[index])
        fail("Object missing required field `" + std::string(field) + "`");
      ++index;
    });
  }

  template <class T>
  Msg read_tagged(const node& n) {
    T value{};
    read_fields(n, value);
    return Msg{std::move(value)};
  }

  using decoder_fn = Msg (walker::*)(const node&);

  static const std::unordered_map<std::string_view, decoder_fn>& msg_decoders() {
    static const auto table = [] {
      std::unordered_map<std::string_view, decoder_fn> t;
      [&]<size_t... Is>(std::index_sequence<Is...>) {
        ((t.emplace(std::variant_alternative_t<Is, Msg>::type_tag,
                    &walker::read_tagged<std::variant_alternative_t<Is, Msg>>)),
         ...);
      }
      (std::make_index_sequence<std::variant_size_v<Msg>>{});
      return t;
    }();
    return table;
  }

  // -- member variables ------------------------------------------------------------

  uint32_t max_depth_;
  uint32_t depth_ = 0;
};

/// "$.operations[3].key" (or "`key` in `$.error_codes`") from a failure.
inline codec_error to_codec_error(const walk_failure& f) {
  std::string path = "$";
  for (auto it = f.path.rbegin(); it != f.path.rend(); ++it)
    path += *it;
  if (f.at_key)
    return codec_error{f.what + " - at `key` in `" + path + "`"};
  if (f.path.empty())
    return codec_error{f.what};
  return codec_error{f.what + " - at `" + path + "`"};
}

} // namespace lmcc::msg::internal
