// membership_record: which configured nodes own data, as a versioned record
// every node keeps, gossips and writes to its data dir.
//
// lmcc_cluster_members lists every node a node can talk to (its address book,
// the "universe"); the record says which of them are members, i.e. own slots
// and home workers. A change of the member set (adding a node, removing one)
// is a new record with the next epoch, made at one node (POST
// /cluster/members) and spread with the greetings: a node that greets with an
// older record is sent the newer one. A change goes through two records:
//
//   epoch E, committed=false  (joint) writes go to the owners under both the
//                             previous and the new member set; reads come from
//                             owners that held the slot before; every node
//                             copies the slots it gains (slot_mover.hpp);
//   epoch E, committed=true   every live new member has its slots: the new
//                             member set alone places writes, reads and homes,
//                             and nodes drop the slots they no longer own.
//
// The previous member set stays in the committed record: a node that gained a
// slot in the last change is the junior owner of that slot for anti-entropy
// (it copies from an owner that held the slot throughout, never the reverse).
//
// A node restarting reads its record (membership.json in its data dir), so it
// comes back with the current member set even if its YAML is older; a record
// naming a node missing from the YAML brings that node's address along.
//
//   auto rec = membership_record::initial(opts.members);   // epoch 0
//   if (supersedes(received, rec)) adopt(received);
//   store_record(path, rec);                               // atomic replace
//
// Context: plain values and pure functions, plus a file load/store. CAF-free.
#pragma once

#include "cluster/cluster_options.hpp"
#include "cluster/expected.hpp"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace lmcc::cluster {

struct membership_record {
  /// 0 for the member set of the configuration; +1 per change.
  uint64_t epoch = 0;
  /// The members after the change, sorted by id, with their addresses.
  std::vector<member_address> members;
  /// The member ids before the change (sorted); equal to members' at epoch 0.
  std::vector<std::string> previous;
  /// false while the data moves (joint placement), true once it has.
  bool committed = true;

  /// The non-standby entries of the configured list, epoch 0, committed.
  static membership_record initial(const std::vector<member_address>& configured);

  std::vector<std::string> member_ids() const;
  bool is_member(std::string_view id) const noexcept;
  bool was_member(std::string_view id) const noexcept;
  /// Hash of (epoch, member ids, previous ids): two records of one epoch made
  /// at two nodes at once differ here, and the larger wins everywhere.
  uint64_t identity() const noexcept;

  friend bool operator==(const membership_record&, const membership_record&) = default;
};

/// Does `a` replace `b`? Later epoch first, then identity (a tie between two
/// concurrent changes), then committed over joint.
bool supersedes(const membership_record& a, const membership_record& b) noexcept;

/// Longest record text parsed. It is parsed as a whole document, which costs
/// tens of bytes per byte of text; a record of 64 members (a cluster's most)
/// with ids and hosts of hundreds of bytes is under 50 KiB.
inline constexpr size_t max_record_bytes = size_t{1} << 20;

/// The record as one JSON object (also what /cluster/status shows).
std::string to_json(const membership_record& r);
/// Parses to_json()'s output; refuses a text past max_record_bytes, missing
/// fields, an empty member set and members without an address.
expected<membership_record> record_from_json(std::string_view text);

/// The record stored at `path`, or nullopt when there is none.
expected<std::optional<membership_record>> load_record(const std::string& path);
/// Writes `r` to `path` through a temporary file, fsync and rename: a crash
/// leaves the old record or the new one, never a torn one.
expected<bool> store_record(const std::string& path, const membership_record& r);

} // namespace lmcc::cluster
