#include "messages/codec_json.hpp"

#include "messages/codec_msgpack.hpp"
#include "messages/internal/decode_walk.hpp"
#include "messages/internal/json_tree.hpp"
#include "messages/json_text_reader.hpp"

#include <nlohmann/json.hpp>
#include <simdjson.h>

namespace lmcc::msg {
namespace {

using ojson = nlohmann::ordered_json;

codec_error malformed(simdjson::error_code e) {
  return codec_error{std::string{"JSON is malformed: "} + simdjson::error_message(e)};
}

// -- base64 (msgspec's representation of bytes in JSON) --------------------------

std::string base64_encode(std::string_view in) {
  static constexpr char alphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((in.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 2 < in.size(); i += 3) {
    uint32_t v = (uint8_t(in[i]) << 16) | (uint8_t(in[i + 1]) << 8) | uint8_t(in[i + 2]);
    out += {alphabet[v >> 18], alphabet[(v >> 12) & 63], alphabet[(v >> 6) & 63], alphabet[v & 63]};
  }
  if (i + 1 == in.size()) {
    uint32_t v = uint8_t(in[i]) << 16;
    out += {alphabet[v >> 18], alphabet[(v >> 12) & 63], '=', '='};
  } else if (i + 2 == in.size()) {
    uint32_t v = (uint8_t(in[i]) << 16) | (uint8_t(in[i + 1]) << 8);
    out += {alphabet[v >> 18], alphabet[(v >> 12) & 63], alphabet[(v >> 6) & 63], '='};
  }
  return out;
}

// -- encoding ---------------------------------------------------------------------

// A struct so that every overload sees every other one, whatever their order.
struct json_encoder {
  static ojson to_json(const wire_int& v) {
    return v.is_negative() ? ojson(v.as_int64()) : ojson(v.bits());
  }
  static ojson to_json(double v) { return ojson(v); }
  static ojson to_json(bool v) { return ojson(v); }
  static ojson to_json(const std::string& v) { return ojson(v); }
  static ojson to_json(OpType v) { return ojson(std::string(op_type_name(v))); }

  template <class T>
  static ojson to_json(const std::optional<T>& v) {
    return v ? to_json(*v) : ojson(nullptr);
  }

  template <class T>
  static ojson to_json(const std::vector<T>& v) {
    ojson a = ojson::array();
    for (const auto& x : v)
      a.push_back(to_json(x));
    return a;
  }

  static std::string json_key(const std::string& k) { return k; }
  static std::string json_key(const wire_int& k) { return k.to_string(); }
  static std::string json_key(const any_value& k) {
    // JSON keys are text: render scalar keys the way msgspec does (ints as digits).
    if (const auto* s = std::get_if<std::string>(&k.value))
      return *s;
    if (const auto* i = std::get_if<wire_int>(&k.value))
      return i->to_string();
    return to_json(k).dump();
  }

  template <class K, class V>
  static ojson to_json(const std::vector<std::pair<K, V>>& v) {
    ojson o = ojson::object();
    for (const auto& [k, x] : v)
      o[json_key(k)] = to_json(x);
    return o;
  }

  template <class T>
  requires internal::is_tuple_like<T>::value static ojson to_json(const T& v) {
    ojson a = ojson::array();
    std::apply([&](const auto&... xs) { (a.push_back(to_json(xs)), ...); }, v);
    return a;
  }

  template <class T>
  static ojson struct_to_json(const T& v, std::string_view tag_field) {
    ojson o = ojson::object();
    if constexpr (internal::has_type_tag<T>)
      o[std::string(tag_field)] = std::string(T::type_tag);
    T::fields(v, [&](std::string_view name, const auto& member, field_kind) {
      o[std::string(name)] = to_json(member);
    });
    return o;
  }

  template <class T>
  requires internal::has_fields<T>
  static ojson to_json(const T& v) { return struct_to_json(v, "type"); }

  static ojson to_json(const AnyCommand& c) {
    return std::visit([](const auto& x) { return struct_to_json(x, HeartbeatCommand::tag_field); },
                      c);
  }

  static ojson to_json(const any_value& v) {
    return std::visit(
        [](const auto& x) -> ojson {
          using X = std::decay_t<decltype(x)>;
          if constexpr (std::is_same_v<X, std::monostate>)
            return ojson(nullptr);
          else if constexpr (std::is_same_v<X, any_bytes>)
            return ojson(base64_encode(x.data));
          else
            return to_json(x);
        },
        v.value);
  }
};

} // namespace

std::string encode_json(const Msg& m) {
  return std::visit([](const auto& x) { return json_encoder::to_json(x); }, m)
      .dump(-1, ' ', false, ojson::error_handler_t::replace);
}

expected<Msg> decode_json(std::string_view text, const decode_limits& limits) {
  if (text.size() > limits.max_frame_bytes)
    return codec_error{"Frame of " + std::to_string(text.size()) + " bytes exceeds the limit of " +
                       std::to_string(limits.max_frame_bytes)};
  try {
    // The whole document is read (and checked) before the walk, so that malformed
    // JSON anywhere is refused as such, as json.loads would refuse it.
    borrowed_json_reader reader;
    internal::json_tree tree{limits};
    auto error = reader->read(text, [&](simdjson::ondemand::value root) { tree.build(root); });
    if (error != simdjson::SUCCESS)
      return malformed(error);
    internal::walker<internal::json_tree_adapter> walk{limits.max_depth};
    return walk.read_msg(tree.root());
  } catch (const internal::walk_failure& f) {
    return internal::to_codec_error(f);
  } catch (const internal::json_syntax_error& e) {
    return malformed(e.code);
  }
}

expected<Msg> decode_frame(std::string_view frame, const decode_limits& limits) {
  if (!frame.empty() && frame.front() == '{')
    return decode_json(frame, limits);
  return decode_msgpack(frame, limits);
}

} // namespace lmcc::msg
