// router_loop: the body of an S2/S3 ROUTER socket thread: decode, hand to
// the handler, and send each peer's replies in the order its requests came.
//
// Private to gateway/: included by zmq_frontend.cpp only.
#pragma once

#include "gateway/internal/reply_order.hpp"
#include "gateway/zmq_frontend.hpp"
#include "messages/codec_json.hpp"

#include <deque>
#include <optional>
#include <unordered_map>

namespace lmcc::gateway::internal {

// -- S2/S3 ROUTER loop ---------------------------------------------------------

/// The ROUTER thread's body. Each request takes the next place in its peer's
/// queue; replies, on whatever thread and in whatever order they are produced,
/// leave each peer's queue strictly from the front. Peers do not wait for each
/// other.
class router_loop {
public:
  router_loop(request_socket kind, zmq::socket_t& socket, std::shared_ptr<reply_mailbox> mailbox,
              frontend_handler& handler, const zmq_options& options, frontend_counters& counters,
              const std::atomic<bool>& stopping)
    : kind_(kind), name_(socket_name(kind)), socket_(socket), mailbox_(std::move(mailbox)),
      handler_(handler), options_(options), counters_(counters), stopping_(stopping) {}

  void run() {
    zmq_pollitem_t items[2] = {{socket_.handle(), 0, ZMQ_POLLIN, 0},
                               {nullptr, mailbox_->wake_fd(), ZMQ_POLLIN, 0}};
    while (!stopping_.load()) {
      try {
        zmq::poll(items, 2, poll_forever);
        if (stopping_.load())
          break;
        if (items[1].revents & ZMQ_POLLIN)
          deliver_finished();
        if (items[0].revents & ZMQ_POLLIN) {
          for (int i = 0; i < max_messages_per_drain && !stopping_.load() && receive_one(); ++i) {
          }
          // Handlers often answer synchronously: send those replies now
          // rather than after another trip through poll.
          deliver_finished();
          if (kind_ == request_socket::reply)
            counters_.reply_has_pending.store(has_input(socket_) ? 1 : 0);
        }
      } catch (const zmq::error_t& e) {
        if (e.num() == ETERM) {
          spdlog::warn("zmq-frontend-context-closed socket={}", name_);
          break;
        }
        if (e.num() != EINTR)
          spdlog::error("router-socket-error socket={} error={}", name_, e.what());
      } catch (const std::exception& e) {
        spdlog::error("router-loop-error socket={} error={}", name_, e.what());
      }
    }
    abandon_pending();
  }

private:
  /// A request of one peer, in arrival order, and its reply once there is one.
  struct pending_reply {
    uint64_t seq = 0;
    std::optional<std::string> payload; ///< msgpack
    bool is_error = false;
  };
  /// Per peer, requests whose replies have not left yet, oldest first.
  using peer_map = std::unordered_map<std::string, std::deque<pending_reply>>;

  /// Receives one multipart; false when there was none.
  bool receive_one() {
    zmq::message_t identity;
    if (!socket_.recv(identity, zmq::recv_flags::dontwait))
      return false;
    // Keep only the first and the last frame: a peer sending many frames must
    // not make us hold them all.
    zmq::message_t payload;
    size_t frames = 1;
    for (bool more = identity.more(); more; more = payload.more()) {
      if (!socket_.recv(payload, zmq::recv_flags::none))
        break; // cannot happen: ZMQ delivers multiparts atomically
      ++frames;
    }
    counters_.reply_requests.fetch_add(1);
    if (frames < 2) {
      // Without a payload there is no request to answer.
      counters_.bad_frames.fetch_add(1);
      log_bad("router-short-message", identity.to_string_view(),
              fmt::format("expected >= 2 frames, got {}", frames));
      return true;
    }
    handle_request(identity.to_string(), payload.to_string_view());
    return true;
  }

  /// Gives the request its place in its peer's order, then either hands it to
  /// the handler or answers it with an ErrorMsg made here. Either way the
  /// reply takes that place, so a bad request cannot overtake a slow good one.
  void handle_request(const std::string& identity, std::string_view payload) {
    auto it = peers_.try_emplace(identity).first;
    const bool overloaded = it->second.size() >= options_.max_pending_per_peer;
    const uint64_t seq = next_seq_++;
    it->second.push_back({.seq = seq});
    counters_.reply_active.fetch_add(1);
    std::optional<std::string> error;
    if (overloaded) {
      log_bad("router-peer-overloaded", identity, fmt::format("pending={}", it->second.size() - 1));
      error = std::string(too_many_pending_text);
    } else {
      try {
        error = dispatch(identity, seq, payload);
      } catch (const std::exception& e) {
        error = fmt::format("internal error: {}", e.what());
      }
    }
    if (error) {
      fill(it->second, seq,
           msg::encode_msgpack(msg::Msg{msg::ErrorMsg{.error = std::move(*error)}}), true);
      flush(it);
    }
  }

