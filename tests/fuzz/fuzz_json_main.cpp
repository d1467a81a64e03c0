// libFuzzer target lmcc-fuzz-json: decode_json and json_text_reader on any text;
// see fuzz_json.hpp for the invariants. Built only with clang and -DLMCC_FUZZ=ON;
// run it with `make fuzz FUZZ_TARGETS=json`.
#include "tests/fuzz/fuzz_json.hpp"

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string why = lmcc::fuzz::check_json({reinterpret_cast<const char*>(data), size});
  if (!why.empty()) {
    std::fprintf(stderr, "lmcc-fuzz-json: invariant broken: %s\n", why.c_str());
    std::abort();
  }
  return 0;
}
