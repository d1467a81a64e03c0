// lookup_command: `lmcc lookup`, the layout of a prompt's tokens as an
// LMCache router gets it: POST /lookup {"tokens": [...]} to the first
// endpoint that answers, then which instance holds how many of the prompt's
// leading tokens, where, which node answered and how long it took.
//
//   lmcc lookup [FILE|-] [--endpoints HOST:PORT[,...]] [--output table|json] [--timeout S]
//   (tokens: a JSON array of integers or blank-separated integers; stdin without FILE)
//
// Exit codes (docs/client.md): 0 some instance holds a prefix, 1 none does,
// 2 no endpoint answered, 3 an endpoint answered but not with a layout,
// 4 bad --endpoints or tokens.
//
// Context: called from main() only.
#pragma once

#include "apps/lmcc/client/endpoints.hpp"

#include <istream>
#include <ostream>
#include <string>

namespace lmcc::apps::client {

/// `source`: a file name, or "" / "-" for `in` (stdin).
int run_lookup(const client_options& options, const std::string& source, std::istream& in,
               std::ostream& out, std::ostream& err);

} // namespace lmcc::apps::client
