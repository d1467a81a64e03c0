// handshake: the MAC is HMAC-SHA256 over the role, both ids and both nonces,
// length-prefixed, as 64 lowercase hex digits, and every field changes it;
// mac_equal compares exactly; resolve_secret reads the file, else the
// variable, trims trailing whitespace and refuses secrets under 16 bytes.
// The known answers were computed with `openssl dgst -sha256 -hmac`, not with
// the code under test.
#include "cluster/handshake.hpp"

#if defined(CAF_VERSION)
#error "cluster/handshake pulls in CAF"
#endif

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <unistd.h>

namespace lmcc::cluster {
namespace {

const std::string secret = "0123456789abcdef-secret";

std::string join_mac(std::string_view key = secret, std::string_view client = "n2",
                     std::string_view server = "n1", uint64_t cn = 7, uint64_t sn = 9) {
  return handshake_mac(key, handshake_role::join, client, server, cn, sn);
}

// -- handshake_mac -------------------------------------------------------------------------

// printf '%s' 'lmcc-join2:n22:n11:71:9' | openssl dgst -sha256 -hmac '0123456789abcdef-secret'
TEST(handshake, mac_matches_hmac_sha256_of_the_length_prefixed_fields) {
  EXPECT_EQ(join_mac(), "e37b3a9b2cae165d7680517f1dbb71bff209561250a44fedb524612a6e19a485");
  // 'lmcc-accept2:n22:n12:4220:18446744073709551615'
  EXPECT_EQ(handshake_mac(secret, handshake_role::accept, "n2", "n1", 42, UINT64_MAX),
            "8ca8bc8878e8c52802ca3430c7fad2f3278b7edbbf2b0511d817ca250445b77e");
}

TEST(handshake, mac_is_64_lowercase_hex_digits) {
  for (const std::string& mac :
       {join_mac(), join_mac("another secret, long enough", "a", "b", 0, 0),
        handshake_mac("", handshake_role::accept, "", "", UINT64_MAX, 1)}) {
    ASSERT_EQ(mac.size(), 64u) << mac;
    for (char c : mac)
      EXPECT_TRUE((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')) << mac;
  }
}

TEST(handshake, mac_is_deterministic) {
  EXPECT_EQ(join_mac(), join_mac());
  EXPECT_EQ(handshake_mac(secret, handshake_role::accept, "x", "y", 1, 2),
            handshake_mac(secret, handshake_role::accept, "x", "y", 1, 2));
}

TEST(handshake, mac_changes_with_every_field) {
  const std::string base = join_mac();
  std::set<std::string> macs{
      base,
      handshake_mac(secret, handshake_role::accept, "n2", "n1", 7, 9), // role
      join_mac(secret, "n3", "n1", 7, 9),                              // client id
      join_mac(secret, "n2", "n3", 7, 9),                              // server id
      join_mac(secret, "n1", "n2", 7, 9),                              // ids swapped
      join_mac(secret, "n2", "n1", 8, 9),                              // client nonce
      join_mac(secret, "n2", "n1", 7, 10),                             // server nonce
      join_mac(secret, "n2", "n1", 9, 7),                              // nonces swapped
      join_mac("0123456789abcdef-secreT", "n2", "n1", 7, 9),           // secret
      join_mac("0123456789abcdef-secret ", "n2", "n1", 7, 9),          // secret, longer
  };
  EXPECT_EQ(macs.size(), 10u);
}

TEST(handshake, length_prefixes_keep_field_boundaries_apart) {
  EXPECT_NE(join_mac(secret, "ab", "c"), join_mac(secret, "a", "bc"));
  EXPECT_NE(join_mac(secret, "", "abc"), join_mac(secret, "abc", ""));
  // Nonces are fields too: (12, 3) and (1, 23) read the same undelimited.
  EXPECT_NE(join_mac(secret, "n2", "n1", 12, 3), join_mac(secret, "n2", "n1", 1, 23));
  // A nonce cannot be smuggled in as id text.
  EXPECT_NE(join_mac(secret, "n2", "n17", 9, 1), join_mac(secret, "n2", "n1", 79, 1));
}

// -- mac_equal -----------------------------------------------------------------------------

TEST(handshake, mac_equal_compares_exactly) {
  const std::string mac = join_mac();
  EXPECT_TRUE(mac_equal(mac, mac));
  EXPECT_TRUE(mac_equal(mac, std::string(mac)));
  EXPECT_TRUE(mac_equal("", ""));

  std::string last = mac;
  last.back() = last.back() == '0' ? '1' : '0';
  EXPECT_FALSE(mac_equal(mac, last));
  std::string first = mac;
  first.front() = first.front() == '0' ? '1' : '0';
  EXPECT_FALSE(mac_equal(mac, first));
  EXPECT_FALSE(mac_equal(mac, join_mac(secret, "n2", "n1", 7, 10)));
}

TEST(handshake, mac_equal_is_false_for_different_lengths) {
  const std::string mac = join_mac();
  EXPECT_FALSE(mac_equal(mac, mac.substr(0, 63)));
  EXPECT_FALSE(mac_equal(mac.substr(0, 63), mac));
  EXPECT_FALSE(mac_equal(mac, mac + "0"));
  EXPECT_FALSE(mac_equal(mac, ""));
  EXPECT_FALSE(mac_equal("", mac));
  // A view that is a prefix of the other over the same bytes: only the length
  // tells them apart.
  const std::string_view whole = mac;
  EXPECT_FALSE(mac_equal(whole, whole.substr(0, 32)));
  EXPECT_FALSE(mac_equal(whole.substr(0, 32), whole));
}

// -- resolve_secret ------------------------------------------------------------------------

// A file under the temp directory, removed when the test ends.
class secret_file {
public:
  explicit secret_file(const std::string& contents)
    : path_(std::filesystem::temp_directory_path() /
            ("lmcc_handshake_test_" + std::to_string(::getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name())) {
    std::ofstream out(path_, std::ios::binary);
    out << contents;
  }
  ~secret_file() {
    std::error_code ec;
    std::filesystem::remove(path_, ec);
  }
  secret_file(const secret_file&) = delete;
  secret_file& operator=(const secret_file&) = delete;

  std::string path() const { return path_.string(); }

private:
  std::filesystem::path path_;
};

using env = std::map<std::string, std::string>;

cluster_options from_file(const std::string& path) {
  cluster_options opts;
  opts.secret_file = path;
  return opts;
}

bool mentions(const error& e, const std::string& what) {
  return e.message.find(what) != std::string::npos;
}

TEST(handshake, secret_from_a_file_with_its_trailing_newline_trimmed) {
  const secret_file f("0123456789abcdef-from-file\n");
  expected<std::string> s = resolve_secret(from_file(f.path()), {});
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(*s, "0123456789abcdef-from-file");
}

TEST(handshake, secret_trims_trailing_whitespace_only) {
  const secret_file f("  0123456789abcdef \t inner\r\n \t\n");
  expected<std::string> s = resolve_secret(from_file(f.path()), {});
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(*s, "  0123456789abcdef \t inner");
}

TEST(handshake, a_missing_file_is_an_error_naming_the_file) {
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("lmcc_handshake_test_missing_" + std::to_string(::getpid())))
                               .string();
  expected<std::string> s = resolve_secret(from_file(path), {});
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().code, errc::no_secret);
  EXPECT_TRUE(mentions(s.error(), path)) << s.error().message;
}

TEST(handshake, a_configured_file_does_not_fall_back_to_the_variable) {
  // Asked for a file that is missing, the node refuses rather than quietly
  // using a secret from somewhere else.
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("lmcc_handshake_test_missing_" + std::to_string(::getpid())))
                               .string();
  expected<std::string> s =
      resolve_secret(from_file(path), env{{"LMCC_CLUSTER_SECRET", "0123456789abcdef-env"}});
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().code, errc::no_secret);
}

TEST(handshake, secret_from_the_default_variable) {
  expected<std::string> s =
      resolve_secret(cluster_options{}, env{{"LMCC_CLUSTER_SECRET", "0123456789abcdef-env\n"},
                                            {"OTHER", "not this one at all"}});
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(*s, "0123456789abcdef-env");
}

TEST(handshake, secret_from_a_named_variable) {
  cluster_options opts;
  opts.secret_env = "MY_SECRET";
  expected<std::string> s =
      resolve_secret(opts, env{{"MY_SECRET", "0123456789abcdef-mine"},
                               {"LMCC_CLUSTER_SECRET", "0123456789abcdef-default"}});
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(*s, "0123456789abcdef-mine");
}

TEST(handshake, a_missing_variable_is_an_error_naming_it) {
  cluster_options opts;
  opts.secret_env = "MY_SECRET";
  expected<std::string> s =
      resolve_secret(opts, env{{"LMCC_CLUSTER_SECRET", "0123456789abcdef-default"}});
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().code, errc::no_secret);
  EXPECT_TRUE(mentions(s.error(), "MY_SECRET")) << s.error().message;

