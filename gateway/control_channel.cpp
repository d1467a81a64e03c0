#include "gateway/control_channel.hpp"

#include "gateway/io_lanes.hpp"
#include "messages/codec_msgpack.hpp"

#include <spdlog/fmt/fmt.h>
#include <spdlog/spdlog.h>
#include <zmq.hpp>
#include <zmq_addon.hpp>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <deque>
#include <iterator>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string_view>
#include <sys/eventfd.h>
#include <system_error>
#include <thread>
#include <unistd.h>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

namespace lmcc::gateway {

namespace {

using clock = std::chrono::steady_clock;

constexpr std::string_view shutting_down_text = "controller shutting down";

/// An eventfd that other threads write to in order to wake the channel thread
/// out of zmq::poll. An fd (not an inproc socket) because send() may be called
/// from any number of threads and a ZMQ socket must not be shared between them.
class wake_fd {
public:
  wake_fd() : fd_(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {
    if (fd_ < 0) {
      throw std::system_error(errno, std::generic_category(), "control_channel: eventfd");
    }
  }
  ~wake_fd() { ::close(fd_); }
  wake_fd(const wake_fd&) = delete;
  wake_fd& operator=(const wake_fd&) = delete;

  int fd() const noexcept { return fd_; }

  void notify() noexcept {
    const uint64_t one = 1;
    // EAGAIN only when the counter is about to overflow, i.e. a wake-up is
    // already pending; nothing else can fail on a valid eventfd.
    [[maybe_unused]] const auto n = ::write(fd_, &one, sizeof one);
  }

  void drain() noexcept {
    uint64_t value = 0;
    [[maybe_unused]] const auto n = ::read(fd_, &value, sizeof value);
  }

private:
  int fd_;
};

/// One command waiting for (or being given) a reply.
struct pending_command {
  std::string_view type; // type tag; points at static storage of the message type
  std::string frame;     // msgpack, encoded by the caller's thread (keeps this thread light)
  control_reply_fn done;
};

struct send_op {
  std::string endpoint;
  pending_command command;
};

struct forget_op {
  std::string endpoint;
};

using inbox_op = std::variant<send_op, forget_op>;

/// The connection to one worker's REP socket and the commands addressed to it.
/// Only queue.front() is ever in flight: a REP answers strictly one request at a
/// time, and with no correlation id on the wire (spec 2.2) order is all that
/// ties a reply to its command.
struct worker_link {
  std::string endpoint;
  std::optional<zmq::socket_t> socket; // created lazily; reset after a timeout
  std::deque<pending_command> queue;
  bool in_flight = false;
  clock::time_point deadline{};
};

void invoke(control_reply_fn& done, msg::expected<msg::Msg> reply, std::string_view endpoint) {
  // A throwing callback must not take down the thread that serves every worker.
  try {
    done(std::move(reply));
  } catch (const std::exception& e) {
    spdlog::error("control-callback-threw worker={} error={}", endpoint, e.what());
  } catch (...) {
    spdlog::error("control-callback-threw worker={} error=unknown", endpoint);
  }
}

void fail(pending_command& command, std::string_view endpoint, std::string text) {
  invoke(command.done, msg::codec_error{std::move(text)}, endpoint);
}

std::string describe_frames(size_t count, size_t first_frame_bytes) {
  return fmt::format(
      "expected 2 frames [\"\", payload], got {} frame(s) with a {}-byte first frame", count,
      first_frame_bytes);
}

} // namespace

class control_channel::impl {
public:
  impl(zmq::context_t& context, control_options options)
    : context_(context), options_(options), thread_([this] { run(); }) {}

  ~impl() {
    {
      std::lock_guard lock(mutex_);
      stop_requested_ = true;
    }
    wake_.notify();
    thread_.join();
  }

  impl(const impl&) = delete;
  impl& operator=(const impl&) = delete;

