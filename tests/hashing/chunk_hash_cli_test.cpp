// `lmcc chunk-hashes` as a child process: one output line per input line,
// checked against the CPython vectors of token-hash.jsonl.
#include "tests/hashing/test_support.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace {

using nlohmann::json;

const std::string lmcc_binary = LMCC_BINARY_DIR "/lmcc";

// Spec 4.4.1: hash("0") under PYTHONHASHSEED=0 and hash("123") under 123.
constexpr int64_t none_hash_seed_0 = 5313149338359954478;
constexpr int64_t none_hash_seed_123 = -6197052367682486848;

struct cli_run {
  int exit_code = -1;
  std::vector<std::string> lines;
};

cli_run run_chunk_hashes(const std::string& args, const std::vector<std::string>& input) {
  lmcc::test::temp_dir dir;
  std::string text;
  for (const auto& line : input)
    text += line + '\n';
  auto in = dir.write("input.txt", text);
  auto result = lmcc::test::run_command(lmcc::test::shell_quote(lmcc_binary) + " chunk-hashes " +
                                        args + " < " + lmcc::test::shell_quote(in.string()));
  return {result.exit_code, lmcc::test::split_lines(result.output)};
}

class chunk_hashes_cli : public testing::Test {
protected:
  void SetUp() override {
    ASSERT_TRUE(std::filesystem::exists(lmcc_binary)) << lmcc_binary << " is not built";
    vectors_ = lmcc::test::load_token_hash_vectors();
    ASSERT_EQ(vectors_.size(), 27u) << lmcc::test::token_hash_path;
  }

  const json& vector_with_none_hash(int64_t none_hash) const {
    for (const auto& v : vectors_)
      if (v.at("none_hash").get<int64_t>() == none_hash && !v.at("tokens").empty())
        return v;
    throw std::runtime_error("no vector with none_hash " + std::to_string(none_hash));
  }

  std::vector<json> vectors_;
};

TEST_F(chunk_hashes_cli, answers_every_zero_none_hash_vector_line_by_line) {
  std::vector<std::string> input;
  std::vector<json> expected;
  for (const auto& v : vectors_) {
    if (v.at("none_hash").get<int64_t>() != 0)
      continue;
    input.push_back(v.at("tokens").dump());
    expected.push_back(v.at("hashes"));
  }
  ASSERT_GE(input.size(), 15u);
  auto run = run_chunk_hashes("", input);
  ASSERT_EQ(run.exit_code, 0);
  ASSERT_EQ(run.lines.size(), input.size());
  for (size_t i = 0; i < input.size(); ++i)
    EXPECT_EQ(json::parse(run.lines[i]), expected[i]) << "input line " << i + 1;
}

TEST_F(chunk_hashes_cli, starts_the_chain_at_the_none_hash_option) {
  std::map<int64_t, std::vector<const json*>> by_none_hash;
  for (const auto& v : vectors_)
    if (v.at("none_hash").get<int64_t>() != 0)
      by_none_hash[v.at("none_hash").get<int64_t>()].push_back(&v);
  ASSERT_GE(by_none_hash.size(), 8u);
  for (const auto& [none_hash, group] : by_none_hash) {
    std::vector<std::string> input;
    for (const json* v : group)
      input.push_back(v->at("tokens").dump());
    auto run = run_chunk_hashes("--none-hash " + std::to_string(none_hash), input);
    ASSERT_EQ(run.exit_code, 0) << "--none-hash " << none_hash;
    ASSERT_EQ(run.lines.size(), input.size()) << "--none-hash " << none_hash;
    for (size_t i = 0; i < group.size(); ++i)
      EXPECT_EQ(json::parse(run.lines[i]), group[i]->at("hashes")) << "--none-hash " << none_hash;
  }
}

TEST_F(chunk_hashes_cli, derives_the_none_hash_from_python_hash_seed_like_vllm) {
  for (auto [seed, none_hash] :
       {std::pair{0, none_hash_seed_0}, std::pair{123, none_hash_seed_123}}) {
    const json& v = vector_with_none_hash(none_hash);
    auto run =
        run_chunk_hashes("--python-hash-seed " + std::to_string(seed), {v.at("tokens").dump()});
    ASSERT_EQ(run.exit_code, 0) << "--python-hash-seed " << seed;
    ASSERT_EQ(run.lines.size(), 1u);
    EXPECT_EQ(json::parse(run.lines[0]), v.at("hashes")) << "--python-hash-seed " << seed;
  }
}

