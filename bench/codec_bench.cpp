// lmcc-microbench: the codec's hot paths with LMCache-shaped traffic.
//
//   build/lmcc-microbench --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
//
// One iteration is one message (or one prompt, or one HTTP body). Time per iteration is therefore
// ns per message; items/s counts ops (BatchedKVOperationMsg), keys
// (FullSyncBatchMsg) or tokens (chunk hashing); bytes/s counts the wire frame.
// Inputs are drawn from a fixed seed, so every run measures the same bytes.
#include "gateway/http_body.hpp"
#include "messages/chunk_hash.hpp"
#include "messages/codec_json.hpp"
#include "messages/codec_msgpack.hpp"
#include "messages/lmcache_msgs.hpp"

#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <span>
#include <string>
#include <vector>

namespace {

using namespace lmcc::msg;

constexpr int batch_ops = 50;        // LMCache's batch size for KV admit/evict events
constexpr int full_sync_keys = 2000; // LMCache's full-sync batch size
constexpr int prompt_tokens = 4096;
constexpr uint64_t input_seed = 42;

/// A worker's batch: 50 admits/evicts of random 64-bit signed chunk keys
/// (Python hash values), consecutive sequence numbers.
Msg make_batch() {
  std::mt19937_64 rng{input_seed};
  BatchedKVOperationMsg m{.instance_id = "vllm-instance-0",
                          .worker_id = 0,
                          .location = "LocalCPUBackend",
                          .operations = {}};
  m.operations.reserve(batch_ops);
  for (int i = 0; i < batch_ops; ++i)
    m.operations.push_back(KVOpEvent{.op_type = (rng() % 4 == 0) ? OpType::evict : OpType::admit,
                                     .key = static_cast<int64_t>(rng()),
                                     .seq_num = 1000 + i});
  return m;
}

Msg make_full_sync_batch() {
  std::mt19937_64 rng{input_seed + 1};
  FullSyncBatchMsg m{.instance_id = "vllm-instance-0",
                     .worker_id = 0,
                     .location = "LocalCPUBackend",
                     .sync_id = "6f1c2a9e-3b57-4d0a-9c8e-1f2d3c4b5a69",
                     .batch_id = 3,
                     .keys = {}};
  m.keys.reserve(full_sync_keys);
  for (int i = 0; i < full_sync_keys; ++i)
    m.keys.emplace_back(static_cast<int64_t>(rng()));
  return m;
}

/// Aborts the run: a benchmark that silently measures a failing decode is worse than none.
void require(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "lmcc-microbench: %s\n", what);
    std::abort();
  }
}

void report(benchmark::State& state, int64_t items, size_t frame_bytes) {
  state.SetItemsProcessed(state.iterations() * items);
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(frame_bytes));
  state.counters["frame_bytes"] = static_cast<double>(frame_bytes);
}

// -- BatchedKVOperationMsg, 50 ops ------------------------------------------------

void BM_EncodeMsgpack_Batch50(benchmark::State& state) {
  const Msg m = make_batch();
  size_t bytes = 0;
  for (auto _ : state) {
    std::string frame = encode_msgpack(m);
    bytes = frame.size();
    benchmark::DoNotOptimize(frame.data());
  }
  report(state, batch_ops, bytes);
}
BENCHMARK(BM_EncodeMsgpack_Batch50);

void BM_DecodeMsgpack_Batch50(benchmark::State& state) {
  const std::string frame = encode_msgpack(make_batch());
  require(decode_msgpack(frame).has_value(), "batch frame does not decode");
  for (auto _ : state) {
    expected<Msg> m = decode_msgpack(frame);
    benchmark::DoNotOptimize(m);
  }
  report(state, batch_ops, frame.size());
}
BENCHMARK(BM_DecodeMsgpack_Batch50);

void BM_DecodeJson_Batch50(benchmark::State& state) {
  const std::string frame = encode_json(make_batch());
  require(decode_frame(frame).has_value(), "JSON batch frame does not decode");
  for (auto _ : state) {
    expected<Msg> m = decode_frame(frame); // the worker socket's path: `{` -> JSON
    benchmark::DoNotOptimize(m);
  }
  report(state, batch_ops, frame.size());
}
BENCHMARK(BM_DecodeJson_Batch50);

// -- a hostile JSON frame: one object of 80,000 keys ------------------------------
//
// Issue 9: one 0.87 MB frame like this, sent to the reply socket, held every
// other worker's requests for 7.3 s while the decoder inserted the keys. The
// frame is an ErrorMsg whose unknown field `extra` holds the object, so only the
// parser and the limits see it. Under the default limits (65,536 entries per
// map) it must be refused; with the map limit raised it must decode, and in
// both cases in time linear in its size.

constexpr int wide_object_keys = 80'000;

std::string make_wide_object_frame() {
  std::string text = R"({"type":"ErrorMsg","error":"x","extra":{)";
  for (int i = 0; i < wide_object_keys; ++i) {
    if (i > 0)
      text += ',';
    text += "\"k" + std::to_string(i) + "\":" + std::to_string(i);
  }
  return text + "}}";
}

void BM_DecodeJson_WideObject80k_Refused(benchmark::State& state) {
  const std::string frame = make_wide_object_frame();
  require(!decode_frame(frame).has_value(), "the 80k-key object must break the map limit");
  for (auto _ : state) {
    expected<Msg> m = decode_frame(frame);
    benchmark::DoNotOptimize(m);
  }
  report(state, wide_object_keys, frame.size());
}
BENCHMARK(BM_DecodeJson_WideObject80k_Refused)->Unit(benchmark::kMillisecond);

