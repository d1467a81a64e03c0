// lmcc-fuzz-http-body-smoke: the body of lmcc-fuzz-http-body (fuzz_http_body.hpp)
// under g++ in `make test`, over its seeds, its kept corpus
// (tests/fuzz/corpus/http-body) and mutations of both drawn from a fixed seed.
#include "tests/fuzz/fuzz_http_body.hpp"
#include "tests/fuzz/fuzz_smoke.hpp"

#include <gtest/gtest.h>

namespace {

TEST(FuzzHttpBodySmoke, SeedsAndKeptCorpusKeepEveryInvariant) {
  const auto seeds = lmcc::fuzz::http_body_seeds();
  ASSERT_GE(seeds.size(), 40u);
  lmcc::fuzz::expect_every_input_passes(lmcc::fuzz::check_http_body, seeds);
  lmcc::fuzz::expect_every_input_passes(lmcc::fuzz::check_http_body,
                                        lmcc::fuzz::kept_corpus("http-body"));
}

TEST(FuzzHttpBodySmoke, SeededMutationsKeepEveryInvariant) {
  const auto pool =
      lmcc::fuzz::joined(lmcc::fuzz::http_body_seeds(), lmcc::fuzz::kept_corpus("http-body"));
  lmcc::fuzz::expect_mutations_pass(lmcc::fuzz::check_http_body, pool, 50000);
}

} // namespace
