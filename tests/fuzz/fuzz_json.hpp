// The fuzz body of lmcc-fuzz-json: the JSON side of the codec on any text, shared by
// the libFuzzer target (fuzz_json_main.cpp, clang only) and its g++ smoke test.
//
// Why a target of its own: the frame target (fuzz_decode.hpp) reaches decode_json
// only through decode_frame, i.e. for texts whose first byte is `{`, and two
// thirds of its corpus is msgpack; the reader under every JSON decoder
// (json_text_reader: HTTP bodies too) then sees few non-object roots, scalars,
// trailing content or whitespace before the value. Here every input is JSON
// text, and check_json(text) holds:
//   - decode_json under strict and default limits: a refusal has a message;
//     what strict limits accept the defaults accept as the same message; and
//     every accepted message keeps the codec invariants of fuzz_decode.hpp
//     (limits, msgpack and JSON round trips);
//   - json_text_reader with read_json_number, visiting every value, against
//     nlohmann::json::parse (the rules lmcc has always read JSON with): both
//     accept or both refuse, and what both accept is the same value, integer
//     and floating kinds included (nesting beyond 256 levels is not compared:
//     simdjson stops at its own depth limit, nlohmann has none). Where
//     nlohmann is more lenient than JSON, lmcc must refuse: nlohmann skips a
//     leading UTF-8 byte order mark (json.loads refuses a str starting with
//     one) and takes a NUL byte for the end of the text. One refusal is
//     simdjson's and known: a number whose exponent has more than 19 digits
//     (1e00000000000000000005) is malformed to simdjson 3.0.1, valid JSON to
//     json.loads and nlohmann;
//   - decode_json calls a text malformed only when the reader refuses it, and
//     accepts none that the reader refuses.
//
//   std::string why = lmcc::fuzz::check_json(text);   // "" when all hold
//
// Thread-safety: reentrant.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace lmcc::fuzz {

/// Runs the whole body on one text: "" when every invariant holds, else the first broken.
std::string check_json(std::string_view text);

/// Real JSON encodings to start from: the JSON form of every conformance vector
/// at `golden_path` (and of every hostile input the codec accepts), plus texts
/// for the reader's edges (scalars, escapes, numbers at the kinds' borders).
std::vector<std::string> json_seeds(const std::string& golden_path);

} // namespace lmcc::fuzz
