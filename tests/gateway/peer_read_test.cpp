// peer_read: a lookup's key reads between nodes, over real TCP sockets on
// loopback.
#include "gateway/peer_read.hpp"

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <cerrno>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <thread>

namespace lmcc::gateway {
namespace {

using namespace std::chrono_literals;

constexpr peer_read_key read_test_key{0x0123456789abcdefULL, 0xfedcba9876543210ULL};

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
  peer_read_server server{"127.0.0.1", "127.0.0.1", read_test_key, fake_answer};
  EXPECT_TRUE(server.endpoint().starts_with("tcp://127.0.0.1:"));
  peer_read_client client;
  const std::vector<uint64_t> keys{7, 4, 9, 10, 3};
  auto call = client.send(server.access_endpoint(), keys);
  ASSERT_TRUE(call);
  auto flat = client.wait(*call, 5s);
  ASSERT_TRUE(flat);
  EXPECT_EQ(*flat, fake_answer(keys));
  EXPECT_EQ(server.requests(), 1u);
}

TEST(peer_read, concurrent_callers_each_get_their_own_answer) {
  peer_read_server server{"127.0.0.1", "127.0.0.1", read_test_key, fake_answer};
  peer_read_client client;
  std::vector<std::thread> threads;
  std::atomic<int> right{0};
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (uint64_t i = 0; i < 50; ++i) {
        const std::vector<uint64_t> keys{i * 10 + static_cast<uint64_t>(t), i + 1};
        auto call = client.send(server.access_endpoint(), keys);
        if (call && client.wait(*call, 5s) == fake_answer(keys))
          ++right;
      }
    });
  for (auto& th : threads)
    th.join();
  EXPECT_EQ(right.load(), 200);
}

/// A raw TCP connection to a server's endpoint ("tcp://127.0.0.1:PORT").
unique_fd raw_connection(const std::string& endpoint) {
  unique_fd fd{::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)};
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(static_cast<uint16_t>(std::stoi(endpoint.substr(endpoint.rfind(':') + 1))));
  ::inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
  EXPECT_EQ(::connect(fd.get(), reinterpret_cast<sockaddr*>(&to), sizeof to), 0);
  return fd;
}

/// The preface a reader sends first: "lmccrd01" and the key (peer_read.hpp).
void send_preface(int fd, peer_read_key key) {
  const uint64_t preface[3] = {0x3130647263636d6cULL, key[0], key[1]};
  ASSERT_EQ(::send(fd, preface, sizeof preface, 0), 24);
}

/// Whether the server closed `fd` rather than answering: end of file, or a
/// reset when it closed with bytes of ours unread.
bool closed_by_server(int fd) {
  char byte = 0;
  const ssize_t n = ::recv(fd, &byte, 1, 0);
  return n == 0 || (n < 0 && errno == ECONNRESET);
}

TEST(peer_read, the_endpoint_handed_to_peers_carries_the_key_and_the_plain_one_does_not) {
  peer_read_server server{"127.0.0.1", "127.0.0.1", read_test_key, fake_answer};
  EXPECT_EQ(server.access_endpoint(), server.endpoint() + "#0123456789abcdeffedcba9876543210");
  EXPECT_EQ(server.endpoint().find('#'), std::string::npos);
}

