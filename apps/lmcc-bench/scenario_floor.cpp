// floor: the generator against a built-in sink that only receives and decodes
// (PULL + decode_frame, the least a controller must do per frame). If the
// generator pushes N ops/s into the sink, a controller measured below N is the
// limit, not the generator. The sink also checks what the generator sends:
// every frame decodes, and seq_nums run 0, 1, 2, ... per (worker, location).
// With --pid (e.g. the bench's own), the CPU those processes spent per op.
//
// Then the request floor: --requests BatchedP2PLookupMsg requests, one at a
// time, from the p2p scenario's DEALER to a built-in ROUTER that sends each
// straight back (its own libzmq context, as a controller has). No controller
// answers a P2P lookup faster than this round trip on the same machine.
// And the HTTP floor: --requests POST /lookup requests of 8 chunks' tokens,
// one at a time on one kept-alive connection, to a cpp-httplib server set up
// as lmcc's (a thread pool, TCP_NODELAY) that answers each with a fixed empty
// layout: the least lmcc's HTTP stack takes for a /lookup on this machine.
#include "apps/lmcc-bench/cluster.hpp"
#include "apps/lmcc-bench/controller_http.hpp"
#include "apps/lmcc-bench/proc_stats.hpp"
#include "apps/lmcc-bench/scenario_support.hpp"
#include "apps/lmcc-bench/scenarios.hpp"
#include "apps/lmcc-bench/stats.hpp"
#include "apps/lmcc-bench/zmq_io.hpp"
#include "messages/codec_json.hpp"

#include <fmt/format.h>
#include <httplib.h>
#include <spdlog/spdlog.h>
#include <zmq_addon.hpp>

#include <atomic>
#include <thread>
#include <unordered_map>

namespace lmcc::bench {
namespace {

using namespace std::chrono_literals;

class decoding_sink {
public:
  explicit decoding_sink(zmq::context_t& ctx)
    : socket_(make_socket(ctx, zmq::socket_type::pull, 100)) {
    // A small receive queue, like the generator's send queue: the sink's rate
    // is then what it decodes, not what ZMQ can buffer.
    socket_.set(zmq::sockopt::rcvhwm, 32);
    socket_.bind("tcp://127.0.0.1:*");
    url_ = "tcp://127.0.0.1:" + std::to_string(bound_port(socket_));
    thread_ = std::jthread{[this](std::stop_token stop) { loop(std::move(stop)); }};
  }

  const std::string& url() const { return url_; }

  std::atomic<uint64_t> ops{0};
  std::atomic<uint64_t> frames{0};
  std::atomic<uint64_t> bytes{0};
  std::atomic<uint64_t> decode_errors{0};
  std::atomic<uint64_t> seq_gaps{0};

private:
  void loop(std::stop_token stop) {
    std::unordered_map<std::string, int64_t> last_seq;
    std::vector<zmq::message_t> parts;
    while (!stop.stop_requested()) {
      parts.clear();
      if (!zmq::recv_multipart(socket_, std::back_inserter(parts)))
        continue; // RCVTIMEO: look at the stop token again
      for (const auto& part : parts) {
        ++frames;
        bytes += part.size();
        auto decoded = msg::decode_frame(part.to_string_view());
        if (!decoded) {
          ++decode_errors;
          continue;
        }
        auto* batch = std::get_if<msg::BatchedKVOperationMsg>(&*decoded);
        if (batch == nullptr)
          continue;
        auto key = fmt::format("{}\x1f{}\x1f{}", batch->instance_id, batch->worker_id.to_string(),
                               batch->location);
        auto [it, fresh] = last_seq.try_emplace(std::move(key), -1);
        for (const auto& op : batch->operations) {
          const int64_t seq = op.seq_num.to_int64().value_or(-2);
          if (seq != it->second + 1)
            ++seq_gaps;
          it->second = seq;
        }
        ops += batch->operations.size();
      }
    }
  }

  zmq::socket_t socket_;
  std::string url_;
  std::jthread thread_; // last: joins before the socket closes
};

/// A ROUTER that sends every request straight back from one thread: the
/// least a controller's request socket does.
class echo_router {
public:
  echo_router() : socket_(make_socket(context_, zmq::socket_type::router, 100)) {
    socket_.bind("tcp://127.0.0.1:*");
    url_ = "tcp://127.0.0.1:" + std::to_string(bound_port(socket_));
    thread_ = std::jthread{[this](std::stop_token stop) { loop(std::move(stop)); }};
  }

