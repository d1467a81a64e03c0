// lmcc: the LMCache cache controller and its tools.
//
//   lmcc node [flags]              a controller node (LMCache's CLI flags)
//   lmcc msg decode|encode         hex msgpack <-> msgspec JSON, one per line
//   lmcc chunk-hashes [...]        token lists -> CPython-compatible chunk hashes
#include "apps/lmcc/tool_commands.hpp"

#include <CLI/CLI.hpp>

#include <iostream>
#include <optional>

int main(int argc, char** argv) {
  CLI::App app{"lmcc: a clustered, durable cache controller for LMCache"};
  app.require_subcommand(1);

  auto* msg_cmd = app.add_subcommand("msg", "encode/decode LMCache wire messages");
  msg_cmd->require_subcommand(1);
  auto* decode_cmd = msg_cmd->add_subcommand(
    "decode", "stdin: one hex msgpack frame per line; stdout: msgspec JSON or {\"error\":...}");
  auto* encode_cmd = msg_cmd->add_subcommand(
    "encode", "stdin: one msgspec JSON message per line; stdout: hex msgpack or {\"error\":...}");

  auto* hash_cmd = app.add_subcommand(
    "chunk-hashes", "stdin: JSON array of token ids per line; stdout: [[start,end,hash],...]");
  std::optional<int64_t> none_hash;
  std::optional<uint32_t> python_hash_seed;
  uint32_t chunk_size = 256;
  auto* none_opt = hash_cmd->add_option("--none-hash", none_hash, "initial chain hash (default 0)");
  hash_cmd->add_option("--python-hash-seed", python_hash_seed,
                       "derive the initial hash from PYTHONHASHSEED as vLLM does")
    ->excludes(none_opt);
  hash_cmd->add_option("--chunk-size", chunk_size, "tokens per chunk")
    ->check(CLI::Range(1U, 1U << 20));

  CLI11_PARSE(app, argc, argv);
  std::ios::sync_with_stdio(false);

  if (*decode_cmd)
    return lmcc::apps::run_msg_decode(std::cin, std::cout);
  if (*encode_cmd)
    return lmcc::apps::run_msg_encode(std::cin, std::cout);
  if (*hash_cmd) {
    lmcc::msg::chunk_hash_options options;
    options.chunk_size = chunk_size;
    if (none_hash)
      options.none_hash = *none_hash;
    if (python_hash_seed)
      options.none_hash = lmcc::msg::none_hash_from_python_hash_seed(*python_hash_seed);
    return lmcc::apps::run_chunk_hashes(options, std::cin, std::cout);
  }
  return 0;
}
