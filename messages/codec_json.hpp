// JSON codec: msgspec's JSON form of the same messages.
//
// LMCache accepts JSON frames (first byte `{`) on its worker sockets, from
// external systems such as Mooncake; they are parsed with json.loads and
// converted with msgspec.convert, so they follow the msgpack rules (tag
// anywhere, unknown fields ignored, defaults filled in). The encoder writes
// msgspec.json.encode's form: compact, tag first, fields in declaration order.
// Bytes inside `Any` values travel as base64 text, as in msgspec.
//
// Decoding reads the text once with simdjson On-Demand into a compact tree
// (internal/json_tree.hpp), every decode_limits limit checked as each value
// arrives, so that any frame costs time linear in its size; a repeated key keeps
// its first position and takes its last value, as with json.loads. Encoding
// builds an nlohmann document (messages are small).
//
//   auto m = decode_json(R"({"type":"ErrorMsg","error":"boom"})");
//   std::string text = encode_json(*m);   // {"type":"ErrorMsg","error":"boom"}
//
// Thread-safety: all functions are reentrant; no shared state.
#pragma once

#include "messages/expected.hpp"
#include "messages/limits.hpp"
#include "messages/lmcache_msgs.hpp"

#include <string>
#include <string_view>

namespace lmcc::msg {

/// msgspec.json.encode(m), as text.
[[nodiscard]] std::string encode_json(const Msg& m);

/// Decodes one JSON document into a message, under the same limits as msgpack.
[[nodiscard]] expected<Msg> decode_json(std::string_view text, const decode_limits& limits = {});

/// Decodes a worker-socket frame: JSON when its first byte is `{`, else msgpack.
[[nodiscard]] expected<Msg> decode_frame(std::string_view frame, const decode_limits& limits = {});

} // namespace lmcc::msg
