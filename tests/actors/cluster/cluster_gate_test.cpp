// cluster_gate (cluster_node.hpp) in a real actor system, asked as a
// connecting node asks it: a peer of another cluster protocol version is
// refused at the first step and counted, a wrong MAC is refused, and the right
// one gets the handles, the HTTP address and the read endpoint with a MAC that
// proves the gate holds the secret. Links CAF (lmcc_actors).
#include "actors/cluster/cluster_node.hpp"
#include "actors/type_ids.hpp"
#include "cluster/handshake.hpp"

#include <caf/all.hpp>
#include <gtest/gtest.h>

#include <chrono>

namespace lmcc::actors {
namespace {

using namespace std::chrono_literals;

constexpr std::string_view secret = "0123456789abcdef-test-secret";

/// Every actor of the handles is `who` (a test stands in for all four).
peer_handles handles_of(caf::scoped_actor& who, std::string http, std::string read) {
  caf::actor a{who};
  return peer_handles{a, a, a, a, std::move(http), std::move(read)};
}

struct gate_fixture {
  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> sys;
  std::unique_ptr<caf::scoped_actor> client;
  std::shared_ptr<cluster_counters> counters = std::make_shared<cluster_counters>();
  cluster_gate_actor gate;

  explicit gate_fixture(bool tell_node = false) {
    register_message_types(cfg);
    sys = std::make_unique<caf::actor_system>(cfg);
    client = std::make_unique<caf::scoped_actor>(*sys);
    gate_config gc;
    gc.self_id = "n1";
    gc.secret = std::string{secret};
    gc.handles = handles_of(*client, "127.0.0.1:9000", "tcp://127.0.0.1:5000#key");
    gc.counters = counters;
    gc.tell_node = tell_node;
    gate = sys->spawn(cluster_gate_main, std::move(gc));
  }
  ~gate_fixture() {
    caf::anon_send_exit(gate, caf::exit_reason::user_shutdown);
    client.reset();
  }

  /// Step 2 as node "n2", with its own handles (all the client's here):
  /// (accept MAC, the gate's handles), or nullopt.
  std::optional<std::pair<std::string, peer_handles>> join(uint64_t client_nonce,
                                                           const std::string& mac) {
    std::optional<std::pair<std::string, peer_handles>> out;
    (*client)
        ->request(gate, 5s, join_atom::value, std::string{"n2"}, client_nonce, mac,
                  handles_of(*client, "127.0.0.1:9010", "tcp://127.0.0.1:5010#key2"))
        .receive([&](std::string& accept, peer_handles& hs) { out.emplace(accept, hs); },
                 [](caf::error&) {});
    return out;
  }

  /// Step 2 as node "n2" without TLS: no handles of its own (it is dialled back).
  std::optional<std::pair<std::string, peer_handles>> join_plain(uint64_t client_nonce,
                                                                 const std::string& mac) {
    std::optional<std::pair<std::string, peer_handles>> out;
    (*client)
        ->request(gate, 5s, join_atom::value, std::string{"n2"}, client_nonce, mac)
        .receive([&](std::string& accept, peer_handles& hs) { out.emplace(accept, hs); },
                 [](caf::error&) {});
    return out;
  }

