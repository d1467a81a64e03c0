// node_tls: mutual TLS between the nodes of a cluster, over OpenSSL, for
// every channel they open to each other: the cluster port (CAF's middleman,
// actors/cluster/tls_transport.hpp) and the peer-read connections (peer_read.hpp).
//
// One node_tls per node holds the CA, the node's certificate and its key
// (lmcc_cluster_tls_ca_file, _cert_file, _key_file), read once at start; it
// is shared by every connection, dialled or accepted, each of which runs a
// tls_stream over its non-blocking socket. Both ends must show a certificate
// the CA signed (SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT on both
// sides; TLS 1.2 at least). A handshake that fails is reported once, as a
// tls_refusal, to the hook the node gives (which logs `cluster-tls-refused`
// and counts it): an untrusted certificate, none at all, a peer that does not
// speak TLS, one that stops half-way or takes too long, or -- seen from the
// other end -- a peer that refused ours. The cluster secret's handshake
// (cluster/handshake.hpp) still runs on top: TLS says the peer holds a key the
// cluster's CA certified, the secret that it belongs to this cluster.
//
// Any certificate the CA signed is let in: no host name is checked (a node's
// address may be a DNS name, an IP or a proxy's), so give the cluster a CA of
// its own. TLS session tickets and resumption are off: a connection idle in a
// pool must have nothing to read unless its peer closed it.
//
//   auto tls = node_tls::load({ca, cert, key}, on_refused);   // throws on a bad file
//   tls_stream s{*tls, fd, tls_stream::role::client};
//   while (s.handshake() == tls_stream::status::want_read) poll(fd, POLLIN);
//   s.write(buf, n); s.read(buf, n);
//
// Writes go through write(2): a process using this must ignore SIGPIPE (the
// node does), or a write to a peer that closed kills it.
//
// Context: node_tls is immutable after load() and thread-safe; a tls_stream is
// used by one thread at a time (it may move between threads). CAF-free.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <sys/types.h>

struct ssl_ctx_st;
struct ssl_st;

namespace lmcc::gateway {

/// The three PEM files of a node (all three or none).
struct node_tls_files {
  std::string ca_file;   ///< the CA every peer's certificate must chain to
  std::string cert_file; ///< this node's certificate (chain)
  std::string key_file;  ///< its private key
};

/// Why a connection between nodes did not get through TLS.
struct tls_refusal {
  /// "cluster" (the middleman's port) or "peer-read".
  std::string channel;
  /// The member the connection was dialled to, when known ("" for an
  /// accepted connection: the id is not known before the handshake).
  std::string peer;
  /// host:port of the other end.
  std::string address;
  /// The subject of the certificate the other end showed ("" if none).
  std::string subject;
  /// untrusted-certificate, no-certificate, not-tls, closed-during-handshake,
  /// handshake-timeout or tls-error: this node refused the peer;
  /// refused-by-peer: the peer refused this node's certificate.
  std::string reason;
  /// OpenSSL's words (a verify error, an alert).
  std::string detail;

  bool by_peer() const noexcept { return reason == "refused-by-peer"; }
};

/// The words `cluster-tls-refused` logs for a refusal (tests read them).
std::string describe(const tls_refusal& r);

class node_tls {
public:
  using refusal_fn = std::function<void(const tls_refusal&)>;

  /// Reads and checks the three files: the key must match the certificate,
  /// and the certificate must chain to the CA (a node that would refuse its
  /// own certificate is a configuration error). Throws std::runtime_error
  /// naming the file and OpenSSL's reason. `on_refused` (may be empty) is
  /// called once for every refused connection, from the thread that saw it.
  static std::shared_ptr<const node_tls> load(const node_tls_files& files,
                                              refusal_fn on_refused = {});

  ~node_tls();
  node_tls(const node_tls&) = delete;
  node_tls& operator=(const node_tls&) = delete;

  ssl_ctx_st* context() const noexcept { return ctx_; }
  const node_tls_files& files() const noexcept { return files_; }
  /// The subject of this node's own certificate.
  const std::string& subject() const noexcept { return subject_; }
  /// Passes `r` to the hook given to load().
  void refused(const tls_refusal& r) const;

private:
  node_tls() = default;
  ssl_ctx_st* ctx_ = nullptr;
  node_tls_files files_;
  std::string subject_;
  refusal_fn on_refused_;
};

/// One connection's TLS over a connected, non-blocking socket it does not
/// own (closing the socket stays the owner's job; close_notify is not sent:
/// the peer sees the TCP close).
class tls_stream {
public:
  enum class role : uint8_t { client, server };
  enum class status : uint8_t { done, want_read, want_write, failed };

  /// Throws std::runtime_error if OpenSSL cannot make a session.
  tls_stream(const node_tls& tls, int fd, role r);
  ~tls_stream();
  tls_stream(const tls_stream&) = delete;
  tls_stream& operator=(const tls_stream&) = delete;

  /// One step of the handshake; call again after the socket is ready for
  /// what it wants (POLLIN or POLLOUT), until done or failed.
  status handshake();
  bool established() const noexcept { return established_; }

  /// Reads up to `len` bytes (> 0), 0 when none can be read now (wait for
  /// wants()), -1 when the connection closed or failed.
  ssize_t read(void* buf, size_t len);
  /// Writes up to `len` bytes (> 0, possibly fewer), 0 when the socket cannot
  /// take any now (wait for wants()), -1 when the connection failed.
  ssize_t write(const void* buf, size_t len);
  /// Decrypted bytes waiting in the session (poll does not see them).
  size_t pending() const noexcept;
  /// POLLIN or POLLOUT: what the last call that could not go on waits for.
  short wants() const noexcept { return wants_; }

  /// Why the handshake (or the first read after it) failed, once it did;
  /// `channel`, `peer` and `address` are the caller's to fill in.
  tls_refusal refusal() const;
  /// True once the handshake failed, or the first read after it did (the
  /// peer's alert refusing this node's certificate arrives then in TLS 1.3):
  /// refusal() says why. A failure after data flowed is no refusal.
  bool refused() const noexcept { return !failure_reason_.empty(); }
  /// The handshake ran out of time (whoever watched the clock closed the
  /// socket's read side): refusal() says handshake-timeout.
  void mark_timed_out();
  /// The subject of the certificate the peer showed ("" if none yet).
  std::string peer_subject() const;

  /// Drives handshake() to its end, waiting on `fd` with poll until
  /// `deadline`, or until `stop_fd` (-1: none) becomes readable. On failure
  /// refusal() says why (handshake-timeout when the deadline passed).
  bool handshake_until(std::chrono::steady_clock::time_point deadline, int stop_fd = -1);

  /// What the certificate check saw of a certificate it refused (filled by
  /// the verify callback; internal).
  struct verify_note {
    std::string subject;
    std::string error;
  };
  verify_note& verify_state() noexcept { return verify_; }

private:
  /// Records why the last call failed (from OpenSSL's error queue).
  void note_failure(int ssl_error);

  ssl_st* ssl_ = nullptr;
  int fd_ = -1;
  bool established_ = false;
  /// Application data arrived: a later failure is no refusal.
  bool got_data_ = false;
  short wants_ = 0;
  std::string failure_reason_;
  std::string failure_detail_;
  verify_note verify_;
};

/// host:port of the other end of `fd` ("" if it is not connected).
std::string peer_address(int fd);

} // namespace lmcc::gateway