  const std::string& url() const { return url_; }

private:
  void loop(std::stop_token stop) {
    std::vector<zmq::message_t> parts;
    while (!stop.stop_requested()) {
      parts.clear();
      if (!zmq::recv_multipart(socket_, std::back_inserter(parts)))
        continue; // RCVTIMEO: look at the stop token again
      (void)zmq::send_multipart(socket_, parts);
    }
  }

  zmq::context_t context_{1};
  zmq::socket_t socket_;
  std::string url_;
  std::jthread thread_; // last: joins before the socket closes
};

/// A cpp-httplib server configured as lmcc's HTTP API is (gateway/http_api.cpp:
/// a thread pool, TCP_NODELAY) whose POST /lookup answers every request with
/// an empty layout, the size of lmcc's answer to a prompt nobody holds.
class http_echo {
public:
  http_echo() {
    // lmcc's default lmcc_http_threads; httplib owns the pointer it is handed.
    server_.new_task_queue = [] { return new httplib::ThreadPool(32); };
    server_.set_tcp_nodelay(true);
    server_.Post("/lookup", [](const httplib::Request&, httplib::Response& res) {
      res.set_content(
          R"({"event_id":"Lookup00000000-0000-0000-0000-000000000000","layout_info":{}})",
          "application/json");
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    if (port_ <= 0)
      throw std::runtime_error("http floor: cannot bind 127.0.0.1");
    thread_ = std::jthread{[this] {
      server_.listen_after_bind();
      listener_done_ = true;
    }};
    // As gateway/http_api.cpp waits: a listener that failed at once never runs.
    while (!server_.is_running() && !listener_done_)
      std::this_thread::sleep_for(1ms);
    if (!server_.is_running())
      throw std::runtime_error("http floor: the server did not start listening");
  }
  ~http_echo() { server_.stop(); } // the jthread joins after this

  host_port target() const { return {"127.0.0.1", static_cast<uint16_t>(port_)}; }

private:
  httplib::Server server_;
  int port_ = 0;
  std::atomic<bool> listener_done_{false};
  std::jthread thread_; // last: joins before the members it uses go
};

struct request_floor {
  std::vector<double> latencies_us;
  uint32_t failed = 0;
};

/// Times `requests` calls of `send` (true: answered) one after the other,
/// after a warm-up (connection set-up and first allocations) left untimed.
template <class Send>
request_floor time_requests(uint32_t requests, Send&& send) {
  request_floor f;
  constexpr uint32_t warm_up = 50;
  for (uint32_t i = 0; i < warm_up + requests; ++i) {
    const auto t0 = steady::now();
    const bool ok = send();
    const double us = std::chrono::duration<double, std::micro>(steady::now() - t0).count();
    if (i < warm_up)
      continue;
    if (ok)
      f.latencies_us.push_back(us);
    else
      ++f.failed;
  }
  return f;
}

/// The report's rows of one floor: `<name>_requests`, `<name>_p50_us`, ...
void add_floor(report& r, const std::string& name, const std::string& what, const request_floor& f,
               uint32_t requests) {
  const latency_summary lat = summarize(f.latencies_us);
  r.add(name + "_requests", what, static_cast<double>(lat.count), "req");
  for (const auto& [label, value] : {std::pair{"p50", lat.p50}, {"p90", lat.p90}, {"p99", lat.p99}})
    r.add(fmt::format("{}_{}_us", name, label), fmt::format("{}: {}", what, label), value, "us");
  r.check(fmt::format("{}: every request answered", what), f.failed == 0 && lat.count == requests,
          fmt::format("{} of {}", lat.count, requests));
}

request_floor measure_http_floor(uint32_t requests, uint32_t timeout_ms, uint32_t chunk_size) {
  http_echo echo;
  controller_http api{echo.target(), "auto", "bench-floor", timeout_ms};
  std::vector<int64_t> tokens(size_t{8} * chunk_size);
  for (size_t i = 0; i < tokens.size(); ++i)
    tokens[i] = static_cast<int64_t>((i * 7919) % 50'000); // token-id sized numbers
  return time_requests(requests, [&] { return api.lookup(tokens).ok; });
}

request_floor measure_request_floor(zmq::context_t& ctx, uint32_t requests, uint32_t timeout_ms) {
  echo_router echo;
  dealer_channel channel{ctx, echo.url(), timeout_ms};
  msg::BatchedP2PLookupMsg request{.hashes = {}, .instance_id = "bench-floor", .worker_id = 0};
  for (int64_t h = 1; h <= 8; ++h)
    request.hashes.emplace_back(h * 1'000'003);
  return time_requests(requests,
                       [&] { return channel.request(request).status == request_status::ok; });
}

} // namespace

floor_result measure_floor(scenario_env& env, double duration_s) {
  const auto& o = env.opts;
  decoding_sink sink{env.ctx};
  cluster c{env.ctx, o, sink.url()};
  const auto t0 = steady::now();
  const auto deadline = t0 + seconds_to_duration(duration_s);
  auto drivers = c.start_all([&](simulated_worker& w, std::stop_token stop) {
    (void)w.push_random(push_limits{.deadline = deadline, .stop = std::move(stop)});
  });
  progress_clock progress;
  while (steady::now() < deadline) {
    std::this_thread::sleep_for(100ms);
    if (progress.due())
      spdlog::info("floor t={:.1f}s sent={} received={} ops", seconds_since(t0),
                   c.sum(&worker_counters::ops_sent), sink.ops.load());
  }
  drivers.stop();
  floor_result r;
  r.seconds = seconds_since(t0);
  r.ops_sent = c.sum(&worker_counters::ops_sent);
  // Let the sink drain what is still queued, but never wait more than 5 s.
  const auto drain_deadline = steady::now() + 5s;
  while (sink.ops.load() < r.ops_sent && steady::now() < drain_deadline)
    std::this_thread::sleep_for(10ms);
  const double received_s = seconds_since(t0);
  r.ops_received = sink.ops.load();
  r.frames = sink.frames.load();
  r.bytes = sink.bytes.load();
  r.decode_errors = sink.decode_errors.load();
  r.seq_gaps = sink.seq_gaps.load();
  r.sent_ops_per_s = static_cast<double>(r.ops_sent) / r.seconds;
  r.received_ops_per_s = static_cast<double>(r.ops_received) / received_s;
  return r;
}

report run_floor(scenario_env& env) {
  const auto& o = env.opts;
  report r{"floor"};
  r.set_config(config_json(o));
  const process_set processes{o.pids}; // e.g. the bench itself: the generator's own cost
  const auto cpu0 = processes.cpu_seconds();
  const floor_result f = measure_floor(env, o.duration_s);
  const auto cpu1 = processes.cpu_seconds();
  r.add("workers", "simulated workers (instances x tp)", static_cast<double>(o.workers * o.tp),
        "workers");
  r.add("seconds", "push duration", f.seconds, "s");
  r.add("ops_sent", "ops sent", static_cast<double>(f.ops_sent), "ops");
  r.add("generator_ops_per_s", "generator -> sink ops/s (sent)", f.sent_ops_per_s, "ops/s");
  r.add("sink_ops_per_s", "sink decoded ops/s", f.received_ops_per_s, "ops/s");
  if (cpu0 && cpu1 && f.ops_sent > 0)
    r.add("cpu_us_per_op", "CPU of the --pid processes per op sent",
          (*cpu1 - *cpu0) * 1e6 / static_cast<double>(f.ops_sent), "us/op");
  r.add("frames", "frames decoded", static_cast<double>(f.frames), "frames");
  r.add("mib_per_s", "wire bytes", static_cast<double>(f.bytes) / f.seconds / (1 << 20), "MiB/s");
  r.check("generator made progress", f.ops_sent > 0, fmt::format("{} ops", f.ops_sent));
  r.check("sink received every op", f.ops_received == f.ops_sent,
          fmt::format("{} of {}", f.ops_received, f.ops_sent));
  r.check("every frame decodes", f.decode_errors == 0,
          fmt::format("{} decode errors", f.decode_errors));
  r.check("seq_num runs 0,1,2,... per (worker, location)", f.seq_gaps == 0,
          fmt::format("{} gaps", f.seq_gaps));

  add_floor(r, "request_floor", "bare ROUTER echo round trip (P2P, 8 hashes)",
            measure_request_floor(env.ctx, o.requests, o.request_timeout_ms), o.requests);
  add_floor(r, "http_floor", "bare HTTP /lookup round trip (8 chunks)",
            measure_http_floor(o.requests, o.request_timeout_ms, o.chunk_size), o.requests);
  return r;
}

} // namespace lmcc::bench
