// node_tls: mutual TLS between nodes over socket pairs, with certificates
// made in the test (tls_test_certs.hpp): both ends with certificates of one
// CA get through and exchange data; every way in which a peer is not let in
// is refused and named once (another CA's certificate, none, no TLS at all,
// a peer that stops half-way or never answers); a node's own bad files stop
// it with a message naming them.
#include "gateway/node_tls.hpp"
#include "tests/gateway/tls_test_certs.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <csignal>
#include <fcntl.h>
#include <fstream>
#include <mutex>
#include <openssl/ssl.h>
#include <poll.h>
#include <sys/socket.h>
#include <thread>
#include <vector>

namespace lmcc::gateway {
namespace {

using namespace std::chrono_literals;
using testing::test_pki;

/// A connected pair of non-blocking stream sockets.
struct socket_pair {
  int fds[2] = {-1, -1};
  socket_pair() {
    ::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, fds);
    std::signal(SIGPIPE, SIG_IGN); // as the node does (node_tls.hpp)
  }
  ~socket_pair() {
    close(0);
    close(1);
  }
  void close(int i) {
    if (fds[i] >= 0)
      ::close(fds[i]);
    fds[i] = -1;
  }
};

/// What a node_tls's hook was told.
struct refusals {
  std::mutex mutex;
  std::vector<tls_refusal> seen;
  node_tls::refusal_fn hook() {
    return [this](const tls_refusal& r) {
      std::lock_guard lock{mutex};
      seen.push_back(r);
    };
  }
};

/// Runs both ends' handshakes at once; (client ok, server ok).
std::pair<bool, bool> handshake_both(tls_stream& client, tls_stream& server,
                                     std::chrono::milliseconds timeout = 5s) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  bool server_ok = false;
  std::thread t{[&] { server_ok = server.handshake_until(deadline); }};
  const bool client_ok = client.handshake_until(deadline);
  t.join();
  return {client_ok, server_ok};
}

/// Reads exactly `n` bytes, polling; empty on failure or timeout.
std::string read_n(tls_stream& s, int fd, size_t n) {
  std::string out(n, '\0');
  size_t got = 0;
  const auto deadline = std::chrono::steady_clock::now() + 5s;
  while (got < n && std::chrono::steady_clock::now() < deadline) {
    const ssize_t r = s.read(out.data() + got, n - got);
    if (r < 0)
      return {};
    if (r == 0) {
      pollfd p{fd, s.wants(), 0};
      ::poll(&p, 1, 100);
      continue;
    }
    got += static_cast<size_t>(r);
  }
  return got == n ? out : std::string{};
}

