// libFuzzer target lmcc-fuzz-peer-messages: what a node decodes from another
// node (CAF values and messages, op-log records, slot snapshots, holder states,
// membership records, handshake MACs); see fuzz_peer_messages.hpp for the input
// layout and the invariants. Built only with clang and -DLMCC_FUZZ=ON; run it
// with `make fuzz FUZZ_TARGETS=peer-messages`.
#include "tests/fuzz/fuzz_peer_messages.hpp"

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string why =
      lmcc::fuzz::check_peer_message({reinterpret_cast<const char*>(data), size});
  if (!why.empty()) {
    std::fprintf(stderr, "lmcc-fuzz-peer-messages: invariant broken: %s\n", why.c_str());
    std::abort();
  }
  return 0;
}
