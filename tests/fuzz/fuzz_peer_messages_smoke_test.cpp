// lmcc-fuzz-peer-messages-smoke: the body of lmcc-fuzz-peer-messages
// (fuzz_peer_messages.hpp) under g++ in `make test`, over its seeds, its kept
// corpus (tests/fuzz/corpus/peer-messages) and mutations of both drawn from a
// fixed seed.
#include "tests/fuzz/fuzz_peer_messages.hpp"
#include "tests/fuzz/fuzz_smoke.hpp"

#include <gtest/gtest.h>

namespace {

TEST(FuzzPeerMessagesSmoke, SeedsAndKeptCorpusKeepEveryInvariant) {
  const auto seeds = lmcc::fuzz::peer_message_seeds();
  ASSERT_GE(seeds.size(), 40u);
  lmcc::fuzz::expect_every_input_passes(lmcc::fuzz::check_peer_message, seeds);
  lmcc::fuzz::expect_every_input_passes(lmcc::fuzz::check_peer_message,
                                        lmcc::fuzz::kept_corpus("peer-messages"));
}

TEST(FuzzPeerMessagesSmoke, SeededMutationsKeepEveryInvariant) {
  const auto pool = lmcc::fuzz::joined(lmcc::fuzz::peer_message_seeds(),
                                       lmcc::fuzz::kept_corpus("peer-messages"));
  lmcc::fuzz::expect_mutations_pass(lmcc::fuzz::check_peer_message, pool, 50000);
}

} // namespace
