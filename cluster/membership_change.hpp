// membership_change: what an operator's new member set (POST /cluster/members)
// becomes — the joint record of the next epoch — or why it is refused.
//
// The checks, in order: no change is still moving slots (the current record is
// committed); every id is in this node's address book (lmcc_cluster_members,
// standby entries included) and listed once; the set is not empty, has at
// least R members and differs from the current one; and every node it adds is
// live (it must copy its slots), while a member that is down may stay (it
// catches up when it returns, as after any failure).
//
//   auto next = propose_members(members, {"n1", "n2", "n4"}, options.replicas);
//   if (!next) refuse(next.error().message); else adopt(*next);
//
// Context: a pure function of the membership view. CAF-free.
#pragma once

#include "cluster/expected.hpp"
#include "cluster/membership.hpp"
#include "cluster/membership_record.hpp"

#include <cstdint>
#include <span>
#include <string>

namespace lmcc::cluster {

/// The record of the change to `ids` (epoch + 1, joint: committed = false,
/// members sorted by id, previous = the current member ids), or an error with
/// code member_change_refused whose message says why, naming the id.
expected<membership_record> propose_members(const membership& members,
                                            std::span<const std::string> ids, uint32_t replicas);

} // namespace lmcc::cluster
