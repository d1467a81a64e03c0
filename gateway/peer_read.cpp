#include "gateway/peer_read.hpp"

#include <spdlog/spdlog.h>

#include <cstring>

namespace lmcc::gateway {

// -- server ----------------------------------------------------------------------

peer_read_server::peer_read_server(zmq::context_t& ctx, const std::string& bind_host,
                                   const std::string& advertised_host, answer_fn answer)
  : socket_(ctx, zmq::socket_type::router), answer_(std::move(answer)) {
  socket_.set(zmq::sockopt::linger, 0);
  socket_.set(zmq::sockopt::maxmsgsize, static_cast<int64_t>((max_keys + 1) * sizeof(uint64_t)));
  socket_.bind("tcp://" + bind_host + ":*");
  const std::string bound = socket_.get(zmq::sockopt::last_endpoint);
  endpoint_ = "tcp://" + advertised_host + bound.substr(bound.rfind(':'));
  thread_ = std::thread([this] { run(); });
}

peer_read_server::~peer_read_server() {
  stop_ = true;
  if (thread_.joinable())
    thread_.join();
}

void peer_read_server::run() {
  std::vector<uint64_t> keys;
  while (!stop_) {
    zmq::pollitem_t item{socket_.handle(), 0, ZMQ_POLLIN, 0};
    if (zmq::poll(&item, 1, std::chrono::milliseconds{100}) <= 0)
      continue;
    zmq::message_t identity;
    zmq::message_t request;
    if (!socket_.recv(identity, zmq::recv_flags::dontwait))
      continue;
    if (!identity.more() || !socket_.recv(request, zmq::recv_flags::dontwait)) {
      ++malformed_;
      continue;
    }
    while (request.more()) { // extra frames: not ours
      zmq::message_t extra;
      if (!socket_.recv(extra, zmq::recv_flags::dontwait))
        break;
      request = std::move(extra);
    }
    if (request.size() < sizeof(uint64_t) || request.size() % sizeof(uint64_t) != 0 ||
        request.size() / sizeof(uint64_t) - 1 > max_keys) {
      if (malformed_++ % 100 == 0)
        spdlog::warn("peer-read-malformed bytes={} dropped_so_far={}", request.size(),
                     malformed_.load());
      continue;
    }
    ++requests_;
    const size_t words = request.size() / sizeof(uint64_t);
    keys.resize(words);
    std::memcpy(keys.data(), request.data(), request.size());
    auto flat = answer_(std::span<const uint64_t>{keys.data() + 1, words - 1});
    zmq::message_t reply((flat.size() + 1) * sizeof(uint64_t));
    auto* out = static_cast<uint64_t*>(reply.data());
    out[0] = keys[0];
    if (!flat.empty())
      std::memcpy(out + 1, flat.data(), flat.size() * sizeof(uint64_t));
    // A ROUTER drops replies to peers that left; a full peer is not waited for.
    (void)socket_.send(identity, zmq::send_flags::sndmore | zmq::send_flags::dontwait);
    (void)socket_.send(reply, zmq::send_flags::dontwait);
  }
}

// -- client ----------------------------------------------------------------------

peer_read_client::~peer_read_client() {
  std::lock_guard lock{mutex_};
  idle_.clear(); // sockets close (linger 0) before the context goes
}

std::optional<peer_read_client::call> peer_read_client::send(const std::string& endpoint,
                                                             std::span<const uint64_t> keys) {
  call c;
  c.endpoint = endpoint;
  c.id = next_id_.fetch_add(1);
  {
    std::lock_guard lock{mutex_};
    auto& pool = idle_[endpoint];
    if (!pool.empty()) {
      c.socket = std::move(pool.back());
      pool.pop_back();
    }
  }
  try {
    if (!c.socket) {
      c.socket = zmq::socket_t(ctx_, zmq::socket_type::dealer);
      c.socket.set(zmq::sockopt::linger, 0);
      c.socket.connect(endpoint);
    }
    zmq::message_t request((keys.size() + 1) * sizeof(uint64_t));
    auto* out = static_cast<uint64_t*>(request.data());
    out[0] = c.id;
    if (!keys.empty())
      std::memcpy(out + 1, keys.data(), keys.size_bytes());
    if (!c.socket.send(request, zmq::send_flags::dontwait))
      return std::nullopt;
  } catch (const zmq::error_t& e) {
    spdlog::warn("peer-read-send-failed endpoint={} error={}", endpoint, e.what());
    return std::nullopt;
  }
  return c;
}

std::optional<std::vector<uint64_t>> peer_read_client::wait(call& c,
                                                            std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    zmq::pollitem_t item{c.socket.handle(), 0, ZMQ_POLLIN, 0};
    if (left.count() < 0 || zmq::poll(&item, 1, std::max(left, std::chrono::milliseconds{0})) <= 0)
      return std::nullopt; // the socket is dropped: a late reply must not reach the next call
    zmq::message_t reply;
    if (!c.socket.recv(reply, zmq::recv_flags::dontwait))
      continue;
    if (reply.size() < sizeof(uint64_t) || reply.size() % sizeof(uint64_t) != 0)
      continue;
    const auto* words = static_cast<const uint64_t*>(reply.data());
    if (words[0] != c.id)
      continue; // not ours (cannot happen on a socket used by one call at a time)
    std::vector<uint64_t> flat(words + 1, words + reply.size() / sizeof(uint64_t));
    std::lock_guard lock{mutex_};
    idle_[c.endpoint].push_back(std::move(c.socket));
    return flat;
  }
}

} // namespace lmcc::gateway
