// The msgpack decoder lmcc shipped before the single-pass reader, kept as the
// reference that msgpack_differential_test holds decode_msgpack to.
//
// It is the old messages/codec_msgpack.cpp decoding path, unchanged: a limits
// pre-scan with msgpack-cxx's SAX parser, then msgpack-cxx's object tree,
// walked by the typed walk of that time (frozen in reference_decode_walk.hpp).
// Slow (it builds a zone-allocated
// tree), but its accept/reject decisions, decoded values and error texts are
// the behaviour the wire conformance suites pinned; the new decoder must match
// it on every input.
//
//   auto old = lmcc::test::reference_decode_msgpack(frame, limits);
//   auto now = lmcc::msg::decode_msgpack(frame, limits);
//
// Thread-safety: reentrant; no shared state. Test code only.
#pragma once

#include "messages/expected.hpp"
#include "messages/limits.hpp"
#include "messages/lmcache_msgs.hpp"

#include <string_view>

namespace lmcc::test {

/// decode_msgpack as it was before the single-pass reader replaced it.
[[nodiscard]] msg::expected<msg::Msg> reference_decode_msgpack(std::string_view frame,
                                                               const msg::decode_limits& limits);

} // namespace lmcc::test
