#include "gateway/peer_read.hpp"

#include "clock/clock.hpp"

#include <spdlog/fmt/fmt.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <memory>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <system_error>

namespace lmcc::gateway {
namespace {

using clock = std::chrono::steady_clock;

/// How long a server thread waits for a caller to take its reply.
constexpr auto reply_write_timeout = std::chrono::seconds{5};

/// Most wake-ups of an accept loop short of file descriptors, per second.
constexpr int fd_exhausted_backoff_ms = 100;

/// The preface's first word: "lmccrd01" (this wire format, version 1).
constexpr uint64_t preface_magic = 0x3130647263636d6cULL;

/// "tcp://host:port#<32 hex>" -> the key; nullopt without a well-formed one.
std::optional<peer_read_key> key_of(std::string_view endpoint) {
  const size_t hash = endpoint.rfind('#');
  if (hash == std::string_view::npos || endpoint.size() - hash - 1 != 32)
    return std::nullopt;
  peer_read_key key{0, 0};
  for (size_t word = 0; word < key.size(); ++word) {
    const char* first = endpoint.data() + hash + 1 + word * 16;
    const auto [end, ec] = std::from_chars(first, first + 16, key[word], 16);
    if (ec != std::errc{} || end != first + 16)
      return std::nullopt;
  }
  return key;
}

int millis_left(std::optional<clock::time_point> deadline) {
  if (!deadline)
    return -1;
  const auto left =
      std::chrono::duration_cast<std::chrono::milliseconds>(*deadline - clock::now()).count();
  return left < 0 ? 0 : static_cast<int>(std::min<int64_t>(left, 1 << 30));
}

/// Waits until `fd` is ready for `events`; false on timeout, on `stop_fd`
/// becoming readable (shutdown) or on an error.
bool wait_ready(int fd, short events, int stop_fd, std::optional<clock::time_point> deadline) {
  while (true) {
    pollfd fds[2] = {{fd, events, 0}, {stop_fd, POLLIN, 0}};
    const int n = ::poll(fds, stop_fd >= 0 ? 2 : 1, millis_left(deadline));
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0 || (stop_fd >= 0 && fds[1].revents != 0))
      return false;
    return (fds[0].revents & (events | POLLHUP | POLLERR)) != 0;
  }
}

/// A connection's socket and its TLS session (null: plain, read and written
/// directly: one branch is all TLS costs when it is off).
struct conn {
  int fd;
  tls_stream* tls = nullptr;
};

/// Reads what is there, up to `len`: > 0 bytes, 0 when nothing can be read
/// now (`wait` says for what to poll), -1 when the peer closed or failed.
ssize_t receive_some(const conn& c, void* buffer, size_t len, short& wait) {
  if (c.tls != nullptr) {
    const ssize_t n = c.tls->read(buffer, len);
    wait = c.tls->wants();
    return n;
  }
  while (true) {
    const ssize_t n = ::recv(c.fd, buffer, len, 0);
    if (n > 0)
      return n;
    if (n == 0)
      return -1; // the peer closed
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      wait = POLLIN;
      return 0;
    }
    if (errno != EINTR)
      return -1;
  }
}

/// Writes what the socket takes, up to `len`: as receive_some.
ssize_t send_some(const conn& c, const void* buffer, size_t len, short& wait) {
  if (c.tls != nullptr) {
    const ssize_t n = c.tls->write(buffer, len);
    wait = c.tls->wants();
    return n;
  }
  while (true) {
    const ssize_t n = ::send(c.fd, buffer, len, MSG_NOSIGNAL);
    if (n >= 0)
      return n;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      wait = POLLOUT;
      return 0;
    }
    if (errno != EINTR)
      return -1;
  }
}

/// Reads exactly `len` bytes from a non-blocking socket.
bool read_exact(const conn& c, void* buffer, size_t len, int stop_fd,
                std::optional<clock::time_point> deadline) {
  auto* at = static_cast<char*>(buffer);
  while (len > 0) {
    short wait = POLLIN;
    const ssize_t n = receive_some(c, at, len, wait);
    if (n > 0) {
      at += n;
      len -= static_cast<size_t>(n);
    } else if (n < 0 || !wait_ready(c.fd, wait, stop_fd, deadline)) {
      return false;
    }
  }
  return true;
}

