// tls_transport: CAF's middleman over mutual TLS between real actor systems
// in one process (each with its own middleman and multiplexer), certificates
// made in the test: nodes of one CA talk, large messages included; a node of
// another CA is refused whichever side dials, and the refusing side names
// what it saw (the dialling side with the member's id); a plain CAF node
// meets a TLS port and the other way round, and neither gets in; a peer that
// never starts its handshake is cut off. Links lmcc_tls_transport.
#include "actors/cluster/tls_transport.hpp"
#include "tests/gateway/tls_test_certs.hpp"

#include <caf/all.hpp>
#include <caf/io/all.hpp>
#include <gtest/gtest.h>

#include <condition_variable>
#include <csignal>
#include <fstream>
#include <mutex>
#include <netinet/in.h>
#include <optional>
#include <sys/socket.h>
#include <unistd.h>

namespace lmcc::actors {
namespace {

using namespace std::chrono_literals;
using gateway::node_tls;
using gateway::tls_refusal;
using gateway::testing::test_pki;

class refusals {
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

private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<tls_refusal> seen_;
};

caf::behavior echo(caf::event_based_actor*) {
  return {[](const std::string& s) { return s; }};
}

/// An actor system with a middleman and, given files, a TLS transport.
struct node {
  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> sys;
  std::unique_ptr<tls_transport> transport;
  refusals saw;
  std::vector<caf::actor> published; ///< told to exit at the end: the system waits for them

  explicit node(std::optional<gateway::node_tls_files> files,
                std::chrono::milliseconds handshake_timeout = 5s) {
    std::signal(SIGPIPE, SIG_IGN); // as the node does
    cfg.load<caf::io::middleman>();
    sys = std::make_unique<caf::actor_system>(cfg);
    if (files)
      transport = std::make_unique<tls_transport>(
          *sys, tls_transport_options{node_tls::load(*files, saw.hook()),
                                      [](const std::string&, uint16_t) { return "n1"; },
                                      handshake_timeout});
  }
  ~node() {
    for (auto& a : published)
      caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
    if (transport)
      transport->stop();
  }

  caf::io::middleman_actor connector() const {
    return transport ? transport->actor_handle() : sys->middleman().actor_handle();
  }

  /// Publishes an echo actor (over TLS when it has a transport); its port.
  uint16_t publish_echo() {
    auto a = sys->spawn(echo);
    published.push_back(a);
    auto port = transport ? transport->publish(a, 0, "127.0.0.1")
                          : sys->middleman().publish(a, 0, "127.0.0.1", true);
    EXPECT_TRUE(port) << sys->render(port.error());
    return port ? *port : 0;
  }

  /// Connects to 127.0.0.1:port; the published actor, or the error.
  caf::expected<caf::actor> connect(uint16_t port, std::chrono::milliseconds timeout = 5s) {
    caf::expected<caf::actor> out{caf::sec::runtime_error};
    caf::scoped_actor self{*sys};
    self->request(connector(), timeout, caf::connect_atom::value, std::string{"127.0.0.1"}, port)
        .receive(
            [&](const caf::node_id&, caf::strong_actor_ptr& p, const std::set<std::string>&) {
              if (p)
                out = caf::actor_cast<caf::actor>(std::move(p));
            },
            [&](caf::error& e) { out = std::move(e); });
    return out;
  }

