// decode_msgpack against the decoder it replaced (reference_msgpack_decoder.hpp),
// frame by frame: the same accept/reject decision, the same error text, and
// the same decoded message (compared through its canonical encoding, which
// also tells -0.0 from 0.0 and keeps NaN payloads).
//
// Inputs, each decoded under three sets of limits (the defaults, the fuzz
// body's strict limits and a random tight set):
//   - every frame of shared/conformance/wire-golden.jsonl and every prefix of it;
//   - random messages written from the schema with deviations (frame_generator.hpp);
//   - random msgpack documents of any shape;
//   - byte-level mutations of all of the above.
// The seed is printed; rerun a failure with LMCC_TEST_SEED=<seed>.
#include "messages/codec_msgpack.hpp"
#include "tests/conformance/frame_generator.hpp"
#include "tests/conformance/reference_msgpack_decoder.hpp"
#include "tests/conformance/test_support.hpp"
#include "tests/fuzz/fuzz_decode.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace {

namespace msg = lmcc::msg;
using lmcc::test::frame_generator;
using lmcc::test::from_hex;
using lmcc::test::to_hex;

constexpr const char* golden_path = LMCC_SHARED_DIR "/conformance/wire-golden.jsonl";
constexpr int schema_messages = 30000;
constexpr int any_documents = 10000;
constexpr int mutations = 40000;

uint64_t base_seed() {
  static const uint64_t seed = [] {
    uint64_t s = 0x6c6d6363'd1ff0001; // fixed default: every run checks the same frames
    if (const char* env = std::getenv("LMCC_TEST_SEED"); env != nullptr && *env != '\0')
      s = std::strtoull(env, nullptr, 0);
    std::printf("msgpack_differential: seed %llu (rerun with LMCC_TEST_SEED=%llu)\n",
                static_cast<unsigned long long>(s), static_cast<unsigned long long>(s));
    return s;
  }();
  return seed;
}

std::vector<std::string> golden_frames() {
  std::ifstream in{golden_path};
  std::vector<std::string> frames;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty())
      continue;
    auto vec = nlohmann::json::parse(line);
    for (const char* field : {"msgpack", "canonical"})
      if (vec.contains(field))
        frames.push_back(from_hex(vec[field].get<std::string>()));
  }
  return frames;
}

/// What a decoder made of a frame, in one comparable line.
std::string outcome(const msg::expected<msg::Msg>& r) {
  if (!r)
    return "refused: " + r.error().message;
  return "accepted " + std::string(msg::type_tag_of(*r)) + " " + to_hex(msg::encode_msgpack(*r));
}

std::string describe(const msg::decode_limits& lim) {
  return "limits{frame " + std::to_string(lim.max_frame_bytes) + ", depth " +
         std::to_string(lim.max_depth) + ", array " + std::to_string(lim.max_array_length) +
         ", map " + std::to_string(lim.max_map_length) + ", string " +
         std::to_string(lim.max_string_bytes) + "}";
}

/// Tight limits around a frame's size, so that every limit is met now and then.
msg::decode_limits random_tight_limits(std::mt19937_64& rng, size_t frame_size) {
  auto below = [&](uint64_t n) { return std::uniform_int_distribution<uint64_t>{0, n}(rng); };
  msg::decode_limits lim;
  lim.max_frame_bytes = below(4) == 0 ? below(frame_size) : frame_size + below(16);
  lim.max_depth = static_cast<uint32_t>(1 + below(6));
  lim.max_array_length = static_cast<uint32_t>(below(24));
  lim.max_map_length = static_cast<uint32_t>(below(12));
  lim.max_string_bytes = static_cast<uint32_t>(below(48));
  return lim;
}

/// Runs both decoders over frames and tallies what they did.
class comparison {
public:
  explicit comparison(uint64_t seed) : rng_(seed) {}

