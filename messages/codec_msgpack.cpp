#include "messages/codec_msgpack.hpp"

#include "messages/internal/decode_walk.hpp"
#include "messages/internal/utf8.hpp"

#include <msgpack.hpp>

#include <bit>
#include <type_traits>

namespace lmcc::msg {
namespace {

using internal::node_kind;

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

// -- limits pre-scan ----------------------------------------------------------

// Walks the frame once with msgpack-cxx's SAX parser before any tree is built.
// Every declared array element or map entry needs at least one byte of input,
// so a document whose headers declare more elements than the frame has bytes
// is truncated: it is refused here, before msgpack-cxx would allocate for it.
class limit_scan : public msgpack::null_visitor {
public:
  limit_scan(const decode_limits& limits, size_t frame_size)
    : limits_(limits), frame_size_(frame_size) {}

  bool start_array(uint32_t n) {
    if (declared_ + n > frame_size_)
      return open(n);
    if (n > limits_.max_array_length)
      return refuse("Array of " + std::to_string(n) + " elements exceeds the limit of " +
                    std::to_string(limits_.max_array_length));
    return open(n);
  }
  bool end_array() {
    --depth_;
    return true;
  }
  bool start_map(uint32_t n) {
    if (declared_ + uint64_t{n} * 2 > frame_size_)
      return open(uint64_t{n} * 2);
    if (n > limits_.max_map_length)
      return refuse("Map of " + std::to_string(n) + " entries exceeds the limit of " +
                    std::to_string(limits_.max_map_length));
    return open(uint64_t{n} * 2);
  }
  bool end_map() {
    --depth_;
    return true;
  }
  bool visit_str(const char* data, uint32_t size) {
    if (size > limits_.max_string_bytes)
      return refuse("String of " + std::to_string(size) + " bytes exceeds the limit");
    if (!internal::is_valid_utf8(std::string_view{data, size}))
      return refuse("Invalid UTF-8 in str");
    return true;
  }
  bool visit_bin(const char*, uint32_t size) {
    if (size > limits_.max_string_bytes)
      return refuse("Bytes of " + std::to_string(size) + " bytes exceed the limit");
    return true;
  }
  void parse_error(size_t, size_t) { malformed_ = true; }
  void insufficient_bytes(size_t, size_t) { truncated_ = true; }

  bool truncated() const { return truncated_; }
  bool malformed() const { return malformed_; }
  const std::string& refusal() const { return refusal_; }

private:
  bool open(uint64_t elements) {
    declared_ += elements;
    if (declared_ > frame_size_) {
      truncated_ = true;
      refusal_.clear();
      return false;
    }
    if (++depth_ > limits_.max_depth)
      return refuse("Nesting deeper than the limit of " + std::to_string(limits_.max_depth));
    return true;
  }
  bool refuse(std::string why) {
    refusal_ = std::move(why);
    return false;
  }

  const decode_limits& limits_;
  size_t frame_size_;
  uint64_t declared_ = 0;
  uint32_t depth_ = 0;
  bool truncated_ = false;
  bool malformed_ = false;
  std::string refusal_;
};

// -- tree adapter for the generic walk -----------------------------------------

struct msgpack_adapter {
  using node = msgpack::object;

  static node_kind kind(const node& n) {
    switch (n.type) {
    case msgpack::type::NIL:
      return node_kind::nil;
    case msgpack::type::BOOLEAN:
      return node_kind::boolean;
    case msgpack::type::POSITIVE_INTEGER:
    case msgpack::type::NEGATIVE_INTEGER:
      return node_kind::integer;
    case msgpack::type::FLOAT32:
    case msgpack::type::FLOAT64:
      return node_kind::floating;
    case msgpack::type::STR:
      return node_kind::string;
    case msgpack::type::BIN:
      return node_kind::bytes;
    case msgpack::type::ARRAY:
      return node_kind::array;
    case msgpack::type::MAP:
      return node_kind::object;
    default:
      return node_kind::other;
    }
  }
  static bool get_bool(const node& n) { return n.via.boolean; }
  static wire_int get_int(const node& n) {
    return n.type == msgpack::type::POSITIVE_INTEGER ? wire_int::from_unsigned(n.via.u64)
                                                     : wire_int{n.via.i64};
  }
  static double get_double(const node& n) { return n.via.f64; }
  static std::string_view get_string(const node& n) { return {n.via.str.ptr, n.via.str.size}; }
  static any_bytes get_bytes(const node& n) { return {std::string(n.via.bin.ptr, n.via.bin.size)}; }
  static size_t size(const node& n) {
    return n.type == msgpack::type::ARRAY ? n.via.array.size : n.via.map.size;
  }
  static const node& at(const node& n, size_t i) { return n.via.array.ptr[i]; }
  template <class F>
  static void for_each_entry(const node& n, F&& f) {
    for (uint32_t i = 0; i < n.via.map.size; ++i)
      f(n.via.map.ptr[i].key, n.via.map.ptr[i].val);
  }
  static std::string_view key_string(const node& n) { return get_string(n); }
  static constexpr bool text_keys = false;
};

bool reference_everything(msgpack::type::object_type, size_t, void*) {
  return true; // strings point into the caller's frame; the walk copies what it keeps
}

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
  limit_scan scan{limits, frame.size()};
  size_t offset = 0;
  bool parsed = msgpack::parse(frame.data(), frame.size(), offset, scan);
  if (!scan.refusal().empty())
    return codec_error{scan.refusal()};
  if (scan.malformed())
    return codec_error{"MessagePack data is malformed: invalid opcode"};
  if (scan.truncated() || !parsed)
    return codec_error{"Input data was truncated"};
  try {
    // Like msgspec: the first object is decoded and type-checked, and only then
    // are trailing bytes an error.
    size_t first_end = 0;
    msgpack::object_handle tree = msgpack::unpack(
        frame.data(), offset, first_end, reference_everything, nullptr, msgpack::unpack_limit{});
    internal::walker<msgpack_adapter> walk{limits.max_depth};
    Msg result = walk.read_msg(tree.get());
    if (offset != frame.size())
      return codec_error{"MessagePack data is malformed: trailing characters (byte " +
                         std::to_string(offset) + ")"};
    return result;
  } catch (const internal::walk_failure& f) {
    return internal::to_codec_error(f);
  } catch (const std::exception& e) {
    return codec_error{std::string{"MessagePack data is malformed: "} + e.what()};
  }
}

} // namespace lmcc::msg
