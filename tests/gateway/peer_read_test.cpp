// peer_read: a lookup's key reads between nodes, over real ZMQ sockets on
// loopback.
#include "gateway/peer_read.hpp"

#include <gtest/gtest.h>

#include <thread>

namespace lmcc::gateway {
namespace {

using namespace std::chrono_literals;

/// Key k is held by holders 1..(k % 4): a pattern the test can recompute.
std::vector<uint64_t> fake_answer(std::span<const uint64_t> keys) {
  std::vector<uint64_t> flat;
  for (uint64_t k : keys) {
    flat.push_back(k % 4);
    for (uint64_t h = 1; h <= k % 4; ++h)
      flat.push_back(h * 1000 + k);
  }
  return flat;
}

TEST(peer_read, a_request_gets_the_holders_of_its_keys_in_order) {
  zmq::context_t ctx;
  peer_read_server server{ctx, "127.0.0.1", "127.0.0.1", fake_answer};
  EXPECT_TRUE(server.endpoint().starts_with("tcp://127.0.0.1:"));
  peer_read_client client{ctx};
  const std::vector<uint64_t> keys{7, 4, 9, 10, 3};
  auto call = client.send(server.endpoint(), keys);
  ASSERT_TRUE(call);
  auto flat = client.wait(*call, 5s);
  ASSERT_TRUE(flat);
  EXPECT_EQ(*flat, fake_answer(keys));
  EXPECT_EQ(server.requests(), 1u);
}

TEST(peer_read, concurrent_callers_each_get_their_own_answer) {
  zmq::context_t ctx;
  peer_read_server server{ctx, "127.0.0.1", "127.0.0.1", fake_answer};
  peer_read_client client{ctx};
  std::vector<std::thread> threads;
  std::atomic<int> right{0};
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (uint64_t i = 0; i < 50; ++i) {
        const std::vector<uint64_t> keys{i * 10 + static_cast<uint64_t>(t), i + 1};
        auto call = client.send(server.endpoint(), keys);
        if (call && client.wait(*call, 5s) == fake_answer(keys))
          ++right;
      }
    });
  for (auto& th : threads)
    th.join();
  EXPECT_EQ(right.load(), 200);
}

TEST(peer_read, a_malformed_request_is_counted_and_the_server_keeps_serving) {
  zmq::context_t ctx;
  peer_read_server server{ctx, "127.0.0.1", "127.0.0.1", fake_answer};
  zmq::socket_t raw{ctx, zmq::socket_type::dealer};
  raw.set(zmq::sockopt::linger, 0);
  raw.connect(server.endpoint());
  raw.send(zmq::buffer(std::string("not a whole number of words")), zmq::send_flags::none);
  peer_read_client client{ctx};
  const std::vector<uint64_t> keys{5};
  // The well-formed request behind it is answered; the bad one was dropped.
  auto call = client.send(server.endpoint(), keys);
  ASSERT_TRUE(call);
  EXPECT_EQ(client.wait(*call, 5s), fake_answer(keys));
  EXPECT_EQ(server.malformed(), 1u);
}

TEST(peer_read, an_unreachable_peer_times_out_instead_of_blocking) {
  zmq::context_t ctx;
  std::string endpoint;
  {
    peer_read_server gone{ctx, "127.0.0.1", "127.0.0.1", fake_answer};
    endpoint = gone.endpoint();
  }
  peer_read_client client{ctx};
  const std::vector<uint64_t> keys{1, 2};
  auto call = client.send(endpoint, keys);
  ASSERT_TRUE(call);
  EXPECT_FALSE(client.wait(*call, 200ms)); // returns: a dead peer costs one timeout
}

} // namespace
} // namespace lmcc::gateway
