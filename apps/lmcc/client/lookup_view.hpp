// lookup_view: the pure half of `lmcc lookup`: the tokens read from a file or
// stdin, and the layout a node's POST /lookup answers (LMCache's router
// endpoint: instance -> (location, tokens of the prompt's prefix it holds)),
// as people read it.
//
//   auto tokens = parse_tokens("[1, 2, 3]");          // or "1 2 3", a JSON array
//   render_lookup(answer, {"n2", "10.0.0.2:9000", 3.0}, 1024, std::cout);
//   -> INSTANCE  LOCATION         TOKENS
//      vllm-0    LocalCPUBackend     512
//
//      n2 (10.0.0.2:9000) answered in 3.0 ms: 1 instance holds a prefix of the 1024 tokens
//
// Context: pure functions, reentrant.
#pragma once

#include "messages/expected.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <ostream>
#include <string>
#include <string_view>

namespace lmcc::apps::client {

/// The token ids in `text`: a JSON array of integers, or integers separated
/// by blanks, newlines or commas. Ids are what /lookup accepts, -2^63 ..
/// 2^64-1. Fails naming the first item that is not an integer, or when
/// there is none. The result is a JSON array, ready for {"tokens": ...}.
[[nodiscard]] msg::expected<nlohmann::json> parse_tokens(std::string_view text);

/// Who answered a lookup and how long the POST took.
struct lookup_origin {
  std::string node;      ///< its node id; "" when it did not say (a single node)
  std::string endpoint;  ///< the address asked
  double elapsed_ms = 0; ///< the POST's round trip
};

/// The instances in /lookup's `layout_info` ({instance: [location, tokens]}).
size_t layout_instances(const nlohmann::json& answer);

/// "n2 (10.0.0.2:9000)", or the address alone when the node is unknown.
std::string describe_origin(const lookup_origin& origin);

/// The layout as a table (INSTANCE, LOCATION, TOKENS) and a line saying
/// who answered, in how long, and how many instances hold a prefix of the
/// `token_count` tokens; with none, the line alone.
void render_lookup(const nlohmann::json& answer, const lookup_origin& origin, size_t token_count,
                   std::ostream& out);

/// The node's answer with "node" (its id, or null), "asked" and
/// "elapsed_ms" (to the microsecond) added.
nlohmann::json lookup_json(nlohmann::json answer, const lookup_origin& origin);

} // namespace lmcc::apps::client
