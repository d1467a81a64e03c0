#include "apps/lmcc/client/members_view.hpp"

#include "apps/lmcc/client/json_fields.hpp"

#include <algorithm>
#include <set>

namespace lmcc::apps::client {
namespace {

bool has(const std::vector<std::string>& ids, const std::string& id) {
  return std::find(ids.begin(), ids.end(), id) != ids.end();
}

/// Appends each of `parts` to `out` (GCC 12 warns, wrongly, on "..." + std::string&&).
template <class... Parts>
void append(std::string& out, const Parts&... parts) {
  (out.append(parts), ...);
}

std::string copied_of(const node_progress& p) {
  std::string out;
  append(out, std::to_string(p.slots_copied), "/", std::to_string(p.slots_to_copy));
  return out;
}

const char* phase_name(node_phase p) {
  switch (p) {
  case node_phase::unreachable:
    return "unreachable";
  case node_phase::behind:
    return "behind";
  case node_phase::joint:
    return "joint";
  case node_phase::copying:
    return "copying";
  case node_phase::committed:
    return "committed";
  }
  return "?";
}

} // namespace

msg::expected<std::vector<std::string>> members_after(const std::vector<std::string>& current,
                                                      const std::vector<std::string>& add,
                                                      const std::vector<std::string>& remove) {
  std::set<std::string> given;
  for (const auto* list : {&add, &remove})
    for (const auto& id : *list) {
      if (id.empty() || id.find_first_of(", \t") != std::string::npos)
        return msg::codec_error{"\"" + id + "\" is not a node id"};
      if (!given.insert(id).second)
        return msg::codec_error{id + " is given twice"};
    }
  if (given.empty())
    return msg::codec_error{"no node id given"};
  std::vector<std::string> next;
  for (const auto& id : current)
    if (!has(remove, id))
      next.push_back(id);
  for (const auto& id : remove)
    if (!has(current, id))
      return msg::codec_error{id + " is not a member (the members are " + join_ids(current) + ")"};
  for (const auto& id : add) {
    if (has(current, id))
      return msg::codec_error{id + " is already a member (the members are " + join_ids(current) +
                              ")"};
    next.push_back(id);
  }
  std::sort(next.begin(), next.end());
  return next;
}

msg::expected<std::vector<std::string>> drain_members(const std::vector<std::string>& current,
                                                      const std::string& node, size_t replicas) {
  auto next = members_after(current, {}, {node});
  if (!next)
    return next;
  if (next->size() < replicas)
    return msg::codec_error{"draining " + node + " would leave " + std::to_string(next->size()) +
                            " member" + (next->size() == 1 ? "" : "s") +
                            ", fewer than the replica count R = " + std::to_string(replicas) +
                            " (lmcc_replicas); add a node first (lmcc members add)"};
  return next;
}

std::string join_ids(const std::vector<std::string>& ids) {
  std::string out;
  for (const auto& id : ids)
    append(out, out.empty() ? "" : " ", id);
  return out;
}

node_progress progress_of(const std::string& id, const nlohmann::json* status,
                          const std::string& error) {
  node_progress p;
  p.id = id;
  if (!status || !status->is_object() || !status->contains("membership") ||
      !(*status)["membership"].is_object()) {
    p.error = status ? "its /cluster/status has no membership" : error;
    return p;
  }
  const auto& m = (*status)["membership"];
  p.answered = true;
  p.epoch = u64_field(m, "epoch");
  p.committed = m.value("state", std::string{}) == "committed";
  p.slots_to_copy = u64_field(m, "slots_to_copy");
  p.slots_copied = u64_field(m, "slots_copied");
  return p;
}

node_phase phase_of(const node_progress& p, uint64_t epoch) {
  if (!p.answered)
    return node_phase::unreachable;
  if (p.epoch < epoch)
    return node_phase::behind;
  if (p.epoch > epoch) // a later change superseded this one: it committed first
    return node_phase::committed;
  if (!p.committed)
    return node_phase::joint;
  return p.slots_copied < p.slots_to_copy ? node_phase::copying : node_phase::committed;
}

change_progress judge_change(uint64_t epoch, const std::vector<node_progress>& nodes) {
  change_progress out;
  size_t answered = 0;
  size_t committed = 0;
  std::string parts;
  for (const auto& p : nodes) {
    const auto phase = phase_of(p, epoch);
    std::string part = p.id;
    switch (phase) {
    case node_phase::unreachable:
      out.unreachable.push_back(p.id);
      part.append(" not answering");
      break;
    case node_phase::behind:
      append(part, " at epoch ", std::to_string(p.epoch));
      break;
    case node_phase::joint:
      part.append(" joint");
      if (p.slots_to_copy > 0)
        append(part, " ", copied_of(p), " slots copied");
      break;
    case node_phase::copying:
      append(part, " copying ", copied_of(p), " slots");
      break;
    case node_phase::committed:
      if (p.epoch > epoch)
        append(part, " at epoch ", std::to_string(p.epoch));
      else
        part.append(" committed");
      break;
    }
    answered += phase != node_phase::unreachable ? 1 : 0;
    committed += phase == node_phase::committed ? 1 : 0;
    append(parts, parts.empty() ? "" : ", ", part);
  }
  out.done = answered > 0 && committed == answered;
  append(out.summary, std::to_string(committed), "/", std::to_string(nodes.size()),
         " committed: ", parts);
  return out;
}

std::string progress_line(uint64_t epoch, const change_progress& progress, int64_t elapsed_ms) {
  std::string elapsed = std::to_string(std::max<int64_t>(elapsed_ms, 0) / 1000) + "s";
  if (elapsed.size() < 4)
    elapsed.insert(0, 4 - elapsed.size(), ' ');
  append(elapsed, "  epoch ", std::to_string(epoch), ": ", progress.summary);
  return elapsed;
}

nlohmann::json progress_json(const node_progress& p, uint64_t epoch) {
  nlohmann::json j{
      {"id", p.id}, {"answered", p.answered}, {"phase", phase_name(phase_of(p, epoch))}};
  if (!p.answered) {
    j["error"] = p.error;
    return j;
  }
  j["epoch"] = p.epoch;
  j["state"] = p.committed ? "committed" : "joint";
  j["slots_to_copy"] = p.slots_to_copy;
  j["slots_copied"] = p.slots_copied;
  return j;
}

} // namespace lmcc::apps::client