  std::optional<std::string> ask(const caf::actor& a, std::string text) {
    std::optional<std::string> out;
    caf::scoped_actor self{*sys};
    self->request(a, 5s, std::move(text))
        .receive([&](std::string& s) { out = std::move(s); }, [](caf::error&) {});
    return out;
  }
};

TEST(tls_transport, nodes_of_one_ca_talk_over_it) {
  test_pki pki;
  node a{pki.issue("n1")};
  node b{pki.issue("n2")};
  const uint16_t port = a.publish_echo();
  auto remote = b.connect(port);
  ASSERT_TRUE(remote) << b.sys->render(remote.error());
  EXPECT_EQ(b.ask(*remote, "hello"), "hello");
  const std::string big(3 << 20, 'q'); // many TLS records each way
  EXPECT_EQ(b.ask(*remote, big), big);
  EXPECT_EQ(a.transport->counters().established.load(), 1u);
  EXPECT_EQ(b.transport->counters().established.load(), 1u);
  EXPECT_TRUE(a.saw.wait_for(1, 0ms).empty());
  EXPECT_TRUE(b.saw.wait_for(1, 0ms).empty());
}

TEST(tls_transport, a_node_of_another_ca_is_refused_whichever_side_dials) {
  test_pki pki;
  test_pki other;
  node a{pki.issue("n1")};
  const uint16_t port = a.publish_echo();
  {
    // It dials us and trusts only its own CA: it refuses our certificate
    // (naming us by the member id its transport knows), we hear its alert.
    node stranger{other.issue("n9")};
    EXPECT_FALSE(stranger.connect(port));
    const auto mine = stranger.saw.wait_for(1);
    ASSERT_EQ(mine.size(), 1u);
    EXPECT_EQ(mine[0].reason, "untrusted-certificate") << describe(mine[0]);
    EXPECT_EQ(mine[0].peer, "n1");
    EXPECT_EQ(mine[0].channel, "cluster");
    const auto theirs = a.saw.wait_for(1);
    ASSERT_EQ(theirs.size(), 1u);
    EXPECT_TRUE(theirs[0].by_peer()) << describe(theirs[0]);
  }
  {
    // It trusts our CA too; we do not trust its: we refuse it, and name it
    // by its certificate (an accepted connection has no member id yet).
    auto files = other.issue("n8");
    files.ca_file = (other.dir() / "both.pem").string();
    {
      std::ofstream out{files.ca_file};
      out << std::ifstream{pki.ca_file()}.rdbuf() << std::ifstream{other.ca_file()}.rdbuf();
    }
    node stranger{files};
    EXPECT_FALSE(stranger.connect(port));
    const auto theirs = a.saw.wait_for(2);
    ASSERT_EQ(theirs.size(), 2u);
    EXPECT_EQ(theirs[1].reason, "untrusted-certificate") << describe(theirs[1]);
    EXPECT_NE(theirs[1].subject.find("CN=n8"), std::string::npos) << describe(theirs[1]);
    EXPECT_TRUE(theirs[1].peer.empty());
    // It hears of it from our alert, unless the reset of the BASP greeting it
    // wrote meanwhile overtook the alert: best effort on the refused side.
    for (const auto& r : stranger.saw.wait_for(1, 200ms))
      EXPECT_TRUE(r.by_peer()) << describe(r);
  }
  // And a node of our CA still gets in.
  node b{pki.issue("n2")};
  auto remote = b.connect(port);
  ASSERT_TRUE(remote);
  EXPECT_EQ(b.ask(*remote, "still"), "still");
}

TEST(tls_transport, a_plain_node_and_a_tls_port_do_not_meet_either_way) {
  test_pki pki;
  node a{pki.issue("n1")};
  node plain{std::nullopt};
  // A plain dialler greets in BASP where TLS is expected.
  const uint16_t tls_port = a.publish_echo();
  EXPECT_FALSE(plain.connect(tls_port, 1s));
  const auto first = a.saw.wait_for(1);
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0].reason, "not-tls") << describe(first[0]);
  // A TLS dialler to a plain port reads BASP's greeting where it expects TLS.
  const uint16_t plain_port = plain.publish_echo();
  EXPECT_FALSE(a.connect(plain_port, 2s));
  const auto second = a.saw.wait_for(2);
  ASSERT_EQ(second.size(), 2u);
  EXPECT_TRUE(second[1].reason == "not-tls" || second[1].reason == "closed-during-handshake")
      << describe(second[1]);
  EXPECT_EQ(second[1].peer, "n1");
  EXPECT_EQ(a.transport->counters().established.load(), 0u);
}

TEST(tls_transport, a_peer_that_never_starts_its_handshake_is_cut_off) {
  test_pki pki;
  node a{pki.issue("n1"), 300ms};
  const uint16_t port = a.publish_echo();
  // A TCP connection that says nothing: without the watch it would hold a
  // socket for good (CAF times out only connections past BASP's handshake).
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(port);
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to), 0);
  const auto start = std::chrono::steady_clock::now();
  const auto cut = a.saw.wait_for(1);
  ASSERT_EQ(cut.size(), 1u);
  EXPECT_EQ(cut[0].reason, "handshake-timeout") << describe(cut[0]);
  EXPECT_GE(std::chrono::steady_clock::now() - start, 250ms); // the 300 ms timeout, not before
  char byte;
  EXPECT_EQ(::recv(fd, &byte, 1, 0), 0); // and its socket is closed
  ::close(fd);
}

} // namespace
} // namespace lmcc::actors
