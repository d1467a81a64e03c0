// restart: how long the cluster is blind after a controller restart. The
// workers admit prompts (heartbeats on, full sync on request: the recovery
// path of spec 1.1 step 10 and 4.7.2), every sampled lookup is checked to
// answer fully, then --restart-cmd runs (sh -c) and the sample is looked up
// every 100 ms until every lookup answers fully again. A full answer only
// counts once the old controller is known to be gone: a lookup has failed or
// come back short, or the command has exited. Bounded by --duration.
#include "apps/lmcc-bench/cluster.hpp"
#include "apps/lmcc-bench/scenario_support.hpp"
#include "apps/lmcc-bench/scenarios.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <map>
#include <spawn.h>
#include <sys/wait.h>
#include <thread>

extern char** environ; // NOLINT: POSIX, for posix_spawn

namespace lmcc::bench {
namespace {

using namespace std::chrono_literals;

enum class sample_state { down, partial, full };

/// Looks up every sampled prompt once.
sample_state probe(controller_http& api, const std::vector<lookup_query>& sample,
                   const std::vector<instance_info>& infos, const std::string& location) {
  bool all_full = true;
  for (const auto& q : sample) {
    const auto v = http_lookup(api, q, infos[q.instance], location);
    if (!v.answered)
      return sample_state::down;
    all_full = all_full && v.correct;
  }
  return all_full ? sample_state::full : sample_state::partial;
}

/// The sampled queries: whole prompts (every chunk held) plus a fresh tail.
std::vector<lookup_query> full_prompt_sample(const bench_options& o, const prompt_corpus& corpus,
                                             const msg::chunk_hasher& hasher) {
  std::vector<lookup_query> sample;
  auto rng = make_rng(o.seed, 3000);
  while (sample.size() < o.restart_sample) {
    lookup_query q = make_query(corpus, rng, o.chunk_size, hasher);
    if (q.held_chunks == o.prompt_chunks)
      sample.push_back(std::move(q));
  }
  return sample;
}

/// A child running `sh -c cmd`; reaped on destruction if it has exited.
class shell_child {
public:
  explicit shell_child(const std::string& cmd) {
    const char* argv[] = {"/bin/sh", "-c", cmd.c_str(), nullptr};
    if (posix_spawn(&pid_, "/bin/sh", nullptr, nullptr, const_cast<char* const*>(argv), environ) !=
        0)
      throw std::runtime_error("cannot run /bin/sh -c for --restart-cmd");
  }
  ~shell_child() { (void)poll(); }
  shell_child(const shell_child&) = delete;
  shell_child& operator=(const shell_child&) = delete;

  /// The exit status once the child has exited.
  std::optional<int> poll() {
    if (!status_ && pid_ > 0) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_)
        status_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    return status_;
  }

private:
  pid_t pid_ = -1;
  std::optional<int> status_;
};

} // namespace

report run_restart(scenario_env& env) {
  if (env.opts.restart_cmd.empty())
    throw std::invalid_argument("restart needs --restart-cmd '<shell command>'");
  bench_options o = env.opts;
  if (o.heartbeat_interval_s <= 0)
    o.heartbeat_interval_s = 1; // the recovery path needs heartbeats
  o.full_sync_on_request = true;
  report r{"restart"};
  r.set_config(config_json(o));
  controller_http api{o.http, o.key_source, o.instance_prefix, o.request_timeout_ms, o.http_access};
  api.check_reachable();
  check_other_nodes_reachable(o);
  cluster c{env.ctx, o};
  c.register_all();
  key_tracker keys{api, o};
  const prompt_corpus corpus{o.seed, o.workers, o.prompts, o.prompt_chunks, env.hasher};
  c.admit_prompts(corpus, steady::now() + seconds_to_duration(o.settle_timeout_s));
  const convergence setup = wait_for_truth(keys, c, o.settle_timeout_s, steady::now());
  const auto infos = c.instance_infos();
  const auto sample = full_prompt_sample(o, corpus, env.hasher);
  controller_http prober{o.http, o.key_source, o.instance_prefix, 1000};
  const bool full_before = probe(prober, sample, infos, o.location) == sample_state::full;
  r.check("before the restart: the controller holds every key and lookups answer fully",
          setup.reached && full_before,
          fmt::format("controller {} vs truth {}", setup.count, setup.truth));
  if (!setup.reached || !full_before)
    return r;

  const uint64_t syncs_before = c.sum(&worker_counters::full_syncs);
  const auto t0 = steady::now();
  const auto deadline = t0 + seconds_to_duration(o.duration_s);
  auto idle = c.start_all([deadline](simulated_worker& w, std::stop_token stop) {
    w.serve_full_sync_requests(push_limits{.deadline = deadline, .stop = std::move(stop)});
  });
  shell_child child{o.restart_cmd};
  std::optional<double> exited_s;
  std::optional<double> down_s;
  std::optional<double> back_s;
  std::optional<double> full_s;
  progress_clock progress;
  while (!full_s && steady::now() < deadline) {
    if (!exited_s && child.poll())
      exited_s = seconds_since(t0);
    const auto state = probe(prober, sample, infos, o.location);
    const double t = seconds_since(t0);
    if (state != sample_state::full && !down_s)
      down_s = t;
    if (state != sample_state::down && down_s && !back_s)
      back_s = t;
    if (state == sample_state::full && (down_s || exited_s))
      full_s = t;
    if (progress.due())
      spdlog::info("restart t={:.1f}s command {} lookups {}", t, exited_s ? "exited" : "running",
                   state == sample_state::full      ? "full"
                   : state == sample_state::partial ? "partial"
                                                    : "down");
    if (!full_s)
      std::this_thread::sleep_for(100ms);
  }
  idle.stop();
  if (!exited_s && child.poll())
    exited_s = seconds_since(t0);

  r.add("sampled_lookups", "lookups sampled (whole prompts)", static_cast<double>(sample.size()),
        "req");
  if (exited_s)
    r.add("command_exit_s", "restart command exited after", *exited_s, "s");
  else
    r.note("command_exit_s", "restart command exited after", "still running (not waited for)");
  if (down_s)
    r.add("first_miss_s", "first failed or short lookup after", *down_s, "s");
  if (back_s)
    r.add("http_back_s", "HTTP answering again after", *back_s, "s");
  if (full_s)
    r.add("full_again_s", "all lookups full again after", *full_s, "s");
  r.add("full_syncs", "full syncs run by the workers",
        static_cast<double>(c.sum(&worker_counters::full_syncs) - syncs_before), "syncs");
  std::map<std::string, int> reasons;
  for (size_t i = 0; i < c.size(); ++i)
    for (const auto& sync : c[i].full_sync_results())
      ++reasons[sync.reason + (sync.complete ? "" : " (incomplete)")];
  std::string reason_text;
  for (const auto& [reason, n] : reasons)
    reason_text += fmt::format("{}{} x{}", reason_text.empty() ? "" : ", ", reason, n);
  r.note("full_sync_reasons", "full-sync reasons given by the controller", reason_text);
  r.add("heartbeat_failures", "heartbeat failures (timeouts while down)",
        static_cast<double>(c.sum(&worker_counters::heartbeat_failures)), "beats");
  r.check("lookups answer fully again within --duration", full_s.has_value(),
          full_s ? fmt::format("{:.3f} s", *full_s)
                 : fmt::format("not within {:g} s", o.duration_s));
  const convergence after = wait_for_truth(keys, c, o.settle_timeout_s, steady::now());
  check_key_count(r, after, keys);
  return r;
}

} // namespace lmcc::bench
