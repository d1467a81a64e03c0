// io_lanes: the node's sockets land on their own libzmq I/O threads, and a
// context too small for the lanes still carries traffic.
#include "gateway/internal/socket_util.hpp"
#include "gateway/io_lanes.hpp"

#include <gtest/gtest.h>
#include <zmq.hpp>

#include <chrono>
#include <string>

namespace lmcc::gateway {
namespace {

using namespace std::chrono_literals;

TEST(io_lanes, a_node_context_puts_ingest_and_requests_on_different_io_threads) {
  zmq::context_t context{zmq_io_threads};
  auto pull = internal::bind_socket(context, zmq::socket_type::pull, "127.0.0.1", 0, 1 << 20);
  auto router = internal::bind_socket(context, zmq::socket_type::router, "127.0.0.1", 0, 1 << 20);
  const uint64_t ingest = pull.get(zmq::sockopt::affinity);
  const uint64_t requests = router.get(zmq::sockopt::affinity);
  EXPECT_EQ(ingest, uint64_t{1});   // I/O thread 0
  EXPECT_EQ(requests, uint64_t{2}); // I/O thread 1
  zmq::socket_t dealer{context, zmq::socket_type::dealer};
  put_on_lane(context, dealer, io_lane::requests);
  EXPECT_EQ(dealer.get(zmq::sockopt::affinity), requests);
}

TEST(io_lanes, a_one_thread_context_keeps_libzmqs_choice_and_still_accepts_connections) {
  // An accepted connection whose mask names no I/O thread is a libzmq
  // assertion: this test would abort if the lane were set here.
  zmq::context_t context{1};
  auto pull = internal::bind_socket(context, zmq::socket_type::pull, "127.0.0.1", 0, 1 << 20);
  EXPECT_EQ(pull.get(zmq::sockopt::affinity), uint64_t{0});
  const std::string endpoint = pull.get(zmq::sockopt::last_endpoint);
  zmq::socket_t push{context, zmq::socket_type::push};
  push.set(zmq::sockopt::linger, 0);
  push.connect(endpoint);
  ASSERT_TRUE(push.send(zmq::str_buffer("frame"), zmq::send_flags::none));
  pull.set(zmq::sockopt::rcvtimeo, 10'000);
  zmq::message_t got;
  ASSERT_TRUE(pull.recv(got));
  EXPECT_EQ(got.to_string(), "frame");
}

} // namespace
} // namespace lmcc::gateway
