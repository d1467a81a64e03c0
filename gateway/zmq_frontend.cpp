#include "gateway/zmq_frontend.hpp"

#include "messages/codec_json.hpp"
#include "messages/codec_msgpack.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <zmq.hpp>

#include <algorithm>
#include <arpa/inet.h>
#include <cerrno>
#include <chrono>
#include <deque>
#include <exception>
#include <mutex>
#include <netinet/in.h>
#include <stdexcept>
#include <string_view>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <system_error>
#include <thread>
#include <unistd.h>
#include <unordered_map>
#include <utility>
#include <vector>

namespace lmcc::gateway {
namespace {

using namespace std::chrono_literals;

// -- tuning constants ----------------------------------------------------------

/// Longest a socket thread sleeps in zmq::poll. Only a safety net: stop() and
/// finished replies wake the threads through their eventfds at once.
constexpr auto poll_interval = 200ms;

/// Messages taken from one socket per wake-up before the thread looks at its
/// eventfd again, so a flood of requests cannot hold back the replies.
constexpr int max_messages_per_drain = 256;

/// At most one bad-input line per socket per interval; the rest are counted.
constexpr auto log_interval = 1s;

/// Bytes of a bad frame shown (hex) in its log line.
constexpr size_t log_head_bytes = 16;

/// Characters of untrusted text (error messages quoting peer input) in a log line.
constexpr size_t log_text_chars = 200;

constexpr std::string_view too_many_pending_text = "too many pending requests";

// -- small helpers -------------------------------------------------------------

/// Owns a file descriptor (-1: none).
class unique_fd {
public:
  explicit unique_fd(int fd) noexcept : fd_(fd) {}
  ~unique_fd() {
    if (fd_ >= 0)
      ::close(fd_);
  }
  unique_fd(const unique_fd&) = delete;
  unique_fd& operator=(const unique_fd&) = delete;

  int get() const noexcept { return fd_; }

private:
  int fd_;
};

/// An eventfd used as a level-triggered "look at your mailbox" flag that
/// zmq::poll can wait on next to a ZMQ socket.
class event_fd {
public:
  event_fd() : fd_(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {
    if (fd_.get() < 0)
      throw std::system_error(errno, std::generic_category(), "eventfd");
  }

  int fd() const noexcept { return fd_.get(); }

  void notify() noexcept {
    uint64_t one = 1;
    // Fails only when the counter is saturated, i.e. already signalled.
    if (::write(fd_.get(), &one, sizeof one) < 0) {
    }
  }

  void clear() noexcept {
    uint64_t value = 0;
    // EAGAIN just means it was not signalled.
    if (::read(fd_.get(), &value, sizeof value) < 0) {
    }
  }

private:
  unique_fd fd_;
};

/// Lets one log line through per log_interval and counts the ones it swallows.
class log_throttle {
public:
  /// True when a line may be written now; `suppressed` is then the number of
  /// lines swallowed since the previous one.
  bool allow(uint64_t& suppressed) {
    const auto now = std::chrono::steady_clock::now();
    if (logged_ && now - last_ < log_interval) {
      ++suppressed_;
      return false;
    }
    logged_ = true;
    last_ = now;
    suppressed = std::exchange(suppressed_, 0);
    return true;
  }

private:
  bool logged_ = false;
  std::chrono::steady_clock::time_point last_;
  uint64_t suppressed_ = 0;
};

std::string hex(std::string_view bytes, size_t max_bytes) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < bytes.size() && i < max_bytes; ++i) {
    const auto b = static_cast<uint8_t>(bytes[i]);
    out += digits[b >> 4];
    out += digits[b & 15];
  }
  if (bytes.size() > max_bytes)
    out += "..";
  return out;
}

/// Peer-controlled text made safe for one log line: no control characters
/// (a newline could forge log lines), bounded length.
std::string printable(std::string_view text) {
  std::string out;
  for (size_t i = 0; i < text.size() && i < log_text_chars; ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    out += (c < 0x20 || c == 0x7f) ? '?' : static_cast<char>(c);
  }
  if (text.size() > log_text_chars)
    out += "...";
  return out;
}

bool is_bind_all(std::string_view host) {
  return host.empty() || host == "*" || host == "0.0.0.0";
}

/// A socket of `type` bound to tcp://host:port, closing without linger.
zmq::socket_t bind_socket(zmq::context_t& ctx, zmq::socket_type type, const std::string& host,
                          uint16_t port) {
  zmq::socket_t socket(ctx, type);
  // A controller that stops must not wait for unread replies to drain.
  socket.set(zmq::sockopt::linger, 0);
  std::string bind_host = host.empty() ? "*" : host;
  if (bind_host.find(':') != std::string::npos) {
    socket.set(zmq::sockopt::ipv6, true);
    if (bind_host.front() != '[')
      bind_host = "[" + bind_host + "]";
  }
  const std::string url = fmt::format("tcp://{}:{}", bind_host, port);
  try {
    socket.bind(url);
  } catch (const zmq::error_t& e) {
    throw std::runtime_error(fmt::format("cannot bind {}: {}", url, e.what()));
  }
  spdlog::info("zmq-frontend-bound url={}", url);
  return socket;
}

bool has_input(zmq::socket_t& socket) {
  return (socket.get(zmq::sockopt::events) & ZMQ_POLLIN) != 0;
}

std::string_view socket_name(request_socket s) {
  return s == request_socket::reply ? "reply" : "heartbeat";
}

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
        zmq::poll(items, 2, poll_interval);
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

// -- S1 PULL loop --------------------------------------------------------------

class pull_loop {
public:
  pull_loop(zmq::socket_t& socket, const event_fd& wake, frontend_handler& handler,
            const zmq_options& options, frontend_counters& counters,
            const std::atomic<bool>& stopping)
    : socket_(socket), wake_(wake), handler_(handler), options_(options), counters_(counters),
      stopping_(stopping) {}

