// The fuzz body for the frame decoder, shared by the libFuzzer target
// (lmcc-fuzz-decode, clang only) and its g++ smoke test (lmcc-fuzz-decode-smoke).
//
// check_decode(frame) first holds decode_msgpack to the decoder it replaced
// (same decision, message and error text, under strict and default limits),
// then runs decode_frame under both and, for every frame that decodes, checks
// the codec's invariants:
//   - nothing in the decoded message is larger than the limits allowed;
//   - encode_msgpack -> decode_msgpack gives back an equal message, and a
//     second encode gives the same bytes (msgspec's encoding is canonical);
//   - encode_json -> decode_json succeeds (unless a typed float field holds a
//     NaN or an infinity, which JSON cannot carry: msgspec writes them as null
//     and refuses them back, and so does lmcc).
//
//   std::string why = lmcc::fuzz::check_decode(frame);
//   if (!why.empty()) abort();
//
// Thread-safety: reentrant, no shared state.
#pragma once

#include "messages/limits.hpp"
#include "messages/lmcache_msgs.hpp"

#include <string>
#include <string_view>
#include <vector>

namespace lmcc::fuzz {

/// Small limits, so that the fuzzer reaches every refusal path quickly.
constexpr msg::decode_limits strict_limits() {
  msg::decode_limits lim;
  lim.max_frame_bytes = 4096;
  lim.max_depth = 8;
  lim.max_array_length = 64;
  lim.max_map_length = 32;
  lim.max_string_bytes = 256;
  return lim;
}

/// Runs the whole body on one frame. Returns "" when every invariant holds,
/// otherwise a description of the first one broken (the caller aborts).
std::string check_decode(std::string_view frame);

/// The invariants of a message some decoder accepted under `lim`: nothing in
/// it past the limits, and both codecs' round trips (see above). "" or what
/// broke, prefixed with `label`.
std::string check_decoded_message(const msg::Msg& m, const msg::decode_limits& lim,
                                  const std::string& label);

/// Every frame of the conformance vectors at `golden_path` (wire-golden.jsonl):
/// each vector's msgpack, its canonical re-encoding and its JSON form.
std::vector<std::string> decode_seeds(const std::string& golden_path);

} // namespace lmcc::fuzz