  void check(const std::string& frame) {
    const msg::decode_limits sets[] = {msg::decode_limits{}, lmcc::fuzz::strict_limits(),
                                       random_tight_limits(rng_, frame.size())};
    // The new decoder reads 8 bytes at a time near value boundaries: on an
    // exactly sized heap copy, ASan builds catch any read past the frame.
    const std::vector<char> exact(frame.begin(), frame.end());
    const std::string_view exact_frame{exact.data(), exact.size()};
    for (const auto& lim : sets) {
      std::string before = outcome(lmcc::test::reference_decode_msgpack(frame, lim));
      std::string now = outcome(msg::decode_msgpack(exact_frame, lim));
      ++decodes_;
      if (before.starts_with("accepted"))
        ++accepted_;
      else
        ++refusals_[before.substr(0, before.find(" - at "))];
      if (before != now && ++failures_ <= 10)
        ADD_FAILURE() << "decoders differ under " << describe(lim) << "\nframe:  " << to_hex(frame)
                      << "\nbefore: " << before << "\nnow:    " << now;
    }
  }

  ~comparison() {
    std::printf("msgpack_differential: %d decodes by each decoder, %d accepted, %zu distinct "
                "refusal texts\n",
                decodes_, accepted_, refusals_.size());
  }

  int decodes() const { return decodes_; }
  int accepted() const { return accepted_; }
  /// Distinct refusal texts, the field path cut off.
  const std::map<std::string, int>& refusals() const { return refusals_; }

private:
  std::mt19937_64 rng_;
  int decodes_ = 0;
  int accepted_ = 0;
  int failures_ = 0;
  std::map<std::string, int> refusals_;
};

TEST(msgpack_differential, golden_vectors_and_all_their_prefixes_decode_as_before) {
  auto frames = golden_frames();
  ASSERT_GE(frames.size(), 250u) << "too few vectors read from " << golden_path;
  comparison cmp{base_seed()};
  for (const auto& frame : frames)
    for (size_t n = 0; n <= frame.size(); ++n)
      cmp.check(frame.substr(0, n));
  EXPECT_GT(cmp.accepted(), static_cast<int>(frames.size()) / 2);
  EXPECT_GT(cmp.refusals().at("refused: Input data was truncated"), 10000);
}

TEST(msgpack_differential, random_schema_messages_decode_as_before) {
  std::mt19937_64 rng{base_seed() ^ 1};
  frame_generator gen{rng};
  comparison cmp{base_seed() ^ 2};
  for (int i = 0; i < schema_messages; ++i)
    cmp.check(gen.message());
  // Not vacuous: under the default limits most frames are valid messages, and
  // the deviations reach a wide range of refusals.
  EXPECT_GT(cmp.accepted(), cmp.decodes() / 5);
  EXPECT_GE(cmp.refusals().size(), 25u);
  for (const char* text :
       {"refused: Invalid UTF-8 in str", "refused: Expected `int`, got `str`",
        "refused: Invalid enum value 'ADMIT'", "refused: Nesting deeper than the limit of 64",
        "refused: Object missing required field `type`"})
    EXPECT_TRUE(cmp.refusals().contains(text)) << text;
}

TEST(msgpack_differential, random_documents_of_any_shape_decode_as_before) {
  std::mt19937_64 rng{base_seed() ^ 3};
  frame_generator gen{rng};
  comparison cmp{base_seed() ^ 4};
  for (int i = 0; i < any_documents; ++i)
    cmp.check(gen.document());
  EXPECT_TRUE(cmp.refusals().contains("refused: Expected `object`, got `array`"));
  EXPECT_TRUE(cmp.refusals().contains("refused: Expected `object`, got `ext`"));
}

TEST(msgpack_differential, mutated_frames_decode_as_before) {
  std::mt19937_64 rng{base_seed() ^ 5};
  frame_generator gen{rng};
  std::vector<std::string> pool = golden_frames();
  for (int i = 0; i < 2000; ++i)
    pool.push_back(i % 4 == 0 ? gen.document() : gen.message());
  comparison cmp{base_seed() ^ 6};
  for (int i = 0; i < mutations; ++i) {
    const std::string& frame = pool[rng() % pool.size()];
    const std::string& donor = pool[rng() % pool.size()];
    cmp.check(gen.mutate(frame, donor));
  }
  EXPECT_GT(cmp.accepted(), cmp.decodes() / 200);
  for (const char* text : {"refused: MessagePack data is malformed: invalid opcode",
                           "refused: Input data was truncated"})
    EXPECT_TRUE(cmp.refusals().contains(text)) << text;
  bool saw_trailing = false;
  for (const auto& [text, count] : cmp.refusals())
    saw_trailing |= text.find("trailing characters") != std::string::npos;
  EXPECT_TRUE(saw_trailing);
}

