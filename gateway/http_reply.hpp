// http_reply: the JSON answers of the HTTP API, in LMCache's shapes (spec 5.1).
//
// Replies are small (an event_id and a count, a few workers), so they are built
// as nlohmann documents, keys in LMCache's order. The controller's answer is
// checked first: an ErrorMsg becomes 500 {"detail": error}, as in LMCache.
//
//   const auto& ret = expect_reply<msg::ClearRetMsg>(reply, "ClearMsg");   // or throws
//   send_json(res, 200, num_tokens_json(ret));
//
// Context: free functions, reentrant. Private to gateway/http_*.cpp.
#pragma once

#include "gateway/http_body.hpp"
#include "messages/lmcache_msgs.hpp"

#include <httplib.h>
#include <nlohmann/json.hpp>

#include <string>
#include <string_view>
#include <variant>

namespace lmcc::gateway {

using reply_json = nlohmann::ordered_json;

/// An int as JSON, keeping the full range: negative ones signed, others unsigned.
reply_json int_json(const msg::wire_int& v);

/// FastAPI's error body: {"detail": text}.
reply_json detail_json(std::string_view text);

/// Writes `body` as the response with `status`; text that is not valid UTF-8
/// (from workers, from /proc) is replaced rather than refused.
void send_json(httplib::Response& res, int status, const reply_json& body);

/// A WorkerInfo as LMCache's dataclass renders it.
reply_json worker_info_json(const msg::WorkerInfo& w);

/// {"event_id", "num_tokens"}: the reply of /clear, /pin, /compress, /decompress, /move.
template <class Ret>
reply_json num_tokens_json(const Ret& ret) {
  return reply_json{{"event_id", ret.event_id}, {"num_tokens", int_json(ret.num_tokens)}};
}

/// The controller's reply as `Ret`. Throws request_error 500 with the error text
/// for an ErrorMsg, and naming both types for any other message.
template <class Ret>
const Ret& expect_reply(const msg::Msg& reply, std::string_view request_tag) {
  if (const auto* error = std::get_if<msg::ErrorMsg>(&reply))
    throw request_error{500, error->error};
  if (const auto* ret = std::get_if<Ret>(&reply))
    return *ret;
  throw request_error{500, "controller answered " + std::string(msg::type_tag_of(reply)) + " to " +
                               std::string(request_tag)};
}

} // namespace lmcc::gateway