  void run() {
    zmq_pollitem_t items[2] = {{socket_.handle(), 0, ZMQ_POLLIN, 0},
                               {nullptr, wake_.fd(), ZMQ_POLLIN, 0}};
    while (!stopping_.load()) {
      try {
        zmq::poll(items, 2, poll_interval);
        if (stopping_.load() || !(items[0].revents & ZMQ_POLLIN))
          continue;
        for (int i = 0; i < max_messages_per_drain && !stopping_.load() && receive_one(); ++i) {
        }
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
    hand_over_queued();
  }

private:
  /// On stop: what ZMQ has already taken off the wire is, for the workers,
  /// sent; handing it over lets the node's drain commit it instead of making
  /// every busy worker resync after a clean restart. Bounded in time, since
  /// workers may keep sending while the socket is open.
  void hand_over_queued() {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1);
    uint64_t handed = 0;
    try {
      while (std::chrono::steady_clock::now() < deadline && receive_one())
        ++handed;
    } catch (const std::exception& e) {
      spdlog::warn("pull-final-drain-error error={}", e.what());
    }
    if (handed > 0)
      spdlog::info("pull-final-drain frames_handed_over={}", handed);
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
    if (total > frames.size()) {
      counters_.bad_frames.fetch_add(total - frames.size());
      log_bad(0, {},
              fmt::format("{} frames in one multipart, max {}: dropped {}", total,
                          options_.max_frames_per_multipart, total - frames.size()));
    }
    counters_.pull_active.fetch_add(static_cast<int64_t>(frames.size()));
    for (const auto& f : frames) {
      try {
        handle_frame(f.to_string_view());
      } catch (const std::exception& e) {
        // Say std::bad_alloc while decoding: this frame is lost, the rest are not.
        counters_.bad_frames.fetch_add(1);
        log_bad(f.size(), f.to_string_view(), e.what());
      }
      counters_.pull_active.fetch_sub(1);
    }
    return true;
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
    try {
      handler_.on_push(std::move(*decoded));
    } catch (const std::exception& e) {
      handler_failed(type, e.what());
    } catch (...) {
      handler_failed(type, "unknown exception");
    }
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
  const event_fd& wake_;
  frontend_handler& handler_;
  const zmq_options& options_;
  frontend_counters& counters_;
  const std::atomic<bool>& stopping_;
  log_throttle bad_log_;
  log_throttle handler_log_;
};

/// Runs `body` as a thread whose escaping exception is logged, not fatal.
template <class Body>
std::thread spawn(std::string_view name, Body body) {
  return std::thread([name, body = std::move(body)]() mutable {
    try {
      body();
    } catch (const std::exception& e) {
      spdlog::critical("zmq-frontend-thread-died socket={} error={}", name, e.what());
    }
  });
}

} // namespace

// -- zmq_frontend --------------------------------------------------------------

class zmq_frontend::impl {
public:
  impl(zmq::context_t& context, zmq_options options, frontend_handler& handler)
    : context_(context), options_(std::move(options)), handler_(handler) {}

  void start() {
    if (running_)
      throw std::logic_error("zmq_frontend already started");
    // Bind everything before starting any thread: a failed bind leaves nothing
    // running and unbinds the sockets already bound (linger 0).
    zmq::socket_t pull =
        bind_socket(context_, zmq::socket_type::pull, options_.host, options_.pull_port);
    std::optional<zmq::socket_t> reply, heartbeat;
    if (options_.reply_port)
      reply = bind_socket(context_, zmq::socket_type::router, options_.host, *options_.reply_port);
    if (options_.heartbeat_port)
      heartbeat =
          bind_socket(context_, zmq::socket_type::router, options_.host, *options_.heartbeat_port);

    stopping_.store(false);
    pull_wake_.emplace();
    pull_ = std::move(pull);
    reply_ = std::move(reply);
    heartbeat_ = std::move(heartbeat);
    running_ = true;
    try {
      pull_thread_ = spawn("pull", [this] {
        pull_loop(*pull_, *pull_wake_, handler_, options_, counters_, stopping_).run();
      });
      if (reply_)
        reply_thread_ = start_router(request_socket::reply, *reply_, reply_mailbox_);
      if (heartbeat_)
        heartbeat_thread_ =
            start_router(request_socket::heartbeat, *heartbeat_, heartbeat_mailbox_);
    } catch (...) {
      stop();
      throw;
    }
  }

