// proc_stats: what the controller's processes cost this host, read from /proc
// (the controller must run on the bench's host; --pid P[,P...], summed for a
// cluster of node processes).
//
//  * CPU: utime + stime of /proc/<pid>/stat, which covers every thread of the
//    process, live or exited, in clock ticks (sysconf(_SC_CLK_TCK), usually
//    100 per second, so a reading is exact to 10 ms per process).
//  * RSS: VmRSS of /proc/<pid>/status.
//  * By thread name: CPU and context switches of /proc/<pid>/task/*, and the
//    time on a CPU of /proc/<pid>/task/*/schedstat, exact to the nanosecond
//    (what an idle reading needs: ticks give 10 ms per thread).
//
//   process_set node{opts.pids};
//   auto cpu0 = node.cpu_seconds();          // nullopt without pids
//   rss_monitor rss{node, 500ms};            // samples in its own thread
//
// Context: process_set is immutable and may be shared; rss_monitor owns a
// thread and is used from the thread that made it.
#pragma once

#include "apps/lmcc-bench/zmq_io.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace lmcc::bench {

/// What the threads of one name (comm) used so far, summed over processes.
struct thread_use {
  double cpu_s = 0;      ///< utime + stime
  uint64_t run_ns = 0;   ///< time on a CPU, exact to the nanosecond (schedstat)
  uint64_t switches = 0; ///< voluntary + involuntary context switches
  uint32_t threads = 0;
};

class process_set {
public:
  /// Throws unreachable_error if a pid's /proc entries cannot be read now.
  explicit process_set(std::vector<int> pids);

  bool empty() const { return pids_.empty(); }
  const std::vector<int>& pids() const { return pids_; }

  /// Summed user + system CPU seconds; nullopt without pids or if a process
  /// has gone (a reading that cannot be trusted is not made up).
  std::optional<double> cpu_seconds() const;

  /// CPU and context switches of the live threads, by thread name
  /// (/proc/<pid>/task/*): where a controller's CPU goes, without a profiler.
  /// Threads that exited are not in it.
  std::map<std::string, thread_use> threads_by_name() const;

  /// Summed VmRSS in KiB; nullopt as above.
  std::optional<uint64_t> rss_kib() const;

private:
  std::vector<int> pids_;
};

/// RSS samples every `interval` in a thread of its own, from construction
/// until stop() or destruction; t is seconds since construction. With an
/// `index_bytes` reader (called on the monitor's thread, so it must own what
/// it uses), each sample also holds the index's own size read at the same
/// moment, which gives the RSS beyond the index (the flood scenario's bound:
/// 256 MiB).
class rss_monitor {
public:
  using index_reader = std::function<std::optional<double>()>;

  struct sample {
    double t = 0;
    uint64_t kib = 0;
    std::optional<uint64_t> index_kib; ///< nullopt: no reader, or it failed
  };

  rss_monitor(const process_set& processes, std::chrono::milliseconds interval,
              index_reader index_bytes = {});
  ~rss_monitor() = default;
  rss_monitor(const rss_monitor&) = delete;
  rss_monitor& operator=(const rss_monitor&) = delete;

  void stop();

  /// The largest RSS seen so far (0 before the first sample).
  uint64_t peak_kib() const;

  /// The largest RSS minus the index's size over the samples taken in
  /// [from_s, to_s] (series clock) that have both; nullopt if none has.
  std::optional<uint64_t> peak_over_index_kib(double from_s, double to_s) const;

  /// Seconds since construction (the series' clock).
  double now() const { return seconds_since(t0_); }

  /// [[t, RSS MiB], ...], or [[t, RSS MiB, index MiB or null], ...] with a reader.
  nlohmann::json series_json() const;

  /// The names of series_json()'s columns.
  nlohmann::json series_columns() const;

private:
  void loop(std::stop_token stop);

  const process_set* processes_;
  std::chrono::milliseconds interval_;
  index_reader index_bytes_;
  steady::time_point t0_ = steady::now();
  mutable std::mutex mutex_; // guards samples_ and peak_
  std::vector<sample> samples_;
  uint64_t peak_ = 0;
  std::jthread thread_; // last: stops before the members it reads go
};

inline double kib_to_mib(uint64_t kib) {
  return static_cast<double>(kib) / 1024.0;
}

} // namespace lmcc::bench
