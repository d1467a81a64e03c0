// peer_read: the nodes of a cluster read each other's index for lookups over
// plain TCP, answered on a thread of the serving node.
//
// A lookup that arrives at one node needs the holders of the keys of slots it
// does not hold. Asked through CAF's middleman that took ~300 us idle and
// ~1 ms under load on a 2-core VM (middleman thread, mailbox, scheduler on
// each side). Through a ZMQ DEALER/ROUTER pair it still crossed six threads
// (the caller, its ZMQ I/O thread, the peer's I/O thread, the peer's socket
// thread and back), each a wake-up that waits for a core on a loaded box.
// Here the calling thread writes to a pooled TCP connection and the peer's
// thread for that connection reads its index under the reader lock, as a
// local lookup does (registry/lookup_reader.hpp), and writes back: two wake-ups.
//
// Wire format (little-endian uint64 words, one frame each way):
//   preface: [magic, key word 0, key word 1]   once, first on each connection
//   request: [words, request id, key, key, ...]             words = 1 + keys
//   reply:   [words, request id, n0, holders of key 0..., n1, ...]
// A count word with peer_read_uncertain set says the server's copy of that
// key's slot is uncertain (it missed ops and waits for another owner's copy:
// docs/convergence.md); the reader then asks another owner and keeps this
// answer only when none is left.
// The server's access key is 128 random bits made at each start; peers get it
// with the endpoint ("tcp://host:port#<32 hex digits>", access_endpoint()) in
// the cluster handshake (actors/cluster/cluster_node.hpp), which only a node proving
// the cluster secret completes. A connection whose preface is not the magic
// and the key within preface_timeout is counted (unauthorized()), logged
// (rate-limited) and closed before it can read anything: reaching the port is
// not enough to read the index. The magic also names this wire format's
// version.
// With TLS between nodes (node_tls.hpp: lmcc_cluster_tls_*), both ends run
// mutual TLS over the socket before the preface: the server's thread for the
// connection does the handshake within preface_timeout, the client within its
// connect timeout, and a peer without a certificate of the cluster's CA never
// gets to send a byte of the protocol (the node's hook logs and counts the
// refusal). Without it the sockets are read and written directly, as before:
// the key, and the index, cross in clear.
// A request frame longer than max_keys (or empty) is counted, logged
// (rate-limited) and its connection closed: a stream that lost its framing
// cannot be resynchronised, and the caller of a bad frame times out. The
// server needs no port of its own in the config: it binds an ephemeral port
// on the node's host, and the handshake tells peers which.
//
//   peer_read_server server{"127.0.0.1", "127.0.0.1", random_key, answer};
//   peer_read_client client;
//   auto call = client.send(server.access_endpoint(), keys); // nullopt: not connected
//   auto flat = client.wait(*call, 2s);                       // nullopt on timeout
//
// Threads: the server has one accept thread and one thread per connection (at
// most max_connections; a caller holds one connection per call in flight and
// keeps up to max_idle_per_peer open). The client is thread-safe.
#pragma once

#include "gateway/node_tls.hpp"
#include "gateway/unique_fd.hpp"

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

namespace lmcc::gateway {

/// What a reader presents before its first request.
using peer_read_key = std::array<uint64_t, 2>;

/// Set in a key's count word: the serving node's copy of the key's slot is
/// uncertain, so its holders may lack what another owner's copy has.
inline constexpr uint64_t peer_read_uncertain = uint64_t{1} << 63;

/// Flat holders of `keys` (count, holders..., per key; a count may carry
/// peer_read_uncertain). Called concurrently.
using peer_read_answer_fn = std::function<std::vector<uint64_t>(std::span<const uint64_t> keys)>;

/// A peer-read connection: its socket and, with TLS between nodes, the TLS
/// session over it (null: plain). Converts from a plain socket.
class peer_socket {
public:
  peer_socket() = default;
  peer_socket(unique_fd fd) : fd_(std::move(fd)) {} // NOLINT: plain, implicitly
  peer_socket(unique_fd fd, std::unique_ptr<tls_stream> tls)
    : fd_(std::move(fd)), tls_(std::move(tls)) {}

  int get() const noexcept { return fd_.get(); }
  explicit operator bool() const noexcept { return static_cast<bool>(fd_); }
  tls_stream* tls() const noexcept { return tls_.get(); }
  void reset() noexcept {
    tls_.reset();
    fd_.reset();
  }

private:
  unique_fd fd_;
  std::unique_ptr<tls_stream> tls_; ///< declared last: freed before the socket closes
};

/// What a server's connections count, shared by their threads.
struct peer_read_counters {
  std::atomic<uint64_t> requests{0};
  std::atomic<uint64_t> malformed{0};
  std::atomic<uint64_t> unauthorized{0};
};

/// Serves one connection (`fd`: connected, non-blocking) until the caller
/// closes it, breaks the protocol or `stop_fd` becomes readable (-1: never):
/// the preface must carry `key`, then each request is answered with `answer`.
/// `tls`: the connection's established TLS session (null: plain).
/// peer_read_server runs it on a thread per connection; a test can drive it
/// over a socketpair.
void serve_peer_reads(int fd, int stop_fd, const peer_read_key& key,
                      const peer_read_answer_fn& answer, peer_read_counters& counters,
                      tls_stream* tls = nullptr);

class peer_read_server {
public:
  using answer_fn = peer_read_answer_fn;

