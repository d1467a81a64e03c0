// lmcc-fuzz-decode-smoke: the libFuzzer body (fuzz_body.hpp) without libFuzzer,
// so that `make test` runs it under g++ (and `make test-asan` under ASan+UBSan).
// Inputs: every vector of shared/conformance/wire-golden.jsonl (its msgpack, its
// canonical re-encoding and its JSON form as a JSON frame), then a few thousand
// mutations of them drawn from a fixed seed, so failures reproduce.
#include "messages/codec_json.hpp"
#include "tests/fuzz/fuzz_body.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cstdint>
#include <fstream>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

constexpr const char* golden_path = LMCC_SHARED_DIR "/conformance/wire-golden.jsonl";
constexpr int mutation_count = 5000;
constexpr uint64_t mutation_seed = 0x6c6d6363'00000001; // "lmcc", 1

std::string from_hex(const std::string& text) {
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9')
      return c - '0';
    if (c >= 'a' && c <= 'f')
      return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
      return c - 'A' + 10;
    return -1;
  };
  std::string out;
  for (size_t i = 0; i + 1 < text.size(); i += 2) {
    int hi = nibble(text[i]);
    int lo = nibble(text[i + 1]);
    if (hi < 0 || lo < 0)
      throw std::runtime_error("bad hex in " + std::string(golden_path));
    out += static_cast<char>(hi * 16 + lo);
  }
  return out;
}

std::string to_hex(const std::string& bytes) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out += digits[c >> 4];
    out += digits[c & 15];
  }
  return out;
}

/// Every frame the seed corpus holds (the same set seed-corpus.sh writes).
std::vector<std::string> golden_frames() {
  std::ifstream in{golden_path};
  if (!in)
    throw std::runtime_error("cannot open " + std::string(golden_path));
  std::vector<std::string> frames;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty())
      continue;
    auto vec = nlohmann::json::parse(line);
    for (const char* field : {"msgpack", "canonical"})
      if (vec.contains(field))
        frames.push_back(from_hex(vec[field].get<std::string>()));
    if (vec.contains("json"))
      frames.push_back(vec["json"].dump());
  }
  return frames;
}

/// One libFuzzer-style mutation: flip, overwrite, insert, erase, duplicate,
/// truncate or splice in a piece of another frame.
class mutator {
public:
  explicit mutator(const std::vector<std::string>& pool) : pool_(pool), rng_(mutation_seed) {}

  std::string next() {
    std::string s = pool_[pick(pool_.size())];
    int rounds = 1 + static_cast<int>(pick(4));
    for (int i = 0; i < rounds; ++i)
      mutate(s);
    return s;
  }

private:
  size_t pick(size_t n) {
    return n == 0 ? 0 : std::uniform_int_distribution<size_t>{0, n - 1}(rng_);
  }

  void mutate(std::string& s) {
    // Bytes msgpack and JSON treat specially: headers, nil/bool, ext, quotes.
    static constexpr std::array<unsigned char, 24> interesting = {
        0x00, 0x01, 0x7f, 0x80, 0x8f, 0x90, 0x9f, 0xa0, 0xbf, 0xc0, 0xc1, 0xc2,
        0xc4, 0xca, 0xcb, 0xcf, 0xd3, 0xd9, 0xdc, 0xdd, 0xde, 0xdf, 0xff, '"'};
    switch (pick(8)) {
    case 0:
      if (!s.empty())
        s[pick(s.size())] ^= static_cast<char>(1u << pick(8));
      break;
    case 1:
      if (!s.empty())
        s[pick(s.size())] = static_cast<char>(interesting[pick(interesting.size())]);
      break;
    case 2:
      s.insert(s.begin() + pick(s.size() + 1), static_cast<char>(pick(256)));
      break;
    case 3:
      if (!s.empty()) {
        size_t at = pick(s.size());
        s.erase(at, 1 + pick(std::min<size_t>(8, s.size() - at)));
      }
      break;
    case 4:
      if (!s.empty()) {
        size_t at = pick(s.size());
        std::string piece = s.substr(at, 1 + pick(16));
        s.insert(pick(s.size() + 1), piece);
      }
      break;
    case 5:
      s.resize(pick(s.size() + 1));
      break;
    case 6: {
      const std::string& other = pool_[pick(pool_.size())];
      if (!other.empty()) {
        size_t at = pick(other.size());
        s.insert(pick(s.size() + 1), other.substr(at, 1 + pick(32)));
      }
      break;
    }
    default:
      if (!s.empty())
        s[pick(s.size())] = static_cast<char>(pick(256));
      break;
    }
  }

  const std::vector<std::string>& pool_;
  std::mt19937_64 rng_;
};

TEST(FuzzDecodeSmoke, GoldenVectorsKeepEveryInvariant) {
  auto frames = golden_frames();
  ASSERT_GE(frames.size(), 200u) << "too few vectors read from " << golden_path;
  size_t decoded = 0;
  for (const auto& frame : frames) {
    EXPECT_EQ(lmcc::fuzz::check_decode(frame), "") << "frame: " << to_hex(frame);
    decoded += lmcc::msg::decode_frame(frame).has_value() ? 1 : 0;
  }
  // The corpus is mostly valid messages; if none decode the body tests nothing.
  EXPECT_GT(decoded, frames.size() / 2);
}

TEST(FuzzDecodeSmoke, SeededMutationsKeepEveryInvariant) {
  auto frames = golden_frames();
  ASSERT_FALSE(frames.empty());
  mutator gen{frames};
  int failures = 0;
  for (int i = 0; i < mutation_count && failures < 5; ++i) {
    std::string frame = gen.next();
    std::string why = lmcc::fuzz::check_decode(frame);
    if (!why.empty()) {
      ++failures;
      ADD_FAILURE() << "mutation " << i << ": " << why << "\nframe: " << to_hex(frame);
    }
  }
}

} // namespace
