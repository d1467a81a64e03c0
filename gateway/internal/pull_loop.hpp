// pull_loop: the body of the S1 PULL socket thread: read multiparts while
// the ingest gate has room, decode each frame in isolation, and hand a drain
// round's frames to the handler at once.
//
// Coalescing. Every round costs thread wake-ups in the node, and on a VM each
// wake-up is a costly context switch. Two ways to gather a round:
//  - light traffic: a small round waits pull_coalesce for more (coalesce());
//  - busy connections (a round held more multiparts than there are
//    connections): the connections are held (pull_connections.hpp): their
//    bytes wait in the kernel and libzmq's I/O thread sleeps, instead of
//    waking for every multipart a worker sends (at a steady 100 k ops/s in
//    50-op multiparts, ~1 500 wake-ups a second, the largest share of the
//    node's CPU). Every pull_coalesce the loop releases the connections with
//    bytes waiting, and their multiparts make one round. Holding stops after a
//    period with nothing to release. An op waits at most pull_coalesce either way.
//
// Private to gateway/: included by zmq_frontend.cpp only.
#pragma once

#include "clock/clock.hpp"
#include "gateway/internal/pull_connections.hpp"
#include "gateway/internal/socket_util.hpp"
#include "gateway/zmq_frontend.hpp"
#include "messages/codec_json.hpp"

#include <algorithm>
#include <thread>
#include <vector>

namespace lmcc::gateway::internal {

// -- S1 PULL loop --------------------------------------------------------------

class pull_loop {
public:
  pull_loop(zmq::socket_t& socket, pull_connections& connections, const event_fd& wake,
            frontend_handler& handler, const zmq_options& options, frontend_counters& counters,
            const std::atomic<bool>& stopping)
    : socket_(socket), connections_(connections), wake_(wake), handler_(handler), options_(options),
      counters_(counters), stopping_(stopping) {}

  void run() {
    ingest_gate* gate = handler_.gate();
    zmq_pollitem_t items[3] = {{socket_.handle(), 0, ZMQ_POLLIN, 0},
                               {nullptr, wake_.fd(), ZMQ_POLLIN, 0},
                               connections_.poll_item()};
    while (!stopping_.load()) {
      try {
        if (gate && gate->exhausted() && wait_for_credit(*gate))
          continue;
        zmq::poll(items, 3, poll_timeout());
        if (items[2].revents & ZMQ_POLLIN)
          connections_.read_events();
        if (stopping_.load())
          continue;
        if (connections_.holding())
          release_due();
        if (!(items[0].revents & ZMQ_POLLIN))
          continue;
        const uint64_t room = gate ? gate->room() : UINT64_MAX;
        round_credits_ = 0;
        round_multiparts_ = 0;
        drain(room);
        if (connections_.holding())
          gather_released(room);
        else
          coalesce(room);
        const uint64_t multiparts = round_multiparts_;
        hand_over_round();
        if (connections_.holding())
          connections_.hold_drained();
        else if (options_.pull_hold_bytes > 0 && options_.pull_coalesce.count() > 0 &&
                 multiparts > connections_.open())
          start_holding();
        counters_.pull_has_pending.store(has_input(socket_) ? 1 : 0);
      } catch (const zmq::error_t& e) {
        if (e.num() == ETERM) {
          spdlog::warn("zmq-frontend-context-closed socket=pull");
          break;
        }
        if (e.num() != EINTR)
          spdlog::error("pull-socket-error socket=pull error={}", e.what());
      } catch (const std::exception& e) {
        spdlog::error("pull-loop-error socket=pull error={}", e.what());
      }
    }
    drain_on_stop();
  }

private:
  /// On stop: every frame a worker has written is, for the worker, sent.
  /// What is read here is handed over and committed by the node's drain,
  /// instead of every busy worker resyncing after a clean restart. Two steps:
  ///  1. catch up: read until neither the socket nor the kernel holds unread
  ///     input (at most half of pull_stop_drain);
  ///  2. half-close every connection (pull_connections.hpp says why) and read
  ///     until each worker has closed its side.
  /// Step 1 is needed: without it, frames still queued in the kernel when a
  /// worker's close arrived were lost in 4 of 8 runs of a busy-worker restart
  /// test (0 of 27 with it). The likely cause: the close comes while libzmq
  /// has stopped reading the connection at its high-water mark
  /// (pull_queue_messages), and libzmq then ends the connection without
  /// reading the rest. Bounded by pull_stop_drain: a peer that floods or
  /// ignores the half-close cannot hold the stop.
  void drain_on_stop() {
    const auto started = steady_now();
    connections_.stop_holding(); // what the kernel holds is read now
    counters_.pull_holding.store(0);
    const auto deadline = started + options_.pull_stop_drain;
    uint64_t handed = 0;
    size_t half_closed = 0;
    try {
      handed += catch_up(started + options_.pull_stop_drain / 2);
      half_closed = connections_.half_close_all();
      handed += read_until_closed(deadline);
    } catch (const std::exception& e) {
      spdlog::warn("pull-final-drain-error error={}", e.what());
    }
    hand_over_round();
    const auto ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(steady_now() - started).count();
    if (connections_.open() > 0)
      spdlog::warn("pull-final-drain-incomplete frames_handed_over={} connections={} still_open={} "
                   "ms={} limit_ms={}",
                   handed, half_closed, connections_.open(), ms, options_.pull_stop_drain.count());
    else
      spdlog::info("pull-final-drain frames_handed_over={} connections={} ms={}", handed,
                   half_closed, ms);
  }

