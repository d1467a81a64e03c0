// Cross-check against CPython itself: random token lists, chunk sizes and
// PYTHONHASHSEEDs, hashed by LMCC_PYTHON in child processes started with that
// seed, exactly as vLLM derives NONE_HASH (hash(os.environ["PYTHONHASHSEED"])).
//
// The random cases change on every run; the seed is printed and can be pinned
// with LMCC_TEST_SEED=<n>.
#include "messages/chunk_hash.hpp"
#include "tests/hashing/test_support.hpp"

#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace {

using lmcc::msg::chunk_hash_options;
using lmcc::msg::chunk_hasher;
using lmcc::msg::chunk_tuple_shape;
using lmcc::msg::none_hash_from_python_hash_seed;
using lmcc::msg::python_hash_latin1_str;
using lmcc::msg::token_chunk;
using lmcc::msg::wire_int;
using nlohmann::json;

// Runs in a child interpreter started with PYTHONHASHSEED set; reads one batch
// on stdin and prints its hashes as JSON.
constexpr const char* child_script = R"py(
import json, os, sys
batch = json.load(sys.stdin)
none_hash = hash(os.environ["PYTHONHASHSEED"])  # vLLM's init_none_hash
chains = []
for case in batch["cases"]:
    tokens, size, prefix, out = case["tokens"], case["chunk_size"], none_hash, []
    for start in range(0, len(tokens), size):
        chunk = tuple(tokens[start:start + size])
        prefix = hash((prefix, chunk, ()) if case["extra"] else (prefix, chunk))
        out.append([start, min(start + size, len(tokens)), prefix])
    chains.append(out)
strings = [hash("".join(map(chr, codes))) for codes in batch["strings"]]
json.dump({"seed": os.environ["PYTHONHASHSEED"], "algorithm": sys.hash_info.algorithm,
           "none_hash": none_hash, "chains": chains, "strings": strings}, sys.stdout)
)py";

// One interpreter for the whole test: starts one child per seed (the seed is
// fixed at interpreter start-up) and prints a JSON array of their results.
constexpr const char* driver_script = R"py(
import json, os, subprocess, sys
batches = json.load(open(sys.argv[1]))
child = open(sys.argv[2]).read()
results = []
for batch in batches:
    env = dict(os.environ, PYTHONHASHSEED=str(batch["seed"]))
    done = subprocess.run([sys.executable, "-S", "-c", child], input=json.dumps(batch),
                          env=env, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit("child for seed %d failed: %s" % (batch["seed"], done.stderr))
    results.append(json.loads(done.stdout))
json.dump(results, sys.stdout)
)py";

struct token_case {
  std::vector<wire_int> tokens;
  uint32_t chunk_size = 256;
  chunk_tuple_shape shape = chunk_tuple_shape::prefix_tokens_extra;
};

struct seed_batch {
  uint32_t python_hash_seed = 0;
  std::vector<token_case> cases;
  std::vector<std::string> strings; // Latin-1 bytes
};

uint64_t test_seed() {
  if (const char* pinned = std::getenv("LMCC_TEST_SEED"))
    return std::stoull(pinned);
  return std::random_device{}() * uint64_t{0x100000000} + std::random_device{}();
}

class case_generator {
public:
  explicit case_generator(uint64_t seed) : rng_(seed) {}

