#include "gateway/node_tls.hpp"

#include "clock/clock.hpp"

#include <climits>

#include <algorithm>
#include <arpa/inet.h>
#include <cerrno>
#include <cstring>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>
#include <poll.h>
#include <stdexcept>
#include <sys/socket.h>

namespace lmcc::gateway {
namespace {

/// Every error OpenSSL queued on this thread, oldest first; the queue is emptied.
std::string drain_errors() {
  std::string out;
  while (const unsigned long e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof buf);
    out += (out.empty() ? "" : "; ") + std::string{buf};
  }
  return out.empty() ? "no detail from OpenSSL" : out;
}

std::string subject_of(const X509* cert) {
  if (cert == nullptr)
    return {};
  char buf[512];
  X509_NAME_oneline(X509_get_subject_name(cert), buf, sizeof buf);
  return buf;
}

/// Records the first certificate the chain check refuses (the peer's, or one
/// of its chain), for the refusal's log line; OpenSSL's own error then only
/// says "certificate verify failed".
int verify_callback(int preverify_ok, X509_STORE_CTX* store) {
  if (preverify_ok == 1)
    return 1;
  auto* ssl =
      static_cast<SSL*>(X509_STORE_CTX_get_ex_data(store, SSL_get_ex_data_X509_STORE_CTX_idx()));
  auto* stream = ssl != nullptr ? static_cast<tls_stream*>(SSL_get_app_data(ssl)) : nullptr;
  if (stream != nullptr && stream->verify_state().error.empty()) {
    const X509* leaf = X509_STORE_CTX_get0_cert(store);
    stream->verify_state().subject =
        subject_of(leaf != nullptr ? leaf : X509_STORE_CTX_get_current_cert(store));
    stream->verify_state().error = X509_verify_cert_error_string(X509_STORE_CTX_get_error(store));
  }
  return 0;
}

[[noreturn]] void fail(const std::string& what) {
  throw std::runtime_error(what + ": " + drain_errors());
}

/// True if OpenSSL's reason is what a TLS server reads from a peer that
/// speaks something else (plain BASP, HTTP, our peer-read preface).
bool not_tls_reason(int reason) {
  switch (reason) {
  case SSL_R_WRONG_VERSION_NUMBER:
  case SSL_R_HTTP_REQUEST:
  case SSL_R_HTTPS_PROXY_REQUEST:
  case SSL_R_UNKNOWN_PROTOCOL:
  case SSL_R_PACKET_LENGTH_TOO_LONG:
  case SSL_R_RECORD_LENGTH_MISMATCH:
  case SSL_R_UNSUPPORTED_PROTOCOL:
    return true;
  default:
    return false;
  }
}

} // namespace

std::string describe(const tls_refusal& r) {
  auto or_dash = [](const std::string& s) { return s.empty() ? std::string{"-"} : s; };
  return "channel=" + or_dash(r.channel) + " peer=" + or_dash(r.peer) +
         " address=" + or_dash(r.address) + " subject=\"" + r.subject +
         "\" reason=" + or_dash(r.reason) + " detail=\"" + r.detail + "\"";
}

// -- node_tls ------------------------------------------------------------------------

