// The pre-scan, tree adapter and decode function below are copied unchanged
// from messages/codec_msgpack.cpp as it was before the single-pass reader
// (commit 89c1391); only the names of the namespace and the entry point differ.
// The walk is the frozen copy in reference_decode_walk.hpp, so the whole old
// path stays as it was while the live one changes.
#include "tests/conformance/reference_msgpack_decoder.hpp"

#include "messages/internal/utf8.hpp"
#include "tests/conformance/reference_decode_walk.hpp"

#include <msgpack.hpp>

#include <string>

namespace lmcc::test {
namespace {

using namespace lmcc::msg;
using msg::reference_walk::node_kind;

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

msg::expected<msg::Msg> reference_decode_msgpack(std::string_view frame,
                                                 const msg::decode_limits& limits) {
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
    reference_walk::walker<msgpack_adapter> walk{limits.max_depth};
    Msg result = walk.read_msg(tree.get());
    if (offset != frame.size())
      return codec_error{"MessagePack data is malformed: trailing characters (byte " +
                         std::to_string(offset) + ")"};
    return result;
  } catch (const reference_walk::walk_failure& f) {
    return reference_walk::to_codec_error(f);
  } catch (const std::exception& e) {
    return codec_error{std::string{"MessagePack data is malformed: "} + e.what()};
  }
}

} // namespace lmcc::test
