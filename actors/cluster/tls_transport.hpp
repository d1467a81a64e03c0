// tls_transport: the cluster port over mutual TLS (gateway/node_tls.hpp).
//
// CAF's middleman carries BASP over whatever scribes its middleman actor
// makes; CAF's OpenSSL module (caf::openssl) is such an actor over OpenSSL.
// This is one too, built the same way on CAF 0.17's io extension points
// (a middleman_actor_impl that overrides connect and open, a stream whose
// read/write policy runs OpenSSL, a doorman that wraps accepted sockets),
// but over the node's own node_tls, because the module cannot do what lmcc
// needs of it:
// - it makes an SSL_CTX per connection from caf.openssl.* file names and
//   throws from the middleman's thread if a file cannot be read then;
// - it sets no verify callback and reports a failed handshake to CAF's
//   logger only (compiled out in Debian's build): a node that refused a
//   peer's certificate could neither log it nor count it, least of all on
//   the accepting side, which never learns who tried.
// Here each connection's tls_stream (node_tls.hpp) says why a handshake
// failed, and the node's hook logs `cluster-tls-refused` and counts it, on
// the dialling side with the member's id.
//
// The broker only ever gets established connections: a dialled one finishes
// its handshake on the (detached) middleman actor's thread, where CAF's TCP
// connect blocks too; an accepted one on a thread of its own that drives
// every pending handshake with poll and hands each that completes to the
// doorman on the multiplexer's thread. So BASP's greeting (the accepting side
// writes first) never meets a handshake half done, and a handshake still
// running after `handshake_timeout` -- a peer that says nothing -- is closed
// and refused as handshake-timeout (CAF itself times out only connections
// that finished BASP's handshake).
//
//   tls_transport transport{sys, {node_tls, peer_name, 5s}};
//   transport.publish(gate, port, host);                   // the cluster port
//   request(transport.actor_handle(), t, connect_atom::value, host, port)  // a peer
//   transport.stop();                                       // before the system ends
//
// With TLS each node dials only the members whose id sorts after its own
// (cluster_node.hpp): one TLS session per pair by construction, rather than
// two dialled at once that BASP must reconcile.
//
// Context: constructed and stopped by the node runtime's thread; the actor
// and the multiplexer's thread use it meanwhile.
#pragma once

#include "gateway/node_tls.hpp"

#include <caf/actor_system.hpp>
#include <caf/io/middleman_actor.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <string>

namespace lmcc::actors {

namespace tls_detail {
class handshake_worker;
} // namespace tls_detail

struct tls_transport_options {
  std::shared_ptr<const gateway::node_tls> tls;
  /// The member listening at host:port, for refusals of connections this
  /// node dialled ("" when unknown).
  std::function<std::string(const std::string& host, uint16_t port)> peer_name;
  /// How long a connection's TLS handshake may take before it is closed.
  std::chrono::milliseconds handshake_timeout{5000};
};

/// What a transport saw (any thread).
struct tls_transport_counters {
  std::atomic<uint64_t> established{0}; ///< handshakes completed, both directions
  std::atomic<uint64_t> refused{0};     ///< handshakes refused, by either end
};

class tls_transport {
public:
  /// Spawns the TLS middleman actor beside CAF's own (which keeps no port of
  /// its own then). The system must have loaded caf::io::middleman.
  tls_transport(caf::actor_system& sys, tls_transport_options options);
  ~tls_transport();
  tls_transport(const tls_transport&) = delete;
  tls_transport& operator=(const tls_transport&) = delete;

  /// Connects (connect_atom) and publishes (publish_atom) over TLS.
  const caf::io::middleman_actor& actor_handle() const noexcept { return actor_; }

  /// Publishes `whom` at host:port over TLS (blocks until it listens);
  /// the bound port or the error.
  caf::expected<uint16_t> publish(caf::strong_actor_ptr whom, std::set<std::string> sigs,
                                  uint16_t port, const std::string& host, bool reuse_addr);
  template <class Handle>
  caf::expected<uint16_t> publish(const Handle& whom, uint16_t port, const std::string& host,
                                  bool reuse_addr = true) {
    return publish(caf::actor_cast<caf::strong_actor_ptr>(whom), sys_.message_types(whom), port,
                   host, reuse_addr);
  }

  const tls_transport_counters& counters() const noexcept;

  /// Stops the actor and the handshake watch; idempotent.
  void stop();

  struct shared; ///< what the actor, the doormen, the streams and the worker share

private:
  caf::actor_system& sys_;
  std::shared_ptr<shared> shared_;
  std::shared_ptr<tls_detail::handshake_worker> worker_;
  caf::io::middleman_actor actor_;
};

} // namespace lmcc::actors
