// msgpack_tree::read: one pass over the bytes (see msgpack_tree.hpp for the design).
//
// It reproduces, decision for decision, what the old decoder's limits
// pre-scan did on top of msgpack-cxx's parser (tests/conformance/
// reference_msgpack_decoder.cpp keeps that code): it stops at the first of
//   - a value whose header or bytes run past the frame: truncated;
//   - the never-used type byte 0xc1: malformed;
//   - containers declaring, in total, more elements than the frame has bytes
//     (each element needs one): truncated, checked before any limit;
//   - an array or map longer than its limit, then nesting deeper than the limit;
//   - a str longer than the string limit, then a str that is not UTF-8
//     (checked only once its bytes are known to be present);
//   - a bin longer than the string limit.
// msgpack_differential_test holds the two decoders to the same results.
#include "messages/internal/msgpack_tree.hpp"

#include "messages/internal/msgpack_bytes.hpp"

#include <algorithm>
#include <array>
#include <vector>

namespace lmcc::msg::internal {
namespace {

/// The containers open around the current value, innermost on top: inline up
/// to the default depth limit, on the heap only under a larger configured
/// one, and then no larger than the nesting actually met.
template <class T>
class open_containers {
public:
  open_containers() = default;
  open_containers(const open_containers&) = delete;
  open_containers& operator=(const open_containers&) = delete;

  bool empty() const noexcept { return size_ == 0; }
  size_t size() const noexcept { return size_; }
  T& top() noexcept { return data_[size_ - 1]; }
  void push(T v) {
    if (size_ == capacity_)
      grow();
    data_[size_++] = v;
  }
  void pop() noexcept { --size_; }

private:
  void grow() {
    std::vector<T> bigger(2 * capacity_);
    std::copy(data_, data_ + size_, bigger.begin());
    spill_ = std::move(bigger);
    data_ = spill_.data();
    capacity_ = spill_.size();
  }

  std::array<T, 64> inline_;
  std::vector<T> spill_;
  T* data_ = inline_.data();
  size_t size_ = 0;
  size_t capacity_ = inline_.size();
};

// -- the reader -------------------------------------------------------------------

/// One pass over the first object of a frame: every check, and the nodes.
///
/// The read position and the innermost container's run of children live in
/// locals of run(), handed by reference to helpers that are always inlined:
/// as members they would be reloaded from memory after every node store
/// (a node's fields may alias them as far as the compiler knows), and that
/// reload sits on the chain from one value's type byte to the next.
class frame_reader {
public:
  frame_reader(std::string_view frame, const decode_limits& limits)
    : data_(reinterpret_cast<const unsigned char*>(frame.data())), size_(frame.size()),
      limits_(limits) {}

  /// Reads the first object; on failure `error()` says why.
  bool run() {
    // Real messages take 4 bytes or more per value (keys are strings), so this
    // is usually the only allocation. A denser frame grows the array, never
    // past one node per frame byte; a frame of a few big strings, or larger
    // than 64 KiB, starts at 64 KiB of nodes and grows only as its container
    // headers ask.
    reserve(std::min(size_ / 4 + 16, max_first_reservation));
    used_ = 1;
    size_t pos = 0;
    open_run inner{0, 1, 0, node_kind::nil}; // a run of one: the root
    for (;;) {
      size_t target = inner.next++;
      --inner.left;
      if (pos == size_)
        return truncated();
      if (!value(pos, target, inner))
        return false;
      while (inner.left == 0) {
        if (open_.empty()) {
          end_ = pos;
          return true;
        }
        open_run finished = inner;
        inner = open_.top();
        open_.pop();
        if (finished.kind == node_kind::object && inner.kind == node_kind::array)
          struct_run(pos, finished.start, inner);
      }
    }
  }

  size_t end() const noexcept { return end_; }
  std::unique_ptr<msgpack_node[]> take_nodes() && { return std::move(nodes_); }
  codec_error error() && { return {std::move(error_)}; }

private:
  static constexpr size_t max_first_reservation = 4096; // nodes: 64 KiB

  /// The children of an open container that are still to be read.
  struct open_run {
    size_t next; ///< the node the next child fills
    uint64_t left;
    size_t start;   ///< where the container's header is
    node_kind kind; ///< array or object (nil: the root's run of one)
  };

  /// The most values a struct run copies the shape of (a map of 8 entries),
  /// and the longest element it takes, in 8-byte words.
  static constexpr size_t max_struct_values = 16;
  static constexpr size_t max_struct_words = 16;

  bool have(size_t pos, uint64_t n) const noexcept { return n <= size_ - pos; }