/// Reads `count` words into `out` (replacing its contents), growing it as they
/// arrive: a peer's word count is trusted only as far as its bytes come, so a
/// header that promises more than arrives costs at most one chunk more.
bool read_words(const conn& c, size_t count, std::vector<uint64_t>& out, int stop_fd,
                std::optional<clock::time_point> deadline) {
  constexpr size_t chunk_words = size_t{1} << 16; // 512 KiB
  out.clear();
  while (out.size() < count) {
    const size_t at = out.size();
    const size_t n = std::min(chunk_words, count - at);
    out.resize(at + n);
    if (!read_exact(c, out.data() + at, n * sizeof(uint64_t), stop_fd, deadline))
      return false;
  }
  return true;
}

/// Writes all of `len` bytes to a non-blocking socket.
bool write_all(const conn& c, const void* buffer, size_t len, int stop_fd,
               clock::time_point deadline) {
  const auto* at = static_cast<const char*>(buffer);
  while (len > 0) {
    short wait = POLLOUT;
    const ssize_t n = send_some(c, at, len, wait);
    if (n > 0) {
      at += n;
      len -= static_cast<size_t>(n);
    } else if (n < 0 || !wait_ready(c.fd, wait, stop_fd, deadline)) {
      return false;
    }
  }
  return true;
}

void set_no_delay(int fd) {
  const int one = 1;
  (void)::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

struct addrinfo_deleter {
  void operator()(addrinfo* a) const noexcept { ::freeaddrinfo(a); }
};
using addrinfo_ptr = std::unique_ptr<addrinfo, addrinfo_deleter>;

addrinfo_ptr resolve(const char* host, const char* port, int flags) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = flags;
  addrinfo* found = nullptr;
  if (::getaddrinfo(host, port, &hints, &found) != 0)
    return nullptr;
  return addrinfo_ptr{found};
}

} // namespace

// -- server ----------------------------------------------------------------------

peer_read_server::peer_read_server(const std::string& bind_host, const std::string& advertised_host,
                                   peer_read_key key, answer_fn answer,
                                   std::shared_ptr<const node_tls> tls)
  : key_(key), answer_(std::move(answer)), tls_(std::move(tls)),
    stop_event_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)),
    ended_event_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
  if (!stop_event_ || !ended_event_)
    throw std::system_error(errno, std::generic_category(), "peer read: eventfd");
  const bool any = bind_host.empty() || bind_host == "*";
  auto addresses = resolve(any ? nullptr : bind_host.c_str(), "0", AI_PASSIVE);
  if (!addresses)
    throw std::system_error(EINVAL, std::generic_category(),
                            "peer read: cannot resolve bind host '" + bind_host + "'");
  int error = 0;
  for (const addrinfo* a = addresses.get(); a != nullptr && !listener_; a = a->ai_next) {
    unique_fd fd{::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, 0)};
    const int one = 1;
    if (fd && ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) == 0 &&
        ::bind(fd.get(), a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd.get(), 128) == 0)
      listener_ = std::move(fd);
    else
      error = errno;
  }
  if (!listener_)
    throw std::system_error(error, std::generic_category(),
                            "peer read: cannot listen on '" + bind_host + "'");
  sockaddr_storage bound{};
  socklen_t len = sizeof bound;
  ::getsockname(listener_.get(), reinterpret_cast<sockaddr*>(&bound), &len);
  const uint16_t port =
      ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                        : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  const bool v6 = advertised_host.find(':') != std::string::npos;
  endpoint_ =
      "tcp://" + (v6 ? "[" + advertised_host + "]" : advertised_host) + ":" + std::to_string(port);
  acceptor_ = std::thread([this] { accept_loop(); });
}

std::string peer_read_server::access_endpoint() const {
  return fmt::format("{}#{:016x}{:016x}", endpoint_, key_[0], key_[1]);
}

