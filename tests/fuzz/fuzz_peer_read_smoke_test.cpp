// lmcc-fuzz-peer-read-smoke: the body of lmcc-fuzz-peer-read (fuzz_peer_read.hpp)
// under g++ in `make test`, over its seeds, its kept corpus
// (tests/fuzz/corpus/peer-read) and mutations of both drawn from a fixed seed.
#include "tests/fuzz/fuzz_peer_read.hpp"
#include "tests/fuzz/fuzz_smoke.hpp"

#include <gtest/gtest.h>

namespace {

TEST(FuzzPeerReadSmoke, SeedsAndKeptCorpusKeepEveryInvariant) {
  const auto seeds = lmcc::fuzz::peer_read_seeds();
  ASSERT_GE(seeds.size(), 10u);
  lmcc::fuzz::expect_every_input_passes(lmcc::fuzz::check_peer_read, seeds);
  lmcc::fuzz::expect_every_input_passes(lmcc::fuzz::check_peer_read,
                                        lmcc::fuzz::kept_corpus("peer-read"));
}

TEST(FuzzPeerReadSmoke, SeededMutationsKeepEveryInvariant) {
  const auto pool =
      lmcc::fuzz::joined(lmcc::fuzz::peer_read_seeds(), lmcc::fuzz::kept_corpus("peer-read"));
  lmcc::fuzz::expect_mutations_pass(lmcc::fuzz::check_peer_read, pool, 20000);
}

} // namespace