  wire_int token() {
    constexpr uint64_t u64_max = std::numeric_limits<uint64_t>::max();
    constexpr int64_t i64_min = std::numeric_limits<int64_t>::min();
    constexpr int64_t i64_max = std::numeric_limits<int64_t>::max();
    constexpr int64_t mersenne61 = (int64_t{1} << 61) - 1;
    int64_t jitter = static_cast<int64_t>(below(1000));
    switch (below(100)) {
    case 0:
    case 1:
      // small negatives; -1 (whose hash is -2) and -2 often
      return wire_int{-1 - (below(2) == 0 ? jitter % 2 : jitter)};
    case 2:
      return wire_int{i64_min + jitter};
    case 3:
      return wire_int{i64_max - jitter};
    case 4:
      return wire_int::from_unsigned((uint64_t{1} << 63) + static_cast<uint64_t>(jitter));
    case 5:
      return wire_int::from_unsigned(u64_max - static_cast<uint64_t>(jitter));
    case 6:
      return wire_int{mersenne61 - 500 + jitter};
    case 7:
      return wire_int::from_unsigned(rng_()); // anything unsigned
    case 8:
      return wire_int{static_cast<int64_t>(rng_() | (uint64_t{1} << 63))}; // anything negative
    default:
      return wire_int{static_cast<int64_t>(below(200000))};
    }
  }

  token_case tokens_case() {
    static constexpr std::array<uint32_t, 9> odd_sizes{1, 2, 7, 16, 100, 255, 257, 1000, 4096};
    token_case c;
    if (below(4) == 0)
      c.chunk_size = below(2) == 0 ? odd_sizes[below(odd_sizes.size())]
                                   : static_cast<uint32_t>(1 + below(600));
    static constexpr std::array<uint64_t, 9> edge_lengths{0, 1, 255, 256, 257, 511, 512, 513, 3000};
    uint64_t length = below(5) == 0 ? edge_lengths[below(edge_lengths.size())] : below(3001);
    for (uint64_t i = 0; i < length; ++i)
      c.tokens.push_back(token());
    if (below(5) == 0)
      c.shape = chunk_tuple_shape::prefix_tokens;
    return c;
  }

  // ASCII by default, any Latin-1 byte (NUL included) when `latin1`.
  std::string text(uint64_t length, bool latin1) {
    std::string out;
    for (uint64_t i = 0; i < length; ++i)
      out += static_cast<char>(latin1 ? below(256) : 32 + below(95));
    return out;
  }

  uint64_t below(uint64_t n) { return std::uniform_int_distribution<uint64_t>(0, n - 1)(rng_); }

  uint32_t any_seed() { return static_cast<uint32_t>(rng_()); }

private:
  std::mt19937_64 rng_;
};

json to_json(const seed_batch& batch) {
  json cases = json::array();
  for (const auto& c : batch.cases) {
    json tokens = json::array();
    for (const auto& t : c.tokens)
      tokens.push_back(lmcc::test::to_json(t));
    cases.push_back({{"tokens", std::move(tokens)},
                     {"chunk_size", c.chunk_size},
                     {"extra", c.shape == chunk_tuple_shape::prefix_tokens_extra}});
  }
  json strings = json::array();
  for (const auto& s : batch.strings) {
    json codes = json::array();
    for (unsigned char ch : s)
      codes.push_back(ch);
    strings.push_back(std::move(codes));
  }
  return {{"seed", batch.python_hash_seed}, {"cases", std::move(cases)}, {"strings", strings}};
}

std::string describe(const token_case& c) {
  return std::to_string(c.tokens.size()) + " tokens, chunk size " + std::to_string(c.chunk_size) +
         (c.shape == chunk_tuple_shape::prefix_tokens ? ", two-tuple shape" : "");
}

// `text` as a Python literal body, bytes outside printable ASCII escaped.
std::string escaped(const std::string& text) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string out = "'";
  for (unsigned char ch : text) {
    if (ch >= 32 && ch < 127 && ch != '\\' && ch != '\'') {
      out += static_cast<char>(ch);
    } else {
      out += "\\x";
      out += digits[ch >> 4];
      out += digits[ch & 15];
    }
  }
  return out + "' (" + std::to_string(text.size()) + " chars)";
}

