// libFuzzer target lmcc-fuzz-decode: the worker-socket frame decoder
// (decode_frame: JSON when the first byte is `{`, else msgpack) and the codec
// round trips; see fuzz_decode.hpp for the invariants. Built only with clang and
// -DLMCC_FUZZ=ON; run it with `make fuzz FUZZ_TARGETS=decode`.
#include "tests/fuzz/fuzz_decode.hpp"

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view frame{reinterpret_cast<const char*>(data), size};
  std::string why = lmcc::fuzz::check_decode(frame);
  if (!why.empty()) {
    std::fprintf(stderr, "lmcc-fuzz-decode: invariant broken: %s\n", why.c_str());
    std::abort();
  }
  return 0;
}