  // Refusals are rare: kept out of line, so that the checks inline small.
  [[gnu::cold, gnu::noinline]] bool truncated() { return fail("Input data was truncated"); }
  [[gnu::cold, gnu::noinline]] bool fail(std::string why) {
    error_ = std::move(why);
    return false;
  }
  [[gnu::cold, gnu::noinline]] bool refuse_length(const char* what, uint64_t length,
                                                  const char* limit) {
    return fail(what + std::to_string(length) + limit);
  }
  [[gnu::cold, gnu::noinline]] bool refuse_length(uint64_t n, bool is_map) {
    if (is_map)
      return fail("Map of " + std::to_string(n) + " entries exceeds the limit of " +
                  std::to_string(limits_.max_map_length));
    return fail("Array of " + std::to_string(n) + " elements exceeds the limit of " +
                std::to_string(limits_.max_array_length));
  }
  [[gnu::cold, gnu::noinline]] bool refuse_depth() {
    return fail("Nesting deeper than the limit of " + std::to_string(limits_.max_depth));
  }

  /// Reads the value at `pos` into node `target`. A non-empty container's
  /// header becomes the new `inner` run (the old one is pushed): its children
  /// are read next, into the nodes reserved for them.
  [[gnu::always_inline]] bool value(size_t& pos, size_t target, open_run& inner) {
    const unsigned c = data_[pos];
    if ((c & 0xe0) == 0xa0) // fixstr, the commonest value: no table on its path
      return str(pos, target, 1, c & 0x1fu);
    const type_byte& b = type_bytes[c];
    if (c - 0xccu < 8) { // uint8..64, int8..64: keys, seq_nums, tokens
      // The width comes from the type byte's low bits, not from the table:
      // the next value's position waits for it, and a load takes longer.
      size_t length = 1 + (size_t{1} << (c & 3));
      if (!have(pos, length))
        return truncated();
      integer(nodes_[target], b, pos + length);
      pos += length;
      integer_run(pos, length, inner);
      return true;
    }
    // Then other scalars and small maps (structs), before the jump table:
    // plain branches on the commonest roles predict better than an indirect jump.
    if (b.role == byte_role::fixed) {
      if (!have(pos, b.length))
        return truncated();
      scalar(pos, nodes_[target], b);
      if (b.kind == node_kind::integer)
        integer_run(pos, b.length, inner);
      return true;
    }
    if (b.role == byte_role::fixmap)
      return container(pos, target, 1, c & 0x0fu, true, inner);
    uint64_t length = 0;
    switch (b.role) {
    case byte_role::fixed: // taken above
    case byte_role::fixmap:
    case byte_role::fixstr:
    case byte_role::str:
      return read_length(pos, b.length, length) && str(pos, target, 1 + b.length, length);
    case byte_role::bin:
      return read_length(pos, b.length, length) && bin(pos, target, 1 + b.length, length);
    case byte_role::ext: // the length counts the data, not the ext's type byte
      if (!read_length(pos, b.length, length) || !have(pos, 1 + b.length + 1 + length))
        return truncated();
      nodes_[target].kind = node_kind::other;
      pos += 1 + b.length + 1 + length;
      return true;
    case byte_role::fixarray:
      return container(pos, target, 1, c & 0x0fu, false, inner);
    case byte_role::array:
      return read_length(pos, b.length, length) &&
             container(pos, target, 1 + b.length, length, false, inner);
    case byte_role::map:
      return read_length(pos, b.length, length) &&
             container(pos, target, 1 + b.length, length, true, inner);
    case byte_role::invalid:
      break;
    }
    return fail("MessagePack data is malformed: invalid opcode");
  }

  [[gnu::always_inline]] bool read_length(size_t pos, unsigned width, uint64_t& length) {
    if (!have(pos, 1 + width))
      return truncated();
    length = load_big_endian(data_ + pos + 1, width);
    return true;
  }

  /// A scalar of b.length bytes, all present.
  [[gnu::always_inline]] void scalar(size_t& pos, msgpack_node& n, const type_byte& b) {
    n.kind = b.kind;
    switch (b.kind) {
    case node_kind::integer:
      integer(n, b, pos + b.length);
      break;
    case node_kind::boolean:
      n.boolean = data_[pos] == 0xc3;
      break;
    case node_kind::floating:
      if (b.length == 5) // float32, widened as msgspec does
        n.f = std::bit_cast<float>(static_cast<uint32_t>(load_big_endian(data_ + pos + 1, 4)));
      else
        n.f = std::bit_cast<double>(load_big_endian(data_ + pos + 1, 8));
      break;
    default: // nil, fixext
      break;
    }
    pos += b.length;
  }

