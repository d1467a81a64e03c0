#include "apps/lmcc/client/lookup_view.hpp"

#include "apps/lmcc/client/table.hpp"

#include <climits>

#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <optional>

namespace lmcc::apps::client {
namespace {

/// One blank/comma-separated word as a token id, or nullopt.
std::optional<nlohmann::json> word_token(std::string_view w) {
  if (w.empty())
    return std::nullopt;
  if (w.front() == '-') {
    int64_t v = 0;
    const auto [end, ec] = std::from_chars(w.data(), w.data() + w.size(), v);
    if (ec != std::errc{} || end != w.data() + w.size())
      return std::nullopt;
    return nlohmann::json(v);
  }
  if (w.front() == '+')
    w.remove_prefix(1);
  uint64_t v = 0;
  const auto [end, ec] = std::from_chars(w.data(), w.data() + w.size(), v);
  if (w.empty() || ec != std::errc{} || end != w.data() + w.size())
    return std::nullopt;
  if (v <= static_cast<uint64_t>(INT64_MAX))
    return nlohmann::json(static_cast<int64_t>(v));
  return nlohmann::json(v);
}

bool separator(char c) {
  return c == ',' || std::isspace(static_cast<unsigned char>(c)) != 0;
}

std::string quoted(std::string_view w) {
  std::string out = "\"";
  out.append(w.substr(0, 40));
  out.append(w.size() > 40 ? "...\"" : "\"");
  return out;
}

} // namespace

msg::expected<nlohmann::json> parse_tokens(std::string_view text) {
  size_t first = 0;
  while (first < text.size() && std::isspace(static_cast<unsigned char>(text[first])) != 0)
    ++first;
  auto tokens = nlohmann::json::array();
  if (first < text.size() && text[first] == '[') {
    auto doc = nlohmann::json::parse(text, nullptr, false);
    if (doc.is_discarded() || !doc.is_array())
      return msg::codec_error{"the tokens start with '[' but are not a JSON array"};
    for (size_t i = 0; i < doc.size(); ++i) {
      if (!doc[i].is_number_integer())
        return msg::codec_error{"token " + std::to_string(i) + " (" + doc[i].dump() +
                                ") is not an integer"};
      tokens.push_back(doc[i]);
    }
  } else {
    size_t index = 0;
    for (size_t at = first; at < text.size();) {
      if (separator(text[at])) {
        ++at;
        continue;
      }
      size_t end = at;
      while (end < text.size() && !separator(text[end]))
        ++end;
      const auto word = text.substr(at, end - at);
      auto token = word_token(word);
      if (!token)
        return msg::codec_error{"token " + std::to_string(index) + " (" + quoted(word) +
                                ") is not an integer in -2^63..2^64-1"};
      tokens.push_back(std::move(*token));
      ++index;
      at = end;
    }
  }
  if (tokens.empty())
    return msg::codec_error{"no tokens given (a JSON array of integers, or integers separated "
                            "by blanks)"};
  return tokens;
}

size_t layout_instances(const nlohmann::json& answer) {
  if (!answer.is_object() || !answer.contains("layout_info") || !answer["layout_info"].is_object())
    return 0;
  return answer["layout_info"].size();
}

std::string describe_origin(const lookup_origin& origin) {
  return origin.node.empty() ? origin.endpoint : origin.node + " (" + origin.endpoint + ")";
}

void render_lookup(const nlohmann::json& answer, const lookup_origin& origin, size_t token_count,
                   std::ostream& out) {
  const size_t n = layout_instances(answer);
  if (n > 0) {
    text_table t{{{"INSTANCE"}, {"LOCATION"}, {"TOKENS", align::right}}};
    for (const auto& [instance, where] : answer["layout_info"].items()) {
      const bool pair = where.is_array() && where.size() == 2;
      t.add_row({instance, pair && where[0].is_string() ? where[0].get<std::string>() : "?",
                 pair ? where[1].dump() : "?"});
    }
    t.render(out);
    out << "\n";
  }
  char took[32];
  std::snprintf(took, sizeof took, "%.1f", origin.elapsed_ms);
  out << describe_origin(origin) << " answered in " << took << " ms: ";
  const std::string of =
      " of the " + std::to_string(token_count) + " token" + (token_count == 1 ? "" : "s");
  if (n == 0)
    out << "no instance holds a prefix" << of << "\n";
  else
    out << n << (n == 1 ? " instance holds" : " instances hold") << " a prefix" << of << "\n";
}

nlohmann::json lookup_json(nlohmann::json answer, const lookup_origin& origin) {
  if (!answer.is_object())
    answer = nlohmann::json{{"answer", std::move(answer)}};
  answer["node"] = origin.node.empty() ? nlohmann::json(nullptr) : nlohmann::json(origin.node);
  answer["asked"] = origin.endpoint;
  answer["elapsed_ms"] = std::round(origin.elapsed_ms * 1000) / 1000;
  return answer;
}

} // namespace lmcc::apps::client
