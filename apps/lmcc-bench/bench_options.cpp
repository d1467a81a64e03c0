#include "apps/lmcc-bench/bench_options.hpp"

#include "apps/lmcc-bench/key_space.hpp"

#include <charconv>
#include <stdexcept>

namespace lmcc::bench {
namespace {

uint16_t parse_port(std::string_view text, const std::string& whole) {
  unsigned port = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), port);
  if (ec != std::errc{} || end != text.data() + text.size() || port == 0 || port > 65535)
    throw std::invalid_argument("bad port in '" + whole + "'");
  return static_cast<uint16_t>(port);
}

} // namespace

host_port parse_host_port(const std::string& text) {
  auto colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == text.size())
    throw std::invalid_argument("expected host:port, got '" + text + "'");
  return host_port{text.substr(0, colon),
                   parse_port(std::string_view{text}.substr(colon + 1), text)};
}

node_endpoints parse_node_endpoints(const std::string& text) {
  auto colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0)
    throw std::invalid_argument("expected host:PULL/REPLY/HTTP, got '" + text + "'");
  const std::string host = text.substr(0, colon);
  std::string_view ports = std::string_view{text}.substr(colon + 1);
  const auto slash1 = ports.find('/');
  const auto slash2 = slash1 == std::string_view::npos ? slash1 : ports.find('/', slash1 + 1);
  if (slash2 == std::string_view::npos || ports.find('/', slash2 + 1) != std::string_view::npos)
    throw std::invalid_argument("expected host:PULL/REPLY/HTTP, got '" + text + "'");
  return node_endpoints{
      host_port{host, parse_port(ports.substr(0, slash1), text)},
      host_port{host, parse_port(ports.substr(slash1 + 1, slash2 - slash1 - 1), text)},
      host_port{host, parse_port(ports.substr(slash2 + 1), text)}};
}

node_endpoints pick_node(const bench_options& o, node_role role, size_t index) {
  if (o.nodes.empty())
    return node_endpoints{o.pull, o.reply, o.http};
  const uint64_t start = mix64(o.seed ^ (static_cast<uint64_t>(role) << 56));
  return o.nodes[(start + index) % o.nodes.size()];
}

} // namespace lmcc::bench
