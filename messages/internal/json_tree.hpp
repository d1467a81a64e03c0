// json_tree: a JSON document as the generic decode walk (decode_walk.hpp) reads
// it, built in one pass over simdjson On-Demand with decode_limits enforced
// while it is read.
//
// Why not a DOM library: nlohmann's ordered_json inserts each object key by a
// linear scan (80k keys took seconds), and it checks array and map lengths only
// once a container is complete. Here every value is visited once, the nesting,
// string, array and map limits are checked as each value arrives (the map limit
// counts every entry, repeated keys included, since each costs work), and the
// work is linear in the text apart from the repeated-key check.
//
// Repeated keys keep Python's json module's meaning, as LMCache parses JSON
// frames with json.loads before msgspec.convert: one entry per key, at the
// position of its first occurrence, holding the value of its last; the values
// overwritten never reach the walk, so they are not type-checked. Finding them
// costs O(n log n) key comparisons for an object of n > 16 entries (a sort, not
// a hash table, so that no choice of keys can make it quadratic).
//
// Nodes are 16 bytes; containers hold their children in one array from an
// arena, objects as (key, value) pairs. Strings point into the parser that read
// the document (json_text_reader): the tree is valid until that reader's next read.
//
//   json_tree tree{limits};
//   reader->read(text, [&](simdjson::ondemand::value v) { tree.build(v); });
//   walker<json_tree_adapter> walk{limits.max_depth};
//   Msg m = walk.read_msg(tree.root());
//
// Private to messages/. Context: one tree per document, not thread-safe.
#pragma once

#include "messages/internal/decode_walk.hpp"
#include "messages/limits.hpp"

#include <simdjson.h>

#include <cstddef>
#include <cstdint>
#include <memory_resource>
#include <string_view>
#include <vector>

namespace lmcc::msg::internal {

/// The JSON text is malformed: thrown by json_tree::build with simdjson's reason.
struct json_syntax_error {
  simdjson::error_code code;
};

struct json_node {
  node_kind kind : 8 = node_kind::nil; // 8 bits: the node fits 16 bytes
  bool negative = false;               ///< integer: `bits` holds an int64_t below zero
  uint32_t size = 0;                   ///< string: bytes; array: elements; object: entries
  union {
    uint64_t bits = 0;      ///< boolean (0/1) and integer
    double number;          ///< floating
    const char* text;       ///< string
    const json_node* items; ///< array: `size` nodes; object: `size` (key, value) pairs
  };

  std::string_view string() const { return {text, size}; }
};
static_assert(sizeof(json_node) == 16);

class json_tree {
public:
  explicit json_tree(const decode_limits& limits) : limits_(limits) {}
  json_tree(const json_tree&) = delete;
  json_tree& operator=(const json_tree&) = delete;

  /// Reads `value` and everything inside it into the tree. Throws walk_failure for
  /// a broken limit and json_syntax_error for malformed JSON.
  void build(simdjson::ondemand::value value);

  /// The document's root; REQUIRES: build() returned.
  const json_node& root() const { return root_; }

private:
  // -- reading ---------------------------------------------------------------------

  json_node read_value(simdjson::ondemand::value& value, uint32_t depth);
  json_node read_array(simdjson::ondemand::value& value, uint32_t depth);
  json_node read_object(simdjson::ondemand::value& value, uint32_t depth);
  json_node read_string(std::string_view text) const;
  void enter_container(uint32_t depth) const;

  // -- repeated keys ---------------------------------------------------------------

  /// Collapses repeated keys among the `count` (key, value) pairs at `entries`
  /// in place, as a Python dict would; answers how many entries remain.
  size_t collapse_repeated_keys(json_node* entries, size_t count);
  bool any_repeated_key(const json_node* entries, size_t count);

  /// Copies the nodes from open_[start] on into the arena and drops them from open_.
  const json_node* close_container(size_t start, size_t count);

  // -- member variables --------------------------------------------------------------

  const decode_limits& limits_;
  std::pmr::monotonic_buffer_resource arena_;
  /// Children of the containers still being read, innermost container last.
  std::vector<json_node> open_;
  /// Scratch for collapse_repeated_keys: entry indices, then where each value comes from.
  std::vector<uint32_t> order_;
  std::vector<uint32_t> value_of_;
  json_node root_;
};

/// The walk's view of a json_tree (see the Adapter requirements in decode_walk.hpp).
struct json_tree_adapter {
  using node = json_node;

  static node_kind kind(const node& n) { return n.kind; }
  static bool get_bool(const node& n) { return n.bits != 0; }
  static wire_int get_int(const node& n) {
    return n.negative ? wire_int{static_cast<int64_t>(n.bits)} : wire_int::from_unsigned(n.bits);
  }
  static double get_double(const node& n) { return n.number; }
  static std::string_view get_string(const node& n) { return n.string(); }
  static any_bytes get_bytes(const node&) { return {}; } // JSON has no bytes
  static size_t size(const node& n) { return n.size; }
  static const node& at(const node& n, size_t i) { return n.items[i]; }
  template <class F>
  static void for_each_entry(const node& n, F&& f) {
    for (size_t i = 0; i < n.size; ++i)
      f(n.items[2 * i], n.items[2 * i + 1]);
  }
  static std::string_view key_string(const node& n) { return n.string(); }
  /// JSON object keys are always text; int-keyed dicts carry digits.
  static constexpr bool text_keys = true;
};

} // namespace lmcc::msg::internal