std::shared_ptr<const node_tls> node_tls::load(const node_tls_files& files, refusal_fn on_refused) {
  ERR_clear_error();
  std::shared_ptr<node_tls> tls{new node_tls};
  tls->files_ = files;
  tls->on_refused_ = std::move(on_refused);
  SSL_CTX* ctx = SSL_CTX_new(TLS_method());
  if (ctx == nullptr)
    fail("cannot make an OpenSSL context");
  tls->ctx_ = ctx; // freed by ~node_tls from here on
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  // No tickets and no session cache: nothing arrives on an idle connection
  // (a TLS 1.3 server sends tickets after its handshake otherwise), and every
  // connection shows its certificate again.
  SSL_CTX_set_options(ctx, SSL_OP_NO_TICKET | SSL_OP_NO_RENEGOTIATION);
  SSL_CTX_set_num_tickets(ctx, 0);
  SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
  // Non-blocking writers may write part of a buffer and retry the rest from
  // wherever their buffer then is.
  SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  if (SSL_CTX_use_certificate_chain_file(ctx, files.cert_file.c_str()) != 1)
    fail("cannot read the certificate " + files.cert_file + " (lmcc_cluster_tls_cert_file)");
  if (SSL_CTX_use_PrivateKey_file(ctx, files.key_file.c_str(), SSL_FILETYPE_PEM) != 1 &&
      ERR_GET_REASON(ERR_peek_last_error()) != X509_R_KEY_VALUES_MISMATCH)
    fail("cannot read the private key " + files.key_file + " (lmcc_cluster_tls_key_file)");
  if (ERR_peek_last_error() != 0 || SSL_CTX_check_private_key(ctx) != 1)
    fail("the private key " + files.key_file + " does not belong to the certificate " +
         files.cert_file);
  if (SSL_CTX_load_verify_locations(ctx, files.ca_file.c_str(), nullptr) != 1)
    fail("cannot read the CA " + files.ca_file + " (lmcc_cluster_tls_ca_file)");
  // A node whose own certificate its CA does not sign would refuse itself,
  // and every peer would refuse it: say so at start, not per connection.
  X509* own = SSL_CTX_get0_certificate(ctx);
  tls->subject_ = subject_of(own);
  STACK_OF(X509)* chain = nullptr;
  SSL_CTX_get0_chain_certs(ctx, &chain);
  X509_STORE_CTX* check = X509_STORE_CTX_new();
  if (check == nullptr)
    fail("cannot check the certificate " + files.cert_file);
  const bool init = X509_STORE_CTX_init(check, SSL_CTX_get_cert_store(ctx), own, chain) == 1;
  const bool chains = init && X509_verify_cert(check) == 1;
  const std::string why = init ? X509_verify_cert_error_string(X509_STORE_CTX_get_error(check))
                               : std::string{"cannot check it"};
  X509_STORE_CTX_free(check);
  if (!chains)
    throw std::runtime_error("the certificate " + files.cert_file + " (" + tls->subject_ +
                             ") does not chain to the CA " + files.ca_file + ": " + why);
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, verify_callback);
  // Tell clients which CA a server takes (their certificate choice, and logs).
  if (STACK_OF(X509_NAME)* names = SSL_load_client_CA_file(files.ca_file.c_str()))
    SSL_CTX_set_client_CA_list(ctx, names);
  ERR_clear_error();
  return tls;
}

node_tls::~node_tls() {
  SSL_CTX_free(ctx_);
}

void node_tls::refused(const tls_refusal& r) const {
  if (on_refused_)
    on_refused_(r);
}

// -- tls_stream ----------------------------------------------------------------------

tls_stream::tls_stream(const node_tls& tls, int fd, role r)
  : ssl_(SSL_new(tls.context())), fd_(fd) {
  if (ssl_ == nullptr || SSL_set_fd(ssl_, fd) != 1) {
    SSL_free(ssl_);
    fail("cannot make a TLS session");
  }
  SSL_set_app_data(ssl_, this);
  if (r == role::client)
    SSL_set_connect_state(ssl_);
  else
    SSL_set_accept_state(ssl_);
}

tls_stream::~tls_stream() {
  SSL_free(ssl_);
}

tls_stream::status tls_stream::handshake() {
  if (established_)
    return status::done;
  if (refused())
    return status::failed;
  ERR_clear_error();
  const int r = SSL_do_handshake(ssl_);
  if (r == 1) {
    established_ = true;
    return status::done;
  }
  const int e = SSL_get_error(ssl_, r);
  if (e == SSL_ERROR_WANT_READ) {
    wants_ = POLLIN;
    return status::want_read;
  }
  if (e == SSL_ERROR_WANT_WRITE) {
    wants_ = POLLOUT;
    return status::want_write;
  }
  note_failure(e);
  return status::failed;
}

ssize_t tls_stream::read(void* buf, size_t len) {
  ERR_clear_error();
  const int n = SSL_read(ssl_, buf, static_cast<int>(std::min<size_t>(len, INT_MAX)));
  if (n > 0) {
    got_data_ = true;
    return n;
  }
  const int e = SSL_get_error(ssl_, n);
  if (e == SSL_ERROR_WANT_READ) {
    wants_ = POLLIN;
    return 0;
  }
  if (e == SSL_ERROR_WANT_WRITE) {
    wants_ = POLLOUT;
    return 0;
  }
  note_failure(e);
  return -1;
}