TEST(node_tls, two_nodes_with_certificates_of_one_ca_get_through_and_exchange_data) {
  test_pki pki;
  refusals seen;
  auto a = node_tls::load(pki.issue("n1"), seen.hook());
  auto b = node_tls::load(pki.issue("n2"), seen.hook());
  EXPECT_NE(a->subject().find("CN=n1"), std::string::npos);
  socket_pair p;
  tls_stream client{*a, p.fds[0], tls_stream::role::client};
  tls_stream server{*b, p.fds[1], tls_stream::role::server};
  auto [c, s] = handshake_both(client, server);
  ASSERT_TRUE(c);
  ASSERT_TRUE(s);
  EXPECT_NE(client.peer_subject().find("CN=n2"), std::string::npos);
  EXPECT_NE(server.peer_subject().find("CN=n1"), std::string::npos);
  // Both ways, more than one TLS record (16 KiB) at once.
  const std::string big(100'000, 'x');
  size_t sent = 0;
  std::thread writer{[&] {
    while (sent < big.size()) {
      const ssize_t n = client.write(big.data() + sent, big.size() - sent);
      ASSERT_GE(n, 0);
      if (n == 0) {
        pollfd pf{p.fds[0], client.wants(), 0};
        ::poll(&pf, 1, 100);
      }
      sent += static_cast<size_t>(n);
    }
  }};
  EXPECT_EQ(read_n(server, p.fds[1], big.size()), big);
  writer.join();
  ASSERT_EQ(server.write("pong", 4), 4);
  EXPECT_EQ(read_n(client, p.fds[0], 4), "pong");
  EXPECT_FALSE(client.refused());
  EXPECT_FALSE(server.refused());
  EXPECT_TRUE(seen.seen.empty());
}

TEST(node_tls, a_node_of_another_ca_and_ours_refuse_each_other_each_naming_what_it_saw) {
  test_pki pki;
  test_pki other;
  refusals seen;
  auto good = node_tls::load(pki.issue("n1"), seen.hook());
  auto stranger = node_tls::load(other.issue("n9")); // trusts only its own CA
  socket_pair p;
  tls_stream client{*good, p.fds[0], tls_stream::role::client};
  tls_stream server{*stranger, p.fds[1], tls_stream::role::server};
  auto [c, s] = handshake_both(client, server);
  EXPECT_FALSE(c);
  EXPECT_FALSE(s);
  // The client checks the server's certificate first and refuses it; the
  // server hears of that as an alert.
  ASSERT_TRUE(client.refused());
  const auto r = client.refusal();
  EXPECT_EQ(r.reason, "untrusted-certificate") << describe(r);
  EXPECT_NE(r.subject.find("CN=n9"), std::string::npos) << describe(r);
  EXPECT_NE(r.detail.find("certificate"), std::string::npos) << describe(r);
  ASSERT_TRUE(server.refused());
  EXPECT_EQ(server.refusal().reason, "refused-by-peer") << describe(server.refusal());
  // A stream only records; the node's hook hears what the caller reports.
  EXPECT_TRUE(seen.seen.empty());
  good->refused(r);
  ASSERT_EQ(seen.seen.size(), 1u);
  EXPECT_EQ(seen.seen[0].reason, "untrusted-certificate");
}

TEST(node_tls, a_client_refused_by_the_server_hears_so_at_its_first_read) {
  // The client trusts the server's CA, but the server does not trust the
  // client's: in TLS 1.3 the client's handshake completes before the server
  // checks it, and the server's alert arrives at the client's first read.
  test_pki pki;
  test_pki other;
  auto server_tls = node_tls::load(pki.issue("n1"));
  // A client certificate of the other CA, trusting the server's CA.
  auto stranger_files = other.issue("n9");
  const auto trusting = (other.dir() / "trust-both.pem").string();
  {
    std::ofstream out{trusting};
    out << std::ifstream{pki.ca_file()}.rdbuf() << std::ifstream{other.ca_file()}.rdbuf();
  }
  stranger_files.ca_file = trusting;
  auto client_tls = node_tls::load(stranger_files);
  socket_pair p;
  tls_stream client{*client_tls, p.fds[0], tls_stream::role::client};
  tls_stream server{*server_tls, p.fds[1], tls_stream::role::server};
  auto [c, s] = handshake_both(client, server);
  EXPECT_FALSE(s);
  EXPECT_EQ(server.refusal().reason, "untrusted-certificate");
  if (c) { // TLS 1.3: the refusal comes as an alert
    char buf[8];
    ssize_t n = 0;
    const auto deadline = std::chrono::steady_clock::now() + 5s;
    while ((n = client.read(buf, sizeof buf)) == 0 && std::chrono::steady_clock::now() < deadline) {
      pollfd pf{p.fds[0], client.wants(), 0};
      ::poll(&pf, 1, 100);
    }
    EXPECT_EQ(n, -1);
  }
  ASSERT_TRUE(client.refused());
  EXPECT_EQ(client.refusal().reason, "refused-by-peer") << describe(client.refusal());
  EXPECT_TRUE(client.refusal().by_peer());
}

TEST(node_tls, a_client_without_a_certificate_is_refused) {
  test_pki pki;
  auto server_tls = node_tls::load(pki.issue("n1"));
  // A TLS client that trusts the CA but shows no certificate of its own.
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  ASSERT_EQ(SSL_CTX_load_verify_locations(ctx, pki.ca_file().c_str(), nullptr), 1);
  SSL* ssl = SSL_new(ctx);
  socket_pair p;
  SSL_set_fd(ssl, p.fds[0]);
  SSL_set_connect_state(ssl);
  tls_stream server{*server_tls, p.fds[1], tls_stream::role::server};
  std::atomic<bool> done{false};
  std::thread client{[&] {
    while (!done) {
      SSL_do_handshake(ssl);
      char buf[4];
      SSL_read(ssl, buf, sizeof buf); // takes the server's alert, if any
      pollfd pf{p.fds[0], POLLIN, 0};
      ::poll(&pf, 1, 20);
    }
  }};
  EXPECT_FALSE(server.handshake_until(std::chrono::steady_clock::now() + 5s));
  done = true;
  client.join();
  SSL_free(ssl);
  SSL_CTX_free(ctx);
  EXPECT_EQ(server.refusal().reason, "no-certificate") << describe(server.refusal());
}

TEST(node_tls, a_peer_that_does_not_speak_tls_is_refused_as_such) {
  test_pki pki;
  auto tls = node_tls::load(pki.issue("n1"));
  socket_pair p;
  // What a plain lmcc would send: the peer-read preface, 24 bytes of words.
  const char preface[24] = "lmccrd01 and some key..";
  ASSERT_EQ(::write(p.fds[0], preface, sizeof preface), 24);
  tls_stream server{*tls, p.fds[1], tls_stream::role::server};
  EXPECT_FALSE(server.handshake_until(std::chrono::steady_clock::now() + 5s));
  EXPECT_EQ(server.refusal().reason, "not-tls") << describe(server.refusal());
}

TEST(node_tls, a_peer_that_says_nothing_times_out_and_one_that_leaves_half_way_is_named) {
  test_pki pki;
  auto tls = node_tls::load(pki.issue("n1"));
  {
    socket_pair p;
    tls_stream server{*tls, p.fds[1], tls_stream::role::server};
    EXPECT_FALSE(server.handshake_until(std::chrono::steady_clock::now() + 200ms));
    EXPECT_EQ(server.refusal().reason, "handshake-timeout");
  }
  {
    socket_pair p;
    tls_stream client{*tls, p.fds[0], tls_stream::role::client};
    EXPECT_EQ(client.handshake(), tls_stream::status::want_read); // the hello is out
    p.close(1);                                                   // and the peer goes
    EXPECT_FALSE(client.handshake_until(std::chrono::steady_clock::now() + 5s));
    EXPECT_EQ(client.refusal().reason, "closed-during-handshake");
  }
}

TEST(node_tls, a_nodes_own_bad_files_stop_it_with_a_message_naming_them) {
  test_pki pki;
  test_pki other;
  auto files = pki.issue("n1");
  auto expect_error = [](const node_tls_files& f, const std::string& words) {
    try {
      node_tls::load(f);
      ADD_FAILURE() << "loaded; expected: " << words;
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string{e.what()}.find(words), std::string::npos) << e.what();
    }
  };
  auto missing = files;
  missing.cert_file = "/nonexistent/n1.pem";
  expect_error(missing, "cannot read the certificate /nonexistent/n1.pem");
  auto no_ca = files;
  no_ca.ca_file = "/nonexistent/ca.pem";
  expect_error(no_ca, "cannot read the CA /nonexistent/ca.pem");
  auto wrong_key = files;
  wrong_key.key_file = other.issue("n2").key_file;
  expect_error(wrong_key, "does not belong to the certificate");
  auto other_ca = files;
  other_ca.ca_file = other.ca_file();
  expect_error(other_ca, "does not chain to the CA " + other.ca_file());
}

} // namespace
} // namespace lmcc::gateway
