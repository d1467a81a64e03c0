// cluster::expected<T>: a value or a cluster::error, returned by everything in
// cluster/ that refuses bad input (an empty or duplicated member list, a slot
// count that is not a power of two, R = 0, ...). The template is
// msg::basic_expected (messages/expected.hpp, header-only, CAF-free); the
// error carries a stable code for programs and a one-line message for people.
//
//   expected<member_set> m = member_set::make({"n1", "n2", "n1"});
//   if (!m) spdlog::error("ring-config-refused code={} error={}",
//                         static_cast<int>(m.error().code), m.error().message);
//
// Context: plain value types, thread-compatible. CAF-free.
#pragma once

#include "messages/expected.hpp"

#include <cstdint>
#include <string>

namespace lmcc::cluster {

/// Why cluster/ refused an input. The numbers are stable (they may reach logs
/// and the status API); new codes get new numbers.
enum class errc : uint8_t {
  /// The member list has no node.
  empty_member_set = 1,
  /// A node id is the empty string.
  empty_node_id = 2,
  /// A node id appears twice in the member list.
  duplicate_node_id = 3,
  /// More members than max_members.
  too_many_members = 4,
  /// slot_count is 0, not a power of two, or above max_slot_count.
  bad_slot_count = 5,
  /// replicas (R) is 0.
  zero_replicas = 6,
  /// virtual_nodes is 0 or above max_virtual_nodes.
  bad_virtual_nodes = 7,
  /// The liveness set names a node that is not a member.
  unknown_node = 8,
  /// Two placements with different slot counts were compared.
  slot_count_mismatch = 9,
  /// No usable cluster secret (missing file or variable, or too short).
  no_secret = 10,
  /// A membership record that cannot be read, stored or adopted.
  bad_membership = 11,
  /// An operator's new member set that cannot be adopted now
  /// (membership_change.hpp says why).
  member_change_refused = 12,
};

/// A refused input: which rule it broke and a one-line message naming the value.
struct error {
  errc code;
  std::string message;
};

template <class T>
using expected = msg::basic_expected<T, error>;

} // namespace lmcc::cluster
