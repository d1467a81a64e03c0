#include "apps/lmcc/tool_commands.hpp"

#include "messages/codec_json.hpp"
#include "messages/codec_msgpack.hpp"

#include <nlohmann/json.hpp>

#include <optional>
#include <string>

namespace lmcc::apps {
namespace {

std::string error_line(std::string_view why) {
  return nlohmann::json{{"error", std::string(why)}}.dump(-1, ' ', false,
                                                          nlohmann::json::error_handler_t::replace);
}

std::optional<std::string> hex_to_bytes(std::string_view hex) {
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9')
      return c - '0';
    if (c >= 'a' && c <= 'f')
      return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
      return c - 'A' + 10;
    return -1;
  };
  if (hex.size() % 2 != 0)
    return std::nullopt;
  std::string out(hex.size() / 2, '\0');
  for (size_t i = 0; i < out.size(); ++i) {
    int hi = nibble(hex[2 * i]);
    int lo = nibble(hex[2 * i + 1]);
    if (hi < 0 || lo < 0)
      return std::nullopt;
    out[i] = static_cast<char>((hi << 4) | lo);
  }
  return out;
}

std::string bytes_to_hex(std::string_view bytes) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) {
    out += digits[c >> 4];
    out += digits[c & 15];
  }
  return out;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.back() == '\r' || s.back() == ' ' || s.back() == '\t'))
    s.remove_suffix(1);
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t'))
    s.remove_prefix(1);
  return s;
}

} // namespace

int run_msg_decode(std::istream& in, std::ostream& out) {
  std::string line;
  while (std::getline(in, line)) {
    auto bytes = hex_to_bytes(trim(line));
    if (!bytes) {
      out << error_line("input is not hex") << '\n';
      continue;
    }
    auto decoded = msg::decode_msgpack(*bytes);
    out << (decoded ? msg::encode_json(*decoded) : error_line(decoded.error().message)) << '\n';
  }
  return 0;
}

int run_msg_encode(std::istream& in, std::ostream& out) {
  std::string line;
  while (std::getline(in, line)) {
    auto decoded = msg::decode_json(trim(line));
    out << (decoded ? bytes_to_hex(msg::encode_msgpack(*decoded))
                    : error_line(decoded.error().message))
        << '\n';
  }
  return 0;
}

int run_chunk_hashes(const msg::chunk_hash_options& options, std::istream& in, std::ostream& out) {
  msg::chunk_hasher hasher{options};
  std::string line;
  while (std::getline(in, line)) {
    std::vector<msg::wire_int> tokens;
    try {
      auto doc = nlohmann::json::parse(trim(line));
      if (!doc.is_array())
        throw std::invalid_argument("expected a JSON array of token ids");
      tokens.reserve(doc.size());
      for (const auto& t : doc) {
        if (t.is_number_unsigned())
          tokens.push_back(msg::wire_int::from_unsigned(t.get<uint64_t>()));
        else if (t.is_number_integer())
          tokens.emplace_back(t.get<int64_t>());
        else
          throw std::invalid_argument("token ids must be integers");
      }
    } catch (const std::exception& e) {
      out << error_line(e.what()) << '\n';
      continue;
    }
    nlohmann::json result = nlohmann::json::array();
    for (const auto& c : hasher.chunks(tokens))
      result.push_back({c.start, c.end, c.key});
    out << result.dump() << '\n';
  }
  return 0;
}

} // namespace lmcc::apps
