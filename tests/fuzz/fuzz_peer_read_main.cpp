// libFuzzer target lmcc-fuzz-peer-read: both ends of the owner-read protocol
// between nodes over a socketpair; see fuzz_peer_read.hpp for the input layout
// and the invariants. Built only with clang and -DLMCC_FUZZ=ON; run it with
// `make fuzz FUZZ_TARGETS=peer-read`.
#include "tests/fuzz/fuzz_peer_read.hpp"

#include <spdlog/spdlog.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

// The server logs every refused stream (rate-limited per server; each input
// has a server of its own): millions of lines would only slow the run.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  spdlog::set_level(spdlog::level::off);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string why = lmcc::fuzz::check_peer_read({reinterpret_cast<const char*>(data), size});
  if (!why.empty()) {
    std::fprintf(stderr, "lmcc-fuzz-peer-read: invariant broken: %s\n", why.c_str());
    std::abort();
  }
  return 0;
}
