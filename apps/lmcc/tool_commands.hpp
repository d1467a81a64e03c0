// The line-oriented tool commands of `lmcc`: msg decode, msg encode and
// chunk-hashes. Each reads stdin line by line and writes exactly one line per
// input line, so other tools (and tests) can pipe through them.
//
//   printf '82a4...\n' | lmcc msg decode        -> {"type":"ErrorMsg","error":"boom"}
//
// Context: called from main() only.
#pragma once

#include "messages/chunk_hash.hpp"

#include <istream>
#include <ostream>

namespace lmcc::apps {

/// hex msgpack per line -> msgspec JSON or {"error": "..."} per line.
int run_msg_decode(std::istream& in, std::ostream& out);

/// msgspec JSON per line -> lowercase hex msgpack or {"error": "..."} per line.
int run_msg_encode(std::istream& in, std::ostream& out);

/// JSON array of token ids per line -> JSON array of [start, end, hash] per line.
int run_chunk_hashes(const msg::chunk_hash_options& options, std::istream& in, std::ostream& out);

} // namespace lmcc::apps