  void stop() {
    if (!running_)
      return;
    stopping_.store(true);
    // Closed first, so that replies arriving from now on are dropped at once.
    for (auto* mailbox : {&reply_mailbox_, &heartbeat_mailbox_})
      if (*mailbox)
        (*mailbox)->close();
    pull_wake_->notify();
    for (auto* thread : {&pull_thread_, &reply_thread_, &heartbeat_thread_})
      if (thread->joinable())
        thread->join();
    reply_mailbox_.reset();
    heartbeat_mailbox_.reset();
    pull_.reset();
    reply_.reset();
    heartbeat_.reset();
    pull_wake_.reset();
    running_ = false;
    spdlog::info("zmq-frontend-stopped pull_frames={} reply_requests={} bad_frames={}",
                 counters_.pull_frames.load(), counters_.reply_requests.load(),
                 counters_.bad_frames.load());
  }

  const frontend_counters& counters() const noexcept { return counters_; }

  std::optional<std::string> heartbeat_url_for(const std::string& worker_ip) const {
    if (!options_.heartbeat_port)
      return std::nullopt;
    // local_ip() costs a syscall or three; only bind-all hosts without an
    // advertised host need it.
    const bool needs_local_ip = is_bind_all(options_.host) && options_.advertise_host.empty();
    return heartbeat_connect_url(options_.host, *options_.heartbeat_port, worker_ip,
                                 options_.advertise_host, needs_local_ip ? local_ip() : "");
  }

private:
  std::thread start_router(request_socket kind, zmq::socket_t& socket,
                           std::shared_ptr<reply_mailbox>& mailbox) {
    mailbox = std::make_shared<reply_mailbox>();
    return spawn(socket_name(kind), [this, kind, &socket, mailbox] {
      router_loop(kind, socket, mailbox, handler_, options_, counters_, stopping_).run();
    });
  }

  zmq::context_t& context_;
  const zmq_options options_;
  frontend_handler& handler_;
  frontend_counters counters_;
  std::atomic<bool> stopping_{false};
  bool running_ = false;
  std::optional<event_fd> pull_wake_;
  std::optional<zmq::socket_t> pull_, reply_, heartbeat_;
  std::shared_ptr<reply_mailbox> reply_mailbox_, heartbeat_mailbox_;
  std::thread pull_thread_, reply_thread_, heartbeat_thread_;
};

zmq_frontend::zmq_frontend(zmq::context_t& context, zmq_options options, frontend_handler& handler)
  : impl_(std::make_unique<impl>(context, std::move(options), handler)) {}

zmq_frontend::~zmq_frontend() {
  stop();
}

void zmq_frontend::start() {
  impl_->start();
}

void zmq_frontend::stop() {
  impl_->stop();
}

const frontend_counters& zmq_frontend::counters() const noexcept {
  return impl_->counters();
}

std::optional<std::string> zmq_frontend::heartbeat_url_for(const std::string& worker_ip) const {
  return impl_->heartbeat_url_for(worker_ip);
}

// -- addresses -----------------------------------------------------------------

std::string local_ip() {
  const std::string fallback = "127.0.0.1";
  const unique_fd socket(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  const int fd = socket.get();
  if (fd < 0)
    return fallback;
  // Connecting a UDP socket sends nothing; it only makes the kernel pick the
  // source address of the default route.
  sockaddr_in remote{};
  remote.sin_family = AF_INET;
  remote.sin_port = htons(80);
  if (::inet_pton(AF_INET, "8.8.8.8", &remote.sin_addr) != 1 ||
      ::connect(fd, reinterpret_cast<const sockaddr*>(&remote), sizeof remote) != 0)
    return fallback;
  sockaddr_in local{};
  socklen_t length = sizeof local;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &length) != 0)
    return fallback;
  char text[INET_ADDRSTRLEN] = {};
  if (::inet_ntop(AF_INET, &local.sin_addr, text, sizeof text) == nullptr)
    return fallback;
  return text;
}

std::string heartbeat_connect_url(const std::string& bind_host, uint16_t port,
                                  const std::string& worker_ip, const std::string& advertise_host,
                                  const std::string& this_host_ip) {
  if (!is_bind_all(bind_host))
    return fmt::format("{}:{}", bind_host, port);
  if (!advertise_host.empty())
    return fmt::format("{}:{}", advertise_host, port);
  // A worker on this host reaches us on loopback even if the outbound
  // address changes (LMCache does the same).
  if (worker_ip == this_host_ip)
    return fmt::format("127.0.0.1:{}", port);
  return fmt::format("{}:{}", this_host_ip, port);
}

} // namespace lmcc::gateway