TEST(msgpack_differential, deep_nesting_under_raised_depth_limits_decodes_as_before) {
  // The default limit (64) keeps the reader's stack of open containers
  // inline; a raised one takes it to the heap. Nesting sits in an unknown
  // field (skipped by the walk) and in a command's `args` (walked as Any).
  using lmcc::test::mp;
  auto nested = [](size_t depth) { return std::string(depth, '\x91') + "\x01"; };
  int accepted = 0;
  for (uint32_t max_depth : {64u, 65u, 100u, 1500u, 5000u}) {
    msg::decode_limits lim;
    lim.max_depth = max_depth;
    for (size_t depth : {62u, 63u, 64u, 65u, 99u, 100u, 1000u, 1497u, 1498u, 1499u, 2000u}) {
      SCOPED_TRACE("max_depth " + std::to_string(max_depth) + ", depth " + std::to_string(depth));
      std::string unknown = mp{}.map(3)
                                .str("type")
                                .str("ErrorMsg")
                                .str("error")
                                .str("x")
                                .str("extra")
                                .raw(nested(depth));
      std::string args = mp{}.map(2)
                             .str("type")
                             .str("HeartbeatRetMsg")
                             .str("commands")
                             .array(1)
                             .map(2)
                             .str("command_type")
                             .str("full_sync")
                             .str("args")
                             .map(1)
                             .str("a")
                             .raw(nested(depth));
      for (const std::string& frame : {unknown, args}) {
        std::string now = outcome(msg::decode_msgpack(frame, lim));
        EXPECT_EQ(now, outcome(lmcc::test::reference_decode_msgpack(frame, lim)));
        accepted += now.starts_with("accepted") ? 1 : 0;
      }
    }
  }
  EXPECT_GE(accepted, 30); // the deep frames within the raised limits decode
}

/// A BatchedKVOperationMsg of `ops` operations of one shape, but for element
/// `odd`, written as the given bytes; the array's header claims `claimed`
/// elements (0: as many as there are).
std::string batch_with_one_odd_op(size_t ops, size_t odd, std::string_view odd_element,
                                  size_t claimed = 0) {
  using lmcc::test::mp;
  mp frame;
  frame.map(5).str("type").str("BatchedKVOperationMsg").str("instance_id").str("inst");
  frame.str("worker_id").uint(0).str("location").str("LocalCPUBackend").str("operations");
  frame.array(static_cast<uint32_t>(claimed == 0 ? ops : claimed));
  for (size_t i = 0; i < ops; ++i) {
    if (i == odd) {
      frame.raw(odd_element);
      continue;
    }
    // Keys of both signs, so the run's ints are uint64 and int64 by turns
    // (and the first, -1, a fixint that starts no run).
    auto magnitude = static_cast<int64_t>(i) * 7919 * 7919 * 7919 * 7919;
    frame.map(3).str("op_type").str(i % 3 == 0 ? "evict" : "admit");
    frame.str("key").sint(i % 2 == 0 ? -1 - magnitude : magnitude);
    frame.str("seq_num").uint(1000 + i);
  }
  return frame.bytes();
}

/// Elements that differ from a batch's usual operation in one way each.
std::vector<std::pair<std::string, std::string>> odd_elements() {
  using lmcc::test::mp;
  auto op = [](std::string_view op_type, std::string_view key, std::string_view seq) {
    return mp{}.map(3).raw(op_type).raw(key).raw(seq).bytes();
  };
  const std::string op_type = mp{}.str("op_type").str("admit");
  const std::string key = mp{}.str("key").sint(-4242424242424242);
  const std::string seq = mp{}.str("seq_num").uint(1500);
  return {
      {"same shape", op(op_type, key, seq)},
      {"longer enum value", op(mp{}.str("op_type").str("ADMITS"), key, seq)},
      {"wrong enum value, same length", op(mp{}.str("op_type").str("ADMIT"), key, seq)},
      {"invalid UTF-8 in a key", op(mp{}.str("op_typ\xff").str("admit"), key, seq)},
      {"invalid UTF-8 in a value", op(op_type, key, mp{}.str("seq_num").str("\xc0\x80"))},
      {"invalid UTF-8 in an enum value", op(mp{}.str("op_type").str("adm\xc0\x80"), key, seq)},
      {"valid non-ASCII value", op(mp{}.str("op_type").str("\xc3\xa1"
                                                           "dmi"),
                                   key, seq)},
      {"narrower key", op(op_type, mp{}.str("key").uint(7), seq)},
      {"key as float", op(op_type, mp{}.str("key").f64(1.5), seq)},
      {"nil seq_num", op(op_type, key, mp{}.str("seq_num").nil())},
      {"str8 key name", op(op_type, mp{}.raw(from_hex("d903")).raw("key").sint(-5), seq)},
      {"nested value", op(op_type, mp{}.str("key").array(1).uint(1), seq)},
      {"ext value", op(op_type, mp{}.str("key").raw(from_hex("d40101")), seq)},
      {"0xc1 value", op(op_type, mp{}.str("key").raw(from_hex("c1")), seq)},
      {"bin key name", op(op_type, mp{}.bin("key").sint(-5), seq)},
      {"four entries", mp{}.map(4).raw(op_type).raw(key).raw(seq).str("x").nil().bytes()},
      {"bare invalid str", mp{}.str("\xff\xfe").bytes()},
      {"bare int", mp{}.uint(3).bytes()},
  };
}