peer_read_server::~peer_read_server() {
  const uint64_t one = 1;
  (void)::write(stop_event_.get(), &one, sizeof one); // stays readable: every poll wakes
  if (acceptor_.joinable())
    acceptor_.join();
}

void peer_read_server::accept_loop() {
  while (true) {
    // No timeout: an idle node's accept thread sleeps until a peer connects,
    // a connection ends or the server stops.
    pollfd fds[3] = {{listener_.get(), POLLIN, 0},
                     {stop_event_.get(), POLLIN, 0},
                     {ended_event_.get(), POLLIN, 0}};
    const int n = ::poll(fds, 3, -1);
    if (fds[1].revents != 0)
      break;
    if (fds[2].revents != 0) {
      uint64_t ended = 0;
      (void)::read(ended_event_.get(), &ended, sizeof ended);
      reap(false);
    }
    if (n <= 0 || (fds[0].revents & POLLIN) == 0)
      continue;
    unique_fd fd{::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK)};
    if (!fd) {
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        spdlog::warn("peer-read-accept-failed error={}", std::strerror(errno));
        pollfd stop{stop_event_.get(), POLLIN, 0};
        (void)::poll(&stop, 1, fd_exhausted_backoff_ms);
      }
      continue;
    }
    if (connections_.size() >= max_connections) {
      if (refused_++ % 100 == 0)
        spdlog::warn("peer-read-refused connections={} refused_so_far={}", connections_.size(),
                     refused_.load());
      continue;
    }
    set_no_delay(fd.get());
    auto& c = connections_.emplace_back();
    c.fd = std::move(fd);
    ++accepted_;
    c.thread = std::thread([this, &c] {
      serve(c.fd.get());
      c.fd.reset(); // the caller sees the close now, not at the next reap
      c.done = true;
      const uint64_t one = 1;
      (void)::write(ended_event_.get(), &one, sizeof one);
    });
  }
  reap(true);
}

void peer_read_server::serve(int fd) {
  if (!tls_) {
    serve_peer_reads(fd, stop_event_.get(), key_, answer_, counters_);
    return;
  }
  try {
    tls_stream tls{*tls_, fd, tls_stream::role::server};
    if (!tls.handshake_until(clock::now() + preface_timeout, stop_event_.get())) {
      if (tls.refused()) {
        auto r = tls.refusal();
        r.channel = "peer-read";
        r.address = peer_address(fd);
        tls_->refused(r);
      }
      return;
    }
    serve_peer_reads(fd, stop_event_.get(), key_, answer_, counters_, &tls);
  } catch (const std::exception& e) {
    spdlog::error("peer-read-tls-failed error={}", e.what());
  }
}

void peer_read_server::reap(bool all) {
  for (auto it = connections_.begin(); it != connections_.end();) {
    if (!all && !it->done) {
      ++it;
      continue;
    }
    it->thread.join(); // at shutdown the stop event ends serve() at its next wait
    it = connections_.erase(it);
  }
}

namespace {

/// Reads the preface; true when it is the magic and `key`.
bool admitted(const conn& c, int stop, const peer_read_key& key, peer_read_counters& counters) {
  uint64_t preface[3] = {0, 0, 0};
  const bool read = read_exact(c, preface, sizeof preface, stop,
                               clock::now() + peer_read_server::preface_timeout);
  // Every word compared, so the time taken tells nothing about the key.
  const uint64_t diff =
      (preface[0] ^ preface_magic) | (preface[1] ^ key[0]) | (preface[2] ^ key[1]);
  if (read && diff == 0)
    return true;
  if (counters.unauthorized++ % 100 == 0)
    spdlog::warn("peer-read-unauthorized reason={} refused_so_far={}",
                 !read                         ? "no-preface"
                 : preface[0] != preface_magic ? "not-a-peer-read-client"
                                               : "wrong-key",
                 counters.unauthorized.load());
  return false;
}

} // namespace

