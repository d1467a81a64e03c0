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
// Still lost: what is on the wire when a node is killed (kill -9), and, rarely,
// frames of a worker that floods the node while it stops. A hazard on the
// worker's side: a worker that closes its own PUSH socket at that very moment,
// blocked with a multipart half sent, can hit an assertion in its libzmq 4.3.4
// (session_base.cpp:260). A test whose pusher closed with linger 0 while
// blocked hit it in 4 of 30 runs (0 of 30 with the plain close); with the
// pusher open, never.
//
// Holding (kernel-side coalescing, pull_loop.hpp says when): a held
// connection has SO_RCVLOWAT set to hold_bytes, so the kernel does not wake
// libzmq's I/O thread for each multipart a worker sends; its bytes wait in the
// kernel until the PULL thread releases it (SO_RCVLOWAT 1: the kernel signals
// the bytes it holds at once) or until hold_bytes of them arrive. Linux wakes
// a reader below the low-water mark anyway under memory pressure, when the
// receive window is nearly closed, and at the peer's close, so holding never
// stalls a connection for good; the PULL thread releases held bytes within
// one coalescing period.
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
#include <unordered_map>
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
        // Held once drained (hold_drained). The kernel is told so too: the
        // descriptor may have been reused before this event was read, and a
        // hold meant for the closed connection then landed on this one -- left
        // in place, its frames would wait in the kernel after holding ends.
        open_[descriptor] = false;
        if (is_pull_connection(descriptor))
          set_low_water(descriptor, 1);
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
    closing_ = true; // no connection is held again (the PULL thread stopped holding first)
    const size_t open_at_stop = open_.size();
    std::vector<int> descriptors; // half_close may erase
    for (const auto& [fd, held] : open_)
      descriptors.push_back(fd);
    for (const int fd : descriptors)
      half_close(fd);
    return open_at_stop;
  }

  size_t open() const noexcept { return open_.size(); }

  /// Bytes the kernel holds unread, summed over the open connections.
  size_t unread_bytes() const {
    size_t total = 0;
    for (const auto& [fd, held] : open_)
      if (is_pull_connection(fd))
        total += unread(fd);
    return total;
  }

  // -- holding ------------------------------------------------------------------

  /// SO_RCVLOWAT of a held connection; 0: never hold.
  void set_hold_bytes(int bytes) noexcept { hold_bytes_ = bytes; }
  bool holding() const noexcept { return holding_; }

  /// From now on connections wait in the kernel between releases: each one
  /// with nothing unread is held now, the others once drained.
  void start_holding() {
    if (hold_bytes_ <= 0 || closing_)
      return;
    holding_ = true;
    hold_drained();
  }

  /// Every connection is read as its bytes arrive again (libzmq's own way).
  void stop_holding() {
    holding_ = false;
    for (auto& [fd, held] : open_)
      if (held) {
        set_low_water(fd, 1); // harmless on a reused descriptor: 1 is the default
        held = false;
      }
  }

  /// Releases every held connection the kernel holds bytes for: libzmq's I/O
  /// thread reads them now. Returns how many were released.
  size_t release_pending() {
    size_t released = 0;
    for (auto& [fd, held] : open_)
      if (held && unread(fd) > 0) {
        set_low_water(fd, 1);
        held = false;
        ++released;
      }
    return released;
  }

  /// True while a released connection still has bytes in the kernel (libzmq
  /// has not read all that a release let through yet).
  bool release_in_progress() const {
    for (const auto& [fd, held] : open_)
      if (!held && unread(fd) > 0)
        return true;
    return false;
  }

  /// Holds again every released connection the kernel holds nothing for.
  void hold_drained() {
    if (!holding_ || closing_)
      return;
    for (auto& [fd, held] : open_)
      if (!held && unread(fd) == 0 && is_pull_connection(fd)) {
        set_low_water(fd, hold_bytes_);
        held = true;
      }
  }

private:
  static size_t unread(int fd) {
    int bytes = 0;
    return ::ioctl(fd, SIOCINQ, &bytes) == 0 && bytes > 0 ? static_cast<size_t>(bytes) : 0;
  }

  static void set_low_water(int fd, int bytes) {
    if (::setsockopt(fd, SOL_SOCKET, SO_RCVLOWAT, &bytes, sizeof bytes) != 0)
      spdlog::debug("pull-low-water-failed fd={} bytes={} errno={}", fd, bytes, errno);
  }

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
  /// Open connections, and whether each is held.
  std::unordered_map<int, bool> open_;
  uint16_t port_ = 0;
  bool closing_ = false;
  int hold_bytes_ = 0;
  bool holding_ = false;
};

} // namespace lmcc::gateway::internal
