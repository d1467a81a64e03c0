// lmcc-fuzz-seeds DIR: writes every fuzz target's seeds into DIR/<target>/, one
// file per input named by its index: real encodings made by lmcc's own
// encoders (and the conformance vectors), so that the seeds follow any change
// of a format. `make fuzz` runs it before the targets; `make fuzz-merge` folds
// what the seeds and a run found into the kept corpora (tests/fuzz/corpus).
#include "tests/fuzz/fuzz_decode.hpp"
#include "tests/fuzz/fuzz_http_body.hpp"
#include "tests/fuzz/fuzz_json.hpp"
#include "tests/fuzz/fuzz_peer_messages.hpp"
#include "tests/fuzz/fuzz_peer_read.hpp"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

namespace {

constexpr const char* golden_path = LMCC_SHARED_DIR "/conformance/wire-golden.jsonl";

void write_seeds(const std::filesystem::path& dir, const std::vector<std::string>& inputs) {
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  for (size_t i = 0; i < inputs.size(); ++i) {
    char name[16];
    std::snprintf(name, sizeof name, "%05zu", i);
    std::ofstream out{dir / name, std::ios::binary};
    out.write(inputs[i].data(), static_cast<std::streamsize>(inputs[i].size()));
  }
  std::printf("lmcc-fuzz-seeds: %zu inputs in %s\n", inputs.size(), dir.c_str());
}

} // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 2;
  }
  const std::filesystem::path dir{argv[1]};
  const std::vector<std::pair<const char*, std::vector<std::string>>> targets = {
      {"decode", lmcc::fuzz::decode_seeds(golden_path)},
      {"json", lmcc::fuzz::json_seeds(golden_path)},
      {"http-body", lmcc::fuzz::http_body_seeds()},
      {"peer-messages", lmcc::fuzz::peer_message_seeds()},
      {"peer-read", lmcc::fuzz::peer_read_seeds()},
  };
  for (const auto& [name, inputs] : targets)
    write_seeds(dir / name, inputs);
  return 0;
}
