// pull_connections: the workers' TCP connections to the S1 PULL socket, known
// through a libzmq socket monitor, so that a clean stop can read every frame a
// worker has written before the socket closes.
//
// Why: closing a PULL socket throws away what the kernel and libzmq hold for
// it, and a worker's PUSH socket keeps nothing it has written. Each frame lost
// there is a seq gap at the worker's next batch, and a gap costs that worker a
// full sync after the restart. Busy workers always have frames on the wire.
// A TCP half-close (shutdown(SHUT_WR)) of each connection makes the worker's
// libzmq read end-of-stream: it closes its side once the bytes it wrote are
// sent, and keeps its unsent messages queued for the reconnect (to this node
// restarted, or to whatever the address leads to). This side reads until that
// close, which the monitor reports as a disconnection. The PULL thread first
// catches up with what the kernel holds (unread_bytes), for a reason given in
// pull_loop.hpp.
//
// Still lost: what is on the wire when a node is killed (kill -9), and,
// rarely, frames of a worker that floods the node while it stops
// (bench/RESULTS.md). A hazard on the worker's side: a worker that closes its
// own PUSH socket at that very moment, blocked with a multipart half sent,
// can hit an assertion in its libzmq 4.3.4 (session_base.cpp:260). A test
// whose pusher closed with linger 0 while blocked hit it in 4 of 30 runs
// (0 of 30 with the plain close); with the pusher open, never.
//
// Private to gateway/: used by the PULL thread only (zmq_frontend.cpp).
#pragma once

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <zmq.hpp>

#include <arpa/inet.h>
#include <cstdint>
#include <cstring>
#include <linux/sockios.h>
#include <netinet/in.h>
#include <random>
#include <string>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unordered_set>
#include <vector>

namespace lmcc::gateway::internal {

class pull_connections {
public:
  /// Monitors `pull`. Call before the bind: a worker waiting to reconnect is
  /// accepted the moment the socket binds, and its connection must be known.
  pull_connections(zmq::context_t& context, zmq::socket_t& pull)
    : monitor_(context, zmq::socket_type::pair) {
    // Unique within the context: libzmq unbinds a closed socket's monitor
    // endpoint in the background, and a new socket may get the old one's
    // address, so the name holds a random part.
    std::random_device entropy;
    const std::string endpoint =
        fmt::format("inproc://lmcc-pull-monitor-{:08x}{:08x}", entropy(), entropy());
    if (zmq_socket_monitor(pull.handle(), endpoint.c_str(),
                           ZMQ_EVENT_ACCEPTED | ZMQ_EVENT_DISCONNECTED) != 0)
      throw zmq::error_t();
    monitor_.connect(endpoint);
  }

  /// The S1 port, from the bound socket's endpoint: before shutting a
  /// descriptor down, it is checked to still be a connection to this port (a
  /// descriptor number can be reused once libzmq closed it).
  void set_port(uint16_t port) noexcept { port_ = port; }

  zmq_pollitem_t poll_item() noexcept { return {monitor_.handle(), 0, ZMQ_POLLIN, 0}; }

  /// Applies the monitor's pending events. Once closing, a connection accepted
  /// now is half-closed on sight: its handshake fails before it can carry a
  /// message.
  void read_events() {
    zmq::message_t event, endpoint;
    while (monitor_.recv(event, zmq::recv_flags::dontwait)) {
      if (event.more())
        (void)monitor_.recv(endpoint, zmq::recv_flags::none);
      if (event.size() < 6)
        continue;
      uint16_t kind = 0;
      uint32_t fd = 0;
      std::memcpy(&kind, event.data(), sizeof kind);
      std::memcpy(&fd, static_cast<const char*>(event.data()) + sizeof kind, sizeof fd);
      const int descriptor = static_cast<int>(fd);
      if (kind == ZMQ_EVENT_ACCEPTED) {
        open_.insert(descriptor);
        if (closing_)
          half_close(descriptor);
      } else if (kind == ZMQ_EVENT_DISCONNECTED) {
        open_.erase(descriptor);
      }
    }
  }

  /// Half-closes every open connection, and every one accepted from now on;
  /// returns how many were open.
  size_t half_close_all() {
    read_events();
    closing_ = true;
    const size_t open_at_stop = open_.size();
    const std::vector<int> descriptors(open_.begin(), open_.end()); // half_close may erase
    for (const int fd : descriptors)
      half_close(fd);
    return open_at_stop;
  }

  size_t open() const noexcept { return open_.size(); }

  /// Bytes the kernel holds unread, summed over the open connections.
  size_t unread_bytes() const {
    size_t total = 0;
    for (const int fd : open_) {
      int bytes = 0;
      if (is_pull_connection(fd) && ::ioctl(fd, SIOCINQ, &bytes) == 0 && bytes > 0)
        total += static_cast<size_t>(bytes);
    }
    return total;
  }

private:
  void half_close(int fd) {
    if (!is_pull_connection(fd)) {
      open_.erase(fd); // closed and reused meanwhile: nothing of ours to wait for
      return;
    }
    if (::shutdown(fd, SHUT_WR) != 0)
      spdlog::debug("pull-half-close-failed fd={} errno={}", fd, errno);
  }

  bool is_pull_connection(int fd) const {
    sockaddr_storage local{}, peer{};
    socklen_t local_length = sizeof local, peer_length = sizeof peer;
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &local_length) != 0 ||
        ::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &peer_length) != 0)
      return false; // not a socket, or not connected (a listener)
    if (local.ss_family == AF_INET)
      return ntohs(reinterpret_cast<const sockaddr_in&>(local).sin_port) == port_;
    if (local.ss_family == AF_INET6)
      return ntohs(reinterpret_cast<const sockaddr_in6&>(local).sin6_port) == port_;
    return false;
  }

  zmq::socket_t monitor_;
  std::unordered_set<int> open_;
  uint16_t port_ = 0;
  bool closing_ = false;
};

} // namespace lmcc::gateway::internal
