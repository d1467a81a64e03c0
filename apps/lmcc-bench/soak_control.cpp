#include "apps/lmcc-bench/soak_control.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <poll.h>
#include <unistd.h>

namespace lmcc::bench {
namespace {

/// How long the reader waits in poll(): bounds how late it notices a stop.
constexpr int reader_poll_ms = 100;

std::vector<std::string_view> words(std::string_view line) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t' || line[i] == '\r'))
      ++i;
    size_t j = i;
    while (j < line.size() && line[j] != ' ' && line[j] != '\t' && line[j] != '\r')
      ++j;
    if (j > i)
      out.push_back(line.substr(i, j - i));
    i = j;
  }
  return out;
}

std::optional<uint32_t> number(std::string_view text) {
  uint32_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc{} || end != text.data() + text.size())
    return std::nullopt;
  return v;
}

} // namespace

std::optional<soak_command> parse_soak_command(std::string_view line, std::string& error) {
  const auto w = words(line);
  if (w.empty()) {
    error = "empty line";
    return std::nullopt;
  }
  soak_command c;
  const auto need = [&](size_t n) {
    if (w.size() == n)
      return true;
    error = fmt::format("'{}' takes {} argument(s)", w[0], n - 1);
    return false;
  };
  if (w[0] == "status" || w[0] == "stop") {
    if (!need(1))
      return std::nullopt;
    c.what = w[0] == "status" ? soak_command::kind::status : soak_command::kind::stop;
    return c;
  }
  if (w[0] != "restart" && w[0] != "dup" && w[0] != "reorder") {
    error = fmt::format("unknown command '{}'", w[0]);
    return std::nullopt;
  }
  if (!need(w[0] == "restart" ? 2 : 3))
    return std::nullopt;
  const auto worker = number(w[1]);
  if (!worker) {
    error = fmt::format("'{}' is not a worker number", w[1]);
    return std::nullopt;
  }
  c.worker = *worker;
  if (w[0] == "restart") {
    c.what = soak_command::kind::restart;
    return c;
  }
  if (w[0] == "dup") {
    const auto n = number(w[2]);
    if (!n || *n == 0) {
      error = fmt::format("'{}' is not a positive count", w[2]);
      return std::nullopt;
    }
    c.what = soak_command::kind::dup;
    c.count = *n;
    return c;
  }
  c.what = soak_command::kind::reorder;
  std::string_view rest = w[2];
  while (!rest.empty()) {
    const size_t comma = rest.find(',');
    const auto v = number(rest.substr(0, comma));
    if (!v) {
      error = fmt::format("'{}' is not a list of positions", w[2]);
      return std::nullopt;
    }
    c.order.push_back(*v);
    rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
  }
  std::vector<bool> seen(c.order.size(), false);
  for (uint32_t p : c.order) {
    if (p >= c.order.size() || seen[p]) {
      error = fmt::format("'{}' is not a permutation of 0..{}", w[2], c.order.size() - 1);
      return std::nullopt;
    }
    seen[p] = true;
  }
  return c;
}

soak_control::soak_control(int fd)
  : fd_(fd), reader_([this](std::stop_token stop) { read_loop(std::move(stop)); }) {}

soak_control::~soak_control() = default;

void soak_control::read_loop(std::stop_token stop) {
  std::string pending;
  char buffer[4096];
  while (!stop.stop_requested()) {
    pollfd p{fd_, POLLIN, 0};
    const int n = ::poll(&p, 1, reader_poll_ms);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      continue;
    const ssize_t got = ::read(fd_, buffer, sizeof buffer);
    if (got < 0 && errno == EINTR)
      continue;
    if (got <= 0) { // end of input (or an error): the harness is gone
      std::lock_guard lock{mutex_};
      queue_.push_back(soak_command{.what = soak_command::kind::stop});
      ready_.notify_one();
      return;
    }
    pending.append(buffer, static_cast<size_t>(got));
    size_t eol;
    while ((eol = pending.find('\n')) != std::string::npos) {
      const std::string line = pending.substr(0, eol);
      pending.erase(0, eol + 1);
      std::string error;
      auto c = parse_soak_command(line, error);
      if (!c) {
        spdlog::warn("soak: ignored command '{}': {}", line, error);
        continue;
      }
      std::lock_guard lock{mutex_};
      queue_.push_back(std::move(*c));
      ready_.notify_one();
    }
  }
}

std::optional<soak_command> soak_control::next(std::chrono::milliseconds wait) {
  std::unique_lock lock{mutex_};
  if (!ready_.wait_for(lock, wait, [this] { return !queue_.empty(); }))
    return std::nullopt;
  soak_command c = std::move(queue_.front());
  queue_.pop_front();
  return c;
}

void emit_json_line(const std::string& json) {
  std::fwrite(json.data(), 1, json.size(), stdout);
  std::fputc('\n', stdout);
  std::fflush(stdout);
}

} // namespace lmcc::bench