  void send(std::string endpoint, msg::Msg command, control_reply_fn done) {
    pending_command pending{msg::type_tag_of(command), msg::encode_msgpack(command),
                            std::move(done)};
    {
      std::unique_lock lock(mutex_);
      if (!thread_exited_) {
        inbox_.emplace_back(send_op{std::move(endpoint), std::move(pending)});
        lock.unlock();
        wake_.notify();
        return;
      }
    }
    // The channel thread is gone (shutdown, or the ZMQ context was terminated):
    // nobody else will ever run this callback, so run it here.
    fail(pending, endpoint, std::string(shutting_down_text));
  }

  void forget(std::string endpoint) {
    {
      std::lock_guard lock(mutex_);
      if (thread_exited_) {
        return;
      }
      inbox_.emplace_back(forget_op{std::move(endpoint)});
    }
    wake_.notify();
  }

private:
  // -- channel thread ----------------------------------------------------------

  void run() {
    try {
      loop();
    } catch (const zmq::error_t& e) {
      // ETERM: the context is being terminated under us; anything else here is
      // a bug in this file. Either way, fail every command rather than hang it.
      spdlog::error("control-thread-stopped error={}", e.what());
    } catch (const std::exception& e) {
      spdlog::error("control-thread-stopped error={}", e.what());
    }
    shut_down();
  }

  void loop() {
    std::vector<zmq_pollitem_t> items;
    std::vector<worker_link*> polled;
    for (;;) {
      if (!take_inbox()) {
        return;
      }

      items.clear();
      polled.clear();
      items.push_back(zmq_pollitem_t{nullptr, wake_.fd(), ZMQ_POLLIN, 0});
      auto next_deadline = clock::time_point::max();
      for (auto& [endpoint, link] : links_) {
        if (link.in_flight) {
          items.push_back(zmq_pollitem_t{link.socket->handle(), 0, ZMQ_POLLIN, 0});
          polled.push_back(&link);
          next_deadline = std::min(next_deadline, link.deadline);
        }
      }

      auto timeout = std::chrono::milliseconds{-1};
      if (next_deadline != clock::time_point::max()) {
        // Round up: waking a fraction of a millisecond early would just spin.
        timeout =
            std::max(std::chrono::milliseconds{0},
                     std::chrono::ceil<std::chrono::milliseconds>(next_deadline - clock::now()));
      }
      try {
        zmq::poll(items, timeout);
      } catch (const zmq::error_t& e) {
        if (e.num() != EINTR) {
          throw;
        }
        continue;
      }

      if ((items[0].revents & ZMQ_POLLIN) != 0) {
        wake_.drain();
      }
      for (size_t i = 0; i < polled.size(); ++i) {
        if ((items[i + 1].revents & ZMQ_POLLIN) != 0) {
          on_readable(*polled[i]);
        }
      }
      const auto now = clock::now();
      for (auto* link : polled) {
        if (link->in_flight && link->deadline <= now) {
          on_timeout(*link);
        }
      }
    }
  }

  /// Applies queued send()/forget() calls in call order; false once stopping.
  bool take_inbox() {
    {
      std::lock_guard lock(mutex_);
      if (stop_requested_) {
        return false;
      }
      std::move(inbox_.begin(), inbox_.end(), std::back_inserter(taken_));
      inbox_.clear();
    }
    // The lock is released: callbacks run below may call send() again. Ops
    // stay in taken_ until handled, so if ZMQ throws midway shut_down() still
    // answers the rest.
    while (!taken_.empty()) {
      auto op = std::move(taken_.front());
      taken_.pop_front();
      if (auto* s = std::get_if<send_op>(&op)) {
        enqueue(std::move(*s));
      } else {
        drop_link(std::get<forget_op>(op).endpoint);
      }
    }
    return true;
  }