  /// Most keys one request may carry.
  static constexpr size_t max_keys = size_t{1} << 20;

  /// Most connections served at once; more are accepted and closed at once
  /// (counted in refused()). Callers keep few open: see the client.
  static constexpr size_t max_connections = 512;

  /// How long a new connection may take to present the key.
  static constexpr std::chrono::seconds preface_timeout{5};

  /// Listens on bind_host ("0.0.0.0", "*" or an address) at an ephemeral
  /// port; endpoint() names it with `advertised_host`. Readers must present
  /// `key` (make it random, fresh at every start) and, with `tls`, a
  /// certificate of its CA first (refusals go to its hook). Throws
  /// std::system_error when it cannot bind.
  peer_read_server(const std::string& bind_host, const std::string& advertised_host,
                   peer_read_key key, answer_fn answer,
                   std::shared_ptr<const node_tls> tls = nullptr);
  ~peer_read_server();
  peer_read_server(const peer_read_server&) = delete;
  peer_read_server& operator=(const peer_read_server&) = delete;

  /// "tcp://host:port": where it listens (safe to log).
  const std::string& endpoint() const noexcept { return endpoint_; }
  /// endpoint() + "#" + the key in hex: what a peer needs to read. Hand it
  /// only to nodes that proved the cluster secret.
  std::string access_endpoint() const;
  uint64_t requests() const noexcept { return counters_.requests.load(); }
  uint64_t malformed() const noexcept { return counters_.malformed.load(); }
  uint64_t unauthorized() const noexcept { return counters_.unauthorized.load(); }
  uint64_t refused() const noexcept { return refused_.load(); }
  uint64_t accepted() const noexcept { return accepted_.load(); }

private:
  struct connection {
    unique_fd fd;
    std::atomic<bool> done{false};
    std::thread thread;
  };

  void accept_loop();
  void reap(bool all);
  /// One connection's thread: TLS (if on), the preface, then requests.
  void serve(int fd);

  peer_read_key key_;
  answer_fn answer_;
  std::shared_ptr<const node_tls> tls_;
  unique_fd listener_;
  unique_fd stop_event_;  // eventfd: wakes every poll at shutdown
  unique_fd ended_event_; // eventfd: a connection's thread ended (the accept thread reaps it)
  std::string endpoint_;
  peer_read_counters counters_;
  std::atomic<uint64_t> refused_{0};
  std::atomic<uint64_t> accepted_{0};
  std::list<connection> connections_; // the accept thread's alone
  std::thread acceptor_;
};

class peer_read_client {
public:
  /// Connections kept open per peer between calls.
  static constexpr size_t max_idle_per_peer = 16;

  /// Most words a reply may carry (a lookup's keys times their holders).
  static constexpr size_t max_reply_words = size_t{1} << 26;

  /// `connect_timeout`: how long send() waits for a new connection (its TLS
  /// handshake included). `tls`: mutual TLS with every server (null: plain).
  explicit peer_read_client(std::chrono::milliseconds connect_timeout = std::chrono::seconds{1},
                            std::shared_ptr<const node_tls> tls = nullptr)
    : connect_timeout_(connect_timeout), tls_(std::move(tls)) {}
  peer_read_client(const peer_read_client&) = delete;
  peer_read_client& operator=(const peer_read_client&) = delete;

  /// One request in flight; give it back through wait().
  struct call {
    std::string endpoint;
    uint64_t id = 0;
    peer_socket socket;
  };

  /// Sends the request to `endpoint` (a server's access_endpoint(); without
  /// "#key" no preface is sent); nullopt if the peer could not be reached.
  std::optional<call> send(const std::string& endpoint, std::span<const uint64_t> keys);

  /// The reply's flat holders (without the id), or nullopt after `timeout`
  /// or a broken connection (which is then closed, not pooled).
  std::optional<std::vector<uint64_t>> wait(call& c, std::chrono::milliseconds timeout);

  /// The index of a call in `calls` whose reply (or broken connection) can be
  /// read now, waiting up to `timeout`; nullopt when none got ready by then.
  static std::optional<size_t> wait_any(std::span<const call* const> calls,
                                        std::chrono::milliseconds timeout);

  /// Connections kept open between calls, over every peer.
  size_t idle_connections();

  /// How often idle connections are checked for a peer that closed them.
  static constexpr std::chrono::seconds sweep_interval{1};

private:
  peer_socket take_idle(const std::string& endpoint);
  peer_socket connect_to(const std::string& endpoint) const;
  /// Passes a TLS refusal seen on `socket` (the server refused this node's
  /// certificate: its alert arrives at the first read) to the node's hook.
  void report_refusal(const peer_socket& socket, const std::string& endpoint) const;
  /// Closes idle connections the peer closed (it stopped or restarted: a
  /// restarted peer has a new endpoint, so its old pool is never taken from
  /// again and would keep its descriptors for good). REQUIRES: mutex_ held.
  void sweep_closed_locked();

  std::chrono::milliseconds connect_timeout_;
  std::shared_ptr<const node_tls> tls_;
  std::mutex mutex_;
  std::map<std::string, std::vector<peer_socket>> idle_;
  std::chrono::steady_clock::time_point next_sweep_{};
  std::atomic<uint64_t> next_id_{1};
};

} // namespace lmcc::gateway
