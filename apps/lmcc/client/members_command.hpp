// members_command: `lmcc members add|remove NODE_ID...` and `lmcc drain
// NODE_ID`: a membership change (POST /cluster/members, docs/operations.md
// "Adding and removing nodes") with its progress until it is committed on
// every node.
//
//   lmcc members add n4 [--no-wait] [--endpoints H:P,...] [--output table|json] [--timeout S]
//   -> n2 accepted epoch 1: members n1 n2 n3 n4 (were n1 n2 n3)
//        0s  epoch 1: 0/4 committed: n1 joint, n2 joint, n3 joint, n4 joint 0/2048 slots copied
//        1s  epoch 1: 4/4 committed: n1 committed, n2 committed, n3 committed, n4 committed
//      epoch 1 committed on every node in 1s: members n1 n2 n3 n4
//
// The current member set is GET /cluster/status' `membership.members` from
// the first endpoint that answers; the new one is posted to that node; then
// every node of the old and new sets is asked for its /cluster/status once a
// second (all at once) until each that answers has the change committed
// with its slots copied. lmcc has no drain of its own: `lmcc drain n1` is
// `lmcc members remove n1` that first refuses to leave fewer than R members,
// and says that n1 then owns nothing until it is added back.
//
// --timeout bounds the whole command (default 300 s); each request takes at
// most 5 s of it. Exit codes (docs/client.md): 0 committed (accepted, with
// --no-wait), 1 refused (by the client, or by the node: its reason is
// printed), 2 no endpoint answered, 3 timed out, 4 bad --endpoints.
//
// Context: called from main() only.
#pragma once

#include "apps/lmcc/client/endpoints.hpp"

#include <ostream>
#include <string>
#include <vector>

namespace lmcc::apps::client {

/// Exit codes of `lmcc members` and `lmcc drain` where they differ from the shared ones.
enum members_exit_code : int {
  exit_refused = 1,   ///< the client or the node refused the change
  exit_timed_out = 3, ///< not committed everywhere within --timeout
};

/// `verb`: "add" or "remove".
int run_members(const client_options& options, const std::string& verb,
                const std::vector<std::string>& ids, bool no_wait, std::ostream& out,
                std::ostream& err);

int run_drain(const client_options& options, const std::string& node, bool no_wait,
              std::ostream& out, std::ostream& err);

} // namespace lmcc::apps::client
