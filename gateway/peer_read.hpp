// peer_read: the nodes of a cluster read each other's index for lookups over
// a ZMQ ROUTER/DEALER pair, answered on the serving node's socket thread.
//
// A lookup that arrives at one node needs the holders of the keys of slots it
// does not hold. Asked through CAF's middleman that took ~300 us idle and
// ~1 ms under load on a 2-core VM (middleman thread, mailbox, scheduler on
// each side); here a request costs one ZMQ round trip and the peer reads its
// index under the reader lock on the thread that received it, as a local
// lookup does (actors/lookup_reader.hpp).
//
// Wire format (both directions little-endian uint64 words, one frame):
//   request: [request id, key, key, ...]
//   reply:   [request id, n0, holders of key 0..., n1, holders of key 1..., ...]
// A malformed request (not a whole number of words, or more than max_keys) is
// counted and dropped: the caller times out. The endpoint is handed to peers in
// the cluster handshake (actors/cluster_node.hpp), so it needs no port of its
// own in the config: it binds an ephemeral port on the node's host.
//
//   peer_read_server server{ctx, "127.0.0.1", "127.0.0.1", answer};
//   peer_read_client client{ctx};
//   auto call = client.send(server.endpoint(), keys);
//   auto flat = client.wait(*call, 2s);   // nullopt on timeout
//
// Thread-safety: the server runs its own thread; the client is thread-safe
// (a pool of DEALER sockets per endpoint, one per call in flight).
#pragma once

#include <zmq.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
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
  /// Flat holders of `keys` (count, holders..., per key).
  using answer_fn = std::function<std::vector<uint64_t>(std::span<const uint64_t> keys)>;

  /// Most keys one request may carry. Default: 1 << 20
  static constexpr size_t max_keys = size_t{1} << 20;

  /// Binds tcp://bind_host:* ; endpoint() names it with `advertised_host`.
  peer_read_server(zmq::context_t& ctx, const std::string& bind_host,
                   const std::string& advertised_host, answer_fn answer);
  ~peer_read_server();
  peer_read_server(const peer_read_server&) = delete;
  peer_read_server& operator=(const peer_read_server&) = delete;

  const std::string& endpoint() const noexcept { return endpoint_; }
  uint64_t requests() const noexcept { return requests_.load(); }
  uint64_t malformed() const noexcept { return malformed_.load(); }

private:
  void run();

  zmq::socket_t socket_;
  answer_fn answer_;
  std::string endpoint_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> requests_{0};
  std::atomic<uint64_t> malformed_{0};
  std::thread thread_;
};

class peer_read_client {
public:
  explicit peer_read_client(zmq::context_t& ctx) : ctx_(ctx) {}
  ~peer_read_client();
  peer_read_client(const peer_read_client&) = delete;
  peer_read_client& operator=(const peer_read_client&) = delete;

  /// One request in flight; give it back through wait().
  struct call {
    std::string endpoint;
    uint64_t id = 0;
    zmq::socket_t socket;
  };

  /// Sends the request; nullopt if it could not be sent.
  std::optional<call> send(const std::string& endpoint, std::span<const uint64_t> keys);

  /// The reply's flat holders (without the id), or nullopt after `timeout`.
  std::optional<std::vector<uint64_t>> wait(call& c, std::chrono::milliseconds timeout);

private:
  zmq::context_t& ctx_;
  std::mutex mutex_;
  std::map<std::string, std::vector<zmq::socket_t>> idle_;
  std::atomic<uint64_t> next_id_{1};
};

} // namespace lmcc::gateway