TEST(msgpack_differential, arrays_of_same_shape_structs_with_one_odd_element_decode_as_before) {
  // The reader takes runs of structs shaped like the one before them in one
  // step; any element that differs must leave the run to the ordinary path at
  // exactly that element, whatever the difference is and wherever it sits.
  msg::decode_limits tight;
  tight.max_string_bytes = 5; // "op_type" and "seq_num" are refused, wherever they are
  msg::decode_limits shallow;
  shallow.max_depth = 3;
  int accepted = 0;
  int compared = 0;
  auto compare = [&](const std::string& frame) {
    for (const msg::decode_limits& lim : {msg::decode_limits{}, tight, shallow}) {
      std::string now = outcome(msg::decode_msgpack(frame, lim));
      EXPECT_EQ(now, outcome(lmcc::test::reference_decode_msgpack(frame, lim)))
          << "frame: " << to_hex(frame);
      accepted += now.starts_with("accepted") ? 1 : 0;
      ++compared;
    }
  };
  for (const auto& [name, odd_element] : odd_elements()) {
    for (size_t ops : {2u, 3u, 5u, 17u, 50u}) {
      for (size_t odd = 0; odd < ops; odd += (ops > 5 ? 4 : 1)) {
        SCOPED_TRACE(name + ", " + std::to_string(ops) + " ops, odd one at " + std::to_string(odd));
        // Whole, with a trailing byte, and cut anywhere from the odd element on.
        std::string frame = batch_with_one_odd_op(ops, odd, odd_element);
        compare(frame);
        compare(frame + "\x81");
        for (size_t cut = frame.size() * odd / ops; cut < frame.size(); cut += 7)
          compare(frame.substr(0, cut));
      }
    }
    // The array's header claiming more elements than there are, by every
    // count: so many that the elements declared in all outrun the frame's
    // bytes at every element in turn, before, at and after the odd one.
    const size_t ops = 17;
    for (size_t odd : {1u, 8u, 16u}) {
      SCOPED_TRACE(name + ", claimed counts, odd one at " + std::to_string(odd));
      size_t size = batch_with_one_odd_op(ops, odd, odd_element).size();
      for (size_t claimed = ops + 1; claimed <= size; ++claimed)
        compare(batch_with_one_odd_op(ops, odd, odd_element, claimed));
    }
  }
  std::printf("msgpack_differential: %d struct-run decodes, %d accepted\n", compared, accepted);
  EXPECT_GT(accepted, 150);
}

TEST(msgpack_differential, detects_a_difference) {
  // The harness must be able to fail: a frame the decoders agree on compared
  // with one that differs only in a field value gives different outcomes.
  const std::string a = lmcc::test::mp{}.map(2).str("type").str("ErrorMsg").str("error").str("a");
  const std::string b = lmcc::test::mp{}.map(2).str("type").str("ErrorMsg").str("error").str("b");
  EXPECT_NE(outcome(msg::decode_msgpack(a)), outcome(lmcc::test::reference_decode_msgpack(b, {})));
  EXPECT_EQ(outcome(msg::decode_msgpack(a)), outcome(lmcc::test::reference_decode_msgpack(a, {})));
}

} // namespace