TEST(peer_read, a_reader_without_the_key_reads_nothing) {
  peer_read_server server{"127.0.0.1", "127.0.0.1", read_test_key, fake_answer};
  const uint64_t request[3] = {2, 7, 42}; // a well-formed request, no preface
  {
    auto raw = raw_connection(server.endpoint());
    ASSERT_EQ(::send(raw.get(), request, sizeof request, 0), 24);
    EXPECT_TRUE(closed_by_server(raw.get()));
  }
  {
    auto raw = raw_connection(server.endpoint());
    send_preface(raw.get(), peer_read_key{read_test_key[0], read_test_key[1] ^ 1}); // one bit off
    ASSERT_EQ(::send(raw.get(), request, sizeof request, 0), 24);
    EXPECT_TRUE(closed_by_server(raw.get()));
  }
  // The client given the plain endpoint sends no preface: refused too.
  peer_read_client client;
  const std::vector<uint64_t> keys{42};
  auto call = client.send(server.endpoint(), keys);
  EXPECT_FALSE(call && client.wait(*call, 5s));
  EXPECT_EQ(server.unauthorized(), 3u);
  EXPECT_EQ(server.requests(), 0u);
  // With the key, the same request is answered.
  auto raw = raw_connection(server.endpoint());
  send_preface(raw.get(), read_test_key);
  ASSERT_EQ(::send(raw.get(), request, sizeof request, 0), 24);
  uint64_t reply[3] = {0, 0, 0};
  ASSERT_EQ(::recv(raw.get(), reply, sizeof reply, MSG_WAITALL), 24);
  EXPECT_EQ(reply[1], 7u);                   // the request id
  EXPECT_EQ(reply[2], fake_answer(keys)[0]); // 42 % 4 holders
  EXPECT_EQ(server.requests(), 1u);
}

/// The process's peak resident size so far, in KiB.
long peak_rss_kib() {
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss;
}

TEST(peer_read, a_reply_that_promises_more_words_than_come_costs_only_what_comes) {
  // A peer past the handshake answers with a header promising the most words
  // a reply may carry (512 MiB of them), sends one, and closes. The reply is
  // refused, and the memory taken follows the bytes that came, not the promise.
  int fds[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, fds), 0);
  unique_fd peer{fds[0]};
  peer_read_client::call call{"tcp://peer:1", 1, unique_fd{fds[1]}};
  const uint64_t reply[3] = {peer_read_client::max_reply_words + 1, call.id, 7};
  ASSERT_EQ(::send(peer.get(), reply, sizeof reply, 0), static_cast<ssize_t>(sizeof reply));
  peer.reset();
  peer_read_client client;
  const long before = peak_rss_kib();
  EXPECT_FALSE(client.wait(call, 1s));
  EXPECT_LT(peak_rss_kib() - before, 64 * 1024) << "KiB taken by a reply of 24 bytes";
}

TEST(peer_read, a_malformed_request_closes_only_its_connection) {
  peer_read_server server{"127.0.0.1", "127.0.0.1", read_test_key, fake_answer};
  auto raw = raw_connection(server.endpoint());
  send_preface(raw.get(), read_test_key);
  const uint64_t too_many_words = (uint64_t{1} << 40);
  ASSERT_EQ(::send(raw.get(), &too_many_words, sizeof too_many_words, 0), 8);
  // The server closes the bad stream: the raw reader sees end of file.
  char byte = 0;
  EXPECT_EQ(::recv(raw.get(), &byte, 1, 0), 0);
  EXPECT_EQ(server.malformed(), 1u);
  // Other callers are served as before.
  peer_read_client client;
  const std::vector<uint64_t> keys{5};
  auto call = client.send(server.access_endpoint(), keys);
  ASSERT_TRUE(call);
  EXPECT_EQ(client.wait(*call, 5s), fake_answer(keys));
}

TEST(peer_read, a_caller_that_stops_mid_request_holds_no_one_up) {
  peer_read_server server{"127.0.0.1", "127.0.0.1", read_test_key, fake_answer};
  auto raw = raw_connection(server.endpoint());
  send_preface(raw.get(), read_test_key);
  const uint64_t half[2] = {3, 77}; // announces an id and two keys, sends none
  ASSERT_EQ(::send(raw.get(), half, sizeof half, 0), 16);
  peer_read_client client;
  const std::vector<uint64_t> keys{9, 8};
  auto call = client.send(server.access_endpoint(), keys);
  ASSERT_TRUE(call);
  EXPECT_EQ(client.wait(*call, 5s), fake_answer(keys));
}

