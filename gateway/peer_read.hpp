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
// local lookup does (actors/lookup_reader.hpp), and writes back: two wake-ups.
//
// Wire format (little-endian uint64 words, one frame each way):
//   request: [words, request id, key, key, ...]             words = 1 + keys
//   reply:   [words, request id, n0, holders of key 0..., n1, ...]
// A request frame longer than max_keys (or empty) is counted, logged
// (rate-limited) and its connection closed: a stream that lost its framing
// cannot be resynchronised, and the caller of a bad frame times out. The
// endpoint ("tcp://host:port") is handed to peers in the cluster handshake
// (actors/cluster_node.hpp), so it needs no port of its own in the config: it
// binds an ephemeral port on the node's host.
//
//   peer_read_server server{"127.0.0.1", "127.0.0.1", answer};
//   peer_read_client client;
//   auto call = client.send(server.endpoint(), keys);  // nullopt: not connected
//   auto flat = client.wait(*call, 2s);                 // nullopt on timeout
//
// Threads: the server has one accept thread and one thread per connection (at
// most max_connections; a caller holds one connection per call in flight and
// keeps up to max_idle_per_peer open). The client is thread-safe.
#pragma once

#include "gateway/unique_fd.hpp"

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

class peer_read_server {
public:
  /// Flat holders of `keys` (count, holders..., per key). Called concurrently.
  using answer_fn = std::function<std::vector<uint64_t>(std::span<const uint64_t> keys)>;

  /// Most keys one request may carry.
  static constexpr size_t max_keys = size_t{1} << 20;

  /// Most connections served at once; more are accepted and closed at once
  /// (counted in refused()). Callers keep few open: see the client.
  static constexpr size_t max_connections = 512;

  /// Listens on bind_host ("0.0.0.0", "*" or an address) at an ephemeral
  /// port; endpoint() names it with `advertised_host`. Throws
  /// std::system_error when it cannot bind.
  peer_read_server(const std::string& bind_host, const std::string& advertised_host,
                   answer_fn answer);
  ~peer_read_server();
  peer_read_server(const peer_read_server&) = delete;
  peer_read_server& operator=(const peer_read_server&) = delete;

  const std::string& endpoint() const noexcept { return endpoint_; }
  uint64_t requests() const noexcept { return requests_.load(); }
  uint64_t malformed() const noexcept { return malformed_.load(); }
  uint64_t refused() const noexcept { return refused_.load(); }
  uint64_t accepted() const noexcept { return accepted_.load(); }

private:
  struct connection {
    unique_fd fd;
    std::atomic<bool> done{false};
    std::thread thread;
  };

  void accept_loop();
  void serve(connection& c);
  void reap(bool all);

  answer_fn answer_;
  unique_fd listener_;
  unique_fd stop_event_; // eventfd: wakes every poll at shutdown
  std::string endpoint_;
  std::atomic<uint64_t> requests_{0};
  std::atomic<uint64_t> malformed_{0};
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

  /// `connect_timeout`: how long send() waits for a new connection.
  explicit peer_read_client(std::chrono::milliseconds connect_timeout = std::chrono::seconds{1})
    : connect_timeout_(connect_timeout) {}
  peer_read_client(const peer_read_client&) = delete;
  peer_read_client& operator=(const peer_read_client&) = delete;

  /// One request in flight; give it back through wait().
  struct call {
    std::string endpoint;
    uint64_t id = 0;
    unique_fd socket;
  };

  /// Sends the request; nullopt if the peer could not be reached.
  std::optional<call> send(const std::string& endpoint, std::span<const uint64_t> keys);

  /// The reply's flat holders (without the id), or nullopt after `timeout`
  /// or a broken connection (which is then closed, not pooled).
  std::optional<std::vector<uint64_t>> wait(call& c, std::chrono::milliseconds timeout);

private:
  unique_fd take_idle(const std::string& endpoint);
  unique_fd connect_to(const std::string& endpoint) const;

  std::chrono::milliseconds connect_timeout_;
  std::mutex mutex_;
  std::map<std::string, std::vector<unique_fd>> idle_;
  std::atomic<uint64_t> next_id_{1};
};

} // namespace lmcc::gateway