TEST(python_crosscheck, chunk_chains_and_str_hashes_match_cpython_under_random_seeds) {
  if (!std::filesystem::exists(LMCC_PYTHON))
    GTEST_SKIP() << LMCC_PYTHON << " is missing; deploy/install-deps.sh installs Debian's python3";

  const uint64_t seed = test_seed();
  std::cout << "random cases from seed " << seed << " (pin with LMCC_TEST_SEED=" << seed << ")\n";
  SCOPED_TRACE("LMCC_TEST_SEED=" + std::to_string(seed));
  case_generator gen{seed};

  // 30 seeds, 0, 1 and 2^32-1 among them; one token list and a few strings each.
  // String lengths sweep SipHash's tail handling (7..9, 15..17 bytes) every run.
  static constexpr std::array<uint64_t, 10> edge_lengths{0, 1, 7, 8, 9, 15, 16, 17, 24, 40};
  std::vector<seed_batch> batches;
  for (size_t i = 0; i < 30; ++i) {
    seed_batch batch;
    batch.python_hash_seed = i == 0 ? 0U : i == 1 ? 1U : i == 2 ? 4294967295U : gen.any_seed();
    batch.cases.push_back(gen.tokens_case());
    batch.strings.push_back(gen.text(edge_lengths[i % edge_lengths.size()], false));
    batch.strings.push_back(gen.text(gen.below(41), false));
    batch.strings.push_back(gen.text(gen.below(41), true));
    batch.strings.push_back(std::to_string(batch.python_hash_seed));
    batches.push_back(std::move(batch));
  }

  json request = json::array();
  for (const auto& b : batches)
    request.push_back(to_json(b));
  lmcc::test::temp_dir dir;
  auto request_file = dir.write("request.json", request.dump());
  auto driver_file = dir.write("driver.py", driver_script);
  auto child_file = dir.write("child.py", child_script);
  auto result = lmcc::test::run_command(lmcc::test::shell_quote(LMCC_PYTHON) + " -S " +
                                        lmcc::test::shell_quote(driver_file.string()) + " " +
                                        lmcc::test::shell_quote(request_file.string()) + " " +
                                        lmcc::test::shell_quote(child_file.string()));
  ASSERT_EQ(result.exit_code, 0) << "python driver failed; output: " << result.output;
  json answers = json::parse(result.output);
  ASSERT_EQ(answers.size(), batches.size());

  size_t chunks_compared = 0;
  for (size_t i = 0; i < batches.size(); ++i) {
    const auto& batch = batches[i];
    const auto& answer = answers[i];
    SCOPED_TRACE("PYTHONHASHSEED=" + std::to_string(batch.python_hash_seed));
    ASSERT_EQ(answer.at("seed").get<std::string>(), std::to_string(batch.python_hash_seed));
    ASSERT_EQ(answer.at("algorithm").get<std::string>(), "siphash13")
        << LMCC_PYTHON << " does not use SipHash-1-3 (CPython >= 3.11 does)";

    const int64_t none_hash = none_hash_from_python_hash_seed(batch.python_hash_seed);
    EXPECT_EQ(none_hash, answer.at("none_hash").get<int64_t>());

    ASSERT_EQ(answer.at("chains").size(), batch.cases.size());
    for (size_t k = 0; k < batch.cases.size(); ++k) {
      const auto& c = batch.cases[k];
      SCOPED_TRACE(describe(c));
      auto expected = lmcc::test::to_chunks(answer.at("chains")[k]);
      chunk_hasher hasher{
          chunk_hash_options{.chunk_size = c.chunk_size, .none_hash = none_hash, .shape = c.shape}};
      EXPECT_EQ(hasher.chunks(c.tokens), expected);
      chunks_compared += expected.size();
    }

    ASSERT_EQ(answer.at("strings").size(), batch.strings.size());
    for (size_t k = 0; k < batch.strings.size(); ++k) {
      EXPECT_EQ(python_hash_latin1_str(batch.strings[k], batch.python_hash_seed),
                answer.at("strings")[k].get<int64_t>())
          << "string #" << k << ": " << escaped(batch.strings[k]);
    }
  }
  std::cout << batches.size() << " seeds, " << chunks_compared << " chunks compared\n";
}

} // namespace