void BM_DecodeJson_WideObject80k_Accepted(benchmark::State& state) {
  const std::string frame = make_wide_object_frame();
  decode_limits raised;
  raised.max_map_length = 1 << 20;
  require(decode_frame(frame, raised).has_value(), "the 80k-key object must decode");
  for (auto _ : state) {
    expected<Msg> m = decode_frame(frame, raised);
    benchmark::DoNotOptimize(m);
  }
  report(state, wide_object_keys, frame.size());
}
BENCHMARK(BM_DecodeJson_WideObject80k_Accepted)->Unit(benchmark::kMillisecond);

// -- FullSyncBatchMsg, 2000 keys --------------------------------------------------

void BM_EncodeMsgpack_FullSync2000(benchmark::State& state) {
  const Msg m = make_full_sync_batch();
  size_t bytes = 0;
  for (auto _ : state) {
    std::string frame = encode_msgpack(m);
    bytes = frame.size();
    benchmark::DoNotOptimize(frame.data());
  }
  report(state, full_sync_keys, bytes);
}
BENCHMARK(BM_EncodeMsgpack_FullSync2000);

void BM_DecodeMsgpack_FullSync2000(benchmark::State& state) {
  const std::string frame = encode_msgpack(make_full_sync_batch());
  require(decode_msgpack(frame).has_value(), "full-sync frame does not decode");
  for (auto _ : state) {
    expected<Msg> m = decode_msgpack(frame);
    benchmark::DoNotOptimize(m);
  }
  report(state, full_sync_keys, frame.size());
}
BENCHMARK(BM_DecodeMsgpack_FullSync2000);

// -- chunk hashing, one 4096-token prompt (16 chunks of 256) ----------------------

std::vector<int64_t> make_prompt() {
  std::mt19937_64 rng{input_seed + 2};
  std::uniform_int_distribution<int64_t> vocab{0, 151935}; // a Qwen-sized vocabulary
  std::vector<int64_t> tokens(prompt_tokens);
  for (auto& t : tokens)
    t = vocab(rng);
  return tokens;
}

void BM_ChunkHash_Prompt4096(benchmark::State& state) {
  const std::vector<int64_t> tokens = make_prompt();
  const chunk_hasher hasher;
  for (auto _ : state) {
    std::vector<token_chunk> chunks = hasher.chunks(std::span<const int64_t>{tokens});
    benchmark::DoNotOptimize(chunks.data());
  }
  state.SetItemsProcessed(state.iterations() * prompt_tokens);
  state.SetBytesProcessed(state.iterations() * prompt_tokens *
                          static_cast<int64_t>(sizeof(int64_t)));
}
BENCHMARK(BM_ChunkHash_Prompt4096);

void BM_ChunkHash_Prompt4096_WireInt(benchmark::State& state) {
  const std::vector<int64_t> raw = make_prompt();
  const std::vector<wire_int> tokens(raw.begin(), raw.end()); // as LookupMsg decodes them
  const chunk_hasher hasher;
  for (auto _ : state) {
    std::vector<token_chunk> chunks = hasher.chunks(std::span<const wire_int>{tokens});
    benchmark::DoNotOptimize(chunks.data());
  }
  state.SetItemsProcessed(state.iterations() * prompt_tokens);
  state.SetBytesProcessed(state.iterations() * prompt_tokens *
                          static_cast<int64_t>(sizeof(wire_int)));
}
BENCHMARK(BM_ChunkHash_Prompt4096_WireInt);

// -- HTTP bodies: /lookup with a prompt's tokens, /clear with a wide object -------------
//
// /lookup is the router's hot path: one call per request, carrying the whole
// prompt. The body is read straight into the LookupMsg the controller gets.

std::string make_lookup_body(int tokens) {
  std::mt19937_64 rng{input_seed + 3};
  std::uniform_int_distribution<int64_t> vocab{0, 151935};
  std::string body = R"({"tokens": [)";
  for (int i = 0; i < tokens; ++i) {
    if (i > 0)
      body += ", ";
    body += std::to_string(vocab(rng));
  }
  return body + "]}";
}

void BM_ReadLookupBody(benchmark::State& state) {
  const int tokens = static_cast<int>(state.range(0));
  const std::string body = make_lookup_body(tokens);
  constexpr size_t max_tokens = size_t{1} << 20; // http_options' default
  require(lmcc::gateway::read_lookup_body(body, max_tokens).has_value(),
          "the /lookup body must be read");
  for (auto _ : state) {
    auto m = lmcc::gateway::read_lookup_body(body, max_tokens);
    benchmark::DoNotOptimize(m);
  }
  report(state, tokens, body.size());
}
BENCHMARK(BM_ReadLookupBody)->Arg(prompt_tokens)->Arg(131'072);

/// A /clear body whose unknown field holds an object of 80,000 keys: FastAPI
/// ignores it, and so must lmcc, in time linear in its size.
void BM_ReadClearBody_WideObject80k(benchmark::State& state) {
  std::string body = R"({"instance_id": "A", "location": "L", "extra": {)";
  for (int i = 0; i < wide_object_keys; ++i) {
    if (i > 0)
      body += ',';
    body += "\"k" + std::to_string(i) + "\":" + std::to_string(i);
  }
  body += "}}";
  require(lmcc::gateway::read_clear_body(body).has_value(), "the wide /clear body must be read");
  for (auto _ : state) {
    auto m = lmcc::gateway::read_clear_body(body);
    benchmark::DoNotOptimize(m);
  }
  report(state, wide_object_keys, body.size());
}
BENCHMARK(BM_ReadClearBody_WideObject80k)->Unit(benchmark::kMillisecond);

} // namespace

BENCHMARK_MAIN();
