// fuzz_smoke: what the g++ smoke tests of the fuzz targets share. Each target's
// smoke test runs its fuzz body (the function its libFuzzer binary calls) over
// the target's kept corpus (tests/fuzz/corpus/<name>), its seeds made from
// real encodings, and a few thousand libFuzzer-style mutations of both drawn
// from a fixed seed, so that `make test` runs every body and a failure
// reproduces.
//
//   auto inputs = lmcc::fuzz::kept_corpus("json");
//   lmcc::fuzz::expect_every_input_passes(check_json, inputs);
//   lmcc::fuzz::expect_mutations_pass(check_json, inputs, 5000);
//
// Context: test-only, header-only; needs LMCC_FUZZ_CORPUS_DIR (tests/fuzz/CMakeLists.txt).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <random>
#include <string>
#include <string_view>
#include <vector>

namespace lmcc::fuzz {

/// A fuzz body: "" when every invariant holds for the input, else what broke.
using check_fn = std::function<std::string(std::string_view)>;

/// Every file of tests/fuzz/corpus/<target>, in name order.
inline std::vector<std::string> kept_corpus(std::string_view target) {
  const std::filesystem::path dir = std::filesystem::path{LMCC_FUZZ_CORPUS_DIR} / target;
  std::vector<std::filesystem::path> files;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator{dir, ec})
    if (entry.is_regular_file())
      files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  std::vector<std::string> inputs;
  for (const auto& file : files) {
    std::ifstream in{file, std::ios::binary};
    inputs.emplace_back(std::istreambuf_iterator<char>{in}, std::istreambuf_iterator<char>{});
  }
  return inputs;
}

inline std::string to_hex(std::string_view bytes, size_t most = 256) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < bytes.size() && i < most; ++i) {
    out += digits[static_cast<unsigned char>(bytes[i]) >> 4];
    out += digits[static_cast<unsigned char>(bytes[i]) & 15];
  }
  if (bytes.size() > most)
    out += "...";
  return out;
}

/// One libFuzzer-style mutation at a time: flip, overwrite, insert, erase,
/// duplicate, truncate or splice in a piece of another input.
class mutator {
public:
  mutator(const std::vector<std::string>& pool, uint64_t seed) : pool_(pool), rng_(seed) {}

  std::string next() {
    std::string s = pool_.empty() ? std::string{} : pool_[pick(pool_.size())];
    const int rounds = 1 + static_cast<int>(pick(4));
    for (int i = 0; i < rounds; ++i)
      mutate(s);
    return s;
  }

private:
  size_t pick(size_t n) {
    return n == 0 ? 0 : std::uniform_int_distribution<size_t>{0, n - 1}(rng_);
  }

  void mutate(std::string& s) {
    // Bytes msgpack, JSON and length fields treat specially.
    static constexpr std::array<unsigned char, 28> interesting = {
        0x00, 0x01, 0x7f, 0x80, 0x8f, 0x90, 0x9f, 0xa0, 0xbf, 0xc0, 0xc1, 0xc2, 0xc4, 0xca,
        0xcb, 0xcf, 0xd3, 0xd9, 0xdc, 0xdd, 0xde, 0xdf, 0xff, '"',  '[',  '{',  ',',  '\\'};
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
      s.insert(s.begin() + static_cast<std::ptrdiff_t>(pick(s.size() + 1)),
               static_cast<char>(pick(256)));
      break;
    case 3:
      if (!s.empty()) {
        const size_t at = pick(s.size());
        s.erase(at, 1 + pick(std::min<size_t>(8, s.size() - at)));
      }
      break;
    case 4:
      if (!s.empty()) {
        const size_t at = pick(s.size());
        const std::string piece = s.substr(at, 1 + pick(16));
        s.insert(pick(s.size() + 1), piece);
      }
      break;
    case 5:
      s.resize(pick(s.size() + 1));
      break;
    case 6:
      if (!pool_.empty()) {
        const std::string& other = pool_[pick(pool_.size())];
        if (!other.empty())
          s.insert(pick(s.size() + 1), other.substr(pick(other.size()), 1 + pick(32)));
      }
      break;
    default:
      if (!s.empty())
        s[pick(s.size())] = static_cast<char>(pick(256));
      break;
    }
  }

  const std::vector<std::string>& pool_;
  std::mt19937_64 rng_;
};

/// Runs `check` on every input; each broken invariant is a test failure.
inline void expect_every_input_passes(const check_fn& check,
                                      const std::vector<std::string>& inputs) {
  for (size_t i = 0; i < inputs.size(); ++i) {
    const std::string why = check(inputs[i]);
    EXPECT_EQ(why, "") << "input " << i << ": " << to_hex(inputs[i]);
  }
}

/// Runs `check` on `count` mutations of `pool`; stops after five failures.
inline void expect_mutations_pass(const check_fn& check, const std::vector<std::string>& pool,
                                  int count, uint64_t seed = 0x6c6d6363'00000001) {
  mutator gen{pool, seed};
  int failures = 0;
  for (int i = 0; i < count && failures < 5; ++i) {
    const std::string input = gen.next();
    const std::string why = check(input);
    if (!why.empty()) {
      ++failures;
      ADD_FAILURE() << "mutation " << i << ": " << why << "\ninput: " << to_hex(input);
    }
  }
}

/// The pool mutations start from: the kept corpus and the seeds together.
inline std::vector<std::string> joined(std::vector<std::string> a,
                                       const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

} // namespace lmcc::fuzz
