#include "gateway/http_access.hpp"

#include <fstream>
#include <sstream>
#include <stdexcept>

namespace lmcc::gateway {
namespace {

/// Equal in time independent of where the first difference lies.
bool same_secret(std::string_view a, std::string_view b) noexcept {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < a.size(); ++i)
    diff |= static_cast<unsigned char>(a[i] ^ (i < b.size() ? b[i] : 0));
  return diff == 0;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t'))
    s.remove_prefix(1);
  while (!s.empty() &&
         (s.back() == ' ' || s.back() == '\t' || s.back() == '\r' || s.back() == '\n'))
    s.remove_suffix(1);
  return s;
}

} // namespace

std::optional<access_refusal> check_access(route_access access, const http_security& security,
                                           std::string_view authorization) {
  if (security.token.empty() || access == route_access::probe ||
      (access == route_access::read && !security.token_for_reads))
    return std::nullopt;
  constexpr std::string_view scheme = "Bearer ";
  const std::string_view header = trim(authorization);
  if (header.size() <= scheme.size() || header.substr(0, scheme.size()) != scheme)
    return access_refusal{401, "this endpoint needs the API token: Authorization: Bearer <token>",
                          "http_token_missing"};
  if (!same_secret(trim(header.substr(scheme.size())), security.token))
    return access_refusal{403, "the API token is wrong", "http_token_wrong"};
  return std::nullopt;
}

std::string read_api_token(const std::string& file, std::string_view env_value) {
  if (file.empty())
    return std::string(trim(env_value));
  std::ifstream in(file, std::ios::binary);
  if (!in)
    throw std::invalid_argument("cannot read the API token file " + file);
  std::ostringstream text;
  text << in.rdbuf();
  return std::string(trim(text.str()));
}

std::string resolve_api_token(const http_security& security,
                              const std::map<std::string, std::string>& environment) {
  const auto variable = environment.find(security.token_env);
  const std::string_view env_value =
      variable == environment.end() ? std::string_view{} : std::string_view{variable->second};
  std::string token;
  try {
    token = read_api_token(security.token_file, env_value);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(std::string(e.what()) + " (lmcc_api_token_file)");
  }
  if (security.token_file.empty() && env_value.empty())
    return {}; // no token: the API is open, as LMCache's is
  const std::string source = security.token_file.empty() ? "variable " + security.token_env
                                                         : "file " + security.token_file;
  if (token.size() < min_api_token_bytes)
    throw std::invalid_argument("the API token from " + source + " has " +
                                std::to_string(token.size()) + " bytes; at least " +
                                std::to_string(min_api_token_bytes) + " are required");
  return token;
}

} // namespace lmcc::gateway
