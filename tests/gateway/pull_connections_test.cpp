// pull_connections against a real PULL socket on loopback: what the kernel is
// told about a connection (SO_RCVLOWAT) matches what the tracker records, even
// when a descriptor is reused before the monitor's events are read.
#include "gateway/internal/pull_connections.hpp"
#include "zmq_frontend_support.hpp"

#include <gtest/gtest.h>
#include <zmq.hpp>

#include <chrono>
#include <dirent.h>
#include <string>
#include <vector>

namespace lmcc::gateway::internal {
namespace {

using test::wait_until;

uint16_t local_port(int fd) {
  sockaddr_in local{};
  socklen_t length = sizeof local;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &length) != 0 ||
      local.sin_family != AF_INET)
    return 0;
  return ntohs(local.sin_port);
}

/// This process's accepted connections to `port` (libzmq's descriptors).
std::vector<int> connections_to(uint16_t port) {
  std::vector<int> out;
  DIR* dir = ::opendir("/proc/self/fd");
  if (dir == nullptr)
    return out;
  while (const dirent* entry = ::readdir(dir)) {
    const int fd = std::atoi(entry->d_name);
    sockaddr_storage peer{};
    socklen_t length = sizeof peer;
    if (fd > 2 && local_port(fd) == port &&
        ::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &length) == 0)
      out.push_back(fd);
  }
  ::closedir(dir);
  return out;
}

int low_water(int fd) {
  int bytes = -1;
  socklen_t length = sizeof bytes;
  ::getsockopt(fd, SOL_SOCKET, SO_RCVLOWAT, &bytes, &length);
  return bytes;
}

struct pull_fixture {
  zmq::context_t ctx{1};
  zmq::socket_t pull{ctx, zmq::socket_type::pull};
  pull_connections connections{ctx, pull};
  uint16_t port = 0;
  std::string endpoint;

  pull_fixture() {
    pull.set(zmq::sockopt::linger, 0);
    pull.bind("tcp://127.0.0.1:0");
    endpoint = pull.get(zmq::sockopt::last_endpoint);
    port = static_cast<uint16_t>(std::stoi(endpoint.substr(endpoint.rfind(':') + 1)));
    connections.set_port(port);
    connections.set_hold_bytes(65536);
  }

  /// A pusher whose first frame has reached the PULL socket (so its
  /// connection is accepted and its handshake done).
  zmq::socket_t connected_pusher() {
    zmq::socket_t push{ctx, zmq::socket_type::push};
    push.set(zmq::sockopt::linger, 0);
    push.connect(endpoint);
    push.send(zmq::str_buffer("hello"), zmq::send_flags::none);
    zmq::message_t frame;
    EXPECT_TRUE(pull.recv(frame, zmq::recv_flags::none));
    return push;
  }
};

// The race: a connection closes and a new one is accepted on the same
// descriptor before the monitor's events are read, and holding starts in
// between. The new connection gets the hold (the tracker still knows the
// descriptor), then its ACCEPTED event says "not held" -- so stopping holding
// must still leave the kernel waking libzmq for each frame. Before the fix the
// connection kept SO_RCVLOWAT 64 KiB after holding stopped, and a worker's
// small frames waited in the kernel until 64 KiB arrived or it disconnected
// (a failover test saw one worker's frames stuck for 20 s).
TEST(pull_connections_test, a_reused_descriptor_is_never_left_held_after_holding_stops) {
  pull_fixture f;
  auto first = f.connected_pusher();
  f.connections.read_events();
  ASSERT_EQ(f.connections.open(), 1u);
  const auto before = connections_to(f.port);
  ASSERT_EQ(before.size(), 1u);

  first.close(); // libzmq closes its descriptor; the event waits unread
  ASSERT_TRUE(wait_until([&] { return connections_to(f.port).empty(); }));
  auto second = f.connected_pusher();
  const auto after = connections_to(f.port);
  ASSERT_EQ(after.size(), 1u);
  ASSERT_EQ(after[0], before[0]) << "the kernel gave the new connection another descriptor";

  f.connections.start_holding(); // holds the new connection under the old record
  EXPECT_EQ(low_water(after[0]), 65536);
  f.connections.read_events(); // DISCONNECTED, then ACCEPTED of the same descriptor
  f.connections.stop_holding();
  EXPECT_EQ(low_water(after[0]), 1);

  // And the frame is read at once, not held in the kernel.
  second.send(zmq::str_buffer("next"), zmq::send_flags::none);
  zmq::pollitem_t item{f.pull.handle(), 0, ZMQ_POLLIN, 0};
  EXPECT_EQ(zmq::poll(&item, 1, std::chrono::milliseconds(5000)), 1);
}

// While holding, a connection accepted on a reused descriptor is held like
// any other once drained, and released when it has bytes.
TEST(pull_connections_test, a_reused_descriptor_is_held_and_released_while_holding) {
  pull_fixture f;
  auto first = f.connected_pusher();
  f.connections.read_events();
  const auto before = connections_to(f.port);
  ASSERT_EQ(before.size(), 1u);
  first.close();
  ASSERT_TRUE(wait_until([&] { return connections_to(f.port).empty(); }));
  auto second = f.connected_pusher();
  ASSERT_EQ(connections_to(f.port), before);

  f.connections.start_holding();
  f.connections.read_events();
  f.connections.hold_drained();
  EXPECT_EQ(low_water(before[0]), 65536);
  second.send(zmq::str_buffer("held"), zmq::send_flags::none);
  ASSERT_TRUE(wait_until([&] { return f.connections.release_pending() == 1; }));
  EXPECT_EQ(low_water(before[0]), 1);
  zmq::message_t frame;
  EXPECT_TRUE(f.pull.recv(frame, zmq::recv_flags::none));
  EXPECT_EQ(frame.to_string(), "held");
}

} // namespace
} // namespace lmcc::gateway::internal
