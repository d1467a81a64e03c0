// Helpers shared by the chunk-hashing tests: the CPython vectors of
// shared/conformance/token-hash.jsonl, child processes and temporary files.
//
//   auto vectors = lmcc::test::load_token_hash_vectors();
//   auto [status, out] = lmcc::test::run_command("/usr/bin/python3 -c 'print(1)'");
#pragma once

#include "messages/chunk_hash.hpp"
#include "messages/wire_int.hpp"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <ostream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

namespace lmcc::msg {

// Readable gtest output for chunk comparisons.
inline void PrintTo(const token_chunk& c, std::ostream* os) {
  *os << '[' << c.start << ", " << c.end << ", " << c.key << ']';
}

} // namespace lmcc::msg

namespace lmcc::test {

inline const char* token_hash_path = LMCC_SHARED_DIR "/conformance/token-hash.jsonl";

/// Every line of token-hash.jsonl, parsed.
inline std::vector<nlohmann::json> load_token_hash_vectors() {
  std::ifstream in{token_hash_path};
  if (!in)
    throw std::runtime_error(std::string("cannot open ") + token_hash_path);
  std::vector<nlohmann::json> out;
  std::string line;
  while (std::getline(in, line))
    if (!line.empty())
      out.push_back(nlohmann::json::parse(line));
  return out;
}

/// A JSON integer (signed or unsigned 64-bit) as a wire_int.
inline msg::wire_int to_wire_int(const nlohmann::json& v) {
  if (v.is_number_unsigned())
    return msg::wire_int::from_unsigned(v.get<uint64_t>());
  if (v.is_number_integer())
    return msg::wire_int{v.get<int64_t>()};
  throw std::invalid_argument("not an integer: " + v.dump());
}

inline nlohmann::json to_json(const msg::wire_int& v) {
  if (v.is_negative())
    return v.as_int64();
  return v.bits();
}

inline std::vector<msg::wire_int> to_tokens(const nlohmann::json& array) {
  std::vector<msg::wire_int> out;
  for (const auto& v : array)
    out.push_back(to_wire_int(v));
  return out;
}

/// [[start, end, hash], ...] as token_chunks.
inline std::vector<msg::token_chunk> to_chunks(const nlohmann::json& array) {
  std::vector<msg::token_chunk> out;
  for (const auto& c : array)
    out.push_back(
        msg::token_chunk{c.at(0).get<uint64_t>(), c.at(1).get<uint64_t>(), c.at(2).get<int64_t>()});
  return out;
}

/// `text` quoted for /bin/sh.
inline std::string shell_quote(std::string_view text) {
  std::string out = "'";
  for (char c : text) {
    if (c == '\'')
      out += "'\\''";
    else
      out += c;
  }
  out += '\'';
  return out;
}

struct command_result {
  int exit_code = -1; // -1 when the child did not exit normally
  std::string output; // its stdout
};

/// Runs `command` with /bin/sh; its stderr goes to the test's stderr.
inline command_result run_command(const std::string& command) {
  command_result result;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr)
    throw std::runtime_error("popen failed: " + command);
  char buffer[65536];
  size_t n = 0;
  while ((n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0)
    result.output.append(buffer, n);
  int status = ::pclose(pipe);
  if (status != -1 && WIFEXITED(status))
    result.exit_code = WEXITSTATUS(status);
  return result;
}

inline std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string::npos)
      nl = text.size();
    out.push_back(text.substr(pos, nl - pos));
    pos = nl + 1;
  }
  return out;
}

/// A fresh directory under the system temp dir, removed on destruction.
class temp_dir {
public:
  temp_dir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "lmcc-hashing-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr)
      throw std::runtime_error("mkdtemp failed");
    path_ = pattern;
  }
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;
  ~temp_dir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }

  const std::filesystem::path& path() const noexcept { return path_; }

  /// Writes `content` to a file named `name` inside the directory.
  std::filesystem::path write(const std::string& name, std::string_view content) const {
    auto file = path_ / name;
    std::ofstream out{file, std::ios::binary};
    out << content;
    if (!out)
      throw std::runtime_error("cannot write " + file.string());
    return file;
  }

private:
  std::filesystem::path path_;
};

} // namespace lmcc::test
