#include "apps/lmcc/client/workers_view.hpp"

#include "apps/lmcc/client/json_fields.hpp"
#include "apps/lmcc/client/table.hpp"

#include <cmath>
#include <cstdint>
#include <set>

namespace lmcc::apps::client {
namespace {

using nlohmann::json;

std::string text(const json& j, const char* key) {
  const auto it = j.find(key);
  if (it == j.end() || it->is_null())
    return {};
  return it->is_string() ? it->get<std::string>() : it->dump();
}

} // namespace

std::string format_ago(double then_s, double now_s) {
  if (then_s <= 0)
    return "never";
  const auto ms = static_cast<int64_t>(std::llround(std::max(now_s - then_s, 0.0) * 1000));
  return format_duration(ms) + " ago";
}

std::string full_sync_cell(const json& worker) {
  const auto state = text(worker, "full_sync");
  const auto reason = text(worker, "full_sync_reason");
  if (state.empty())
    return "-";
  return state == "owed" && !reason.empty() ? "owed (" + reason + ")" : state;
}

void take_full_sync_from_homes(json& body, const std::map<std::string, json>& home_answers) {
  if (!body.contains("workers") || !body["workers"].is_array())
    return;
  const auto asked = text(body, "node");
  for (auto& w : body["workers"]) {
    w["full_sync_seen_by"] = asked;
    const auto it = home_answers.find(text(w, "home"));
    if (it == home_answers.end() || !it->second.contains("workers") ||
        !it->second["workers"].is_array())
      continue;
    for (const auto& h : it->second["workers"])
      if (text(h, "instance_id") == text(w, "instance_id") &&
          text(h, "worker_id") == text(w, "worker_id")) {
        w["full_sync"] = text(h, "full_sync");
        w["full_sync_reason"] = text(h, "full_sync_reason");
        w["full_sync_seen_by"] = it->first;
        break;
      }
  }
}

void render_workers_table(const json& body, double now_s, std::ostream& out) {
  text_table table{{{"INSTANCE"},
                    {"WORKER", align::right},
                    {"ADDRESS"},
                    {"LOCATIONS", align::right},
                    {"KEYS", align::right},
                    {"LAST HEARTBEAT"},
                    {"HOME"},
                    {"FULL SYNC"}}};
  uint64_t keys = 0;
  std::set<std::string> instances;
  std::set<std::string> not_from_home; // homes whose workers' states another node gave
  const auto& workers = body.contains("workers") ? body["workers"] : json::array();
  for (const auto& w : workers) {
    keys += u64_field(w, "key_count");
    instances.insert(text(w, "instance_id"));
    const auto home = text(w, "home");
    const auto heartbeat = w.value("last_heartbeat_time", 0.0);
    if (w.contains("full_sync_seen_by") && text(w, "full_sync_seen_by") != home)
      not_from_home.insert(home.empty() ? "-" : home);
    table.add_row({text(w, "instance_id"), text(w, "worker_id"),
                   text(w, "ip") + ":" + text(w, "port"), text(w, "locations"),
                   std::to_string(u64_field(w, "key_count")), format_ago(heartbeat, now_s),
                   home.empty() ? "-" : home, full_sync_cell(w)});
  }
  table.render(out);
  const auto& sync = body.contains("full_sync") ? body["full_sync"] : json::object();
  out << '\n'
      << workers.size() << (workers.size() == 1 ? " worker" : " workers") << " in "
      << instances.size() << (instances.size() == 1 ? " instance, " : " instances, ") << keys
      << " keys; full syncs: " << u64_field(sync, "syncing") << " running, "
      << u64_field(sync, "completed") << " completed, " << u64_field(sync, "missing_batches")
      << " batches missing\n";
  for (const auto& home : not_from_home)
    out << "the full-sync states of the workers homed on " << home << " are " << text(body, "node")
        << "'s view (" << home << " did not answer)\n";
}

} // namespace lmcc::apps::client