  /// Any int ending at `end`, without a branch on its width or sign: the
  /// eight bytes that end there hold it in their low bytes (a fixint is its
  /// own type byte), and shifting it up and back down extends its sign or
  /// zeroes the rest. A signed encoding of a non-negative value is an
  /// ordinary unsigned int, as msgspec (and msgpack-cxx before) read it.
  [[gnu::always_inline]] void integer(msgpack_node& n, const type_byte& b,
                                      size_t end) const noexcept {
    uint64_t raw = 0;
    if (end >= 8) {
      raw = load_big_endian(data_ + end - 8, 8);
    } else { // within the frame's first 8 bytes: only there could that start before it
      for (size_t i = 0; i < end; ++i)
        raw = (raw << 8) | data_[i];
    }
    integer_from(n, b, raw);
  }

  /// The int whose bytes end the big-endian word `raw`.
  [[gnu::always_inline]] static void integer_from(msgpack_node& n, const type_byte& b,
                                                  uint64_t raw) noexcept {
    uint64_t up = raw << b.int_shift;
    auto as_signed = static_cast<int64_t>(up) >> b.int_shift;
    n.kind = node_kind::integer;
    n.negative = b.is_signed && as_signed < 0;
    n.u = b.is_signed ? static_cast<uint64_t>(as_signed) : up >> b.int_shift;
  }

  /// After an int of `width` bytes, the ints of the same width that follow it
  /// in its container, four at a time. Checking four type bytes at known
  /// offsets at once breaks the chain "where a value starts depends on the
  /// last one's type byte" that otherwise bounds an array of keys or tokens.
  [[gnu::always_inline]] void integer_run(size_t& pos, size_t width, open_run& inner) {
    if (pos < 8)
      return;
    while (inner.left >= 4 && have(pos, 4 * width)) {
      const type_byte* bs[4];
      bool same = true;
      for (size_t k = 0; k < 4; ++k) {
        bs[k] = &type_bytes[data_[pos + k * width]];
        same &= bs[k]->kind == node_kind::integer && bs[k]->length == width &&
                bs[k]->role == byte_role::fixed;
      }
      if (!same)
        return;
      for (size_t k = 0; k < 4; ++k)
        integer(nodes_[inner.next + k], *bs[k], pos + (k + 1) * width);
      pos += 4 * width;
      inner.next += 4;
      inner.left -= 4;
    }
  }

  /// After a map element of an array that held only fixstrs and fixed-size
  /// scalars, the elements after it that have its exact shape: the same map
  /// header, and at each of its values' offsets a value of the same shape
  /// (the same fixstr type byte, or the same kind and width of scalar). Their
  /// type bytes sit at known offsets, so they are checked side by side rather
  /// than one after the other, each waiting for the last one's length: an
  /// array of structs (a batch's operations) reads at several times the speed.
  /// An element that differs in any way, or that any check would refuse, is
  /// left to value(), which then decides and words everything as before; an
  /// element taken here passes every check value() makes (its lengths, depth
  /// and map size are the first element's, which passed them).
  void struct_run(size_t& pos, size_t element_start, open_run& array) {
    const unsigned header = data_[element_start];
    const size_t count = 2 * size_t{header & 0x0fu};
    if ((header & 0xf0) != 0x80 || count == 0 || count > max_struct_values)
      return;
    std::array<uint16_t, max_struct_values> shape;
    std::array<size_t, max_struct_values> offset;
    // Which bytes of an element are string text, 8 at a time: one pass of
    // loads and ORs says whether all its strings are ASCII (valid UTF-8).
    std::array<uint64_t, max_struct_words> text_mask{};
    size_t span = 1;
    for (size_t i = 0; i < count; ++i) {
      shape[i] = shapes[data_[element_start + span]];
      if (shape[i] == 0)
        return; // a nested container, or a str, bin or ext with a length field
      offset[i] = span;
      span += shape_bytes(shape[i]);
      if (span > 8 * max_struct_words)
        return;
      if (is_fixstr_shape(shape[i]))
        for (size_t b = offset[i] + 1; b < span; ++b)
          text_mask[b / 8] |= uint64_t{0xff}
                              << (std::endian::native == std::endian::little ? 8 * (b % 8)
                                                                             : 56 - 8 * (b % 8));
    }
    const size_t words = (span + 7) / 8;
    if (pos < 8)
      return;
    // The word loads may run past the element, never past the frame.
    while (array.left != 0 && have(pos, 8 * words) && data_[pos] == header &&
           declared_ + count <= size_) {
      bool same = true;
      for (size_t i = 0; i < count; ++i)
        same &= shapes[data_[pos + offset[i]]] == shape[i];
      if (!same)
        return;
      uint64_t text = 0;
      for (size_t w = 0; w < words; ++w)
        text |= load_native(data_ + pos + 8 * w) & text_mask[w];
      if ((text & 0x8080808080808080) != 0)
        return; // non-ASCII text: value() checks it as UTF-8
      reserve(used_ + count);
      size_t target = array.next++;
      --array.left;
      msgpack_node& map = nodes_[target];
      map.kind = node_kind::object;
      map.size = static_cast<uint32_t>(count / 2);
      map.first_child = used_ - target;
      for (size_t i = 0; i < count; ++i) {
        size_t at = pos + offset[i];
        msgpack_node& n = nodes_[used_ + i];
        size_t bytes = shape_bytes(shape[i]);
        if (is_fixstr_shape(shape[i])) {
          n.kind = node_kind::string;
          n.size = static_cast<uint32_t>(bytes - 1);
          n.bytes = reinterpret_cast<const char*>(data_ + at + 1);
        } else if (shape[i] >> 8 == static_cast<unsigned>(node_kind::integer)) {
          // pos >= 8 (checked above), so the word that ends the int is in the frame
          integer_from(n, type_bytes[data_[at]], load_big_endian(data_ + at + bytes - 8, 8));
        } else {
          scalar(at, n, type_bytes[data_[at]]);
        }
      }
      declared_ += count;
      used_ += count;
      pos += span;
    }
  }

