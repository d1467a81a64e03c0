#include "actors/cluster/tls_transport.hpp"

#include <caf/all.hpp>
#include <caf/io/all.hpp>
#include <caf/io/basp_broker.hpp>
#include <caf/io/middleman_actor_impl.hpp>
#include <caf/io/network/default_multiplexer.hpp>
#include <caf/io/network/doorman_impl.hpp>
#include <caf/io/network/native_socket.hpp>
#include <caf/io/network/stream.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>
#include <vector>

namespace lmcc::actors {
namespace tls_detail {

using caf::io::network::native_socket;
using caf::io::network::operation;
using caf::io::network::rw_state;
using default_mpx = caf::io::network::default_multiplexer;
using clock_type = std::chrono::steady_clock;

class tls_doorman;

} // namespace tls_detail

/// What the actor, the doormen, the streams and the handshake thread share.
struct tls_transport::shared {
  explicit shared(tls_transport_options o)
    : tls(std::move(o.tls)), peer_name(std::move(o.peer_name)),
      handshake_timeout(o.handshake_timeout) {}
  std::shared_ptr<const gateway::node_tls> tls;
  std::function<std::string(const std::string&, uint16_t)> peer_name;
  std::chrono::milliseconds handshake_timeout;
  tls_transport_counters counters;

  /// Passes a failed handshake's refusal (if it is one) to the node's hook.
  void report(const gateway::tls_stream& s, std::string peer, std::string address) {
    if (!s.refused())
      return;
    ++counters.refused;
    auto r = s.refusal();
    r.channel = "cluster";
    r.peer = std::move(peer);
    r.address = std::move(address);
    tls->refused(r);
  }
};

namespace tls_detail {

/// The read/write policy of an established TLS connection's stream (as
/// caf::openssl's ssl_policy, without the handshake: it is done before the
/// broker sees the connection).
class tls_policy {
public:
  tls_policy(std::shared_ptr<tls_transport::shared> shared,
             std::shared_ptr<gateway::tls_stream> tls, std::string peer, std::string address)
    : shared_(std::move(shared)), tls_(std::move(tls)), peer_(std::move(peer)),
      address_(std::move(address)) {}

  rw_state read_some(size_t& result, native_socket, void* buf, size_t len) {
    result = 0;
    const ssize_t n = tls_->read(buf, len);
    if (n < 0)
      return fail();
    result = static_cast<size_t>(n); // 0: nothing until the next event
    return rw_state::success;
  }

  rw_state write_some(size_t& result, native_socket, const void* buf, size_t len) {
    result = 0;
    if (len == 0)
      return rw_state::indeterminate;
    // Record after record while the socket takes them (one SSL_write writes
    // one record in partial-write mode).
    const auto* at = static_cast<const char*>(buf);
    size_t total = 0;
    while (total < len) {
      const ssize_t n = tls_->write(at + total, len - total);
      if (n > 0) {
        total += static_cast<size_t>(n);
        continue;
      }
      if (n == 0 || total > 0)
        break; // would block (a failure shows at the next write)
      return fail();
    }
    result = total;
    return rw_state::success;
  }

  bool must_read_more(native_socket, size_t threshold) {
    return threshold > 0 && tls_->pending() >= threshold;
  }

private:
  rw_state fail() {
    // In TLS 1.3 a dialler's handshake ends before the other side checked
    // its certificate: that side's refusal is the first thing read here.
    if (!reported_) {
      reported_ = true;
      shared_->report(*tls_, peer_, address_);
    }
    return rw_state::failure;
  }

  std::shared_ptr<tls_transport::shared> shared_;
  std::shared_ptr<gateway::tls_stream> tls_;
  std::string peer_;
  std::string address_;
  bool reported_ = false;
};

/// A stream whose bytes go through tls_policy (CAF's stream_impl<policy>).
class tls_socket_stream : public caf::io::network::stream {
public:
  tls_socket_stream(default_mpx& mpx, native_socket fd, tls_policy policy)
    : stream(mpx, fd), policy_(std::move(policy)) {}
  void handle_event(operation op) override { handle_event_impl(op, policy_); }

private:
  tls_policy policy_;
};

/// A connection's end as the BASP broker sees it (caf::openssl's scribe_impl).
class tls_scribe : public caf::io::scribe {
public:
  tls_scribe(default_mpx& mpx, native_socket fd, tls_policy policy)
    : scribe(caf::io::network::conn_hdl_from_socket(fd)), stream_(mpx, fd, std::move(policy)) {}

