// libFuzzer target lmcc-fuzz-http-body: the body reader of every HTTP endpoint
// and the integers of query parameters; see fuzz_http_body.hpp for the input
// layout and the invariants. Built only with clang and -DLMCC_FUZZ=ON; run it
// with `make fuzz FUZZ_TARGETS=http-body`.
#include "tests/fuzz/fuzz_http_body.hpp"

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string why = lmcc::fuzz::check_http_body({reinterpret_cast<const char*>(data), size});
  if (!why.empty()) {
    std::fprintf(stderr, "lmcc-fuzz-http-body: invariant broken: %s\n", why.c_str());
    std::abort();
  }
  return 0;
}
