#include "tests/fuzz/fuzz_peer_read.hpp"

#include "gateway/peer_read.hpp"
#include "gateway/unique_fd.hpp"

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <sys/socket.h>
#include <unistd.h>
#include <vector>

namespace lmcc::fuzz {
namespace {

using gateway::peer_read_client;
using gateway::peer_read_server;
using gateway::unique_fd;

constexpr gateway::peer_read_key fuzz_key{0x0123456789abcdefULL, 0xfedcba9876543210ULL};

/// "lmccrd01": the protocol's magic, as the client writes it.
constexpr uint64_t preface_magic = 0x3130647263636d6cULL;

/// The id peer_read_client gives its first call.
constexpr uint64_t first_call_id = 1;

/// A stream longer than this is cut: the socketpair's buffer must hold the
/// input and, on the server's side, its replies, since nothing reads them
/// until the server is done.
constexpr size_t max_stream_bytes = 16 << 10;

/// Key k is held by k % 4 holders: small replies, recomputable.
std::vector<uint64_t> fake_answer(std::span<const uint64_t> keys) {
  std::vector<uint64_t> flat;
  for (uint64_t k : keys) {
    flat.push_back(k % 4);
    for (uint64_t h = 1; h <= k % 4; ++h)
      flat.push_back(h * 1000 + k);
  }
  return flat;
}

uint64_t word_at(std::string_view bytes, size_t index) {
  uint64_t w = 0;
  std::memcpy(&w, bytes.data() + index * 8, 8);
  return w;
}

void append_words(std::string& out, std::span<const uint64_t> words) {
  out.append(reinterpret_cast<const char*>(words.data()), words.size() * 8);
}

bool write_all(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return false;
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

std::string read_to_end(int fd) {
  std::string out;
  char buffer[4096];
  while (true) {
    const ssize_t n = ::recv(fd, buffer, sizeof buffer, 0);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return out;
    out.append(buffer, static_cast<size_t>(n));
  }
}

struct socket_pair {
  unique_fd ours;
  unique_fd theirs;
};

/// Both ends non-blocking, as the server and the client keep their sockets.
/// The inputs are small enough for the buffer, so no write waits.
std::optional<socket_pair> connected_pair() {
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, fds) != 0)
    return std::nullopt;
  return socket_pair{unique_fd{fds[0]}, unique_fd{fds[1]}};
}

// -- the server's side ---------------------------------------------------------------------------

struct server_reading {
  std::string replies;
  uint64_t requests = 0;
  uint64_t malformed = 0;
  uint64_t unauthorized = 0;
};

/// The framing read again, independently of serve_peer_reads.
server_reading reference_server(std::string_view stream) {
  server_reading r;
  if (stream.size() < 24 || word_at(stream, 0) != preface_magic ||
      word_at(stream, 1) != fuzz_key[0] || word_at(stream, 2) != fuzz_key[1]) {
    r.unauthorized = 1;
    return r;
  }
  size_t at = 24;
  while (stream.size() - at >= 8) {
    const uint64_t words = word_at(stream.substr(at), 0);
    at += 8;
    if (words == 0 || words - 1 > peer_read_server::max_keys) {
      r.malformed = 1;
      return r;
    }
    if ((stream.size() - at) / 8 < words)
      return r; // truncated: no answer, not counted
    std::vector<uint64_t> frame(words);
    std::memcpy(frame.data(), stream.data() + at, words * 8);
    at += words * 8;
    ++r.requests;
    const auto flat = fake_answer(std::span<const uint64_t>{frame}.subspan(1));
    const uint64_t head[2] = {flat.size() + 1, frame[0]};
    append_words(r.replies, head);
    append_words(r.replies, flat);
  }
  return r;
}

std::string check_server(std::string_view stream) {
  auto pair = connected_pair();
  if (!pair)
    return "cannot make a socketpair: " + std::string(std::strerror(errno));
  if (!write_all(pair->ours.get(), stream) || ::shutdown(pair->ours.get(), SHUT_WR) != 0)
    return "cannot write the stream: " + std::string(std::strerror(errno));
  gateway::peer_read_counters counters;
  gateway::serve_peer_reads(pair->theirs.get(), -1, fuzz_key, fake_answer, counters);
  pair->theirs.reset();
  const std::string replies = read_to_end(pair->ours.get());

  const server_reading want = reference_server(stream);
  if (counters.unauthorized != want.unauthorized)
    return "unauthorized: " + std::to_string(counters.unauthorized.load()) + ", expected " +
           std::to_string(want.unauthorized);
  if (counters.malformed != want.malformed)
    return "malformed: " + std::to_string(counters.malformed.load()) + ", expected " +
           std::to_string(want.malformed);
  if (counters.requests != want.requests)
    return "requests: " + std::to_string(counters.requests.load()) + ", expected " +
           std::to_string(want.requests);
  if (replies != want.replies)
    return "the replies differ from the reference reading (" + std::to_string(replies.size()) +
           " bytes, expected " + std::to_string(want.replies.size()) + ")";
  return {};
}

// -- the client's side ---------------------------------------------------------------------------

std::optional<std::vector<uint64_t>> reference_reply(std::string_view reply) {
  if (reply.size() < 16)
    return std::nullopt;
  const uint64_t count = word_at(reply, 0);
  if (count == 0 || count - 1 > peer_read_client::max_reply_words ||
      word_at(reply, 1) != first_call_id || (reply.size() - 16) / 8 < count - 1)
    return std::nullopt;
  std::vector<uint64_t> flat(count - 1);
  if (!flat.empty())
    std::memcpy(flat.data(), reply.data() + 16, flat.size() * 8);
  return flat;
}

std::string check_client(std::string_view reply) {
  auto pair = connected_pair();
  if (!pair)
    return "cannot make a socketpair: " + std::string(std::strerror(errno));
  if (!write_all(pair->ours.get(), reply))
    return "cannot write the reply: " + std::string(std::strerror(errno));
  pair->ours.reset(); // the peer is gone after its reply: every read ends at once
  peer_read_client client;
  peer_read_client::call call{"tcp://fuzz:1", first_call_id, std::move(pair->theirs)};
  const auto got = client.wait(call, std::chrono::milliseconds{0});
  if (got != reference_reply(reply))
    return std::string("wait() read the reply as ") + (got ? "words" : "nothing") +
           ", the reference reading as " + (reference_reply(reply) ? "words" : "nothing") +
           (got && reference_reply(reply) ? " (different ones)" : "");
  return {};
}

} // namespace

