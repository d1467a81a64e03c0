// workers_view: the pure half of `lmcc workers`: the table drawn from a
// node's GET /cluster/workers (lmcc's own endpoint: each worker as
// /controller/workers shows it, plus its locations, home node and full-sync
// state).
//
//   take_full_sync_from_homes(body, {{"n2", n2_answer}});   // the homes' word
//   render_workers_table(body, now_s, std::cout);
//   -> INSTANCE  WORKER  ADDRESS          LOCATIONS  KEYS  LAST HEARTBEAT  HOME  FULL SYNC
//      vllm-0         0  10.0.0.7:54321           1  1200  2s ago          n2    none
//      ...
//      2 workers in 1 instance, 2400 keys; full syncs: 0 running, 2 completed, 0 batches missing
//
// Context: pure functions, reentrant.
#pragma once

#include <nlohmann/json.hpp>

#include <map>
#include <ostream>
#include <string>

namespace lmcc::apps::client {

/// How long ago `then_s` was at `now_s` (both Unix seconds): "4s ago",
/// "3m10s ago", "never" for 0.
std::string format_ago(double then_s, double now_s);

/// "owed (reason)", "none", "unknown" from a worker's full_sync fields.
std::string full_sync_cell(const nlohmann::json& worker);

/// Only a worker's home asks it for a full sync (registry/heartbeat_reader.hpp),
/// and nodes may differ on what is owed (each ends LMCache's start-up freeze
/// on its own), so each worker's `full_sync` and `full_sync_reason` are taken
/// from its home's GET /cluster/workers when `home_answers` (node id -> its
/// answer) has it; `full_sync_seen_by` names the node they come from.
void take_full_sync_from_homes(nlohmann::json& body,
                               const std::map<std::string, nlohmann::json>& home_answers);

/// The worker table and its summary line; `now_s` is the client's wall clock.
void render_workers_table(const nlohmann::json& body, double now_s, std::ostream& out);

} // namespace lmcc::apps::client
