// lmcc-fuzz-decode-smoke: the libFuzzer body (fuzz_decode.hpp) without libFuzzer,
// so that `make test` runs it under g++ (and `make test-asan` under ASan+UBSan).
// Inputs: every vector of shared/conformance/wire-golden.jsonl (its msgpack, its
// canonical re-encoding and its JSON form as a JSON frame), the kept corpus
// (tests/fuzz/corpus/decode), then a few thousand mutations of both drawn from
// a fixed seed, so failures reproduce.
#include "messages/codec_json.hpp"
#include "tests/fuzz/fuzz_decode.hpp"
#include "tests/fuzz/fuzz_smoke.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace {

constexpr const char* golden_path = LMCC_SHARED_DIR "/conformance/wire-golden.jsonl";

TEST(FuzzDecodeSmoke, GoldenVectorsKeepEveryInvariant) {
  auto frames = lmcc::fuzz::decode_seeds(golden_path);
  ASSERT_GE(frames.size(), 200u) << "too few vectors read from " << golden_path;
  size_t decoded = 0;
  for (const auto& frame : frames) {
    EXPECT_EQ(lmcc::fuzz::check_decode(frame), "") << "frame: " << lmcc::fuzz::to_hex(frame);
    decoded += lmcc::msg::decode_frame(frame).has_value() ? 1 : 0;
  }
  // The corpus is mostly valid messages; if none decode the body tests nothing.
  EXPECT_GT(decoded, frames.size() / 2);
}

TEST(FuzzDecodeSmoke, KeptCorpusKeepsEveryInvariant) {
  lmcc::fuzz::expect_every_input_passes(lmcc::fuzz::check_decode,
                                        lmcc::fuzz::kept_corpus("decode"));
}

TEST(FuzzDecodeSmoke, SeededMutationsKeepEveryInvariant) {
  const auto pool =
      lmcc::fuzz::joined(lmcc::fuzz::decode_seeds(golden_path), lmcc::fuzz::kept_corpus("decode"));
  ASSERT_FALSE(pool.empty());
  lmcc::fuzz::expect_mutations_pass(lmcc::fuzz::check_decode, pool, 20000);
}

} // namespace
