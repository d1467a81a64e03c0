// peer_read over mutual TLS (lmcc_cluster_tls_*): readers with a certificate
// of the cluster's CA are answered over pooled connections as in clear; one
// with another CA's certificate, or without TLS, reads nothing, and the
// refusal reaches the node's hook once, on the side that refused. Real TCP
// on loopback, certificates made in the test (tls_test_certs.hpp).
#include "gateway/peer_read.hpp"
#include "tests/gateway/tls_test_certs.hpp"

#include <gtest/gtest.h>

#include <condition_variable>
#include <csignal>
#include <fstream>
#include <mutex>

namespace lmcc::gateway {
namespace {

using namespace std::chrono_literals;
using testing::test_pki;

constexpr peer_read_key tls_test_key{0x0123456789abcdefULL, 0xfedcba9876543210ULL};

std::vector<uint64_t> tls_fake_answer(std::span<const uint64_t> keys) {
  std::vector<uint64_t> flat;
  for (uint64_t k : keys) {
    flat.push_back(k % 4);
    for (uint64_t h = 1; h <= k % 4; ++h)
      flat.push_back(h * 1000 + k);
  }
  return flat;
}

/// What a node's refusal hook heard; wait_for() waits for the n-th one.
class tls_refusals {
public:
  node_tls::refusal_fn hook() {
    return [this](const tls_refusal& r) {
      std::lock_guard lock{mutex_};
      seen_.push_back(r);
      changed_.notify_all();
    };
  }
  std::vector<tls_refusal> wait_for(size_t n, std::chrono::milliseconds timeout = 5s) {
    std::unique_lock lock{mutex_};
    changed_.wait_for(lock, timeout, [&] { return seen_.size() >= n; });
    return seen_;
  }
  size_t count() {
    std::lock_guard lock{mutex_};
    return seen_.size();
  }

private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<tls_refusal> seen_;
};

struct tls_fixture : ::testing::Test {
  tls_fixture() { std::signal(SIGPIPE, SIG_IGN); } // as the node does
  test_pki pki;
  tls_refusals server_saw;
  tls_refusals client_saw;
};

TEST_F(tls_fixture, a_reader_of_the_cluster_ca_is_answered_over_a_reused_connection) {
  peer_read_server server{"127.0.0.1", "127.0.0.1", tls_test_key, tls_fake_answer,
                          node_tls::load(pki.issue("n1"), server_saw.hook())};
  peer_read_client client{1s, node_tls::load(pki.issue("n2"), client_saw.hook())};
  for (uint64_t round = 0; round < 3; ++round) {
    const std::vector<uint64_t> keys{7 + round, 4, 9, 10, 3};
    auto call = client.send(server.access_endpoint(), keys);
    ASSERT_TRUE(call);
    ASSERT_NE(call->socket.tls(), nullptr);
    auto flat = client.wait(*call, 5s);
    ASSERT_TRUE(flat);
    EXPECT_EQ(*flat, tls_fake_answer(keys));
    EXPECT_EQ(client.idle_connections(), 1u); // an idle TLS connection stays usable
  }
  // A large request and reply cross several TLS records.
  std::vector<uint64_t> many(50'000);
  for (size_t i = 0; i < many.size(); ++i)
    many[i] = i;
  auto call = client.send(server.access_endpoint(), many);
  ASSERT_TRUE(call);
  auto flat = client.wait(*call, 5s);
  ASSERT_TRUE(flat);
  EXPECT_EQ(*flat, tls_fake_answer(many));
  EXPECT_EQ(server.accepted(), 1u);
  EXPECT_EQ(server.requests(), 4u);
  EXPECT_EQ(server_saw.count(), 0u);
  EXPECT_EQ(client_saw.count(), 0u);
}

TEST_F(tls_fixture, a_reader_whose_certificate_another_ca_signed_reads_nothing) {
  peer_read_server server{"127.0.0.1", "127.0.0.1", tls_test_key, tls_fake_answer,
                          node_tls::load(pki.issue("n1"), server_saw.hook())};
  // It trusts our CA (so it would go on), but we do not trust its CA.
  test_pki other;
  auto files = other.issue("n9");
  files.ca_file = (other.dir() / "both.pem").string();
  {
    std::ofstream out{files.ca_file};
    out << std::ifstream{pki.ca_file()}.rdbuf() << std::ifstream{other.ca_file()}.rdbuf();
  }
  peer_read_client client{1s, node_tls::load(files, client_saw.hook())};
  auto call = client.send(server.access_endpoint(), std::vector<uint64_t>{1, 2, 3});
  if (call) { // TLS 1.3: its handshake ends before ours checks it; the alert comes next
    EXPECT_FALSE(client.wait(*call, 5s));
  }
  const auto refused = server_saw.wait_for(1);
  ASSERT_EQ(refused.size(), 1u);
  EXPECT_EQ(refused[0].channel, "peer-read");
  EXPECT_EQ(refused[0].reason, "untrusted-certificate") << describe(refused[0]);
  EXPECT_NE(refused[0].subject.find("CN=n9"), std::string::npos) << describe(refused[0]);
  EXPECT_TRUE(refused[0].address.starts_with("127.0.0.1:")) << describe(refused[0]);
  // The reader hears of it from the server's alert, unless the reset of the
  // request it wrote meanwhile overtook the alert: best effort on that side.
  for (const auto& r : client_saw.wait_for(1, 100ms)) {
    EXPECT_TRUE(r.by_peer()) << describe(r);
    EXPECT_EQ(r.address.find('#'), std::string::npos); // the key is never reported
  }
  EXPECT_EQ(server.requests(), 0u);
}

TEST_F(tls_fixture, a_plain_reader_meets_a_tls_server_and_a_tls_reader_a_plain_one) {
  {
    peer_read_server server{"127.0.0.1", "127.0.0.1", tls_test_key, tls_fake_answer,
                            node_tls::load(pki.issue("n1"), server_saw.hook())};
    peer_read_client plain;
    auto call = plain.send(server.access_endpoint(), std::vector<uint64_t>{1, 2});
    if (call) {
      EXPECT_FALSE(plain.wait(*call, 5s));
    }
    const auto refused = server_saw.wait_for(1);
    ASSERT_EQ(refused.size(), 1u);
    EXPECT_EQ(refused[0].reason, "not-tls") << describe(refused[0]);
    EXPECT_EQ(server.requests(), 0u);
  }
  {
    peer_read_server plain{"127.0.0.1", "127.0.0.1", tls_test_key, tls_fake_answer};
    peer_read_client client{1s, node_tls::load(pki.issue("n2"), client_saw.hook())};
    EXPECT_FALSE(client.send(plain.access_endpoint(), std::vector<uint64_t>{1, 2}));
    const auto heard = client_saw.wait_for(1);
    ASSERT_EQ(heard.size(), 1u);
    EXPECT_EQ(heard[0].reason, "closed-during-handshake") << describe(heard[0]);
    EXPECT_EQ(plain.requests(), 0u);
    EXPECT_EQ(plain.unauthorized(), 1u);
  }
}

} // namespace
} // namespace lmcc::gateway