std::string check_peer_read(std::string_view input) {
  const uint8_t selector = input.empty() ? 0 : static_cast<uint8_t>(input.front());
  std::string_view bytes = input.empty() ? input : input.substr(1);
  if (bytes.size() > max_stream_bytes)
    bytes = bytes.substr(0, max_stream_bytes);
  if (selector & 1)
    return check_client(bytes);
  if ((selector & 2) == 0)
    return check_server(bytes);
  std::string stream;
  const uint64_t preface[3] = {preface_magic, fuzz_key[0], fuzz_key[1]};
  append_words(stream, preface);
  stream.append(bytes.substr(0, max_stream_bytes - stream.size()));
  return check_server(stream);
}

std::vector<std::string> peer_read_seeds() {
  std::vector<std::string> seeds;
  auto with = [](char selector, std::initializer_list<uint64_t> words) {
    std::string s(1, selector);
    append_words(s, std::span<const uint64_t>{words.begin(), words.size()});
    return s;
  };
  // Server: requests behind the preface (selector 2), and whole streams (0).
  seeds.push_back(with(2, {6, 42, 7, 4, 9, 10, 3}));
  seeds.push_back(with(2, {2, 1, 5, 3, 2, 8, 12}));
  seeds.push_back(with(2, {1, 9}));
  seeds.push_back(with(2, {0}));
  seeds.push_back(with(2, {(uint64_t{1} << 20) + 2, 1}));
  seeds.push_back(with(0, {preface_magic, fuzz_key[0], fuzz_key[1], 3, 77, 5, 6}));
  seeds.push_back(with(0, {preface_magic, fuzz_key[0], fuzz_key[0] + 1, 2, 1, 5}));
  // Client: replies as the server writes them (selector 1).
  seeds.push_back(with(1, {6, first_call_id, 3, 1003, 2003, 3003, 0}));
  seeds.push_back(with(1, {1, first_call_id}));
  seeds.push_back(with(1, {3, first_call_id + 1, 1, 1001}));
  seeds.push_back(with(1, {peer_read_client::max_reply_words + 1, first_call_id, 5}));
  return seeds;
}

} // namespace lmcc::fuzz
