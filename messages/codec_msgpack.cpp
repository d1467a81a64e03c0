#include "messages/codec_msgpack.hpp"

#include "messages/internal/decode_walk.hpp"
#include "messages/internal/msgpack_tree.hpp"

#include <msgpack.hpp>

#include <bit>
#include <type_traits>

namespace lmcc::msg {
namespace {

// -- encoding -----------------------------------------------------------------

struct string_sink {
  std::string& out;
  void write(const char* data, size_t size) { out.append(data, size); }
};

class encoder {
public:
  explicit encoder(std::string& out) : sink_{out}, pk_(sink_) {}

  void write(const wire_int& v) {
    if (v.is_negative())
      pk_.pack_int64(v.as_int64());
    else
      pk_.pack_uint64(v.bits());
  }
  // msgspec always writes float64 (0xcb); msgpack-cxx's pack_double would
  // shorten integral values to ints, so the nine bytes are written here.
  void write(double v) {
    uint64_t bits = std::bit_cast<uint64_t>(v);
    char buf[9];
    buf[0] = static_cast<char>(0xcb);
    for (int i = 0; i < 8; ++i)
      buf[1 + i] = static_cast<char>(bits >> (56 - 8 * i));
    sink_.write(buf, sizeof buf);
  }
  void write(bool v) { v ? pk_.pack_true() : pk_.pack_false(); }
  void write(std::string_view v) {
    pk_.pack_str(static_cast<uint32_t>(v.size()));
    pk_.pack_str_body(v.data(), static_cast<uint32_t>(v.size()));
  }
  void write(const std::string& v) { write(std::string_view{v}); }
  void write(OpType v) { write(op_type_name(v)); }

  void write(const any_value& v) {
    std::visit([this](const auto& x) { write_any(x); }, v.value);
  }

  template <class T>
  void write(const std::optional<T>& v) {
    if (v)
      write(*v);
    else
      pk_.pack_nil();
  }

  template <class T>
  void write(const std::vector<T>& v) {
    pk_.pack_array(static_cast<uint32_t>(v.size()));
    for (const auto& x : v)
      write(x);
  }

  template <class K, class V>
  void write(const std::vector<std::pair<K, V>>& v) {
    pk_.pack_map(static_cast<uint32_t>(v.size()));
    for (const auto& [k, x] : v) {
      write(k);
      write(x);
    }
  }

  template <class T>
  requires internal::is_tuple_like<T>::value void write(const T& v) {
    pk_.pack_array(static_cast<uint32_t>(std::tuple_size_v<T>));
    std::apply([&](const auto&... xs) { (write(xs), ...); }, v);
  }

  void write(const AnyCommand& c) {
    std::visit([this](const auto& x) { write_struct(x, HeartbeatCommand::tag_field); }, c);
  }

  template <class T>
  requires internal::has_fields<T>
  void write(const T& v) {
    if constexpr (internal::has_type_tag<T>)
      write_struct(v, "type");
    else
      write_struct(v, {});
  }

private:
  template <class T>
  void write_struct(const T& v, std::string_view tag_field) {
    uint32_t count = tag_field.empty() ? 0 : 1;
    T::fields(v, [&](std::string_view, const auto&, field_kind) { ++count; });
    pk_.pack_map(count);
    if constexpr (internal::has_type_tag<T>) {
      write(tag_field);
      write(T::type_tag);
    }
    T::fields(v, [&](std::string_view name, const auto& member, field_kind) {
      write(name);
      write(member);
    });
  }

  void write_any(std::monostate) { pk_.pack_nil(); }
  void write_any(const any_bytes& b) {
    pk_.pack_bin(static_cast<uint32_t>(b.data.size()));
    pk_.pack_bin_body(b.data.data(), static_cast<uint32_t>(b.data.size()));
  }
  void write_any(const any_array& a) { write(a); }
  void write_any(const any_map& m) { write(m); }
  template <class T>
  void write_any(const T& x) {
    write(x);
  }

  string_sink sink_;
  msgpack::packer<string_sink> pk_;
};

} // namespace

void encode_msgpack(const Msg& m, std::string& out) {
  encoder enc{out};
  std::visit([&](const auto& x) { enc.write(x); }, m);
}

std::string encode_msgpack(const Msg& m) {
  std::string out;
  out.reserve(128);
  encode_msgpack(m, out);
  return out;
}

expected<Msg> decode_msgpack(std::string_view frame, const decode_limits& limits) {
  if (frame.size() > limits.max_frame_bytes)
    return codec_error{"Frame of " + std::to_string(frame.size()) + " bytes exceeds the limit of " +
                       std::to_string(limits.max_frame_bytes)};
  try {
    expected<internal::msgpack_tree> tree = internal::msgpack_tree::read(frame, limits);
    if (!tree)
      return tree.error();
    internal::walker<internal::msgpack_tree_adapter> walk{limits.max_depth};
    Msg result = walk.read_msg(tree->root());
    // Like msgspec: the first object is decoded and type-checked, and only then
    // are trailing bytes an error.
    if (tree->end() != frame.size())
      return codec_error{"MessagePack data is malformed: trailing characters (byte " +
                         std::to_string(tree->end()) + ")"};
    return result;
  } catch (const internal::walk_failure& f) {
    return internal::to_codec_error(f);
  } catch (const std::exception& e) { // std::bad_alloc, worded as before
    return codec_error{std::string{"MessagePack data is malformed: "} + e.what()};
  }
}

} // namespace lmcc::msg
