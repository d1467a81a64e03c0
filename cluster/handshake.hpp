// handshake: how two nodes prove to each other that they hold the cluster
// secret, without sending it.
//
// A connecting node (the client) sends its id and a fresh random nonce; the
// listening node (the server) answers with its own nonce; the client proves
// itself with HMAC-SHA256(secret, "join" | client id | server id | both
// nonces) and the server answers with the same MAC under "accept", which
// proves the server to the client. Fresh nonces on both sides make a recorded
// exchange useless for a later one. The secret itself never crosses the wire;
// with lmcc_cluster_tls_* the link runs under mutual TLS as well
// (actors/cluster/tls_transport.hpp): TLS proves the peer holds a key the cluster's CA
// certified, this that it holds the cluster's secret.
//
//   auto mac = handshake_mac(secret, handshake_role::join, "n2", "n1", cn, sn);
//   if (!mac_equal(mac, received)) refuse();
//
// Context: pure functions; thread-safe. CAF-free.
#pragma once

#include "cluster/cluster_options.hpp"
#include "cluster/expected.hpp"

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

namespace lmcc::cluster {

/// The version of everything nodes say to each other: actor interfaces,
/// message layouts, the peer-read wire. Bump it with any change to them. The
/// handshake's first step carries it both ways and a node refuses a peer of
/// another version, with a log line naming both (a rolling upgrade across a
/// change of it needs a full stop; one within a version needs nothing).
/// The first step's own interface (hello: id, nonce, version -> nonce,
/// version) must never change, so that any two versions can tell.
/// (Version 2 gained a second join that carries the dialling node's handles,
/// for one connection per pair with TLS between nodes: only nodes with TLS
/// send it, and they never meet a node without, so version 2 stayed.
/// Version 3: the records of cluster/wire.hpp and slot copies as structs, in
/// place of vectors of words with positional meaning. Version 4: a greeting
/// carries the summary of the slots its two nodes share.)
constexpr uint32_t cluster_protocol_version = 4;

enum class handshake_role : uint8_t { join, accept };

/// HMAC-SHA256 over the role, both ids and both nonces, as 64 hex digits.
std::string handshake_mac(std::string_view secret, handshake_role role, std::string_view client_id,
                          std::string_view server_id, uint64_t client_nonce, uint64_t server_nonce);

/// Constant-time comparison of two MACs.
bool mac_equal(std::string_view a, std::string_view b) noexcept;

/// The cluster secret from opts.secret_file, else from the environment
/// variable opts.secret_env; an error says which was tried. A secret shorter
/// than 16 bytes is refused: it would be guessable.
expected<std::string> resolve_secret(const cluster_options& opts,
                                     const std::map<std::string, std::string>& environment);

} // namespace lmcc::cluster
