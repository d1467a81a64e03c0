#include "apps/lmcc-bench/simulated_worker.hpp"

#include "messages/codec_json.hpp"
#include "messages/codec_msgpack.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <limits>

namespace lmcc::bench {
namespace {

using namespace std::chrono_literals;

/// How long the service thread sleeps in poll: bounds the shutdown delay.
constexpr auto service_poll = 50ms;

/// PUSH send timeout: short, so that a blocked push re-checks its deadline often.
constexpr uint32_t push_send_timeout_ms = 200;

/// PUSH linger: queued KV events still reach the controller after the run ends
/// (the ground truth counts them), but closing never waits longer than this.
constexpr int push_linger_ms = 3000;

/// PUSH high-water mark, in multiparts (of up to 2500 ops each). Far below
/// ZMQ's 1000 so that "sent" stays close to "taken by the controller" and a
/// slow controller shows up as PUSH stalls, not as hundreds of MB queued here.
constexpr int push_hwm = 32;

/// LMCache's kv_msg_batch_timeout: a partial batch leaves after 10 ms.
constexpr auto batch_timeout = 10ms;

template <class... Fs>
struct overloaded : Fs... {
  using Fs::operator()...;
};
template <class... Fs>
overloaded(Fs...) -> overloaded<Fs...>;

uint64_t token_count(const std::optional<std::vector<msg::wire_int>>& tokens) {
  return tokens ? tokens->size() : 0;
}

} // namespace

simulated_worker::simulated_worker(zmq::context_t& ctx, worker_identity identity,
                                   worker_config config)
  : ctx_(&ctx), identity_(std::move(identity)), config_(std::move(config)),
    truth_(instance_key_base(config_.seed, identity_.instance_index)),
    // Seeded per instance, not per rank: the ranks of one instance generate
    // the same ops, as real TP ranks store the same chunks.
    rng_(make_rng(config_.seed, identity_.instance_index)),
    push_(make_socket(ctx, zmq::socket_type::push, push_send_timeout_ms, push_linger_ms)),
    rep_(make_socket(ctx, zmq::socket_type::rep, config_.timeout_ms)) {
  push_.set(zmq::sockopt::sndhwm, push_hwm);
  push_.connect(config_.push_url);
  rep_.bind("tcp://127.0.0.1:*");
  rep_port_ = bound_port(rep_);
  if (!config_.reply_url.empty())
    reply_.emplace(ctx, config_.reply_url, config_.timeout_ms);
}

simulated_worker::~simulated_worker() = default;

void simulated_worker::register_with_controller() {
  const auto timeout_ms = static_cast<uint32_t>(config_.register_timeout_s * 1000);
  // A channel of its own: the registration wait is shorter than other requests.
  dealer_channel channel{*ctx_, config_.reply_url, timeout_ms};
  auto result = channel.request(msg::RegisterMsg{.instance_id = identity_.instance_id,
                                                 .worker_id = identity_.worker_id,
                                                 .ip = "127.0.0.1",
                                                 .port = rep_port_,
                                                 .peer_init_url = peer_init_url()});
  if (result.status == request_status::timeout || result.status == request_status::send_failed)
    throw unreachable_error(fmt::format("no RegisterRetMsg from {} within {:g} s — is a "
                                        "controller running?",
                                        config_.reply_url, config_.register_timeout_s));
  if (result.status == request_status::bad_reply)
    throw std::runtime_error("undecodable reply to RegisterMsg: " + result.error);
  if (auto* error = std::get_if<msg::ErrorMsg>(&*result.reply))
    throw std::runtime_error("controller refused RegisterMsg: " + error->error);
  auto* ret = std::get_if<msg::RegisterRetMsg>(&*result.reply);
  if (ret == nullptr)
    throw std::runtime_error(
        fmt::format("expected RegisterRetMsg, got {}", msg::type_tag_of(*result.reply)));
  std::lock_guard lock{mutex_};
  for (const auto& [key, value] : ret->extra_config)
    if (key == "heartbeat_url")
      heartbeat_url_ = value;
}

std::optional<std::string> simulated_worker::heartbeat_url() const {
  std::lock_guard lock{mutex_};
  return heartbeat_url_;
}

void simulated_worker::start_service() {
  service_ = std::jthread{[this](std::stop_token stop) { service_loop(std::move(stop)); }};
}

void simulated_worker::service_loop(std::stop_token stop) {
  const auto url = heartbeat_url();
  const bool beats = config_.heartbeat_interval_s > 0 && url && !config_.reply_url.empty();
  std::optional<dealer_channel> heartbeat;
  if (beats) // the URL is host:port; the worker adds the scheme (spec 2.3)
    heartbeat.emplace(*ctx_, "tcp://" + *url, std::min<uint32_t>(config_.timeout_ms, 1000));
  const auto interval = std::chrono::duration_cast<steady::duration>(
      std::chrono::duration<double>(config_.heartbeat_interval_s));
  const auto reply_wait = std::chrono::milliseconds(config_.timeout_ms);
  auto next_beat = steady::now() + interval;
  // A plain flag + time, not optional<time_point>: g++ 12 reports a false
  // maybe-uninitialized on the latter at -O3.
  bool outstanding = false;
  steady::time_point sent_at{};
  const msg::Msg beat_msg = msg::HeartbeatMsg{.instance_id = identity_.instance_id,
                                              .worker_id = identity_.worker_id,
                                              .ip = "127.0.0.1",
                                              .port = rep_port_,
                                              .peer_init_url = peer_init_url()};
  while (!stop.stop_requested()) {
    std::array<zmq::pollitem_t, 2> items{
        zmq::pollitem_t{rep_.handle(), 0, ZMQ_POLLIN, 0},
        zmq::pollitem_t{heartbeat ? heartbeat->socket().handle() : nullptr, 0, ZMQ_POLLIN, 0}};
    const size_t count = heartbeat && outstanding ? 2 : 1;
    zmq::poll(items.data(), count,
              std::chrono::duration_cast<std::chrono::milliseconds>(service_poll));
    if ((items[0].revents & ZMQ_POLLIN) != 0) {
      try {
        zmq::message_t request;
        if (rep_.recv(request, zmq::recv_flags::dontwait)) {
          std::string reply = answer_control(request.to_string_view());
          (void)rep_.send(zmq::buffer(reply), zmq::send_flags::none);
        }
      } catch (const zmq::error_t& e) {
        // The REP port is in RegisterMsg, so the socket cannot be replaced;
        // keep serving (and heartbeating) rather than end the thread.
        spdlog::warn("{} rank {}: control socket error: {}", identity_.instance_id,
                     identity_.worker_id, e.what());
      }
    }
    if (count == 2 && (items[1].revents & ZMQ_POLLIN) != 0) {
      auto r = heartbeat->receive_now();
      outstanding = false;
      auto* ret = r.reply ? std::get_if<msg::HeartbeatRetMsg>(&*r.reply) : nullptr;
      if (ret == nullptr) {
        ++counters_.heartbeat_failures;
        continue;
      }
      ++counters_.heartbeats_ok;
      for (const auto& command : ret->commands) {
        auto* sync = std::get_if<msg::FullSyncCommand>(&command);
        if (sync == nullptr)
          continue;
        ++counters_.full_sync_requests;
        if (config_.full_sync_on_request) {
          std::lock_guard lock{mutex_};
          pending_full_sync_ = sync->reason.value_or("full_sync");
        }
      }
    }
    const auto now = steady::now();
    if (heartbeat && outstanding && now - sent_at > reply_wait) {
      heartbeat->reset(); // as LMCache does: a late reply must not pair with the next beat
      outstanding = false;
      ++counters_.heartbeat_failures;
    }
    if (heartbeat && !outstanding && now >= next_beat) {
      next_beat = now + interval;
      if (heartbeat->send(beat_msg)) {
        outstanding = true;
        sent_at = now;
      } else {
        heartbeat->reset();
        ++counters_.heartbeat_failures;
      }
    }
  }
  // Stopping comes before DeRegisterMsg. A beat still in flight travels on
  // another socket than the DeRegisterMsg, so nothing orders the two at the
  // controller: handled after it, the beat would register the worker again
  // (spec 4.7.2). Wait for its reply, as long as a reply may take.
  if (heartbeat && outstanding) {
    const auto left = reply_wait - (steady::now() - sent_at);
    zmq::pollitem_t item{heartbeat->socket().handle(), 0, ZMQ_POLLIN, 0};
    if (left > steady::duration::zero())
      zmq::poll(&item, 1, std::chrono::duration_cast<std::chrono::milliseconds>(left));
    auto r = (item.revents & ZMQ_POLLIN) != 0 ? heartbeat->receive_now() : request_result{};
    if (r.reply && std::holds_alternative<msg::HeartbeatRetMsg>(*r.reply))
      ++counters_.heartbeats_ok;
    else
      ++counters_.heartbeat_failures;
  }
}

void simulated_worker::request_service_stop() {
  service_.request_stop();
}

void simulated_worker::stop_service() {
  service_.request_stop();
  if (service_.joinable())
    service_.join();
}

std::string simulated_worker::answer_control(std::string_view request) {
  ++counters_.control_msgs;
  auto decoded = msg::decode_frame(request);
  if (!decoded)
    return msg::encode_msgpack(msg::ErrorMsg{"Worker error: " + decoded.error().message});
  // The simulated worker holds no KV data: a clear frees nothing (and, like a
  // real clear, sends no evict events, so the ground truth stays as it is);
  // pin/compress/move report the tokens they were given.
  msg::Msg reply = std::visit(
      overloaded{[](const msg::ClearWorkerMsg&) -> msg::Msg { return msg::ClearWorkerRetMsg{0}; },
                 [](const msg::PinWorkerMsg& m) -> msg::Msg {
                   return msg::PinWorkerRetMsg{static_cast<int64_t>(m.tokens.size())};
                 },
                 [](const msg::CompressWorkerMsg& m) -> msg::Msg {
                   return msg::CompressWorkerRetMsg{static_cast<int64_t>(token_count(m.tokens))};
                 },
                 [](const msg::DecompressWorkerMsg& m) -> msg::Msg {
                   return msg::DecompressWorkerRetMsg{static_cast<int64_t>(token_count(m.tokens))};
                 },
                 [](const msg::MoveWorkerMsg& m) -> msg::Msg {
                   return msg::MoveWorkerRetMsg{static_cast<int64_t>(token_count(m.tokens))};
                 },
                 [](const msg::HealthWorkerMsg&) -> msg::Msg { return msg::HealthWorkerRetMsg{0}; },
                 [](const msg::CheckFinishWorkerMsg&) -> msg::Msg {
                   return msg::CheckFinishWorkerRetMsg{"finished"};
                 },
                 [](const auto& other) -> msg::Msg {
                   return msg::ErrorMsg{fmt::format("Worker error: unexpected {}",
                                                    std::decay_t<decltype(other)>::type_tag)};
                 }},
      *decoded);
  return msg::encode_msgpack(reply);
}

std::vector<std::string> simulated_worker::encode_batches(std::vector<msg::KVOpEvent>& ops) {
  std::vector<std::string> frames;
  msg::Msg m = msg::BatchedKVOperationMsg{.instance_id = identity_.instance_id,
                                          .worker_id = identity_.worker_id,
                                          .location = config_.location,
                                          .operations = {}};
  auto& batch = std::get<msg::BatchedKVOperationMsg>(m);
  for (size_t i = 0; i < ops.size(); i += config_.batch_ops) {
    auto end =
        ops.begin() + static_cast<ptrdiff_t>(std::min<size_t>(i + config_.batch_ops, ops.size()));
    batch.operations.assign(ops.begin() + static_cast<ptrdiff_t>(i), end);
    frames.push_back(msg::encode_msgpack(m));
  }
  return frames;
}

bool simulated_worker::send_until(const std::vector<std::string>& frames,
                                  const push_limits& limits) {
  while (!send_frames(push_, frames)) {
    ++counters_.send_stalls;
    if (steady::now() >= limits.deadline || limits.stop.stop_requested())
      return false;
  }
  ++counters_.multiparts;
  counters_.batches += frames.size();
  return true;
}

void simulated_worker::make_ops(std::vector<msg::KVOpEvent>& ops, uint64_t count, uint64_t& lo,
                                uint64_t& hi, uint64_t evict_below, uint64_t live_cap,
                                uint64_t& evicts) {
  std::bernoulli_distribution evict{std::clamp(config_.evict_ratio, 0.0, 1.0)};
  const int64_t first_seq = next_seq_ + static_cast<int64_t>(ops.size());
  for (uint64_t i = 0; i < count; ++i) {
    const msg::wire_int seq{first_seq + static_cast<int64_t>(i)};
    // Only keys admitted before `evict_below` are evicted: a reordered window
    // must not send an evict ahead of the admit of the same key.
    const bool can_evict = lo < std::min(hi, evict_below);
    const bool at_cap = live_cap > 0 && hi - lo >= live_cap;
    if (can_evict && (at_cap || (config_.evict_ratio > 0 && evict(rng_)))) {
      ops.push_back(msg::KVOpEvent{msg::OpType::evict, truth_.random_key(lo++), seq});
      ++evicts;
    } else {
      ops.push_back(msg::KVOpEvent{msg::OpType::admit, truth_.random_key(hi++), seq});
    }
  }
}

uint64_t simulated_worker::push_random(const push_limits& limits) {
  const uint64_t chunk_max = uint64_t{config_.batch_ops} * config_.msgs_per_multipart;
  const auto t0 = steady::now();
  auto last_flush = t0;
  uint64_t sent = 0;
  uint64_t paced = 0; // sent, plus the ops the backlog bound let go
  std::vector<msg::KVOpEvent> ops;
  ops.reserve(chunk_max);
  while (!limits.stop.stop_requested() && steady::now() < limits.deadline &&
         (limits.max_ops == 0 || sent < limits.max_ops)) {
    if (auto reason = take_full_sync_request()) {
      (void)full_sync(std::move(*reason), limits.stop); // frozen: no new KV events meanwhile
      continue;
    }
    bool restart = false;
    {
      std::lock_guard lock{mutex_};
      restart = std::exchange(restart_requested_, false);
    }
    if (restart) {
      restart_as_new_process(limits);
      continue;
    }
    uint64_t budget = chunk_max;
    if (limits.max_ops != 0)
      budget = std::min(budget, limits.max_ops - sent);
    if (limits.ops_per_s > 0) {
      const auto now = steady::now();
      const auto allowed =
          static_cast<uint64_t>(limits.ops_per_s * std::chrono::duration<double>(now - t0).count());
      uint64_t due = allowed > paced ? allowed - paced : 0;
      if (limits.max_backlog_s > 0) {
        const auto most = static_cast<uint64_t>(limits.ops_per_s * limits.max_backlog_s);
        if (due > most) {
          counters_.skipped_ops += due - most;
          paced += due - most;
          due = most;
        }
      }
      if (due == 0 || (due < config_.batch_ops && now - last_flush < batch_timeout)) {
        std::this_thread::sleep_for(1ms);
        continue;
      }
      budget = std::min(budget, due);
    }
    std::optional<stream_fault> fault;
    {
      std::lock_guard lock{mutex_};
      fault = std::exchange(pending_fault_, std::nullopt);
    }
    if (fault && fault->what == stream_fault::kind::reorder) {
      const uint64_t n = push_reordered(fault->order, limits);
      sent += n;
      paced += n;
      last_flush = steady::now();
      continue;
    }
    ops.clear();
    uint64_t lo = truth_.lo();
    uint64_t hi = truth_.hi();
    uint64_t evicts = 0;
    make_ops(ops, budget, lo, hi, std::numeric_limits<uint64_t>::max(), limits.live_cap, evicts);
    const auto frames = encode_batches(ops);
    if (!send_until(frames, limits))
      break;     // never sent: neither the seq counter nor the ground truth moves
    if (fault) { // duplicate: the same multipart again, seq numbers and all
      (void)send_until(frames, limits);
      if (--fault->multiparts > 0) {
        std::lock_guard lock{mutex_};
        if (!pending_fault_)
          pending_fault_ = std::move(fault);
      } else {
        ++counters_.stream_faults;
      }
    }
    next_seq_ += static_cast<int64_t>(ops.size());
    truth_.commit_range(lo, hi);
    sent += ops.size();
    paced += ops.size();
    counters_.ops_sent += ops.size();
    counters_.evicts += evicts;
    counters_.admits += ops.size() - evicts;
    last_flush = steady::now();
  }
  return sent;
}

uint64_t simulated_worker::push_reordered(const std::vector<uint32_t>& order,
                                          const push_limits& limits) {
  uint64_t lo = truth_.lo();
  uint64_t hi = truth_.hi();
  const uint64_t evict_below = hi;
  uint64_t evicts = 0;
  std::vector<msg::KVOpEvent> ops;
  std::vector<std::vector<std::string>> parts;
  for (size_t k = 0; k < order.size(); ++k) {
    const size_t before = ops.size();
    make_ops(ops, config_.batch_ops, lo, hi, evict_below, limits.live_cap, evicts);
    std::vector<msg::KVOpEvent> part(ops.begin() + static_cast<ptrdiff_t>(before), ops.end());
    parts.push_back(encode_batches(part));
  }
  // Once the first part is out the window must go out whole, or the ground
  // truth would not say what the controller was sent.
  const push_limits whole{.deadline = steady::now() + 60s};
  for (size_t k = 0; k < order.size(); ++k)
    if (!send_until(parts.at(order[k]), k == 0 ? limits : whole)) {
      if (k == 0)
        return 0;
      throw std::runtime_error(identity_.instance_id + ": a reordered window was sent in part");
    }
  next_seq_ += static_cast<int64_t>(ops.size());
  truth_.commit_range(lo, hi);
  counters_.ops_sent += ops.size();
  counters_.evicts += evicts;
  counters_.admits += ops.size() - evicts;
  ++counters_.stream_faults;
  return ops.size();
}

void simulated_worker::request_restart() {
  std::lock_guard lock{mutex_};
  restart_requested_ = true;
}

void simulated_worker::inject(stream_fault f) {
  std::lock_guard lock{mutex_};
  pending_fault_ = std::move(f);
}

void simulated_worker::restart_as_new_process(const push_limits& limits) {
  const std::vector<int64_t> pinned = truth_.pinned();
  // The frames the old process still queued die with it.
  push_.set(zmq::sockopt::linger, 0);
  push_.close();
  push_ = make_socket(*ctx_, zmq::socket_type::push, push_send_timeout_ms, push_linger_ms);
  push_.set(zmq::sockopt::sndhwm, push_hwm);
  push_.connect(config_.push_url);
  truth_.clear();
  next_seq_ = 0;
  {
    std::lock_guard lock{mutex_};
    pending_full_sync_.reset(); // the new process is asked again if it owes one
    pending_fault_.reset();
  }
  // A worker retries its registration until a controller answers: a home
  // that is frozen or cut off answers late or with an ErrorMsg for a while.
  const auto give_up = steady::now() + 60s;
  while (true) {
    try {
      register_with_controller();
      break;
    } catch (const std::exception& e) {
      if (steady::now() >= give_up || limits.stop.stop_requested())
        throw;
      spdlog::warn("{}: registration after a restart failed ({}); retrying", identity_.instance_id,
                   e.what());
      std::this_thread::sleep_for(500ms);
    }
  }
  if (!admit_pinned(pinned, steady::now() + 60s))
    throw std::runtime_error(identity_.instance_id + ": pinned keys not taken after a restart");
  ++counters_.restarts;
}

bool simulated_worker::admit_pinned(std::span<const int64_t> keys, steady::time_point deadline) {
  const size_t chunk_max = size_t{config_.batch_ops} * config_.msgs_per_multipart;
  std::vector<msg::KVOpEvent> ops;
  for (size_t i = 0; i < keys.size(); i += chunk_max) {
    auto part = keys.subspan(i, std::min(chunk_max, keys.size() - i));
    ops.clear();
    for (size_t k = 0; k < part.size(); ++k)
      ops.push_back(msg::KVOpEvent{msg::OpType::admit, part[k],
                                   msg::wire_int{next_seq_ + static_cast<int64_t>(k)}});
    if (!send_until(encode_batches(ops), push_limits{.deadline = deadline}))
      return false;
    next_seq_ += static_cast<int64_t>(ops.size());
    truth_.add_pinned(part);
    counters_.ops_sent += ops.size();
    counters_.admits += ops.size();
  }
  return true;
}

void simulated_worker::preload(uint64_t n) {
  truth_.commit_range(truth_.lo(), truth_.hi() + n);
}

void simulated_worker::deregister() {
  stop_service(); // no heartbeat after the DeRegisterMsg: it would re-register us
  std::vector<std::string> frame{msg::encode_msgpack(msg::DeRegisterMsg{
      .instance_id = identity_.instance_id,
      .worker_id = identity_.worker_id,
      .ip = "127.0.0.1",
      .port = rep_port_,
  })};
  (void)send_frames(push_, frame);
}

} // namespace lmcc::bench
