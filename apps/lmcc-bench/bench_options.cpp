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
  const std::string expected = "expected host:HTTP or host:PULL/REPLY/HTTP, got '" + text + "'";
  auto colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == text.size())
    throw std::invalid_argument(expected);
  const std::string host = text.substr(0, colon);
  std::string_view ports = std::string_view{text}.substr(colon + 1);
  const auto slash1 = ports.find('/');
  if (slash1 == std::string_view::npos) {
    // host:HTTP, the layout of `lmcc cluster up`: pull HTTP+1, reply HTTP+2.
    const uint16_t http = parse_port(ports, text);
    if (http > 65533)
      throw std::invalid_argument("no room for pull and reply ports above " + text);
    return node_endpoints{host_port{host, static_cast<uint16_t>(http + 1)},
                          host_port{host, static_cast<uint16_t>(http + 2)}, host_port{host, http}};
  }
  const auto slash2 = ports.find('/', slash1 + 1);
  if (slash2 == std::string_view::npos || ports.find('/', slash2 + 1) != std::string_view::npos)
    throw std::invalid_argument(expected);
  return node_endpoints{
      host_port{host, parse_port(ports.substr(0, slash1), text)},
      host_port{host, parse_port(ports.substr(slash1 + 1, slash2 - slash1 - 1), text)},
      host_port{host, parse_port(ports.substr(slash2 + 1), text)}};
}

size_t pick_node_index(const bench_options& o, node_role role, size_t index) {
  if (o.nodes.empty())
    return 0;
  if (o.node_spread == "rotated") {
    const uint64_t start = mix64(o.seed ^ (static_cast<uint64_t>(role) << 56));
    return static_cast<size_t>((start + index) % o.nodes.size());
  }
  return index % o.nodes.size();
}

node_endpoints pick_node(const bench_options& o, node_role role, size_t index) {
  if (o.nodes.empty())
    return node_endpoints{o.pull, o.reply, o.http};
  return o.nodes[pick_node_index(o, role, index)];
}

} // namespace lmcc::bench
