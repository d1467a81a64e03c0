#include "cluster/handshake.hpp"

#include <array>
#include <fstream>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <sstream>

namespace lmcc::cluster {

std::string handshake_mac(std::string_view secret, handshake_role role, std::string_view client_id,
                          std::string_view server_id, uint64_t client_nonce,
                          uint64_t server_nonce) {
  // Length-prefixed fields: "ab"+"c" and "a"+"bc" must not give one MAC.
  std::string text = role == handshake_role::join ? "lmcc-join" : "lmcc-accept";
  auto add = [&text](std::string_view field) {
    text += std::to_string(field.size());
    text += ':';
    text += field;
  };
  add(client_id);
  add(server_id);
  add(std::to_string(client_nonce));
  add(std::to_string(server_nonce));
  std::array<unsigned char, EVP_MAX_MD_SIZE> mac{};
  unsigned int mac_len = 0;
  HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()),
       reinterpret_cast<const unsigned char*>(text.data()), text.size(), mac.data(), &mac_len);
  static constexpr char digits[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(size_t{mac_len} * 2);
  for (unsigned int i = 0; i < mac_len; ++i) {
    hex += digits[mac[i] >> 4];
    hex += digits[mac[i] & 0xf];
  }
  return hex;
}

bool mac_equal(std::string_view a, std::string_view b) noexcept {
  if (a.size() != b.size())
    return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i)
    diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

expected<std::string> resolve_secret(const cluster_options& opts,
                                     const std::map<std::string, std::string>& environment) {
  constexpr size_t min_length = 16;
  std::string secret;
  std::string source;
  if (!opts.secret_file.empty()) {
    std::ifstream in(opts.secret_file, std::ios::binary);
    if (!in)
      return error{errc::no_secret, "cannot read the cluster secret file " + opts.secret_file +
                                        " (lmcc_cluster_secret_file)"};
    std::ostringstream text;
    text << in.rdbuf();
    secret = text.str();
    source = "file " + opts.secret_file;
  } else {
    auto it = environment.find(opts.secret_env);
    if (it == environment.end() || it->second.empty())
      return error{errc::no_secret, "no cluster secret: set lmcc_cluster_secret_file or the "
                                    "environment variable " +
                                        opts.secret_env};
    secret = it->second;
    source = "variable " + opts.secret_env;
  }
  while (!secret.empty() && (secret.back() == '\n' || secret.back() == '\r' ||
                             secret.back() == ' ' || secret.back() == '\t'))
    secret.pop_back();
  if (secret.size() < min_length)
    return error{errc::no_secret, "the cluster secret from " + source + " has " +
                                      std::to_string(secret.size()) + " bytes; at least " +
                                      std::to_string(min_length) + " are required"};
  return secret;
}

} // namespace lmcc::cluster