  /// Reads what is queued now, handing it over in rounds; returns the
  /// multiparts read.
  uint64_t read_queued(std::chrono::steady_clock::time_point deadline) {
    uint64_t read = 0;
    while (steady_now() < deadline && receive_one()) {
      ++read;
      if (round_.size() >= 4096)
        hand_over_round();
    }
    return read;
  }

  /// Reads within the ingest gate's credit, as the loop does; ends early when
  /// the credit runs out: the node is behind (a flood), it cannot catch up, and
  /// reading past the credit only adds to what the stop must commit.
  uint64_t catch_up(std::chrono::steady_clock::time_point deadline) {
    ingest_gate* gate = handler_.gate();
    uint64_t read = 0;
    while (steady_now() < deadline && !(gate && gate->exhausted())) {
      connections_.read_events();
      const uint64_t room = gate ? gate->room() : UINT64_MAX;
      round_credits_ = 0;
      uint64_t now_read = 0;
      while (round_credits_ < room && steady_now() < deadline && receive_one())
        ++now_read;
      hand_over_round();
      read += now_read;
      if (now_read == 0 && connections_.unread_bytes() == 0)
        break;
    }
    return read;
  }

  uint64_t read_until_closed(std::chrono::steady_clock::time_point deadline) {
    uint64_t read = 0;
    zmq_pollitem_t items[2] = {{socket_.handle(), 0, ZMQ_POLLIN, 0}, connections_.poll_item()};
    for (;;) {
      read += read_queued(deadline);
      // libzmq queues a connection's last frames for this socket before it
      // reports the disconnection: once none is open, all were read above.
      const auto now = steady_now();
      if (connections_.open() == 0 || now >= deadline)
        return read;
      zmq::poll(items, 2,
                std::min(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now),
                         std::chrono::milliseconds(10)));
      connections_.read_events();
    }
  }

  /// Receives and handles one multipart; false when there was none.
  bool receive_one() {
    zmq::message_t frame;
    if (!socket_.recv(frame, zmq::recv_flags::dontwait))
      return false;
    std::vector<zmq::message_t> frames;
    size_t total = 0;
    for (;;) {
      ++total;
      const bool more = frame.more();
      if (frames.size() < options_.max_frames_per_multipart)
        frames.push_back(std::move(frame)); // leaves `frame` empty and reusable
      if (!more || !socket_.recv(frame, zmq::recv_flags::none))
        break; // recv cannot fail here: ZMQ delivers multiparts atomically
    }
    counters_.pull_frames.fetch_add(total);
    ++round_multiparts_;
    ++multiparts_since_release_;
    if (total > frames.size()) {
      counters_.bad_frames.fetch_add(total - frames.size());
      log_bad(0, {},
              fmt::format("{} frames in one multipart, max {}: dropped {}", total,
                          options_.max_frames_per_multipart, total - frames.size()));
    }
    for (const auto& f : frames) {
      try {
        handle_frame(f.to_string_view());
      } catch (const std::exception& e) {
        // Say std::bad_alloc while decoding: this frame is lost, the rest are not.
        counters_.bad_frames.fetch_add(1);
        log_bad(f.size(), f.to_string_view(), e.what());
      }
    }
    return true;
  }

  /// Reads what is queued, up to a round's worth.
  void drain(uint64_t room) {
    for (int i = 0;
         i < max_messages_per_drain && !stopping_.load() && round_credits_ < room && receive_one();
         ++i) {
    }
  }

  /// A small round waits up to pull_coalesce for more frames: every round
  /// costs thread wake-ups in the node (ZMQ -> this thread -> the actors), and
  /// on a VM every wake-up is a costly syscall. The thread sleeps rather than
  /// polls: while it does not read, ZMQ's I/O thread queues arriving frames
  /// without signalling it, so a sleep also saves the I/O thread's wake-ups.
  /// LMCache workers batch their own ops for up to 10 ms.
  void coalesce(uint64_t room) {
    if (options_.pull_coalesce.count() <= 0 || round_.empty() ||
        round_credits_ >= options_.pull_coalesce_ops || round_credits_ >= room)
      return;
    std::this_thread::sleep_for(options_.pull_coalesce);
    drain(room);
  }

  // -- holding (see the top of this file) -------------------------------------

  std::chrono::milliseconds poll_timeout() const {
    if (!connections_.holding())
      return poll_forever;
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(next_release_ - steady_now());
    return std::clamp(left, std::chrono::milliseconds{0}, poll_interval);
  }