  /// Step 1 as node "n2" with `version`: the server nonce, or nullopt if refused.
  std::optional<uint64_t> hello(uint64_t client_nonce, uint32_t version) {
    std::optional<uint64_t> out;
    (*client)
        ->request(gate, 5s, hello_atom::value, std::string{"n2"}, client_nonce, version)
        .receive(
            [&](uint64_t server_nonce, uint32_t their_version) {
              EXPECT_EQ(their_version, cluster::cluster_protocol_version);
              out = server_nonce;
            },
            [](caf::error&) {});
    return out;
  }
};

TEST(cluster_gate, a_peer_of_another_protocol_version_is_refused_at_the_first_step) {
  gate_fixture f;
  EXPECT_FALSE(f.hello(7, cluster::cluster_protocol_version + 1));
  EXPECT_EQ(f.counters->joins_refused.load(), 1u);
  EXPECT_TRUE(f.hello(7, cluster::cluster_protocol_version));
  EXPECT_EQ(f.counters->joins_refused.load(), 1u);
}

TEST(cluster_gate, only_a_mac_made_with_the_secret_gets_the_handles) {
  gate_fixture f;
  auto join = [&](uint64_t nonce, const std::string& mac) { return f.join_plain(nonce, mac); };
  auto server_nonce = f.hello(11, cluster::cluster_protocol_version);
  ASSERT_TRUE(server_nonce);
  EXPECT_FALSE(
      join(11, cluster::handshake_mac("another-secret-of-16+", cluster::handshake_role::join, "n2",
                                      "n1", 11, *server_nonce)));
  EXPECT_EQ(f.counters->joins_refused.load(), 1u);
  // The refused attempt closed that handshake: a new one starts with hello.
  server_nonce = f.hello(12, cluster::cluster_protocol_version);
  ASSERT_TRUE(server_nonce);
  auto accepted = join(12, cluster::handshake_mac(secret, cluster::handshake_role::join, "n2", "n1",
                                                  12, *server_nonce));
  ASSERT_TRUE(accepted);
  const auto& [accept, handles] = *accepted;
  EXPECT_TRUE(
      cluster::mac_equal(accept, cluster::handshake_mac(secret, cluster::handshake_role::accept,
                                                        "n2", "n1", 12, *server_nonce)));
  EXPECT_TRUE(handles.complete());
  EXPECT_EQ(handles.http, "127.0.0.1:9000");
  EXPECT_EQ(handles.read, "tcp://127.0.0.1:5000#key");
  // Without TLS both nodes dial: the gate keeps the dialler's handles to itself.
  bool told = false;
  (*f.client)->receive([&](join_atom, std::string&, peer_handles&) { told = true; },
                       caf::after(std::chrono::milliseconds{0}) >> [] {});
  EXPECT_FALSE(told);
}

TEST(cluster_gate, with_one_dialler_per_pair_the_node_hears_of_a_peer_that_proved_the_secret) {
  gate_fixture f{/*tell_node=*/true};
  auto nonce = f.hello(21, cluster::cluster_protocol_version);
  ASSERT_TRUE(nonce);
  EXPECT_FALSE(
      f.join(21, cluster::handshake_mac("another-secret-of-16+", cluster::handshake_role::join,
                                        "n2", "n1", 21, *nonce)));
  nonce = f.hello(22, cluster::cluster_protocol_version);
  ASSERT_TRUE(nonce);
  ASSERT_TRUE(f.join(
      22, cluster::handshake_mac(secret, cluster::handshake_role::join, "n2", "n1", 22, *nonce)));
  // The node actor (the fixture's client stands in for it) got the peer's
  // handles once: for the join that proved the secret, not the one that failed.
  // The gate sends them before it answers, and CAF keeps the order of one
  // sender's messages: they are in the mailbox already.
  int told = 0;
  std::string peer;
  peer_handles handles;
  (*f.client)->receive_while([&] { return told < 2; })(
      [&](join_atom, std::string& p, peer_handles& hs) {
        ++told;
        peer = p;
        handles = hs;
      },
      caf::after(std::chrono::milliseconds{0}) >> [&] { told += 10; });
  EXPECT_EQ(told, 11); // one, then silence
  EXPECT_EQ(peer, "n2");
  EXPECT_TRUE(handles.complete());
  EXPECT_EQ(handles.http, "127.0.0.1:9010");
  EXPECT_EQ(handles.read, "tcp://127.0.0.1:5010#key2");
}

TEST(cluster_gate, a_join_without_handles_tells_the_node_nothing) {
  // A node without TLS (of this version or the one before) dials back itself.
  gate_fixture f{/*tell_node=*/true};
  auto nonce = f.hello(31, cluster::cluster_protocol_version);
  ASSERT_TRUE(nonce);
  ASSERT_TRUE(f.join_plain(
      31, cluster::handshake_mac(secret, cluster::handshake_role::join, "n2", "n1", 31, *nonce)));
  bool told = false;
  (*f.client)->receive([&](join_atom, std::string&, peer_handles&) { told = true; },
                       caf::after(std::chrono::milliseconds{0}) >> [] {});
  EXPECT_FALSE(told);
  EXPECT_EQ(f.counters->joins_refused.load(), 0u);
}

} // namespace
} // namespace lmcc::actors
