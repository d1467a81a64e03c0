// soak_control: the commands a soak harness sends lmcc-bench on its standard
// input, one per line, and the status lines lmcc-bench answers with on its
// standard output (one JSON object per line, flushed).
//
//   restart K           worker K restarts as a new process (simulated_worker)
//   dup K N             worker K sends each of its next N multiparts twice
//   reorder K 2,0,1     worker K sends its next 3 multiparts in that order
//   status              print a status line now
//   stop                stop the load, then check the cluster (scenario_soak)
//
// End of input counts as `stop`, so a harness that dies stops the load.
//
//   soak_control control{STDIN_FILENO};
//   while (auto cmd = control.next(100ms)) ...
//
// Context: a reader thread of its own; next() from one thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace lmcc::bench {

struct soak_command {
  enum class kind { restart, dup, reorder, status, stop };
  kind what = kind::status;
  uint32_t worker = 0;
  uint32_t count = 0;          ///< dup
  std::vector<uint32_t> order; ///< reorder
};

/// One command line; nullopt with `error` set when the line is not one.
std::optional<soak_command> parse_soak_command(std::string_view line, std::string& error);

class soak_control {
public:
  /// Reads lines from `fd` (not owned) on a thread of its own.
  explicit soak_control(int fd);
  ~soak_control();
  soak_control(const soak_control&) = delete;
  soak_control& operator=(const soak_control&) = delete;

  /// The next command, waiting at most `wait`; a malformed line is reported
  /// on stderr and skipped.
  std::optional<soak_command> next(std::chrono::milliseconds wait);

private:
  void read_loop(std::stop_token stop);

  int fd_;
  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<soak_command> queue_;
  std::jthread reader_; // last: stops before the queue goes
};

/// Prints one JSON line on stdout and flushes it (the harness reads them as
/// they come).
void emit_json_line(const std::string& json);

} // namespace lmcc::bench
