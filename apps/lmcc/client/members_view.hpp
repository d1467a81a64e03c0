// members_view: the pure half of `lmcc members add|remove` and `lmcc drain`:
// the member set to ask for (from the current one, as GET /cluster/status'
// `membership.members` says), and how far a membership change has got on
// each node (their /cluster/status: `membership.epoch`, `state` joint or
// committed, `slots_copied` of `slots_to_copy`), as one progress line.
//
//   auto next = members_after({"n1", "n2", "n3"}, {"n4"}, {});      // n1 n2 n3 n4
//   auto left = drain_members({"n1", "n2", "n3"}, "n1", 2);          // n2 n3, or why not
//   node_progress p = progress_of("n4", &n4_status);                 // or progress_of("n4",
//   nullptr, "refused") change_progress c = judge_change(1, {p1, p2, p3, p4});
//   -> c.done, c.summary == "1/4 committed: n1 joint, n2 joint, n3 joint, n4 copying 120/1024
//   slots"
//
// Context: pure functions, reentrant.
#pragma once

#include "messages/expected.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace lmcc::apps::client {

/// `current` with `add` added and `remove` removed, sorted by id (as the
/// nodes keep it). Fails when an added id is already a member, a removed
/// one is not, an id is blank or given twice, or nothing changes.
[[nodiscard]] msg::expected<std::vector<std::string>>
members_after(const std::vector<std::string>& current, const std::vector<std::string>& add,
              const std::vector<std::string>& remove);

/// `current` without `node`, for `lmcc drain`: fails when `node` is not a
/// member or when fewer than `replicas` (R) members would be left.
[[nodiscard]] msg::expected<std::vector<std::string>>
drain_members(const std::vector<std::string>& current, const std::string& node, size_t replicas);

/// "n1 n2 n3".
std::string join_ids(const std::vector<std::string>& ids);

/// One node's part in a change, from its /cluster/status.
struct node_progress {
  std::string id;
  bool answered = false;
  std::string error; ///< why it did not answer
  uint64_t epoch = 0;
  bool committed = false;
  uint64_t slots_to_copy = 0;
  uint64_t slots_copied = 0;
};

/// `status`: its /cluster/status, or nullptr with `error` saying why none.
node_progress progress_of(const std::string& id, const nlohmann::json* status,
                          const std::string& error = {});

enum class node_phase {
  unreachable, ///< did not answer
  behind,      ///< still at an older epoch (has not heard of the change)
  joint,       ///< at the change's epoch, joint: slots still moving
  copying,     ///< committed, but still copying slots it gained (was down)
  committed,   ///< committed at the change's epoch (or a later one) with its slots copied
};

node_phase phase_of(const node_progress& p, uint64_t epoch);

/// How far the change to `epoch` has got.
struct change_progress {
  /// Every node that answered has it committed with its slots copied, and
  /// at least one answered.
  bool done = false;
  std::vector<std::string> unreachable; ///< nodes that did not answer
  /// "2/4 committed: n1 committed, n2 joint, n3 at epoch 0, n4 copying 120/1024 slots"
  std::string summary;
};

change_progress judge_change(uint64_t epoch, const std::vector<node_progress>& nodes);

/// "  3s  epoch 1: " + summary: the progress line printed once a second.
std::string progress_line(uint64_t epoch, const change_progress& progress, int64_t elapsed_ms);

/// {"id", "answered", "error", "epoch", "state", "phase", "slots_to_copy", "slots_copied"}.
nlohmann::json progress_json(const node_progress& p, uint64_t epoch);

} // namespace lmcc::apps::client