  void enqueue(send_op op) {
    auto [it, inserted] = links_.try_emplace(op.endpoint);
    auto& link = it->second;
    if (inserted) {
      link.endpoint = op.endpoint;
    }
    const size_t waiting = link.queue.size() - (link.in_flight ? 1 : 0);
    if (waiting >= options_.max_queued_per_worker) {
      spdlog::warn("control-queue-full worker={} command={} queued={}", link.endpoint,
                   op.command.type, waiting);
      fail(op.command, link.endpoint,
           fmt::format("too many queued commands for worker {}", link.endpoint));
      return;
    }
    link.queue.push_back(std::move(op.command));
    start_next(link);
  }

  void drop_link(const std::string& endpoint) {
    auto node = links_.extract(endpoint);
    if (node.empty()) {
      return;
    }
    auto& link = node.mapped();
    // Close first so nothing more can arrive for these commands.
    link.socket.reset();
    spdlog::info("control-forget worker={} failed={}", endpoint, link.queue.size());
    for (auto& command : link.queue) {
      fail(command, endpoint, fmt::format("worker {} deregistered", endpoint));
    }
  }

  /// Sends the head of the queue if nothing is in flight. Commands that cannot
  /// even be handed to ZMQ fail at once so the queue never stalls.
  void start_next(worker_link& link) {
    while (!link.in_flight && !link.queue.empty()) {
      auto& head = link.queue.front();
      try {
        if (!link.socket) {
          link.socket = open_socket(link.endpoint);
        }
        // A REP peer strips and restores the envelope up to the empty delimiter;
        // without it the REP would drop the request.
        std::array<zmq::const_buffer, 2> frames{zmq::const_buffer{}, zmq::buffer(head.frame)};
        // Without ZMQ_IMMEDIATE the message waits in the pipe until the TCP
        // connection is up, so this only fails on a broken socket, never on a
        // slow or dead worker (those are caught by the deadline).
        if (zmq::send_multipart(*link.socket, frames, zmq::send_flags::dontwait)) {
          link.in_flight = true;
          link.deadline = clock::now() + options_.request_timeout;
          spdlog::debug("control-send worker={} command={} bytes={}", link.endpoint, head.type,
                        head.frame.size());
          return;
        }
        throw zmq::error_t(); // EAGAIN
      } catch (const zmq::error_t& e) {
        if (e.num() == ETERM) {
          throw;
        }
        spdlog::error("control-send-failed worker={} command={} error={}", link.endpoint, head.type,
                      e.what());
        link.socket.reset();
        auto command = std::move(head);
        link.queue.pop_front();
        fail(command, link.endpoint,
             fmt::format("cannot send to worker {}: {}", link.endpoint, e.what()));
      }
    }
  }

  zmq::socket_t open_socket(const std::string& endpoint) {
    zmq::socket_t socket(context_, zmq::socket_type::dealer);
    put_on_lane(context_, socket, io_lane::requests); // commands never queue behind ingest bytes
    // Commands of a closed socket are either answered already or failed by a
    // timeout; nothing left in it is worth delaying shutdown for.
    socket.set(zmq::sockopt::linger, 0);
    // ZMQ_IMMEDIATE stays off on purpose: a command to a worker that is not
    // (yet) reachable waits in the pipe and is delivered if the worker comes up
    // within request_timeout; if it does not, the deadline fails it and the
    // socket (with the stale message in it) is closed, so it is never delivered
    // late. With IMMEDIATE on, the send would fail at once instead and we would
    // have to poll for POLLOUT to offer the same grace.
    //
    // Bound what one worker can make us buffer: a bigger frame drops the
    // connection and the command times out.
    socket.set(zmq::sockopt::maxmsgsize,
               static_cast<int64_t>(msg::decode_limits{}.max_frame_bytes));
    socket.connect("tcp://" + endpoint);
    spdlog::debug("control-connect worker={}", endpoint);
    return socket;
  }