TEST(peer_read, connections_are_reused_between_calls) {
  peer_read_server server{"127.0.0.1", "127.0.0.1", read_test_key, fake_answer};
  peer_read_client client;
  for (uint64_t i = 0; i < 20; ++i) {
    const std::vector<uint64_t> keys{i};
    auto call = client.send(server.access_endpoint(), keys);
    ASSERT_TRUE(call);
    ASSERT_EQ(client.wait(*call, 5s), fake_answer(keys));
  }
  EXPECT_EQ(server.accepted(), 1u); // one pooled connection served them all
  const std::vector<uint64_t> keys{1};
  auto a = client.send(server.access_endpoint(), keys);
  auto b = client.send(server.access_endpoint(), keys); // concurrent: a second connection
  ASSERT_TRUE(a && b);
  EXPECT_EQ(client.wait(*a, 5s), fake_answer(keys));
  EXPECT_EQ(client.wait(*b, 5s), fake_answer(keys));
  EXPECT_EQ(server.requests(), 22u);
  EXPECT_EQ(server.accepted(), 2u);
}

TEST(peer_read, a_peer_that_went_away_fails_the_call_instead_of_blocking) {
  std::string endpoint;
  peer_read_client client;
  const std::vector<uint64_t> keys{1, 2};
  {
    peer_read_server gone{"127.0.0.1", "127.0.0.1", read_test_key, fake_answer};
    endpoint = gone.access_endpoint();
    auto call = client.send(endpoint, keys); // leaves a pooled connection behind
    ASSERT_TRUE(call);
    ASSERT_EQ(client.wait(*call, 5s), fake_answer(keys));
  }
  // The pooled connection is closed by the peer and not used; a new one is
  // refused. Either way the caller learns at once, not after a timeout.
  const auto t0 = std::chrono::steady_clock::now();
  auto call = client.send(endpoint, keys);
  EXPECT_FALSE(call && client.wait(*call, 2s));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 1s);
}

TEST(peer_read, a_restarted_peers_old_connections_are_closed_not_kept) {
  peer_read_client client;
  const std::vector<uint64_t> keys{1, 2};
  {
    // A peer before its restart: its endpoint (port and key) is never asked again.
    peer_read_server before{"127.0.0.1", "127.0.0.1", read_test_key, fake_answer};
    auto call = client.send(before.access_endpoint(), keys);
    ASSERT_TRUE(call);
    ASSERT_EQ(client.wait(*call, 5s), fake_answer(keys));
    ASSERT_EQ(client.idle_connections(), 1u);
  }
  peer_read_server after{"127.0.0.1", "127.0.0.1", read_test_key, fake_answer};
  // Lookups go on to the restarted peer; within a sweep interval the old
  // endpoint's pooled connection is closed, leaving the new one only.
  const auto deadline = std::chrono::steady_clock::now() + peer_read_client::sweep_interval + 5s;
  while (client.idle_connections() != 1 || after.requests() < 2) {
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << client.idle_connections();
    auto call = client.send(after.access_endpoint(), keys);
    ASSERT_TRUE(call);
    ASSERT_EQ(client.wait(*call, 5s), fake_answer(keys));
    std::this_thread::sleep_for(50ms); // the pace of lookups, not a synchronisation
  }
  EXPECT_EQ(after.accepted(), 1u);
}

TEST(peer_read, a_peer_that_never_answers_times_out) {
  // A listener that accepts nothing: the request is sent, no reply comes.
  unique_fd listener{::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)};
  sockaddr_in at{};
  at.sin_family = AF_INET;
  ::inet_pton(AF_INET, "127.0.0.1", &at.sin_addr);
  ASSERT_EQ(::bind(listener.get(), reinterpret_cast<sockaddr*>(&at), sizeof at), 0);
  ASSERT_EQ(::listen(listener.get(), 4), 0);
  socklen_t len = sizeof at;
  ::getsockname(listener.get(), reinterpret_cast<sockaddr*>(&at), &len);
  peer_read_client client;
  const std::vector<uint64_t> keys{1};
  auto call = client.send("tcp://127.0.0.1:" + std::to_string(ntohs(at.sin_port)), keys);
  ASSERT_TRUE(call);
  EXPECT_FALSE(client.wait(*call, 200ms));
}

} // namespace
} // namespace lmcc::gateway
