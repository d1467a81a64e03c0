#include "apps/lmcc-bench/lookup_clients.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace lmcc::bench {
namespace {

double micros_since(steady::time_point t0) {
  return std::chrono::duration<double, std::micro>(steady::now() - t0).count();
}

} // namespace

lookup_verdict http_lookup(controller_http& api, const lookup_query& query,
                           const instance_info& owner, const std::string& location) {
  lookup_verdict v;
  const auto t0 = steady::now();
  auto result = api.lookup(query.tokens);
  v.latency_us = micros_since(t0);
  if (!result.ok) {
    v.no_reply = result.status == 0; // no HTTP response at all
    v.detail = result.error;
    return v;
  }
  v.answered = true;
  if (query.held_chunks == 0) {
    v.correct = result.layout.empty();
    if (!v.correct)
      v.detail = fmt::format("expected no holder, got {} ({} tokens)", result.layout[0].instance_id,
                             result.layout[0].tokens);
    return v;
  }
  if (result.layout.size() != 1) {
    v.detail =
        fmt::format("expected 1 holder ({}), got {}", owner.instance_id, result.layout.size());
    return v;
  }
  const auto& entry = result.layout[0];
  v.correct = entry.instance_id == owner.instance_id && entry.location == location &&
              entry.tokens == static_cast<int64_t>(query.expected_tokens);
  if (!v.correct)
    v.detail = fmt::format("expected {} {} {} tokens, got {} {} {}", owner.instance_id, location,
                           query.expected_tokens, entry.instance_id, entry.location, entry.tokens);
  return v;
}

p2p_client::p2p_client(zmq::context_t& ctx, std::string reply_url, uint32_t timeout_ms,
                       std::string asker_instance)
  : channel_(ctx, std::move(reply_url), timeout_ms), asker_(std::move(asker_instance)) {}

lookup_verdict p2p_client::lookup(const lookup_query& query, int64_t asker_rank,
                                  const instance_info& owner, const std::string& location) {
  lookup_verdict v;
  msg::BatchedP2PLookupMsg request{.hashes = {}, .instance_id = asker_, .worker_id = asker_rank};
  request.hashes.assign(query.chunk_hashes.begin(), query.chunk_hashes.end());
  const auto t0 = steady::now();
  auto result = channel_.request(request);
  v.latency_us = micros_since(t0);
  if (result.status != request_status::ok) {
    v.no_reply = result.status != request_status::bad_reply;
    v.detail = result.status == request_status::bad_reply ? result.error : "no reply (timeout)";
    return v;
  }
  auto* ret = std::get_if<msg::BatchedP2PLookupRetMsg>(&*result.reply);
  if (ret == nullptr) {
    auto* error = std::get_if<msg::ErrorMsg>(&*result.reply);
    v.detail = error != nullptr ? "ErrorMsg: " + error->error
                                : fmt::format("unexpected {}", msg::type_tag_of(*result.reply));
    return v;
  }
  v.answered = true;
  if (ret->layout_info.size() != 1) {
    v.detail = fmt::format("expected 1 layout entry, got {}", ret->layout_info.size());
    return v;
  }
  const auto& [instance, loc, hits, url] = ret->layout_info[0];
  if (query.held_chunks == 0) {
    // A miss is the sentinel ("", "", 0, "") (spec 4.6).
    v.correct = instance.empty() && loc.empty() && hits == msg::wire_int{0} && url.empty();
    if (!v.correct)
      v.detail =
          fmt::format("expected the miss sentinel, got {} {} {}", instance, loc, hits.to_string());
    return v;
  }
  const bool url_of_owner =
      std::find(owner.peer_urls.begin(), owner.peer_urls.end(), url) != owner.peer_urls.end();
  v.correct = instance == owner.instance_id && loc == location &&
              hits == msg::wire_int{static_cast<int64_t>(query.held_chunks)} && url_of_owner;
  const auto rank = static_cast<size_t>(asker_rank);
  v.tp_exact = rank < owner.peer_urls.size() && url == owner.peer_urls[rank];
  if (!v.correct)
    v.detail = fmt::format("expected {} {} {} chunks (a url of {}), got {} {} {} {}",
                           owner.instance_id, location, query.held_chunks, owner.instance_id,
                           instance, loc, hits.to_string(), url);
  return v;
}

} // namespace lmcc::bench