  void start_holding() {
    connections_.start_holding();
    counters_.pull_holding.store(1);
    counters_.pull_hold_starts.fetch_add(1);
    next_release_ = steady_now() + options_.pull_coalesce;
    multiparts_since_release_ = 0;
    spdlog::debug("pull-holding-started connections={}", connections_.open());
  }

  /// Once a period: releases the held connections with bytes waiting; stops
  /// holding when a whole period brought nothing.
  void release_due() {
    const auto now = steady_now();
    if (now < next_release_)
      return;
    next_release_ = now + options_.pull_coalesce;
    const size_t released = connections_.release_pending();
    if (released == 0 && multiparts_since_release_ == 0) {
      connections_.stop_holding();
      counters_.pull_holding.store(0);
      spdlog::debug("pull-holding-stopped connections={}", connections_.open());
    }
    multiparts_since_release_ = 0;
    if (released > 0)
      std::this_thread::sleep_for(settle); // libzmq reads them meanwhile (gather_released)
  }

  /// After a release libzmq reads the released connections one after the
  /// other: waits (briefly) until it has read them all, so that their
  /// multiparts make one round. It sleeps rather than polls the socket: a
  /// poll would wake for each connection's first multipart.
  void gather_released(uint64_t room) {
    const auto until = steady_now() + max_gather;
    while (round_credits_ < room && round_credits_ < options_.pull_coalesce_ops &&
           !stopping_.load() && steady_now() < until && connections_.release_in_progress()) {
      std::this_thread::sleep_for(settle);
      drain(room);
    }
  }

  /// Stops reading S1 until the gate has credit again (or the loop stops);
  /// true when it waited.
  bool wait_for_credit(ingest_gate& gate) {
    if (!gate.arm())
      return false;
    counters_.pull_paused.store(1);
    zmq_pollitem_t items[3] = {{nullptr, gate.wake_fd(), ZMQ_POLLIN, 0},
                               {nullptr, wake_.fd(), ZMQ_POLLIN, 0},
                               connections_.poll_item()};
    while (!stopping_.load()) {
      zmq::poll(items, 3, poll_interval);
      if (items[2].revents & ZMQ_POLLIN)
        connections_.read_events();
      if (items[0].revents & ZMQ_POLLIN)
        break;
      if (!gate.exhausted())
        break; // a wake-up lost to a race costs one poll interval, never a hang
    }
    gate.disarm();
    counters_.pull_paused.store(0);
    return true;
  }

  /// Hands the frames decoded since the last hand-over to the handler.
  void hand_over_round() {
    if (round_.empty())
      return;
    try {
      handler_.on_push_round(round_);
    } catch (const std::exception& e) {
      handler_failed("round", e.what());
    } catch (...) {
      handler_failed("round", "unknown exception");
    }
    counters_.pull_active.fetch_sub(static_cast<int64_t>(round_.size()));
    round_.clear();
  }

  void handle_frame(std::string_view frame) {
    auto decoded = msg::decode_frame(frame, options_.limits);
    if (!decoded) {
      counters_.bad_frames.fetch_add(1);
      log_bad(frame.size(), frame, decoded.error().message);
      return;
    }
    const auto family = msg::family_of(*decoded);
    const std::string_view type = msg::type_tag_of(*decoded);
    if (family != msg::msg_family::worker_push && family != msg::msg_family::orchestration) {
      counters_.bad_frames.fetch_add(1);
      log_bad(frame.size(), frame, fmt::format("unexpected message type {} on pull socket", type));
      return;
    }
    counters_.pull_active.fetch_add(1);
    round_credits_ += ingest_credits(*decoded);
    round_.push_back(std::move(*decoded));
  }

  void handler_failed(std::string_view type, std::string_view what) {
    counters_.handler_errors.fetch_add(1);
    uint64_t suppressed = 0;
    if (handler_log_.allow(suppressed))
      spdlog::error("pull-handler-threw socket=pull type={} error={} suppressed={}", type,
                    printable(what), suppressed);
  }

  void log_bad(size_t bytes, std::string_view frame, std::string_view error) {
    uint64_t suppressed = 0;
    if (bad_log_.allow(suppressed))
      spdlog::warn("pull-bad-frame socket=pull bytes={} head={} error={} suppressed={}", bytes,
                   hex(frame, log_head_bytes), printable(error), suppressed);
  }

  zmq::socket_t& socket_;
  pull_connections& connections_;
  const event_fd& wake_;
  frontend_handler& handler_;
  const zmq_options& options_;
  frontend_counters& counters_;
  const std::atomic<bool>& stopping_;
  log_throttle bad_log_;
  log_throttle handler_log_;
  /// Frames decoded in this drain round, handed over together, and their credits.
  std::vector<msg::Msg> round_;
  uint64_t round_credits_ = 0;
  uint64_t round_multiparts_ = 0;
  /// Holding: when the held connections are next released, and the
  /// multiparts read since the last release.
  std::chrono::steady_clock::time_point next_release_{};
  uint64_t multiparts_since_release_ = 0;
  static constexpr auto max_gather = std::chrono::milliseconds{2};
  static constexpr auto settle = std::chrono::microseconds{500};
};

} // namespace lmcc::gateway::internal
