// Test certificates for TLS between nodes (gateway/node_tls.hpp): a CA and
// certificates it signs, made with OpenSSL's API into a temporary folder
// (EC P-256 keys: milliseconds each).
//
//   test_pki pki;                                  // a CA in a fresh temp dir
//   auto n1 = pki.issue("n1");                     // node_tls_files signed by it
//   test_pki other;                                // another CA
//   auto stranger = other.issue("n9");
//
// Context: tests only; not thread-safe.
#pragma once

#include "gateway/node_tls.hpp"

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <stdexcept>
#include <string>
#include <unistd.h>

namespace lmcc::gateway::testing {

class test_pki {
public:
  test_pki() {
    static std::atomic<int> count{0};
    dir_ = std::filesystem::temp_directory_path() /
           ("lmcc-tls-test-" + std::to_string(::getpid()) + "-" + std::to_string(count++));
    std::filesystem::create_directories(dir_);
    ca_key_ = EVP_EC_gen("P-256");
    ca_ = make_cert("lmcc test CA " + dir_.filename().string(), ca_key_, nullptr, ca_key_, true);
    ca_file_ = (dir_ / "ca.pem").string();
    write_cert(ca_file_, ca_);
  }
  ~test_pki() {
    X509_free(ca_);
    EVP_PKEY_free(ca_key_);
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  test_pki(const test_pki&) = delete;
  test_pki& operator=(const test_pki&) = delete;

  const std::string& ca_file() const { return ca_file_; }
  const std::filesystem::path& dir() const { return dir_; }

  /// A key and a certificate for `name` (its CN) signed by this CA, with
  /// this CA as the trusted one.
  node_tls_files issue(const std::string& name) {
    EVP_PKEY* key = EVP_EC_gen("P-256");
    X509* cert = make_cert(name, key, ca_, ca_key_, false);
    node_tls_files f{ca_file_, (dir_ / (name + ".pem")).string(),
                     (dir_ / (name + ".key")).string()};
    write_cert(f.cert_file, cert);
    FILE* out = std::fopen(f.key_file.c_str(), "w");
    PEM_write_PrivateKey(out, key, nullptr, nullptr, 0, nullptr, nullptr);
    std::fclose(out);
    X509_free(cert);
    EVP_PKEY_free(key);
    return f;
  }

private:
  static X509* make_cert(const std::string& cn, EVP_PKEY* key, X509* issuer, EVP_PKEY* issuer_key,
                         bool ca) {
    static std::atomic<long> serial{1};
    X509* x = X509_new();
    X509_set_version(x, 2);
    ASN1_INTEGER_set(X509_get_serialNumber(x), serial++);
    X509_gmtime_adj(X509_getm_notBefore(x), -3600);
    X509_gmtime_adj(X509_getm_notAfter(x), 86400);
    X509_set_pubkey(x, key);
    X509_NAME* name = X509_get_subject_name(x);
    X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                               reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1, 0);
    X509_set_issuer_name(x, issuer != nullptr ? X509_get_subject_name(issuer) : name);
    X509V3_CTX v3;
    X509V3_set_ctx_nodb(&v3);
    X509V3_set_ctx(&v3, issuer != nullptr ? issuer : x, x, nullptr, nullptr, 0);
    auto add = [&](int nid, const char* value) {
      X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &v3, nid, value);
      X509_add_ext(x, ext, -1);
      X509_EXTENSION_free(ext);
    };
    add(NID_basic_constraints, ca ? "critical,CA:TRUE" : "critical,CA:FALSE");
    add(NID_key_usage, ca ? "critical,keyCertSign,cRLSign" : "critical,digitalSignature");
    if (!ca)
      add(NID_ext_key_usage, "serverAuth,clientAuth");
    if (X509_sign(x, issuer_key, EVP_sha256()) == 0)
      throw std::runtime_error("test_pki: cannot sign");
    return x;
  }

  static void write_cert(const std::string& path, X509* cert) {
    FILE* out = std::fopen(path.c_str(), "w");
    PEM_write_X509(out, cert);
    std::fclose(out);
  }

  std::filesystem::path dir_;
  std::string ca_file_;
  EVP_PKEY* ca_key_ = nullptr;
  X509* ca_ = nullptr;
};

} // namespace lmcc::gateway::testing