TEST_F(chunk_hashes_cli, answers_malformed_lines_with_an_error_and_keeps_going) {
  const json& first = vectors_.at(0);    // tokens 0..599
  const json& extreme = vectors_.at(10); // -2, 2^61-1, 2^64-1, ...
  ASSERT_EQ(first.at("none_hash").get<int64_t>(), 0);
  ASSERT_EQ(extreme.at("none_hash").get<int64_t>(), 0);
  std::vector<std::string> input{
      "this is not json",        first.at("tokens").dump(),
      "[1, \"two\", 3]",         extreme.at("tokens").dump(),
      "{\"tokens\": [1, 2]}",    "[1.5]",
      "[18446744073709551616]",  "[1, 2",
      first.at("tokens").dump(),
  };
  auto run = run_chunk_hashes("", input);
  ASSERT_EQ(run.exit_code, 0);
  ASSERT_EQ(run.lines.size(), input.size());
  for (size_t i : {0u, 2u, 4u, 5u, 6u, 7u}) {
    json answer = json::parse(run.lines[i], nullptr, false);
    ASSERT_TRUE(answer.is_object()) << "input " << input[i] << " gave " << run.lines[i];
    EXPECT_TRUE(answer.contains("error")) << "input " << input[i] << " gave " << run.lines[i];
    EXPECT_TRUE(answer["error"].is_string()) << run.lines[i];
  }
  EXPECT_EQ(json::parse(run.lines[1]), first.at("hashes"));
  EXPECT_EQ(json::parse(run.lines[3]), extreme.at("hashes"));
  EXPECT_EQ(json::parse(run.lines[8]), first.at("hashes"));
}

TEST_F(chunk_hashes_cli, an_empty_token_list_gives_an_empty_array) {
  auto run = run_chunk_hashes("", {"[]", "  [ ]  "});
  ASSERT_EQ(run.exit_code, 0);
  ASSERT_EQ(run.lines.size(), 2u);
  EXPECT_EQ(json::parse(run.lines[0]), json::array());
  EXPECT_EQ(json::parse(run.lines[1]), json::array());
}

TEST_F(chunk_hashes_cli, splits_by_the_chunk_size_option) {
  // A list no longer than the chunk size is one chunk, so single-chunk vectors
  // hold for any chunk size at least as long as the list.
  size_t checked = 0;
  for (const auto& v : vectors_) {
    if (v.at("none_hash").get<int64_t>() != 0 || v.at("hashes").size() != 1)
      continue;
    for (size_t size : {v.at("tokens").size(), size_t{257}, size_t{4096}}) {
      auto run = run_chunk_hashes("--chunk-size " + std::to_string(size), {v.at("tokens").dump()});
      ASSERT_EQ(run.exit_code, 0);
      ASSERT_EQ(run.lines.size(), 1u);
      EXPECT_EQ(json::parse(run.lines[0]), v.at("hashes")) << "--chunk-size " << size;
    }
    ++checked;
  }
  EXPECT_GE(checked, 6u);

  // Multi-chunk splits, expected values printed by CPython 3.11 for tokens 0..599:
  // chunk size 100 (see chunk_hash_test.cpp for the generator).
  json tokens = json::array();
  for (int i = 0; i < 600; ++i)
    tokens.push_back(i);
  auto run = run_chunk_hashes("--chunk-size 100", {tokens.dump()});
  ASSERT_EQ(run.exit_code, 0);
  ASSERT_EQ(run.lines.size(), 1u);
  EXPECT_EQ(json::parse(run.lines[0]), json::parse(R"([[0, 100, -211972067194618715],
      [100, 200, 4020936084537658233], [200, 300, -7451172961840487286],
      [300, 400, -8212961398709427913], [400, 500, 6445439969525197499],
      [500, 600, -6629815895086673298]])"));
}

TEST_F(chunk_hashes_cli, rejects_a_zero_chunk_size_and_conflicting_none_hash_options) {
  EXPECT_NE(run_chunk_hashes("--chunk-size 0 2>/dev/null", {"[1]"}).exit_code, 0);
  EXPECT_NE(run_chunk_hashes("--none-hash 5 --python-hash-seed 1 2>/dev/null", {"[1]"}).exit_code,
            0);
}

} // namespace
