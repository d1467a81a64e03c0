// lmcc-fuzz-json-smoke: the body of lmcc-fuzz-json (fuzz_json.hpp) under g++ in
// `make test`, over its seeds, its kept corpus (tests/fuzz/corpus/json) and
// mutations of both drawn from a fixed seed.
#include "tests/fuzz/fuzz_json.hpp"
#include "tests/fuzz/fuzz_smoke.hpp"

#include <gtest/gtest.h>

namespace {

constexpr const char* golden_path = LMCC_SHARED_DIR "/conformance/wire-golden.jsonl";

TEST(FuzzJsonSmoke, SeedsAndKeptCorpusKeepEveryInvariant) {
  const auto seeds = lmcc::fuzz::json_seeds(golden_path);
  ASSERT_GE(seeds.size(), 150u) << "too few JSON texts made from " << golden_path;
  lmcc::fuzz::expect_every_input_passes(lmcc::fuzz::check_json, seeds);
  lmcc::fuzz::expect_every_input_passes(lmcc::fuzz::check_json, lmcc::fuzz::kept_corpus("json"));
}

TEST(FuzzJsonSmoke, SeededMutationsKeepEveryInvariant) {
  const auto pool =
      lmcc::fuzz::joined(lmcc::fuzz::json_seeds(golden_path), lmcc::fuzz::kept_corpus("json"));
  lmcc::fuzz::expect_mutations_pass(lmcc::fuzz::check_json, pool, 20000);
}

} // namespace
