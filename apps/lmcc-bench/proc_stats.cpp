#include "apps/lmcc-bench/proc_stats.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <unistd.h>

namespace lmcc::bench {
namespace {

/// utime + stime in ticks of /proc/<path>/stat (a process, or one of its
/// threads: "<pid>/task/<tid>"); nullopt if it cannot be read.
std::optional<uint64_t> cpu_ticks(const std::string& path) {
  std::ifstream file{"/proc/" + path + "/stat"};
  std::string line;
  if (!file || !std::getline(file, line))
    return std::nullopt;
  // Field 2 (comm) is in parentheses and may hold spaces or ')': the fields
  // we want are counted from the last ')'. utime and stime are fields 14, 15.
  const auto close = line.rfind(')');
  if (close == std::string::npos)
    return std::nullopt;
  std::istringstream rest{line.substr(close + 1)};
  std::string field;
  uint64_t utime = 0;
  uint64_t stime = 0;
  for (int i = 3; i <= 13; ++i) // state (3) .. cmajflt (13)
    rest >> field;
  if (!(rest >> utime >> stime))
    return std::nullopt;
  return utime + stime;
}

std::optional<uint64_t> cpu_ticks(int pid) {
  return cpu_ticks(std::to_string(pid));
}

double ticks_to_seconds(uint64_t ticks) {
  static const long ticks_per_s = sysconf(_SC_CLK_TCK); // a constant of the system
  return static_cast<double>(ticks) / static_cast<double>(ticks_per_s > 0 ? ticks_per_s : 100);
}

/// Voluntary + involuntary context switches of a thread (its status file).
uint64_t context_switches(const std::string& path) {
  std::ifstream status{"/proc/" + path + "/status"};
  std::string line;
  uint64_t n = 0;
  while (status && std::getline(status, line))
    if (line.starts_with("voluntary_ctxt_switches:") ||
        line.starts_with("nonvoluntary_ctxt_switches:"))
      n += std::stoull(line.substr(line.find(':') + 1));
  return n;
}

/// Nanoseconds a thread spent on a CPU (the first field of its schedstat);
/// 0 if the kernel keeps no schedstats.
uint64_t run_nanoseconds(const std::string& path) {
  std::ifstream schedstat{"/proc/" + path + "/schedstat"};
  uint64_t ns = 0;
  if (schedstat >> ns)
    return ns;
  return 0;
}

std::optional<uint64_t> vm_rss_kib(int pid) {
  std::ifstream status{fmt::format("/proc/{}/status", pid)};
  std::string line;
  while (status && std::getline(status, line))
    if (line.starts_with("VmRSS:"))
      return std::stoull(line.substr(6));
  return std::nullopt;
}

} // namespace

process_set::process_set(std::vector<int> pids) : pids_(std::move(pids)) {
  for (int pid : pids_)
    if (!cpu_ticks(pid) || !vm_rss_kib(pid))
      throw unreachable_error(fmt::format(
          "cannot read /proc/{}/stat and status — is --pid right (the controller must run on "
          "this host)?",
          pid));
}

std::optional<double> process_set::cpu_seconds() const {
  if (pids_.empty())
    return std::nullopt;
  uint64_t ticks = 0;
  for (int pid : pids_) {
    auto t = cpu_ticks(pid);
    if (!t)
      return std::nullopt;
    ticks += *t;
  }
  return ticks_to_seconds(ticks);
}

std::map<std::string, thread_use> process_set::threads_by_name() const {
  std::map<std::string, thread_use> out;
  for (int pid : pids_) {
    std::error_code ec;
    const std::string task_dir = fmt::format("/proc/{}/task", pid);
    for (const auto& entry : std::filesystem::directory_iterator(task_dir, ec)) {
      const std::string path = fmt::format("{}/task/{}", pid, entry.path().filename().string());
      std::ifstream comm_file{"/proc/" + path + "/comm"};
      std::string name;
      auto ticks = cpu_ticks(path);
      if (!comm_file || !std::getline(comm_file, name) || !ticks)
        continue; // the thread ended meanwhile
      auto& use = out[name];
      use.cpu_s += ticks_to_seconds(*ticks);
      use.run_ns += run_nanoseconds(path);
      use.switches += context_switches(path);
      ++use.threads;
    }
  }
  return out;
}

std::optional<uint64_t> process_set::rss_kib() const {
  if (pids_.empty())
    return std::nullopt;
  uint64_t kib = 0;
  for (int pid : pids_) {
    auto k = vm_rss_kib(pid);
    if (!k)
      return std::nullopt;
    kib += *k;
  }
  return kib;
}

rss_monitor::rss_monitor(const process_set& processes, std::chrono::milliseconds interval,
                         index_reader index_bytes)
  : processes_(&processes), interval_(interval), index_bytes_(std::move(index_bytes)),
    thread_([this](std::stop_token stop) { loop(std::move(stop)); }) {}

void rss_monitor::loop(std::stop_token stop) {
  auto next = steady::now();
  while (!stop.stop_requested()) {
    // The index first: its GET takes a moment, and the RSS read right after
    // it is the one the difference is about.
    std::optional<uint64_t> index_kib;
    if (index_bytes_)
      if (auto bytes = index_bytes_(); bytes && *bytes >= 0)
        index_kib = static_cast<uint64_t>(*bytes / 1024.0);
    if (auto kib = processes_->rss_kib()) {
      std::lock_guard lock{mutex_};
      samples_.push_back(sample{seconds_since(t0_), *kib, index_kib});
      peak_ = std::max(peak_, *kib);
    }
    next += interval_;
    // Sleep in short steps so that stop() returns promptly.
    while (!stop.stop_requested() && steady::now() < next)
      std::this_thread::sleep_for(
          std::min<steady::duration>(next - steady::now(), std::chrono::milliseconds(50)));
  }
}

void rss_monitor::stop() {
  thread_.request_stop();
  if (thread_.joinable())
    thread_.join();
}

uint64_t rss_monitor::peak_kib() const {
  std::lock_guard lock{mutex_};
  return peak_;
}

std::optional<uint64_t> rss_monitor::peak_over_index_kib(double from_s, double to_s) const {
  std::lock_guard lock{mutex_};
  std::optional<uint64_t> peak;
  for (const auto& s : samples_) {
    if (s.t < from_s || s.t > to_s || !s.index_kib)
      continue;
    const uint64_t over = s.kib > *s.index_kib ? s.kib - *s.index_kib : 0;
    peak = std::max(peak.value_or(0), over);
  }
  return peak;
}

nlohmann::json rss_monitor::series_columns() const {
  nlohmann::json columns = {"t_s", "rss_mib"};
  if (index_bytes_)
    columns.push_back("index_mib");
  return columns;
}

nlohmann::json rss_monitor::series_json() const {
  std::lock_guard lock{mutex_};
  nlohmann::json out = nlohmann::json::array();
  auto mib = [](uint64_t kib) { return std::round(kib_to_mib(kib) * 10) / 10; };
  for (const auto& s : samples_) {
    nlohmann::json row = {std::round(s.t * 1000) / 1000, mib(s.kib)};
    if (index_bytes_)
      row.push_back(s.index_kib ? nlohmann::json(mib(*s.index_kib)) : nlohmann::json());
    out.push_back(std::move(row));
  }
  return out;
}

} // namespace lmcc::bench
