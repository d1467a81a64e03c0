// The fuzz body of lmcc-fuzz-peer-read: both ends of the plain-TCP owner-read
// protocol between nodes (gateway/peer_read.hpp), driven with the real code
// over a socketpair, shared by the libFuzzer target (fuzz_peer_read_main.cpp,
// clang only) and its g++ smoke test.
//
// An input is a selector byte and the bytes one end receives:
//   - bit 0 clear: the server's side. serve_peer_reads() reads the bytes as a
//     connection's stream (bit 1 set: behind a valid preface, so that
//     mutations reach the requests), answers into the socket, and stops at
//     the end of the stream. It must answer exactly the requests a reference
//     reading of the framing finds before the first broken rule (a wrong
//     preface, a frame of 0 or more than max_keys + 1 words, a truncated
//     frame), in order, each with the answer of its keys and its id, and
//     count requests, malformed frames and refused prefaces as that reading does;
//   - bit 0 set: the client's side. peer_read_client::wait() reads the bytes
//     as the reply to a call, and must return exactly the reference reading:
//     the words after a header [count + 1, the call's id], or nothing for a
//     short, foreign or oversized reply. A header may promise up to
//     max_reply_words words: what is allocated must follow the bytes that
//     arrive, not the promise (libFuzzer's -malloc_limit_mb checks it).
//
//   std::string why = lmcc::fuzz::check_peer_read(input);   // "" when all hold
//
// Thread-safety: reentrant (each call makes its own sockets).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace lmcc::fuzz {

/// Runs the whole body on one input: "" when every invariant holds, else the first broken.
std::string check_peer_read(std::string_view input);

/// Streams as lmcc's own client and server write them (prefaces, requests,
/// replies), each behind a selector byte.
std::vector<std::string> peer_read_seeds();

} // namespace lmcc::fuzz