  void on_readable(worker_link& link) {
    // Read exactly one message: it belongs to the command in flight. Reading
    // more would risk matching a surplus message to the next command.
    std::vector<zmq::message_t> frames;
    size_t frame_count = 0;
    for (;;) {
      zmq::message_t frame;
      if (!link.socket->recv(frame, zmq::recv_flags::dontwait)) {
        break; // POLLIN was spurious
      }
      ++frame_count;
      const bool more = frame.more();
      // Keep the first and the last frame only, so a hostile multipart costs
      // no more memory than a well-formed one.
      if (frames.size() < 2) {
        frames.push_back(std::move(frame));
      } else {
        frames.back() = std::move(frame);
      }
      if (!more) {
        break;
      }
    }
    if (frame_count == 0) {
      return;
    }

    auto command = std::move(link.queue.front());
    link.queue.pop_front();
    link.in_flight = false;

    if (frame_count != 2 || frames.front().size() != 0) {
      spdlog::warn("control-bad-reply worker={} command={} frames={}", link.endpoint, command.type,
                   frame_count);
      fail(command, link.endpoint,
           fmt::format("undecodable reply from worker {}: {}", link.endpoint,
                       describe_frames(frame_count, frames.front().size())));
    } else {
      auto reply = msg::decode_msgpack(frames.back().to_string_view());
      if (reply) {
        spdlog::debug("control-reply worker={} command={} reply={}", link.endpoint, command.type,
                      msg::type_tag_of(*reply));
        invoke(command.done, std::move(reply), link.endpoint);
      } else {
        spdlog::warn("control-bad-reply worker={} command={} error={}", link.endpoint, command.type,
                     reply.error().message);
        fail(command, link.endpoint,
             fmt::format("undecodable reply from worker {}: {}", link.endpoint,
                         reply.error().message));
      }
    }
    start_next(link);
  }

  void on_timeout(worker_link& link) {
    auto command = std::move(link.queue.front());
    link.queue.pop_front();
    link.in_flight = false;
    // The worker may still answer this command. A fresh socket is a fresh TCP
    // connection, so that late reply goes to the closed one and cannot be taken
    // as the answer to the next command.
    link.socket.reset();
    const auto ms = options_.request_timeout.count();
    spdlog::warn("control-timeout worker={} command={} timeout_ms={}", link.endpoint, command.type,
                 ms);
    fail(command, link.endpoint,
         fmt::format("worker {} did not answer within {}ms", link.endpoint, ms));
    start_next(link);
  }

  void shut_down() {
    {
      std::lock_guard lock(mutex_);
      thread_exited_ = true; // later send() calls fail on their own thread
      std::move(inbox_.begin(), inbox_.end(), std::back_inserter(taken_));
      inbox_.clear();
    }
    size_t failed = 0;
    for (auto& [endpoint, link] : links_) {
      link.socket.reset();
      for (auto& command : link.queue) {
        fail(command, endpoint, std::string(shutting_down_text));
        ++failed;
      }
    }
    links_.clear();
    for (auto& op : taken_) {
      if (auto* s = std::get_if<send_op>(&op)) {
        fail(s->command, s->endpoint, std::string(shutting_down_text));
        ++failed;
      }
    }
    if (failed > 0) {
      spdlog::info("control-shutdown failed={}", failed);
    }
  }

  zmq::context_t& context_;
  const control_options options_;
  wake_fd wake_;

  std::mutex mutex_;
  std::vector<inbox_op> inbox_; // guarded by mutex_
  bool stop_requested_ = false; // guarded by mutex_
  bool thread_exited_ = false;  // guarded by mutex_

  std::deque<inbox_op> taken_;                         // channel thread only
  std::unordered_map<std::string, worker_link> links_; // channel thread only

  std::thread thread_; // last: starts after every member it uses exists
};

control_channel::control_channel(zmq::context_t& context, control_options options)
  : impl_(std::make_unique<impl>(context, options)) {}

control_channel::~control_channel() = default;

void control_channel::send(std::string endpoint, msg::Msg command, control_reply_fn done) {
  impl_->send(std::move(endpoint), std::move(command), std::move(done));
}

void control_channel::forget(std::string endpoint) {
  impl_->forget(std::move(endpoint));
}

} // namespace lmcc::gateway