void serve_peer_reads(int fd, int stop, const peer_read_key& key, const peer_read_answer_fn& answer,
                      peer_read_counters& counters, tls_stream* tls) {
  const conn c{fd, tls};
  if (!admitted(c, stop, key, counters))
    return;
  std::vector<uint64_t> request;
  std::vector<uint64_t> reply;
  while (true) {
    uint64_t words = 0;
    if (!read_exact(c, &words, sizeof words, stop, std::nullopt))
      return; // the caller closed, or shutdown
    if (words == 0 || words - 1 > peer_read_server::max_keys) {
      if (counters.malformed++ % 100 == 0)
        spdlog::warn("peer-read-malformed words={} dropped_so_far={}", words,
                     counters.malformed.load());
      return; // the stream lost its framing: close it
    }
    if (!read_words(c, words, request, stop, std::nullopt))
      return;
    ++counters.requests;
    std::vector<uint64_t> flat;
    try {
      flat = answer(std::span<const uint64_t>{request.data() + 1, words - 1});
    } catch (const std::exception& e) {
      spdlog::error("peer-read-answer-failed keys={} error={}", words - 1, e.what());
      return;
    }
    reply.resize(flat.size() + 2);
    reply[0] = flat.size() + 1;
    reply[1] = request[0];
    std::copy(flat.begin(), flat.end(), reply.begin() + 2);
    if (!write_all(c, reply.data(), reply.size() * sizeof(uint64_t), stop,
                   clock::now() + reply_write_timeout))
      return;
  }
}

// -- client ----------------------------------------------------------------------

peer_socket peer_read_client::take_idle(const std::string& endpoint) {
  std::lock_guard lock{mutex_};
  auto& pool = idle_[endpoint];
  while (!pool.empty()) {
    peer_socket s = std::move(pool.back());
    pool.pop_back();
    // An idle connection has nothing to read (with TLS too: no tickets); if
    // it has, the peer closed it (restarted, stopped) and it is dropped
    // rather than failing a lookup.
    pollfd p{s.get(), POLLIN, 0};
    if (::poll(&p, 1, 0) == 0)
      return s;
  }
  return peer_socket{};
}

void peer_read_client::report_refusal(const peer_socket& socket,
                                      const std::string& endpoint) const {
  if (!tls_ || socket.tls() == nullptr || !socket.tls()->refused())
    return;
  auto r = socket.tls()->refusal();
  r.channel = "peer-read";
  r.address = endpoint.substr(0, endpoint.rfind('#')); // never the key
  tls_->refused(r);
}

peer_socket peer_read_client::connect_to(const std::string& access) const {
  constexpr std::string_view scheme = "tcp://";
  const std::string endpoint = access.substr(0, access.rfind('#'));
  const size_t colon = endpoint.rfind(':');
  if (!endpoint.starts_with(scheme) || colon == std::string::npos || colon < scheme.size())
    return peer_socket{};
  std::string host = endpoint.substr(scheme.size(), colon - scheme.size());
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  const std::string port = endpoint.substr(colon + 1);
  auto addresses = resolve(host.c_str(), port.c_str(), 0);
  const auto deadline = clock::now() + connect_timeout_;
  for (const addrinfo* a = addresses.get(); a != nullptr; a = a->ai_next) {
    unique_fd fd{::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, 0)};
    if (!fd)
      continue;
    if (::connect(fd.get(), a->ai_addr, a->ai_addrlen) != 0) {
      if (errno != EINPROGRESS || !wait_ready(fd.get(), POLLOUT, -1, deadline))
        continue;
      int error = 0;
      socklen_t len = sizeof error;
      if (::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &error, &len) != 0 || error != 0)
        continue;
    }
    set_no_delay(fd.get());
    std::unique_ptr<tls_stream> tls;
    if (tls_) {
      try {
        tls = std::make_unique<tls_stream>(*tls_, fd.get(), tls_stream::role::client);
      } catch (const std::exception& e) {
        spdlog::error("peer-read-tls-failed error={}", e.what());
        return peer_socket{};
      }
      if (!tls->handshake_until(deadline)) {
        report_refusal(peer_socket{std::move(fd), std::move(tls)}, endpoint);
        continue;
      }
    }
    const conn c{fd.get(), tls.get()};
    if (auto key = key_of(access)) {
      const uint64_t preface[3] = {preface_magic, (*key)[0], (*key)[1]};
      if (!write_all(c, preface, sizeof preface, -1, deadline))
        continue;
    }
    return peer_socket{std::move(fd), std::move(tls)};
  }
  return peer_socket{};
}