  expected<std::string> empty = resolve_secret(opts, env{{"MY_SECRET", ""}});
  ASSERT_FALSE(empty);
  EXPECT_EQ(empty.error().code, errc::no_secret);
}

TEST(handshake, a_secret_under_16_bytes_is_refused) {
  const std::string fifteen = "0123456789abcde";
  const std::string sixteen = "0123456789abcdef";

  expected<std::string> short_env =
      resolve_secret(cluster_options{}, env{{"LMCC_CLUSTER_SECRET", fifteen}});
  ASSERT_FALSE(short_env);
  EXPECT_EQ(short_env.error().code, errc::no_secret);
  EXPECT_TRUE(mentions(short_env.error(), "LMCC_CLUSTER_SECRET")) << short_env.error().message;

  expected<std::string> ok =
      resolve_secret(cluster_options{}, env{{"LMCC_CLUSTER_SECRET", sixteen}});
  ASSERT_TRUE(ok) << ok.error().message;
  EXPECT_EQ(*ok, sixteen);

  const secret_file f(fifteen + "\n");
  expected<std::string> short_file = resolve_secret(from_file(f.path()), {});
  ASSERT_FALSE(short_file);
  EXPECT_EQ(short_file.error().code, errc::no_secret);
  EXPECT_TRUE(mentions(short_file.error(), f.path())) << short_file.error().message;
}

TEST(handshake, the_length_is_counted_after_trimming) {
  // 20 bytes, but 15 once the trailing whitespace is gone.
  expected<std::string> s =
      resolve_secret(cluster_options{},
                     env{{"LMCC_CLUSTER_SECRET", std::string("0123456789abcde") + " \t\r\n\n"}});
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().code, errc::no_secret);

  const secret_file blank("\n\n   \n");
  expected<std::string> b = resolve_secret(from_file(blank.path()), {});
  ASSERT_FALSE(b);
  EXPECT_EQ(b.error().code, errc::no_secret);
}

TEST(handshake, the_file_takes_precedence_over_the_variable) {
  const secret_file f("0123456789abcdef-from-file\n");
  expected<std::string> s = resolve_secret(
      from_file(f.path()), env{{"LMCC_CLUSTER_SECRET", "0123456789abcdef-from-env"}});
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(*s, "0123456789abcdef-from-file");
}

} // namespace
} // namespace lmcc::cluster
