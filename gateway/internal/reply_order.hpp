// reply_order: how a ROUTER socket's replies, produced on any thread in any
// order, reach its socket thread and leave each peer's queue in request order
// (spec 2.2: no correlation id, exactly one reply per request).
//
// Private to gateway/: included by the router loop only.
#pragma once

#include "gateway/internal/socket_util.hpp"
#include "messages/codec_msgpack.hpp"

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace lmcc::gateway::internal {

// -- reply ordering ------------------------------------------------------------

/// A reply finished by a handler (on any thread), addressed to its request.
/// `seq` numbers the requests of one ROUTER socket, never reused, so a reply
/// can never be mistaken for the answer to a later request of the same peer.
struct finished_reply {
  std::string identity;
  uint64_t seq = 0;
  std::string payload; ///< msgpack
  bool is_error = false;
};

/// What the reply_fns of one ROUTER socket share with its thread. The front end
/// owns it; reply_fns hold it weakly, so a reply that comes after stop() (or
/// after the front end is gone) finds it closed or expired and is dropped.
class reply_mailbox {
public:
  /// False when the mailbox is closed (the reply is dropped).
  bool post(finished_reply reply) {
    bool was_empty = false;
    {
      std::lock_guard lock(mutex_);
      if (closed_)
        return false;
      was_empty = items_.empty();
      items_.push_back(std::move(reply));
    }
    // The thread swaps the whole queue out, so one wake-up per batch suffices.
    if (was_empty)
      wake_.notify();
    return true;
  }

  /// Everything posted so far. Clears the eventfd before taking the queue, so a
  /// reply posted in between is either taken now or signals the next poll.
  std::vector<finished_reply> take() {
    wake_.clear();
    std::lock_guard lock(mutex_);
    return std::exchange(items_, {});
  }

  void close() {
    {
      std::lock_guard lock(mutex_);
      closed_ = true;
      items_.clear();
    }
    wake_.notify();
  }

  int wake_fd() const noexcept { return wake_.fd(); }

private:
  std::mutex mutex_;
  bool closed_ = false;
  std::vector<finished_reply> items_;
  event_fd wake_;
};

/// One accepted request's right to be answered, shared by every copy of its
/// reply_fn. The first answer wins; if the last copy dies unanswered (the
/// handler dropped it) the peer still gets an ErrorMsg, because a missing reply
/// would hold back every later reply to that peer.
class reply_slot {
public:
  reply_slot(std::weak_ptr<reply_mailbox> mailbox, std::string identity, uint64_t seq,
             request_socket socket)
    : mailbox_(std::move(mailbox)), identity_(std::move(identity)), seq_(seq), socket_(socket) {}

  ~reply_slot() {
    if (answered_.load())
      return;
    const std::string peer = hex(identity_, log_head_bytes);
    if (complete(msg::Msg{msg::ErrorMsg{
            .error = "internal error: request dropped without reply"}}) == outcome::posted)
      spdlog::error("reply-never-sent socket={} peer={} seq={}", socket_name(socket_), peer, seq_);
  }
  reply_slot(const reply_slot&) = delete;
  reply_slot& operator=(const reply_slot&) = delete;

  enum class outcome {
    posted,    ///< on its way to the ROUTER thread
    duplicate, ///< this request was answered already; `reply` is dropped
    stopped,   ///< the socket is stopped or gone; `reply` is dropped
  };

  /// Sends `reply` unless this request was answered already.
  outcome complete(msg::Msg reply) noexcept {
    if (answered_.exchange(true))
      return outcome::duplicate;
    auto mailbox = mailbox_.lock();
    if (!mailbox)
      return outcome::stopped;
    try {
      const bool is_error = std::holds_alternative<msg::ErrorMsg>(reply);
      return mailbox->post({std::move(identity_), seq_, msg::encode_msgpack(reply), is_error})
                 ? outcome::posted
                 : outcome::stopped;
    } catch (const std::exception& e) {
      spdlog::error("reply-encode-failed socket={} seq={} error={}", socket_name(socket_), seq_,
                    e.what());
      return outcome::stopped;
    }
  }

private:
  std::weak_ptr<reply_mailbox> mailbox_;
  std::string identity_;
  uint64_t seq_;
  request_socket socket_;
  std::atomic<bool> answered_{false};
};

} // namespace lmcc::gateway::internal