  void configure_read(caf::io::receive_policy::config config) override {
    stream_.configure_read(config);
    if (!launched_) {
      launched_ = true;
      stream_.start(this);
    }
  }
  void ack_writes(bool enable) override { stream_.ack_writes(enable); }
  std::vector<char>& wr_buf() override { return stream_.wr_buf(); }
  std::vector<char>& rd_buf() override { return stream_.rd_buf(); }
  void graceful_shutdown() override {
    stream_.graceful_shutdown();
    detach(&stream_.backend(), false);
  }
  void flush() override { stream_.flush(this); }
  std::string addr() const override {
    auto x = caf::io::network::remote_addr_of_fd(stream_.fd());
    return x ? *x : std::string{};
  }
  uint16_t port() const override {
    auto x = caf::io::network::remote_port_of_fd(stream_.fd());
    return x ? *x : 0;
  }
  void add_to_loop() override { stream_.activate(this); }
  void remove_from_loop() override { stream_.passivate(); }

private:
  bool launched_ = false;
  tls_socket_stream stream_;
};

/// Accepted connections whose TLS handshake runs: one thread drives them all
/// (poll), hands each that completes to its doorman on the multiplexer's
/// thread, and closes, and reports, each that fails or outlives the timeout.
/// The broker thus only ever sees established connections, and BASP's
/// greeting (the accepting side writes first) never meets a handshake.
class handshake_worker {
public:
  handshake_worker(std::shared_ptr<tls_transport::shared> shared)
    : shared_(std::move(shared)), wake_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)),
      thread_([this] { run(); }) {}
  ~handshake_worker() {
    stop();
    ::close(wake_);
  }
  handshake_worker(const handshake_worker&) = delete;
  handshake_worker& operator=(const handshake_worker&) = delete;

  /// Most handshakes pending at once; more connections are closed at once:
  /// strangers cannot make the node hold sockets without bound.
  static constexpr size_t max_pending = 1024;

  void add(caf::intrusive_ptr<tls_doorman> doorman, native_socket fd,
           std::shared_ptr<gateway::tls_stream> tls) {
    if (pending_.load() >= max_pending) {
      if (dropped_++ % 100 == 0)
        spdlog::warn("cluster-tls-handshakes-full pending={} dropped_so_far={}", pending_.load(),
                     dropped_.load());
      ::close(fd);
      return;
    }
    {
      std::lock_guard lock{mutex_};
      if (!stopping_) {
        ++pending_;
        incoming_.push_back(job{std::move(doorman), fd, std::move(tls),
                                clock_type::now() + shared_->handshake_timeout,
                                gateway::peer_address(fd)});
        fd = -1;
      }
    }
    if (fd >= 0)
      ::close(fd);
    const uint64_t one = 1;
    (void)::write(wake_, &one, sizeof one);
  }

  void stop() {
    {
      std::lock_guard lock{mutex_};
      if (stopping_)
        return;
      stopping_ = true;
    }
    const uint64_t one = 1;
    (void)::write(wake_, &one, sizeof one);
    if (thread_.joinable())
      thread_.join();
  }

private:
  struct job {
    caf::intrusive_ptr<tls_doorman> doorman;
    native_socket fd;
    std::shared_ptr<gateway::tls_stream> tls;
    clock_type::time_point deadline;
    std::string address;
  };

  void run();
  void finish(job& j, bool established);

  std::shared_ptr<tls_transport::shared> shared_;
  int wake_;
  std::atomic<size_t> pending_{0}; ///< handshakes added and not finished
  std::atomic<uint64_t> dropped_{0};
  std::mutex mutex_;
  std::vector<job> incoming_; ///< guarded by mutex_
  bool stopping_ = false;     ///< guarded by mutex_
  std::thread thread_;        ///< last: starts once the rest exists
};

/// Accepts TCP as CAF does; the handshake worker puts TLS over each accepted
/// socket before the broker hears of it.
class tls_doorman : public caf::io::network::doorman_impl {
public:
  tls_doorman(default_mpx& mpx, native_socket fd, std::shared_ptr<tls_transport::shared> shared,
              std::shared_ptr<handshake_worker> worker)
    : doorman_impl(mpx, fd), shared_(std::move(shared)), worker_(std::move(worker)) {}

