// Shared by the tests of directory_logic and heartbeat_reader: a
// directory_outbox that records every effect, and the messages they send.
// CAF-free: those tests link lmcc_registry only.
#pragma once

#include "registry/directory_logic.hpp"

#if defined(CAF_VERSION)
#error "directory_logic pulls in CAF"
#endif

#include <string>
#include <utility>
#include <vector>

namespace lmcc::actors::directory_testing {

struct recording_outbox : directory_outbox {
  std::vector<std::pair<uint64_t, bool>> spawned; ///< uid, restored
  std::vector<const restored_worker*> spawned_plans;
  std::vector<std::pair<uint64_t, uint64_t>> resets;
  std::vector<uint64_t> retired, deleted;
  std::vector<persistence::worker_row> rows;
  std::vector<std::string> forgotten, events;

  void spawn_worker(const worker_record& rec, const restored_worker* r) override {
    spawned.emplace_back(rec.uid, r != nullptr);
    spawned_plans.push_back(r);
  }
  void reset_worker(uint64_t uid, uint64_t inc) override { resets.emplace_back(uid, inc); }
  void retire_worker(uint64_t uid) override { retired.push_back(uid); }
  void put_row(const persistence::worker_row& row) override { rows.push_back(row); }
  void delete_row(uint64_t uid, uint64_t) override { deleted.push_back(uid); }
  void forget_control(const std::string& e) override { forgotten.push_back(e); }
  void count(std::string_view e) override { events.emplace_back(e); }
};

inline constexpr uint64_t wall = 1'700'000'000'000; // ms

inline msg::RegisterMsg reg(std::string inst, int64_t w, std::string ip = "10.0.0.1",
                            int64_t port = 8500) {
  return msg::RegisterMsg{std::move(inst), w, std::move(ip), port, std::nullopt};
}

inline msg::HeartbeatMsg hb(std::string inst, int64_t w) {
  return msg::HeartbeatMsg{std::move(inst), w, "10.0.0.1", 8500, std::nullopt};
}

inline std::vector<std::string> commands_of(const msg::Msg& m) {
  std::vector<std::string> out;
  for (const auto& c : std::get<msg::HeartbeatRetMsg>(m).commands)
    std::visit([&](const auto& x) { out.push_back(x.reason.value_or("")); }, c);
  return out;
}

} // namespace lmcc::actors::directory_testing
