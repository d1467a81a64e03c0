// msgpack_tree: one msgpack frame read into a flat array of nodes, for the
// shared typed walk (decode_walk.hpp). It replaces msgpack-cxx's SAX pre-scan
// plus zone-allocated object tree on the decode path, which cost 4-6x more.
//
// Design: one pass over the bytes, then the walk.
//   The pass makes every check the old pre-scan made, in the same order and
//   with the same words (truncation, the 0xc1 opcode, every decode_limits
//   limit, UTF-8 in every str, map keys and unknown fields included), and
//   fills the node array as it goes. As in msgpack-cxx's tree, a container's
//   children are contiguous (a map's as key, value, key, value, ...), so the
//   walk indexes arrays and maps directly; their run of nodes is reserved when
//   the container's header has passed the checks. Type bytes are decoded
//   through a table, so random 64-bit keys (half uint64, half int64 on the
//   wire) cost no mispredicted branch. Reading values one after the other is
//   a chain (where a value starts depends on the last one's type byte), so two
//   kinds of run are taken in one step, with every type byte at a known
//   offset checked side by side: same-width ints four at a time (key and
//   token arrays), and maps of the exact shape of the map before them in an
//   array (a batch's operations). Whatever does not fit a run, or would be
//   refused, goes the one-value-at-a-time way, which makes every decision.
//   Memory: the node array is allocated once, sized for 4 frame bytes per node
//   (real messages take more) up to 64 KiB; a denser or larger frame grows it
//   as its container headers ask. Every node is some header's declared
//   element, and the declared total never exceeds the frame size, so a frame
//   never costs more than 16 bytes per frame byte, whatever its headers claim.
// Why not a typed streaming decode straight from the bytes: msgspec's rules
// decide on the whole document first and on types second (a truncated or
// over-limit frame is refused as such even when an earlier field has the
// wrong type; the tag may come last in the map), and the typed walk that
// encodes them is shared with the JSON codec. Swapping only what the walk
// walks keeps every decision and error text as it was, at the cost of one
// node (16 bytes) per value.
//
//   auto tree = msgpack_tree::read(frame, limits);  // codec_error when refused
//   walker<msgpack_tree_adapter> walk{limits.max_depth};
//   Msg m = walk.read_msg(tree->root());
//   bool trailing = tree->end() != frame.size();
//
// Private to messages/: include only from codec_*.cpp. Strings and bytes in
// the nodes point into the frame, which must outlive the tree.
#pragma once

#include "messages/any_value.hpp"
#include "messages/expected.hpp"
#include "messages/internal/decode_walk.hpp"
#include "messages/limits.hpp"
#include "messages/wire_int.hpp"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace lmcc::msg::internal {

/// One msgpack value. `kind` is a node_kind; which member of the union holds
/// the value follows from it.
struct msgpack_node {
  node_kind kind; ///< not a char type: stores to it must not alias the reader's state
  bool negative;  ///< integer: below zero, held in `i` (else in `u`)
  uint32_t size;  ///< string/bytes: bytes; array: elements; object: entries
  union {
    bool boolean;
    uint64_t u;
    double f; ///< float32 values are widened, as msgspec does
    const char* bytes;
    /// array, object: how many nodes on the first child sits (`size` children
    /// for an array, 2 * `size` for a map). Relative, so that the array can
    /// grow while it is read.
    size_t first_child;
  };
};
static_assert(sizeof(msgpack_node) == 16);

class msgpack_tree {
public:
  /// Reads the first msgpack object of `frame`, or refuses it with the error
  /// decode_msgpack reports. Bytes after that object are left for the caller
  /// (see end()): msgspec reports them only once the message has been typed.
  static expected<msgpack_tree> read(std::string_view frame, const decode_limits& limits);

  const msgpack_node& root() const noexcept { return nodes_[0]; }

  /// Offset just past the first object.
  size_t end() const noexcept { return end_; }

private:
  msgpack_tree(std::unique_ptr<msgpack_node[]> nodes, size_t end)
    : nodes_(std::move(nodes)), end_(end) {}

  std::unique_ptr<msgpack_node[]> nodes_;
  size_t end_;
};

/// The walk's view of a msgpack_node (the Adapter of decode_walk.hpp).
struct msgpack_tree_adapter {
  using node = msgpack_node;

  static node_kind kind(const node& n) noexcept { return n.kind; }
  static bool get_bool(const node& n) noexcept { return n.boolean; }
  static wire_int get_int(const node& n) noexcept { return wire_int::from_bits(n.u, n.negative); }
  static double get_double(const node& n) noexcept { return n.f; }
  static std::string_view get_string(const node& n) noexcept { return {n.bytes, n.size}; }
  static any_bytes get_bytes(const node& n) { return {std::string(n.bytes, n.size)}; }
  static size_t size(const node& n) noexcept { return n.size; }
  static const node& at(const node& n, size_t i) noexcept { return (&n)[n.first_child + i]; }
  template <class F>
  static void for_each_entry(const node& n, F&& f) {
    const node* entry = &n + n.first_child;
    for (uint32_t i = 0; i < n.size; ++i, entry += 2)
      f(entry[0], entry[1]);
  }
  static std::string_view key_string(const node& n) noexcept { return get_string(n); }
  static constexpr bool text_keys = false;
};

} // namespace lmcc::msg::internal
