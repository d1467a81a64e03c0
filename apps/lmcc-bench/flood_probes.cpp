#include "apps/lmcc-bench/flood_probes.hpp"

#include "apps/lmcc-bench/stats.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <cmath>

namespace lmcc::bench {
namespace {

using namespace std::chrono_literals;

double micros_since(steady::time_point t0) {
  return std::chrono::duration<double, std::micro>(steady::now() - t0).count();
}

probe_reply from_verdict(const lookup_verdict& v) {
  probe_reply reply;
  reply.latency_us = v.latency_us;
  reply.detail = v.detail;
  if (v.answered)
    reply.outcome = v.correct ? probe_outcome::correct : probe_outcome::wrong;
  else
    reply.outcome = v.no_reply ? probe_outcome::unanswered : probe_outcome::error;
  return reply;
}

/// The asker of the P2P probe: not one of the simulated instances, whose own
/// keys the controller would leave out of the answer.
constexpr std::string_view p2p_asker = "bench-flood-p2p";

} // namespace

probe_thread::probe_thread(std::string name, double rate, factory make)
  : name_(std::move(name)), rate_(rate),
    thread_([this, make = std::move(make)](std::stop_token stop) { loop(std::move(stop), make); }) {
}

void probe_thread::loop(std::stop_token stop, const factory& make) {
  request_fn request;
  try {
    request = make();
  } catch (const std::exception& e) {
    stats_.problems.push_back(fmt::format("cannot start: {}", e.what()));
    return;
  }
  const auto interval =
      std::chrono::duration_cast<steady::duration>(std::chrono::duration<double>(1.0 / rate_));
  auto due = steady::now();
  while (!stop.stop_requested()) {
    while (!stop.stop_requested() && steady::now() < due)
      std::this_thread::sleep_for(std::min<steady::duration>(due - steady::now(), 20ms));
    if (stop.stop_requested())
      break;
    const double t = seconds_since(t0_);
    probe_reply reply;
    try {
      reply = request();
    } catch (const std::exception& e) { // e.g. a ZMQ error: counted, not fatal
      reply.outcome = probe_outcome::error;
      reply.detail = e.what();
    }
    ++stats_.sent;
    for (const auto& command : reply.commands)
      ++stats_.commands[command];
    switch (reply.outcome) {
    case probe_outcome::correct:
      ++stats_.correct;
      break;
    case probe_outcome::wrong:
      ++stats_.wrong;
      break;
    case probe_outcome::error:
      ++stats_.errors;
      break;
    case probe_outcome::unanswered:
      ++stats_.unanswered;
      break;
    }
    const bool replied = reply.outcome != probe_outcome::unanswered;
    if (replied)
      stats_.latencies_us.push_back(reply.latency_us);
    stats_.series.emplace_back(t, replied ? reply.latency_us : -1);
    if (reply.outcome != probe_outcome::correct && stats_.problems.size() < 5)
      stats_.problems.push_back(fmt::format("t={:.1f}s {}", t, reply.detail));
    due = std::max(due + interval, steady::now());
  }
}

void probe_thread::stop() {
  thread_.request_stop();
  if (thread_.joinable())
    thread_.join();
}

flood_probes::flood_probes(scenario_env& env, const prompt_corpus& corpus,
                           std::vector<instance_info> infos, const simulated_worker& heartbeat_as)
  : infos_(std::move(infos)) {
  const auto& o = env.opts;
  const uint32_t timeout_ms = o.flood_timeout_ms;
  const auto* infos_p = &infos_;
  const auto* corpus_p = &corpus;
  const auto* env_p = &env;
  if (o.flood_lookup_rate > 0)
    probes_.push_back(std::make_unique<probe_thread>(
        "lookup", o.flood_lookup_rate, [=]() -> probe_thread::request_fn {
          const auto& opts = env_p->opts;
          auto api =
              std::make_shared<controller_http>(pick_node(opts, node_role::lookup, 0).http,
                                                opts.key_source, opts.instance_prefix, timeout_ms);
          auto rng = std::make_shared<std::mt19937_64>(make_rng(opts.seed, 5000));
          return [=] {
            const lookup_query q = make_query(*corpus_p, *rng, opts.chunk_size, env_p->hasher);
            return from_verdict(http_lookup(*api, q, (*infos_p)[q.instance], opts.location));
          };
        }));
  if (o.flood_p2p_rate > 0)
    probes_.push_back(
        std::make_unique<probe_thread>("p2p", o.flood_p2p_rate, [=]() -> probe_thread::request_fn {
          const auto& opts = env_p->opts;
          auto client = std::make_shared<p2p_client>(env_p->ctx,
                                                     pick_node(opts, node_role::p2p, 0).reply.tcp(),
                                                     timeout_ms, std::string{p2p_asker});
          auto rng = std::make_shared<std::mt19937_64>(make_rng(opts.seed, 5001));
          return [=] {
            const lookup_query q = make_query(*corpus_p, *rng, opts.chunk_size, env_p->hasher);
            const auto rank =
                std::uniform_int_distribution<int64_t>{0, static_cast<int64_t>(opts.tp) - 1}(*rng);
            return from_verdict(client->lookup(q, rank, (*infos_p)[q.instance], opts.location));
          };
        }));
  const auto url = heartbeat_as.heartbeat_url();
  heartbeat_available_ = url.has_value();
  if (!url)
    spdlog::warn("flood: the controller handed out no heartbeat_url: no heartbeat probe");
  if (o.flood_heartbeat_rate > 0 && url) {
    // The worker's own identity: an unknown one would be registered by the
    // heartbeat (spec 4.7.2) and asked for a full sync.
    const msg::Msg beat = msg::HeartbeatMsg{.instance_id = heartbeat_as.identity().instance_id,
                                            .worker_id = heartbeat_as.identity().worker_id,
                                            .ip = "127.0.0.1",
                                            .port = heartbeat_as.rep_port(),
                                            .peer_init_url = heartbeat_as.peer_init_url()};
    // The URL is host:port; the worker adds the scheme (spec 2.3).
    probes_.push_back(std::make_unique<probe_thread>(
        "heartbeat", o.flood_heartbeat_rate,
        [=, target = "tcp://" + *url]() -> probe_thread::request_fn {
          auto channel = std::make_shared<dealer_channel>(env_p->ctx, target, timeout_ms);
          return [=] {
            probe_reply reply;
            const auto t0 = steady::now();
            const request_result r = channel->request(beat);
            reply.latency_us = micros_since(t0);
            if (r.status == request_status::timeout || r.status == request_status::send_failed) {
              reply.detail = "no reply (timeout)";
              return reply;
            }
            reply.outcome = probe_outcome::error;
            if (r.status == request_status::bad_reply) {
              reply.detail = "undecodable reply: " + r.error;
              return reply;
            }
            if (auto* ret = std::get_if<msg::HeartbeatRetMsg>(&*r.reply)) {
              reply.outcome = probe_outcome::correct;
              for (const auto& command : ret->commands) {
                auto* sync = std::get_if<msg::FullSyncCommand>(&command);
                reply.commands.push_back(sync != nullptr
                                             ? "FullSyncCommand(" + sync->reason.value_or("") + ")"
                                             : "another command");
              }
              return reply;
            }
            auto* error = std::get_if<msg::ErrorMsg>(&*r.reply);
            reply.detail = error != nullptr
                               ? "ErrorMsg: " + error->error
                               : fmt::format("unexpected {}", msg::type_tag_of(*r.reply));
            return reply;
          };
        }));
  }
}

void flood_probes::stop() {
  for (auto& p : probes_)
    p->stop();
}

void flood_probes::add_to(report& r) const {
  for (const auto& p : probes_) {
    const probe_stats& s = p->stats();
    const auto lat = summarize(s.latencies_us);
    const std::string& n = p->name();
    const uint64_t answered = s.correct + s.wrong;
    r.add(n + "_sent", n + ": requests sent", static_cast<double>(s.sent), "req");
    r.add(n + "_answered", n + ": answered within the timeout", static_cast<double>(answered),
          "req");
    r.add(n + "_unanswered", n + ": unanswered within the timeout",
          static_cast<double>(s.unanswered), "req");
    r.add(n + "_errors", n + ": error replies (ErrorMsg, HTTP error, malformed)",
          static_cast<double>(s.errors), "req");
    r.add(n + "_p50_us", n + ": p50 (replies)", lat.p50, "us");
    r.add(n + "_p90_us", n + ": p90", lat.p90, "us");
    r.add(n + "_p99_us", n + ": p99", lat.p99, "us");
    r.add(n + "_max_us", n + ": max", lat.max, "us");
    if (n == "heartbeat") {
      // The probe does not act on them (a real worker would full-sync).
      std::string text;
      for (const auto& [command, times] : s.commands)
        text += fmt::format("{}{} x{}", text.empty() ? "" : ", ", command, times);
      r.note("heartbeat_commands", "heartbeat: commands in the replies (not acted on)",
             text.empty() ? "none" : text);
    }
    std::string problems;
    for (const auto& text : s.problems)
      problems += (problems.empty() ? ": " : "; ") + text;
    r.check(fmt::format("{}: probe sent requests", n), s.sent > 0,
            fmt::format("{} sent{}", s.sent, s.sent > 0 ? "" : problems));
    r.check(fmt::format("{}: no error replies", n), s.errors == 0,
            fmt::format("{} of {}{}", s.errors, s.sent, s.errors == 0 ? "" : problems));
    if (n != "heartbeat")
      r.check(fmt::format("{}: every answer matches the ground truth", n), s.wrong == 0,
              fmt::format("{} of {} correct{}", s.correct, answered, s.wrong == 0 ? "" : problems));
    nlohmann::json series = nlohmann::json::array();
    for (const auto& [t, us] : s.series)
      series.push_back({std::round(t * 1000) / 1000,
                        us < 0 ? nlohmann::json() : nlohmann::json(std::round(us))});
    r.extra()["probes"][n] = {{"rate_per_s", p->rate()},
                              {"columns", {"t_s", "latency_us (null: unanswered)"}},
                              {"rows", std::move(series)}};
  }
  if (!heartbeat_available_)
    r.note("heartbeat_probe", "heartbeat probe", "skipped: no heartbeat_url handed out");
}

} // namespace lmcc::bench