  /// Decodes the payload and hands it to the handler; returns the text of the
  /// ErrorMsg to answer with instead, if any.
  std::optional<std::string> dispatch(const std::string& identity, uint64_t seq,
                                      std::string_view payload) {
    auto decoded = msg::decode_frame(payload, options_.limits);
    if (!decoded) {
      counters_.bad_frames.fetch_add(1);
      log_bad("router-bad-request", identity, decoded.error().message, payload);
      return decoded.error().message;
    }
    if (auto refusal = refuse(*decoded)) {
      counters_.bad_frames.fetch_add(1);
      log_bad("router-bad-request", identity, *refusal, payload);
      return refusal;
    }
    auto slot = std::make_shared<reply_slot>(mailbox_, identity, seq, kind_);
    reply_fn reply = [slot, name = name_](msg::Msg m) {
      if (slot->complete(std::move(m)) == reply_slot::outcome::duplicate)
        spdlog::warn("reply-duplicate socket={} reason=handler answered twice", name);
    };
    const std::string_view type = msg::type_tag_of(*decoded);
    try {
      handler_.on_request(kind_, std::move(*decoded), std::move(reply));
    } catch (const std::exception& e) {
      handler_failed(*slot, identity, type, e.what());
    } catch (...) {
      handler_failed(*slot, identity, type, "unknown exception");
    }
    return std::nullopt;
  }

  /// The ErrorMsg text for a request of the wrong family, or nullopt.
  std::optional<std::string> refuse(const msg::Msg& m) const {
    if (kind_ == request_socket::heartbeat) {
      if (std::holds_alternative<msg::HeartbeatMsg>(m))
        return std::nullopt;
      return fmt::format("Expected HeartbeatMsg, got {}", msg::type_tag_of(m));
    }
    if (msg::family_of(m) == msg::msg_family::worker_request)
      return std::nullopt;
    return fmt::format("Unknown message type: {}", msg::type_tag_of(m));
  }

  void handler_failed(reply_slot& slot, const std::string& identity, std::string_view type,
                      std::string_view what) {
    counters_.handler_errors.fetch_add(1);
    uint64_t suppressed = 0;
    if (handler_log_.allow(suppressed))
      spdlog::error("router-handler-threw socket={} peer={} type={} error={} suppressed={}", name_,
                    hex(identity, log_head_bytes), type, printable(what), suppressed);
    // Dropped as a duplicate if the handler answered before throwing.
    slot.complete(msg::Msg{msg::ErrorMsg{.error = fmt::format("internal error: {}", what)}});
  }

  void deliver_finished() {
    for (auto& reply : mailbox_->take()) {
      auto it = peers_.find(reply.identity);
      if (it == peers_.end())
        continue; // cannot happen: a peer is forgotten only when nothing is pending
      fill(it->second, reply.seq, std::move(reply.payload), reply.is_error);
      flush(it);
    }
  }

  static void fill(std::deque<pending_reply>& pending, uint64_t seq, std::string payload,
                   bool is_error) {
    auto at = std::lower_bound(pending.begin(), pending.end(), seq,
                               [](const pending_reply& p, uint64_t s) { return p.seq < s; });
    if (at == pending.end() || at->seq != seq || at->payload)
      return; // cannot happen: every request is answered once
    at->payload = std::move(payload);
    at->is_error = is_error;
  }

  /// Sends the peer's replies that are next in line; forgets the peer when
  /// nothing of it is pending (a reconnected DEALER has a new identity).
  void flush(peer_map::iterator it) {
    auto& pending = it->second;
    while (!pending.empty() && pending.front().payload) {
      send_reply(it->first, *pending.front().payload);
      if (pending.front().is_error)
        counters_.error_replies.fetch_add(1);
      pending.pop_front();
      counters_.reply_active.fetch_sub(1);
    }
    if (pending.empty())
      peers_.erase(it);
  }

  void send_reply(const std::string& identity, const std::string& payload) {
    // ROUTER without ROUTER_MANDATORY never blocks: a reply to a peer that is
    // gone or over its high-water mark is dropped by ZMQ.
    const auto more = zmq::send_flags::sndmore | zmq::send_flags::dontwait;
    try {
      if (socket_.send(zmq::buffer(identity), more) && socket_.send(zmq::const_buffer(), more) &&
          socket_.send(zmq::buffer(payload), zmq::send_flags::dontwait))
        return;
      spdlog::warn("router-send-dropped socket={} peer={}", name_, hex(identity, log_head_bytes));
    } catch (const zmq::error_t& e) {
      spdlog::warn("router-send-failed socket={} peer={} error={}", name_,
                   hex(identity, log_head_bytes), e.what());
    }
  }

  void log_bad(std::string_view event, std::string_view identity, std::string_view error,
               std::string_view frame = {}) {
    uint64_t suppressed = 0;
    if (bad_log_.allow(suppressed))
      spdlog::warn("{} socket={} peer={} bytes={} head={} error={} suppressed={}", event, name_,
                   hex(identity, log_head_bytes), frame.size(), hex(frame, log_head_bytes),
                   printable(error), suppressed);
  }

  /// On exit: requests still waiting will never be answered by this socket.
  void abandon_pending() {
    int64_t pending = 0;
    for (const auto& [identity, replies] : peers_)
      pending += static_cast<int64_t>(replies.size());
    counters_.reply_active.fetch_sub(pending);
    peers_.clear();
  }

  request_socket kind_;
  std::string_view name_;
  zmq::socket_t& socket_;
  std::shared_ptr<reply_mailbox> mailbox_;
  frontend_handler& handler_;
  const zmq_options& options_;
  frontend_counters& counters_;
  const std::atomic<bool>& stopping_;
  peer_map peers_;
  uint64_t next_seq_ = 0;
  log_throttle bad_log_;
  log_throttle handler_log_;
};

} // namespace lmcc::gateway::internal