  [[gnu::always_inline]] bool str(size_t& pos, size_t target, uint64_t header, uint64_t length) {
    if (!have(pos, header + length))
      return truncated();
    if (length > limits_.max_string_bytes)
      return refuse_length("String of ", length, " bytes exceeds the limit");
    if (!is_valid_utf8_text(data_ + pos + header, length, data_ + size_))
      return fail("Invalid UTF-8 in str");
    bytes(pos, nodes_[target], node_kind::string, header, length);
    return true;
  }

  bool bin(size_t& pos, size_t target, uint64_t header, uint64_t length) {
    if (!have(pos, header + length))
      return truncated();
    if (length > limits_.max_string_bytes)
      return refuse_length("Bytes of ", length, " bytes exceed the limit");
    bytes(pos, nodes_[target], node_kind::bytes, header, length);
    return true;
  }

  [[gnu::always_inline]] void bytes(size_t& pos, msgpack_node& n, node_kind kind, uint64_t header,
                                    uint64_t length) {
    n.kind = kind;
    n.size = static_cast<uint32_t>(length);
    n.bytes = reinterpret_cast<const char*>(data_ + pos + header);
    pos += header + length;
  }

  [[gnu::always_inline]] bool container(size_t& pos, size_t target, uint64_t header, uint64_t n,
                                        bool is_map, open_run& inner) {
    uint64_t count = is_map ? 2 * n : n;
    if (declared_ + count > size_)
      return truncated();
    if (n > (is_map ? limits_.max_map_length : limits_.max_array_length))
      return refuse_length(n, is_map);
    declared_ += count;
    if (open_.size() + 1 > limits_.max_depth) // open_ holds one run per open container
      return refuse_depth();
    // Every node but the root is some container's declared element, so
    // used_ <= 1 + declared_ <= 1 + size_: the array stays within the frame.
    reserve(used_ + count);
    msgpack_node& node = nodes_[target];
    node.kind = is_map ? node_kind::object : node_kind::array;
    node.size = static_cast<uint32_t>(n);
    node.first_child = used_ - target;
    if (count != 0) {
      open_.push(inner);
      inner = {used_, count, pos, node.kind};
    }
    used_ += count;
    pos += header;
    return true;
  }

  void reserve(size_t nodes) {
    if (nodes <= capacity_)
      return;
    size_t grown = std::max(nodes, std::min(2 * capacity_, size_ + 1));
    auto bigger = std::make_unique_for_overwrite<msgpack_node[]>(grown);
    if (used_ != 0)
      std::memcpy(bigger.get(), nodes_.get(), used_ * sizeof(msgpack_node));
    nodes_ = std::move(bigger);
    capacity_ = grown;
  }

  const unsigned char* data_;
  size_t size_;
  const decode_limits& limits_;
  size_t end_ = 0;
  uint64_t declared_ = 0; ///< elements declared by every container header so far
  std::unique_ptr<msgpack_node[]> nodes_;
  size_t capacity_ = 0;
  size_t used_ = 0; ///< nodes filled or reserved for declared children
  /// The runs of the containers around `inner`, the root's run of one at the
  /// bottom: one entry per open container.
  open_containers<open_run> open_;
  std::string error_;
};

} // namespace

expected<msgpack_tree> msgpack_tree::read(std::string_view frame, const decode_limits& limits) {
  frame_reader reader{frame, limits};
  if (!reader.run())
    return std::move(reader).error();
  size_t end = reader.end();
  return msgpack_tree{std::move(reader).take_nodes(), end};
}

} // namespace lmcc::msg::internal