std::optional<peer_read_client::call> peer_read_client::send(const std::string& endpoint,
                                                             std::span<const uint64_t> keys) {
  call c;
  c.endpoint = endpoint;
  c.id = next_id_.fetch_add(1);
  std::vector<uint64_t> request(keys.size() + 2);
  request[0] = keys.size() + 1;
  request[1] = c.id;
  std::copy(keys.begin(), keys.end(), request.begin() + 2);
  // A pooled connection first; a fresh one if it turns out broken.
  for (bool pooled : {true, false}) {
    c.socket = pooled ? take_idle(endpoint) : connect_to(endpoint);
    if (!c.socket)
      continue;
    if (write_all(conn{c.socket.get(), c.socket.tls()}, request.data(),
                  request.size() * sizeof(uint64_t), -1, clock::now() + connect_timeout_))
      return c;
  }
  return std::nullopt;
}

std::optional<std::vector<uint64_t>> peer_read_client::wait(call& c,
                                                            std::chrono::milliseconds timeout) {
  const auto deadline = clock::now() + timeout;
  uint64_t head[2] = {0, 0};
  const conn io{c.socket.get(), c.socket.tls()};
  if (!c.socket || !read_exact(io, head, sizeof head, -1, deadline) || head[0] == 0 ||
      head[0] - 1 > max_reply_words || head[1] != c.id) {
    report_refusal(c.socket, c.endpoint); // TLS 1.3: a refusal arrives here
    c.socket.reset();                     // a late or foreign reply must not reach the next call
    return std::nullopt;
  }
  std::vector<uint64_t> flat;
  if (!read_words(io, head[0] - 1, flat, -1, deadline)) {
    c.socket.reset();
    return std::nullopt;
  }
  std::lock_guard lock{mutex_};
  auto& pool = idle_[c.endpoint];
  if (pool.size() < max_idle_per_peer)
    pool.push_back(std::move(c.socket));
  if (const auto now = steady_now(); now >= next_sweep_) {
    next_sweep_ = now + sweep_interval;
    sweep_closed_locked();
  }
  return flat;
}

void peer_read_client::sweep_closed_locked() {
  for (auto it = idle_.begin(); it != idle_.end();) {
    auto& pool = it->second;
    // An idle connection has nothing to read: readable means closed.
    std::erase_if(pool, [](const peer_socket& s) {
      pollfd p{s.get(), POLLIN, 0};
      return ::poll(&p, 1, 0) != 0;
    });
    it = pool.empty() ? idle_.erase(it) : std::next(it);
  }
}

size_t peer_read_client::idle_connections() {
  std::lock_guard lock{mutex_};
  size_t n = 0;
  for (const auto& [endpoint, pool] : idle_)
    n += pool.size();
  return n;
}

std::optional<size_t> peer_read_client::wait_any(std::span<const call* const> calls,
                                                 std::chrono::milliseconds timeout) {
  std::vector<pollfd> fds;
  fds.reserve(calls.size());
  for (size_t i = 0; i < calls.size(); ++i) {
    const call* c = calls[i];
    // Bytes TLS already decrypted are ready, though poll does not see them.
    if (c->socket.tls() != nullptr && c->socket.tls()->pending() > 0)
      return i;
    fds.push_back(pollfd{c->socket ? c->socket.get() : -1, POLLIN, 0});
  }
  const auto deadline = clock::now() + timeout;
  while (true) {
    const int n = ::poll(fds.data(), fds.size(), millis_left(deadline));
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return std::nullopt;
    for (size_t i = 0; i < fds.size(); ++i)
      if (fds[i].revents != 0)
        return i;
    return std::nullopt;
  }
}

} // namespace lmcc::gateway
