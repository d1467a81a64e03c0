#include "registry/lookup_logic.hpp"

#include <algorithm>
#include <optional>

namespace lmcc::actors {
namespace {

struct resolved_holder {
  const directory_view::worker_entry* worker;
  const std::string* location;
  uint32_t location_rank;
  holder_id id;
};

// Known holders of one key in registration order (instance, worker, then the
// worker's locations in first-seen order, as LMCache's kv_store dict).
absl::InlinedVector<resolved_holder, 4> resolve(const directory_view& view,
                                                const holder_list& holders) {
  absl::InlinedVector<resolved_holder, 4> out;
  for (holder_id h : holders) {
    auto [w, entry] = view.find(h);
    if (w == nullptr)
      continue; // deregistered a moment ago, or not yet in this view
    out.push_back(resolved_holder{w, &entry->location, entry->location_rank, h});
  }
  std::sort(out.begin(), out.end(), [](const resolved_holder& a, const resolved_holder& b) {
    return std::tie(a.worker->instance_rank, a.worker->worker_rank, a.location_rank) <
           std::tie(b.worker->instance_rank, b.worker->worker_rank, b.location_rank);
  });
  return out;
}

} // namespace

msg::LookupRetMsg multi_holder_layout(const directory_view& view, std::string event_id,
                                      const std::vector<msg::token_chunk>& chunks,
                                      const std::vector<holder_list>& holders) {
  msg::LookupRetMsg ret;
  ret.event_id = std::move(event_id);
  if (chunks.empty() || holders.empty())
    return ret;

  struct credit {
    uint32_t instance_rank;
    const std::string* instance_id;
    const std::string* location;
    uint64_t end;
    bool alive;
  };
  std::vector<credit> credits; // in registration order of instances
  for (const auto& h : resolve(view, holders[0])) {
    if (!credits.empty() && credits.back().instance_rank == h.worker->instance_rank)
      continue; // first holder of an instance decides its location
    credits.push_back(
        credit{h.worker->instance_rank, &h.worker->instance_id, h.location, chunks[0].end, true});
  }
  size_t alive = credits.size();
  for (size_t i = 1; i < chunks.size() && i < holders.size() && alive > 0; ++i) {
    auto resolved = resolve(view, holders[i]);
    for (auto& c : credits) {
      if (!c.alive)
        continue;
      auto it = std::find_if(resolved.begin(), resolved.end(), [&](const resolved_holder& h) {
        return h.worker->instance_rank == c.instance_rank;
      });
      if (it == resolved.end()) {
        c.alive = false;
        --alive;
        continue;
      }
      c.location = it->location;
      c.end = chunks[i].end;
    }
  }
  for (const auto& c : credits)
    ret.layout_info.emplace_back(*c.instance_id,
                                 std::make_pair(*c.location, static_cast<int64_t>(c.end)));
  return ret;
}

msg::BatchedP2PLookupRetMsg p2p_layout(const directory_view& view,
                                       const std::string& asker_instance,
                                       const msg::wire_int& asker_worker_id,
                                       const std::vector<holder_list>& holders) {
  msg::BatchedP2PLookupRetMsg miss;
  miss.layout_info.emplace_back("", "", 0, "");
  if (holders.empty())
    return miss;
  std::optional<resolved_holder> peer;
  for (const auto& h : resolve(view, holders[0])) {
    if (h.worker->worker_id == asker_worker_id && h.worker->instance_id != asker_instance) {
      peer = h;
      break;
    }
  }
  if (!peer || !peer->worker->peer_init_url)
    return miss;
  int64_t hits = 0;
  for (const auto& hs : holders) {
    if (std::find(hs.begin(), hs.end(), peer->id) == hs.end())
      break;
    ++hits;
  }
  msg::BatchedP2PLookupRetMsg ret;
  ret.layout_info.emplace_back(peer->worker->instance_id, *peer->location, hits,
                               *peer->worker->peer_init_url);
  return ret;
}

} // namespace lmcc::actors