  bool new_connection() override {
    if (detached())
      return false; // the broker let go of us while the poll set still held events
    const native_socket fd = acceptor_.accepted_socket();
    caf::io::network::nonblocking(fd, true);
    (void)caf::io::network::tcp_nodelay(fd, true);
    std::shared_ptr<gateway::tls_stream> tls;
    try {
      tls = std::make_shared<gateway::tls_stream>(*shared_->tls, fd,
                                                  gateway::tls_stream::role::server);
    } catch (const std::exception& e) {
      spdlog::error("cluster-tls-session-failed error={}", e.what());
      ::close(fd);
      return false;
    }
    worker_->add(caf::intrusive_ptr<tls_doorman>{this}, fd, std::move(tls));
    return true;
  }

  /// On the multiplexer's thread: a connection that completed its handshake.
  void established(native_socket fd, std::shared_ptr<gateway::tls_stream> tls,
                   std::string address) {
    if (detached() || parent() == nullptr) {
      ::close(fd); // the port closed meanwhile
      return;
    }
    auto& mpx = acceptor_.backend();
    auto scribe = caf::make_counted<tls_scribe>(
        mpx, fd, tls_policy{shared_, std::move(tls), {}, std::move(address)});
    auto hdl = scribe->hdl();
    parent()->add_scribe(std::move(scribe));
    doorman::new_connection(&mpx, hdl);
  }

  default_mpx& mpx() { return acceptor_.backend(); }

private:
  std::shared_ptr<tls_transport::shared> shared_;
  /// Shared: a doorman may outlive the transport until the middleman stops.
  std::shared_ptr<handshake_worker> worker_;
};

void handshake_worker::run() {
  std::vector<job> jobs;
  std::vector<pollfd> fds;
  while (true) {
    {
      std::lock_guard lock{mutex_};
      if (stopping_)
        break;
      for (auto& j : incoming_)
        jobs.push_back(std::move(j));
      incoming_.clear();
    }
    const auto now = clock_type::now();
    auto next = clock_type::time_point::max();
    fds.clear();
    fds.push_back(pollfd{wake_, POLLIN, 0});
    for (auto& j : jobs) {
      // A new job's first step: the client hello may be there already.
      const short wants = j.tls->wants() != 0 ? j.tls->wants() : POLLIN;
      fds.push_back(pollfd{j.fd, wants, 0});
      next = std::min(next, j.deadline);
    }
    int timeout = -1;
    if (next != clock_type::time_point::max())
      timeout = static_cast<int>(std::max<int64_t>(
          0, std::chrono::duration_cast<std::chrono::milliseconds>(next - now).count() + 1));
    const int n = ::poll(fds.data(), fds.size(), timeout);
    if (n < 0 && errno != EINTR)
      break;
    if (fds[0].revents != 0) {
      uint64_t drained = 0;
      (void)::read(wake_, &drained, sizeof drained);
    }
    const auto after = clock_type::now();
    std::vector<job> left;
    for (size_t i = 0; i < jobs.size(); ++i) {
      auto& j = jobs[i];
      const bool ready = n > 0 && fds[i + 1].revents != 0;
      if (ready) {
        const auto s = j.tls->handshake();
        if (s == gateway::tls_stream::status::done || s == gateway::tls_stream::status::failed) {
          finish(j, s == gateway::tls_stream::status::done);
          continue;
        }
      }
      if (after >= j.deadline) {
        j.tls->mark_timed_out();
        finish(j, false);
        continue;
      }
      left.push_back(std::move(j));
    }
    jobs.swap(left);
  }
  // Stopping: the handshakes left are dropped with their sockets.
  for (auto& j : jobs)
    ::close(j.fd);
  std::lock_guard lock{mutex_};
  for (auto& j : incoming_)
    ::close(j.fd);
  incoming_.clear();
}

void handshake_worker::finish(job& j, bool established) {
  --pending_;
  if (!established) {
    shared_->report(*j.tls, {}, j.address);
    ::close(j.fd);
    return;
  }
  ++shared_->counters.established;
  auto doorman = std::move(j.doorman);
  auto& mpx = doorman->mpx();
  mpx.post([doorman, fd = j.fd, tls = std::move(j.tls), address = std::move(j.address)]() mutable {
    doorman->established(fd, std::move(tls), std::move(address));
  });
}

