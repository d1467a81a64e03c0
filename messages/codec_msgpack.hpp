// msgpack codec, byte-identical with msgspec.msgpack (LMCache's encoder).
//
// Encoding reproduces msgspec exactly: a struct is a map with the tag pair
// first, then every field in declaration order (defaults included), ints in
// their smallest width by value, floats as float64, None as nil, OpType as its
// value string, tuples as arrays, dicts in insertion order.
// Decoding is exactly as lenient and as strict as msgspec (spec section 3.2):
// tag anywhere, unknown fields ignored, missing defaulted fields filled in,
// everything else refused with a msgspec-worded error naming the field.
// Decoding reads the frame in one pass into a flat node array (see
// internal/msgpack_tree.hpp), enforcing decode_limits as it goes, so a hostile
// length header costs nothing; the typed walk shared with JSON then builds the
// message.
//
//   std::string frame = encode_msgpack(Msg{ErrorMsg{.error = "boom"}});
//   expected<Msg> back = decode_msgpack(frame);
//
// Thread-safety: all functions are reentrant; no shared state.
#pragma once

#include "messages/expected.hpp"
#include "messages/limits.hpp"
#include "messages/lmcache_msgs.hpp"

#include <string>
#include <string_view>

namespace lmcc::msg {

/// Appends the msgpack encoding of `m` to `out`.
void encode_msgpack(const Msg& m, std::string& out);

/// The msgpack encoding of `m`.
[[nodiscard]] std::string encode_msgpack(const Msg& m);

/// Decodes one complete frame (no trailing bytes) into a message.
[[nodiscard]] expected<Msg> decode_msgpack(std::string_view frame,
                                           const decode_limits& limits = {});

} // namespace lmcc::msg
