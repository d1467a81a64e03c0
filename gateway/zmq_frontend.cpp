#include "gateway/zmq_frontend.hpp"

#include "gateway/internal/pull_connections.hpp"
#include "gateway/internal/pull_loop.hpp"
#include "gateway/internal/router_loop.hpp"
#include "gateway/internal/socket_util.hpp"

#include <spdlog/spdlog.h>
#include <zmq.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <optional>
#include <pthread.h>
#include <stdexcept>
#include <sys/socket.h>
#include <thread>

namespace lmcc::gateway {
namespace {

using namespace internal;

/// Runs `body` as a thread whose escaping exception is logged, not fatal.
template <class Body>
std::thread spawn(std::string_view name, Body body) {
  return std::thread([name, body = std::move(body)]() mutable {
    // "lmcc-pull" etc. in /threads, top -H and perf: per-thread CPU is how an
    // operator tells ingest from requests.
    const std::string thread_name = "lmcc-" + std::string{name};
    pthread_setname_np(pthread_self(), thread_name.substr(0, 15).c_str());
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
    std::optional<pull_connections> connections;
    zmq::socket_t pull =
        bind_socket(context_, zmq::socket_type::pull, options_.host, options_.pull_port,
                    options_.limits.max_frame_bytes, static_cast<int>(options_.pull_queue_messages),
                    [&](zmq::socket_t& socket) { connections.emplace(context_, socket); });
    connections->set_port(bound_port(pull));
    connections->set_hold_bytes(
        static_cast<int>(std::min<uint32_t>(options_.pull_hold_bytes, INT32_MAX)));
    std::optional<zmq::socket_t> reply, heartbeat;
    if (options_.reply_port)
      reply = bind_socket(context_, zmq::socket_type::router, options_.host, *options_.reply_port,
                          options_.limits.max_frame_bytes);
    if (options_.heartbeat_port)
      heartbeat = bind_socket(context_, zmq::socket_type::router, options_.host,
                              *options_.heartbeat_port, options_.limits.max_frame_bytes);

    stopping_.store(false);
    pull_wake_.emplace();
    pull_ = std::move(pull);
    pull_connections_ = std::move(connections);
    reply_ = std::move(reply);
    heartbeat_ = std::move(heartbeat);
    running_ = true;
    try {
      pull_thread_ = spawn("pull", [this] {
        handler_.on_pull_thread_start();
        pull_loop(*pull_, *pull_connections_, *pull_wake_, handler_, options_, counters_, stopping_)
            .run();
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
    pull_connections_.reset();
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
  std::optional<pull_connections> pull_connections_;
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