ssize_t tls_stream::write(const void* buf, size_t len) {
  ERR_clear_error();
  const int n = SSL_write(ssl_, buf, static_cast<int>(std::min<size_t>(len, INT_MAX)));
  if (n > 0)
    return n;
  const int e = SSL_get_error(ssl_, n);
  if (e == SSL_ERROR_WANT_WRITE) {
    wants_ = POLLOUT;
    return 0;
  }
  if (e == SSL_ERROR_WANT_READ) {
    wants_ = POLLIN;
    return 0;
  }
  note_failure(e);
  return -1;
}

size_t tls_stream::pending() const noexcept {
  const int n = SSL_pending(ssl_);
  return n > 0 ? static_cast<size_t>(n) : 0;
}

void tls_stream::mark_timed_out() {
  if (!established_ && failure_reason_.empty()) {
    failure_reason_ = "handshake-timeout";
    failure_detail_ = "no TLS handshake in time";
  }
}

void tls_stream::note_failure(int ssl_error) {
  // Only the handshake, or what ends a connection before any data came
  // through it, is a refusal: a peer that goes away later just left.
  const bool early = !established_ || !got_data_;
  if (!failure_reason_.empty() || !early) {
    ERR_clear_error();
    return;
  }
  if (ssl_error == SSL_ERROR_SYSCALL || ssl_error == SSL_ERROR_ZERO_RETURN) {
    ERR_clear_error();
    if (established_)
      return; // closed after a completed handshake: not a refusal
    failure_reason_ = "closed-during-handshake";
    failure_detail_ = errno != 0 && ssl_error == SSL_ERROR_SYSCALL
                          ? std::string{"connection closed: "} + std::strerror(errno)
                          : std::string{"connection closed"};
    return;
  }
  const unsigned long e = ERR_peek_last_error();
  const int reason = ERR_GET_REASON(e);
  const char* words = ERR_reason_error_string(e);
  failure_detail_ = words != nullptr ? words : drain_errors();
  if (!verify_.error.empty() || reason == SSL_R_CERTIFICATE_VERIFY_FAILED) {
    failure_reason_ = "untrusted-certificate";
    if (!verify_.error.empty())
      failure_detail_ = verify_.error;
  } else if (reason == SSL_R_PEER_DID_NOT_RETURN_A_CERTIFICATE) {
    failure_reason_ = "no-certificate";
  } else if (not_tls_reason(reason)) {
    failure_reason_ = "not-tls";
  } else if (reason >= SSL_AD_REASON_OFFSET) {
    failure_reason_ = "refused-by-peer"; // an alert: the peer refused us
  } else {
    failure_reason_ = "tls-error";
  }
  ERR_clear_error();
}

tls_refusal tls_stream::refusal() const {
  tls_refusal r;
  r.reason = failure_reason_;
  r.detail = failure_detail_;
  r.subject = verify_.subject.empty() ? peer_subject() : verify_.subject;
  return r;
}

std::string tls_stream::peer_subject() const {
  return subject_of(SSL_get0_peer_certificate(ssl_));
}

bool tls_stream::handshake_until(std::chrono::steady_clock::time_point deadline, int stop_fd) {
  while (true) {
    const status s = handshake();
    if (s == status::done)
      return true;
    if (s == status::failed)
      return false;
    while (true) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - steady_now()).count();
      if (left <= 0) {
        mark_timed_out();
        return false;
      }
      pollfd fds[2] = {{fd_, wants_, 0}, {stop_fd, POLLIN, 0}};
      const int n =
          ::poll(fds, stop_fd >= 0 ? 2 : 1, static_cast<int>(std::min<int64_t>(left, 1 << 30)));
      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0 || (stop_fd >= 0 && fds[1].revents != 0))
        return false; // shutting down: no refusal
      if (n > 0)
        break;
    }
  }
}

std::string peer_address(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0)
    return {};
  char host[INET6_ADDRSTRLEN] = {};
  if (addr.ss_family == AF_INET) {
    const auto* a = reinterpret_cast<const sockaddr_in*>(&addr);
    ::inet_ntop(AF_INET, &a->sin_addr, host, sizeof host);
    return std::string{host} + ":" + std::to_string(ntohs(a->sin_port));
  }
  if (addr.ss_family == AF_INET6) {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(&addr);
    ::inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof host);
    std::string out{"["};
    out += host;
    out += "]:";
    out += std::to_string(ntohs(a->sin6_port));
    return out;
  }
  return {};
}

} // namespace lmcc::gateway
