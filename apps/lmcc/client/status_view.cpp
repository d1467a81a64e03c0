#include "apps/lmcc/client/status_view.hpp"

#include "apps/lmcc/client/json_fields.hpp"
#include "apps/lmcc/client/table.hpp"

#include <algorithm>
#include <cstdint>
#include <map>
#include <tuple>
#include <utility>

namespace lmcc::apps::client {
namespace {

using nlohmann::json;

// -- reading a status leniently: a field missing (an older node) reads as 0 or "" --

std::string str(const json& j, const char* key) {
  if (!j.is_object())
    return {};
  const auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string{};
}

bool flag(const json& j, const char* key) {
  if (!j.is_object())
    return false;
  const auto it = j.find(key);
  return it != j.end() && it->is_boolean() && it->get<bool>();
}

const json& members_of(const json& status) {
  static const json none = json::array();
  const auto it = status.find("members");
  return it != status.end() && it->is_array() ? *it : none;
}

/// The entry for `id` in `status`'s member list, or nullptr.
const json* member_entry(const json& status, const std::string& id) {
  for (const auto& m : members_of(status))
    if (str(m, "id") == id)
      return &m;
  return nullptr;
}

std::string join(const std::vector<std::string>& items, const char* sep = ", ") {
  std::string out;
  for (const auto& i : items)
    out += (out.empty() ? "" : sep) + i;
  return out;
}

/// "n1 sees" / "n1, n2 see".
std::string as_seen_by(const std::vector<std::string>& ids) {
  return "as " + join(ids) + (ids.size() == 1 ? " sees it" : " see it");
}

/// Copies each slot should have as `status` sees the cluster: min(R, members).
uint64_t copies_wanted(const json& status) {
  uint64_t members = 0;
  for (const auto& m : members_of(status))
    members += flag(m, "member") ? 1 : 0;
  return std::min<uint64_t>(u64_field(status, "replicas"), members);
}

/// Groups the ids of the answering reports by a key of their status.
template <class Key, class KeyOf>
std::map<Key, std::vector<std::string>> group_by(const std::vector<const node_report*>& answered,
                                                 KeyOf key_of) {
  std::map<Key, std::vector<std::string>> out;
  for (const auto* r : answered)
    if (auto key = key_of(*r->status))
      out[*key].push_back(r->id);
  return out;
}

// -- the findings, one function per kind of reason ---------------------------------

void members_silent(const std::vector<node_report>& reports, std::vector<std::string>& reasons) {
  for (const auto& r : reports) {
    if (r.status || !r.member)
      continue;
    if (r.http.empty())
      reasons.push_back(r.id + " is unreachable: no node that answered knows its HTTP address");
    else
      reasons.push_back(r.id + " (" + r.http + ") is unreachable: " + r.error);
  }
}

void members_down(const std::vector<node_report>& reports,
                  const std::vector<const node_report*>& answered,
                  std::vector<std::string>& reasons) {
  for (const auto& r : reports) {
    std::vector<std::string> down_by;
    std::vector<std::string> unheard_by;
    for (const auto* a : answered) {
      const auto* m = a->id == r.id ? nullptr : member_entry(*a->status, r.id);
      if (!m || !flag(*m, "member") || flag(*m, "live"))
        continue;
      (flag(*m, "presumed") ? unheard_by : down_by).push_back(a->id);
    }
    if (!down_by.empty())
      reasons.push_back(r.id + " is down " + as_seen_by(down_by));
    if (!unheard_by.empty())
      reasons.push_back(r.id + " has not been heard from by " + join(unheard_by) + " since " +
                        (unheard_by.size() == 1 ? "it" : "they") + " started");
  }
}

void slots_short(const std::vector<const node_report*>& answered,
                 std::vector<std::string>& reasons) {
  using key = std::tuple<uint64_t, uint64_t, uint64_t>; // (short, slots, copies wanted)
  const auto under = group_by<key>(answered, [](const json& s) -> std::optional<key> {
    if (u64_field(s, "slots_under_replicated") == 0)
      return std::nullopt;
    return key{u64_field(s, "slots_under_replicated"), u64_field(s, "slots"), copies_wanted(s)};
  });
  for (const auto& [k, ids] : under)
    reasons.push_back(std::to_string(std::get<0>(k)) + " of " + std::to_string(std::get<1>(k)) +
                      " slots have fewer than " + std::to_string(std::get<2>(k)) + " live copies " +
                      as_seen_by(ids));
  const auto none = group_by<key>(answered, [](const json& s) -> std::optional<key> {
    if (u64_field(s, "slots_without_live_copy") == 0)
      return std::nullopt;
    return key{u64_field(s, "slots_without_live_copy"), u64_field(s, "slots"), 0};
  });
  for (const auto& [k, ids] : none)
    reasons.push_back(std::to_string(std::get<0>(k)) + " of " + std::to_string(std::get<1>(k)) +
                      " slots have no live copy (lookups miss their keys) " + as_seen_by(ids));
}

void views_differ(const std::vector<const node_report*>& answered,
                  std::vector<std::string>& reasons) {
  const auto rings = group_by<std::string>(
      answered, [](const json& s) -> std::optional<std::string> { return str(s, "ring_version"); });
  if (rings.size() > 1) {
    std::vector<std::string> parts;
    for (const auto& [ring, ids] : rings)
      parts.push_back(ring + " (" + join(ids) + ")");
    reasons.push_back("nodes disagree on the ring version: " + join(parts, "; "));
  }
  const auto sets =
      group_by<std::string>(answered, [](const json& s) -> std::optional<std::string> {
        const auto& m = s.contains("membership") ? s["membership"] : json::object();
        std::vector<std::string> ids;
        if (m.contains("members") && m["members"].is_array())
          for (const auto& id : m["members"])
            ids.push_back(id.is_string() ? id.get<std::string>() : id.dump());
        return "epoch " + std::to_string(u64_field(m, "epoch")) + " [" + join(ids, " ") + "]";
      });
  if (sets.size() > 1) {
    std::vector<std::string> parts;
    for (const auto& [set, ids] : sets)
      parts.push_back(set + " (" + join(ids) + ")");
    reasons.push_back("nodes disagree on the member set: " + join(parts, "; "));
  }
}

void node_states(const std::vector<const node_report*>& answered,
                 std::vector<std::string>& reasons) {
  for (const auto* a : answered) {
    const auto& s = *a->status;
    const auto& m = s.contains("membership") ? s["membership"] : json::object();
    const bool joint = str(m, "state") == "joint";
    const auto to_copy = u64_field(m, "slots_to_copy");
    const auto copied = u64_field(m, "slots_copied");
    if (joint || copied < to_copy)
      reasons.push_back(a->id + ": membership change to epoch " +
                        std::to_string(u64_field(m, "epoch")) + " in progress (" +
                        (joint ? "joint" : "committed, copying") + "), " + std::to_string(copied) +
                        "/" + std::to_string(to_copy) + " slots copied");
    if (flag(s, "refilling"))
      reasons.push_back(a->id + " is refilling: it came back empty and copies its slots from the "
                                "other owners");
    const auto uncertain =
        s.contains("anti_entropy") ? u64_field(s["anti_entropy"], "slots_uncertain") : uint64_t{0};
    if (uncertain > 0)
      reasons.push_back(a->id + " is uncertain of " + std::to_string(uncertain) +
                        " slot copies (anti-entropy compares them with the other owners)");
  }
}

/// The sum of every member's primary entries: the cluster's entry count,
/// known only when every member answered.
std::optional<uint64_t> cluster_entries(const std::vector<node_report>& reports) {
  uint64_t total = 0;
  for (const auto& r : reports) {
    if (!r.member)
      continue;
    if (!r.status || !r.status->contains("primary_entries"))
      return std::nullopt;
    total += u64_field(*r.status, "primary_entries");
  }
  return total;
}

std::string node_label(const node_report& r) {
  return r.member ? r.id : r.id + " (standby)";
}

} // namespace

std::vector<node_report> member_reports(const json& seed, const std::string& seed_endpoint) {
  std::vector<node_report> out;
  for (const auto& m : members_of(seed)) {
    node_report r;
    r.id = str(m, "id");
    r.member = flag(m, "member");
    r.http = str(m, "http");
    if (flag(m, "self")) {
      r.http = seed_endpoint;
      r.status = seed;
    }
    out.push_back(std::move(r));
  }
  return out;
}

void fill_addresses(std::vector<node_report>& reports) {
  for (auto& r : reports) {
    if (!r.http.empty())
      continue;
    for (const auto& other : reports)
      if (other.status)
        if (const auto* m = member_entry(*other.status, r.id); m && !str(*m, "http").empty()) {
          r.http = str(*m, "http");
          break;
        }
  }
}

cluster_verdict judge(const std::vector<node_report>& reports) {
  cluster_verdict v;
  std::vector<const node_report*> answered;
  for (const auto& r : reports)
    if (r.status)
      answered.push_back(&r);
  if (answered.empty()) {
    v.reasons.push_back("no node answered");
    return v;
  }
  members_silent(reports, v.reasons);
  members_down(reports, answered, v.reasons);
  slots_short(answered, v.reasons);
  views_differ(answered, v.reasons);
  node_states(answered, v.reasons);
  v.healthy = v.reasons.empty();
  return v;
}

std::string live_summary(const json& status) {
  uint64_t members = 0;
  uint64_t live = 0;
  std::vector<std::string> down;
  for (const auto& m : members_of(status)) {
    if (!flag(m, "member"))
      continue;
    ++members;
    if (flag(m, "live"))
      ++live;
    else
      down.push_back(str(m, "id"));
  }
  auto out = std::to_string(live) + "/" + std::to_string(members);
  if (!down.empty())
    out += " (" + join(down, ",") + " down)";
  return out;
}

void render_status_table(const std::vector<node_report>& reports, const cluster_verdict& verdict,
                         std::ostream& out) {
  text_table table{{{"NODE"},
                    {"HTTP"},
                    {"LIVE"},
                    {"RING"},
                    {"PRIMARY", align::right},
                    {"REPLICA", align::right},
                    {"LAG", align::right},
                    {"IN-FLIGHT", align::right},
                    {"KEYS", align::right},
                    {"WORKERS", align::right},
                    {"VERSION"},
                    {"UPTIME", align::right}}};
  for (const auto& r : reports) {
    if (!r.status) {
      table.add_row({node_label(r), r.http.empty() ? "?" : r.http, "unreachable", "-", "-", "-",
                     "-", "-", "-", "-", "-", "-"});
      continue;
    }
    const auto& s = *r.status;
    const auto n = [&](const char* key) { return std::to_string(u64_field(s, key)); };
    const auto version = str(s, "version");
    table.add_row({node_label(r), r.http, live_summary(s), str(s, "ring_version").substr(0, 8),
                   n("slots_primary"), n("slots_replica"), n("replication_lag_sub_batches"),
                   n("ingest_inflight_ops"), s.contains("keys") ? n("keys") : "-",
                   s.contains("workers_homed") ? n("workers_homed") : "-",
                   version.empty() ? "-" : version,
                   format_duration(static_cast<int64_t>(u64_field(s, "uptime_ms")))});
  }
  table.render(out);
  out << '\n';
  if (!verdict.healthy) {
    out << "cluster degraded:\n";
    for (const auto& reason : verdict.reasons)
      out << "  - " << reason << '\n';
    return;
  }
  const auto* first = &*std::find_if(reports.begin(), reports.end(),
                                     [](const auto& r) { return r.status.has_value(); });
  const auto& s = *first->status;
  uint64_t members = 0;
  for (const auto& r : reports)
    members += r.member ? 1 : 0;
  out << "cluster healthy: " << members << "/" << members << " members live, ring "
      << str(s, "ring_version") << ", " << u64_field(s, "slots") << " slots with "
      << copies_wanted(s) << (copies_wanted(s) == 1 ? " live copy" : " live copies") << " each";
  if (const auto entries = cluster_entries(reports))
    out << ", " << *entries << " entries";
  out << '\n';
}

json status_json(const std::vector<node_report>& reports, const cluster_verdict& verdict) {
  json nodes = json::array();
  for (const auto& r : reports) {
    json n = {{"id", r.id},
              {"http", r.http},
              {"member", r.member},
              {"reachable", r.status.has_value()},
              {"error", r.error}};
    if (r.status) {
      const auto& s = *r.status;
      n["live"] = live_summary(s);
      for (const char* key : {"ring_version", "version"})
        n[key] = str(s, key);
      for (const char* key : {"slots_primary", "slots_replica", "replication_lag_sub_batches",
                              "ingest_inflight_ops", "keys", "entries", "primary_entries",
                              "workers_homed", "slots_under_replicated", "uptime_ms"})
        n[key] = u64_field(s, key);
      n["status"] = s;
    }
    nodes.push_back(std::move(n));
  }
  const auto entries = cluster_entries(reports);
  return json{{"verdict", verdict.healthy ? "healthy" : "degraded"},
              {"reasons", verdict.reasons},
              {"nodes", std::move(nodes)},
              {"entries", entries ? json(*entries) : json(nullptr)}};
}

} // namespace lmcc::apps::client
