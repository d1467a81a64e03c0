// http_access: which routes need the API token and what a request without it,
// or with the wrong one, gets; where the token comes from. Pure functions.
#include "gateway/http_access.hpp"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <stdexcept>

namespace lmcc::gateway {
namespace {

const std::string token = "0123456789abcdef-the-token";

http_security with_token(bool for_reads = false) {
  http_security s;
  s.token = token;
  s.token_for_reads = for_reads;
  return s;
}

TEST(http_access, without_a_token_every_route_is_open) {
  const http_security open;
  for (auto a : {route_access::probe, route_access::read, route_access::change})
    EXPECT_FALSE(check_access(a, open, ""));
}

TEST(http_access, a_change_needs_the_bearer_token) {
  const auto s = with_token();
  auto missing = check_access(route_access::change, s, "");
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 401);
  EXPECT_EQ(missing->event, "http_token_missing");
  auto basic = check_access(route_access::change, s, "Basic " + token);
  ASSERT_TRUE(basic);
  EXPECT_EQ(basic->status, 401);
  auto wrong = check_access(route_access::change, s, "Bearer " + token + "x");
  ASSERT_TRUE(wrong);
  EXPECT_EQ(wrong->status, 403);
  EXPECT_EQ(wrong->event, "http_token_wrong");
  auto prefix = check_access(route_access::change, s, "Bearer " + token.substr(0, 8));
  ASSERT_TRUE(prefix);
  EXPECT_EQ(prefix->status, 403);
  EXPECT_FALSE(check_access(route_access::change, s, "Bearer " + token));
  EXPECT_FALSE(check_access(route_access::change, s, "  Bearer " + token + " \r"));
}

TEST(http_access, reads_are_open_unless_closed_and_probes_always_are) {
  EXPECT_FALSE(check_access(route_access::read, with_token(false), ""));
  const auto closed = with_token(true);
  EXPECT_TRUE(check_access(route_access::read, closed, ""));
  EXPECT_FALSE(check_access(route_access::read, closed, "Bearer " + token));
  EXPECT_FALSE(check_access(route_access::probe, closed, ""));
}

TEST(http_access, the_token_comes_from_the_file_first_then_the_variable) {
  http_security s;
  EXPECT_EQ(resolve_api_token(s, {}), "");
  EXPECT_EQ(resolve_api_token(s, {{"LMCC_API_TOKEN", ""}}), "");
  EXPECT_EQ(resolve_api_token(s, {{"LMCC_API_TOKEN", token + "\n"}}), token);
  s.token_env = "OTHER";
  EXPECT_EQ(resolve_api_token(s, {{"LMCC_API_TOKEN", token}}), "");
  const std::string path = ::testing::TempDir() + "/lmcc-api-token";
  {
    std::ofstream out(path);
    out << "file-token-0123456789\n";
  }
  s.token_file = path;
  EXPECT_EQ(resolve_api_token(s, {{"OTHER", token}}), "file-token-0123456789");
  std::remove(path.c_str());
  EXPECT_THROW(resolve_api_token(s, {}), std::invalid_argument);
  s.token_file.clear();
  EXPECT_THROW(resolve_api_token(s, {{"OTHER", "short"}}), std::invalid_argument);
}

} // namespace
} // namespace lmcc::gateway
