// Builds a json_tree from simdjson On-Demand, one value at a time, with the
// limits checked as each arrives and repeated keys collapsed as json.loads does
// (see json_tree.hpp).
#include "messages/internal/json_tree.hpp"

#include "messages/json_text_reader.hpp"

#include <algorithm>
#include <numeric>
#include <string>

namespace lmcc::msg::internal {
namespace {

namespace sj = simdjson::ondemand;

void check(simdjson::error_code e) {
  if (e != simdjson::SUCCESS)
    throw json_syntax_error{e};
}

/// Objects up to this size are searched for repeated keys pair by pair (at most
/// 120 comparisons, most ending at the first byte); larger ones are sorted.
constexpr size_t pairwise_key_check_limit = 16;

} // namespace

void json_tree::build(sj::value value) {
  root_ = read_value(value, 1);
}

json_node json_tree::read_value(sj::value& value, uint32_t depth) {
  sj::json_type type;
  check(value.type().get(type));
  json_node node;
  switch (type) {
  case sj::json_type::array:
    return read_array(value, depth);
  case sj::json_type::object:
    return read_object(value, depth);
  case sj::json_type::string: {
    std::string_view text;
    check(value.get_string().get(text));
    return read_string(text);
  }
  case sj::json_type::number: {
    json_number number;
    check(read_json_number(value, number));
    switch (number.kind) {
    case json_number_kind::signed_integer:
      node.kind = node_kind::integer;
      node.negative = number.signed_value < 0;
      node.bits = static_cast<uint64_t>(number.signed_value);
      break;
    case json_number_kind::unsigned_integer:
      node.kind = node_kind::integer;
      node.bits = number.unsigned_value;
      break;
    case json_number_kind::floating:
      node.kind = node_kind::floating;
      node.number = number.floating_value;
      break;
    }
    return node;
  }
  case sj::json_type::boolean: {
    bool flag = false;
    check(value.get_bool().get(flag));
    node.kind = node_kind::boolean;
    node.bits = flag ? 1 : 0;
    return node;
  }
  case sj::json_type::null: {
    bool is_null = false;
    check(value.is_null().get(is_null));
    if (!is_null) // "nul", "nullx"
      throw json_syntax_error{simdjson::N_ATOM_ERROR};
    return node; // kind nil
  }
  }
  throw json_syntax_error{simdjson::TAPE_ERROR};
}

json_node json_tree::read_string(std::string_view text) const {
  if (text.size() > limits_.max_string_bytes)
    fail("String of " + std::to_string(text.size()) + " bytes exceeds the limit");
  json_node node;
  node.kind = node_kind::string;
  node.size = static_cast<uint32_t>(text.size());
  node.text = text.data();
  return node;
}

void json_tree::enter_container(uint32_t depth) const {
  if (depth > limits_.max_depth)
    fail("Nesting deeper than the limit of " + std::to_string(limits_.max_depth));
}

json_node json_tree::read_array(sj::value& value, uint32_t depth) {
  enter_container(depth);
  sj::array array;
  check(value.get_array().get(array));
  const size_t start = open_.size();
  uint32_t count = 0;
  for (auto element : array) {
    sj::value item;
    check(element.get(item));
    if (count == limits_.max_array_length)
      fail("Array exceeds the limit of " + std::to_string(limits_.max_array_length) + " elements");
    json_node item_node = read_value(item, depth + 1);
    open_.push_back(item_node);
    ++count;
  }
  json_node node;
  node.kind = node_kind::array;
  node.size = count;
  node.items = close_container(start, count);
  return node;
}

json_node json_tree::read_object(sj::value& value, uint32_t depth) {
  enter_container(depth);
  sj::object object;
  check(value.get_object().get(object));
  const size_t start = open_.size();
  uint32_t count = 0;
  for (auto field : object) {
    std::string_view key;
    check(field.unescaped_key().get(key));
    if (count == limits_.max_map_length)
      fail("Map exceeds the limit of " + std::to_string(limits_.max_map_length) + " entries");
    open_.push_back(read_string(key));
    sj::value field_value;
    check(field.value().get(field_value));
    json_node value_node = read_value(field_value, depth + 1);
    open_.push_back(value_node);
    ++count;
  }
  const size_t entries = collapse_repeated_keys(open_.data() + start, count);
  json_node node;
  node.kind = node_kind::object;
  node.size = static_cast<uint32_t>(entries);
  node.items = close_container(start, 2 * entries);
  return node;
}

const json_node* json_tree::close_container(size_t start, size_t count) {
  json_node* items = nullptr;
  if (count > 0) {
    void* block = arena_.allocate(count * sizeof(json_node), alignof(json_node));
    items = static_cast<json_node*>(block);
    std::copy_n(open_.data() + start, count, items);
  }
  open_.resize(start);
  return items;
}

bool json_tree::any_repeated_key(const json_node* entries, size_t count) {
  auto key = [&](size_t i) { return entries[2 * i].string(); };
  if (count <= pairwise_key_check_limit) {
    for (size_t i = 0; i < count; ++i)
      for (size_t j = i + 1; j < count; ++j)
        if (key(i) == key(j))
          return true;
    return false;
  }
  // Sorted by key, then by position: a repeated key's occurrences end up side by
  // side, first occurrence first.
  order_.resize(count);
  std::iota(order_.begin(), order_.end(), uint32_t{0});
  std::sort(order_.begin(), order_.end(), [&](uint32_t a, uint32_t b) {
    int c = key(a).compare(key(b));
    return c != 0 ? c < 0 : a < b;
  });
  for (size_t i = 1; i < count; ++i)
    if (key(order_[i - 1]) == key(order_[i]))
      return true;
  return false;
}

size_t json_tree::collapse_repeated_keys(json_node* entries, size_t count) {
  if (count < 2 || !any_repeated_key(entries, count))
    return count;
  auto key = [&](size_t i) { return entries[2 * i].string(); };
  // value_of_[i]: for a key's first occurrence i, the entry whose value it takes
  // (its last occurrence); for every later occurrence, `dropped`.
  constexpr uint32_t dropped = UINT32_MAX;
  value_of_.assign(count, 0);
  std::iota(value_of_.begin(), value_of_.end(), uint32_t{0});
  if (count <= pairwise_key_check_limit) {
    for (size_t i = 0; i < count; ++i) {
      if (value_of_[i] == dropped)
        continue;
      for (size_t j = i + 1; j < count; ++j)
        if (key(i) == key(j)) {
          value_of_[i] = static_cast<uint32_t>(j);
          value_of_[j] = dropped;
        }
    }
  } else {
    // any_repeated_key left order_ sorted by (key, position).
    for (size_t group = 0; group < count;) {
      size_t end = group + 1;
      while (end < count && key(order_[end]) == key(order_[group]))
        ++end;
      value_of_[order_[group]] = order_[end - 1];
      for (size_t k = group + 1; k < end; ++k)
        value_of_[order_[k]] = dropped;
      group = end;
    }
  }
  // In place: entry i moves to slot kept <= i and takes its value from an entry
  // at or after i, so no source is overwritten before it is read.
  size_t kept = 0;
  for (size_t i = 0; i < count; ++i) {
    if (value_of_[i] == dropped)
      continue;
    const json_node value = entries[2 * value_of_[i] + 1];
    entries[2 * kept] = entries[2 * i];
    entries[2 * kept + 1] = value;
    ++kept;
  }
  return kept;
}

} // namespace lmcc::msg::internal