/// CAF's middleman actor with TLS scribes and doormen (caf::openssl's).
class tls_middleman : public caf::io::middleman_actor_impl {
public:
  tls_middleman(caf::actor_config& cfg, caf::actor broker,
                std::shared_ptr<tls_transport::shared> shared,
                std::shared_ptr<handshake_worker> worker)
    : middleman_actor_impl(cfg, std::move(broker)), shared_(std::move(shared)),
      worker_(std::move(worker)) {}

  const char* name() const override { return "lmcc.tls_middleman"; }

protected:
  /// Runs on this (detached) actor's thread, as CAF's own, whose TCP connect
  /// blocks as well: the TLS handshake is done here, within the timeout,
  /// before the broker gets the connection.
  caf::expected<caf::io::scribe_ptr> connect(const std::string& host, uint16_t port) override {
    auto fd = caf::io::network::new_tcp_connection(host, port);
    if (!fd)
      return std::move(fd.error());
    caf::io::network::nonblocking(*fd, true);
    (void)caf::io::network::tcp_nodelay(*fd, true);
    std::shared_ptr<gateway::tls_stream> tls;
    try {
      tls = std::make_shared<gateway::tls_stream>(*shared_->tls, *fd,
                                                  gateway::tls_stream::role::client);
    } catch (const std::exception& e) {
      spdlog::error("cluster-tls-session-failed error={}", e.what());
      ::close(*fd);
      return caf::make_error(caf::sec::cannot_connect_to_node);
    }
    std::string peer = shared_->peer_name ? shared_->peer_name(host, port) : std::string{};
    std::string address = host + ":" + std::to_string(port);
    if (!tls->handshake_until(clock_type::now() + shared_->handshake_timeout)) {
      shared_->report(*tls, std::move(peer), std::move(address));
      ::close(*fd);
      return caf::make_error(caf::sec::cannot_connect_to_node, "TLS handshake failed");
    }
    ++shared_->counters.established;
    return caf::make_counted<tls_scribe>(
        mpx(), *fd, tls_policy{shared_, std::move(tls), std::move(peer), std::move(address)});
  }

  caf::expected<caf::io::doorman_ptr> open(uint16_t port, const char* addr, bool reuse) override {
    auto fd = caf::io::network::new_tcp_acceptor_impl(port, addr, reuse);
    if (!fd)
      return std::move(fd.error());
    return caf::make_counted<tls_doorman>(mpx(), *fd, shared_, worker_);
  }

private:
  default_mpx& mpx() { return static_cast<default_mpx&>(system().middleman().backend()); }

  std::shared_ptr<tls_transport::shared> shared_;
  std::shared_ptr<handshake_worker> worker_;
};

} // namespace tls_detail

tls_transport::tls_transport(caf::actor_system& sys, tls_transport_options options)
  : sys_(sys), shared_(std::make_shared<shared>(std::move(options))),
    worker_(std::make_shared<tls_detail::handshake_worker>(shared_)) {
  auto broker = sys.middleman().named_broker<caf::io::basp_broker>(caf::atom("BASP"));
  // Detached as CAF's own middleman actor: connect() blocks.
  actor_ = sys.spawn<tls_detail::tls_middleman, caf::detached + caf::hidden>(std::move(broker),
                                                                             shared_, worker_);
}

tls_transport::~tls_transport() {
  stop();
}

caf::expected<uint16_t> tls_transport::publish(caf::strong_actor_ptr whom,
                                               std::set<std::string> sigs, uint16_t port,
                                               const std::string& host, bool reuse_addr) {
  caf::expected<uint16_t> out{caf::sec::runtime_error};
  caf::scoped_actor self{sys_};
  self->request(actor_, caf::infinite, caf::publish_atom::value, port, std::move(whom),
                std::move(sigs), host, reuse_addr)
      .receive([&](uint16_t bound) { out = bound; }, [&](caf::error& e) { out = std::move(e); });
  return out;
}

const tls_transport_counters& tls_transport::counters() const noexcept {
  return shared_->counters;
}

void tls_transport::stop() {
  if (actor_) {
    // `kill`, as CAF's middleman stops its own: it does not exit otherwise.
    caf::anon_send_exit(actor_, caf::exit_reason::kill);
    actor_ = nullptr;
  }
  worker_->stop();
}

} // namespace lmcc::actors
