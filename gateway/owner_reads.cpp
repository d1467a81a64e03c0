#include "gateway/owner_reads.hpp"

#include <algorithm>
#include <map>
#include <optional>
#include <vector>

namespace lmcc::gateway {
namespace {

using clock = std::chrono::steady_clock;

/// One request in flight: the items asked of one owner.
struct owner_call {
  owner_index owner = no_owner;
  /// Owners already tried for these items (the next owner passes them over).
  std::vector<owner_index> avoid;
  std::vector<uint32_t> items;
  peer_read_client::call call;
  bool hedged = false;
  bool open = true;
};

class fan_out {
public:
  fan_out(std::span<const uint64_t> keys, const owner_read_routes& routes, peer_read_client& client)
    : keys_(keys), routes_(routes), client_(client), answered_(keys.size(), unanswered) {}

  /// Asks each item's owner (passing over `avoid`; with `complete_only` only
  /// an owner holding all of its slot), the local index at once; false when no
  /// item had an owner left to ask.
  bool dispatch(std::span<const uint32_t> items, const std::vector<owner_index>& avoid,
                bool complete_only = false) {
    bool asked = false;
    std::map<owner_index, std::vector<uint32_t>> by_owner;
    for (uint32_t i : items)
      if (answered_[i] != answered)
        by_owner[routes_.owner(i, avoid, complete_only)].push_back(i);
    for (auto& [owner, its] : by_owner) {
      if (owner == no_owner || std::find(avoid.begin(), avoid.end(), owner) != avoid.end())
        continue; // no owner left: unanswered unless an open call answers
      asked = true;
      if (owner == routes_.self) {
        read_local(its);
        continue;
      }
      asked_.clear();
      for (uint32_t i : its)
        asked_.push_back(keys_[i]);
      const std::string endpoint = routes_.endpoint(owner);
      auto call = endpoint.empty() ? std::nullopt : client_.send(endpoint, asked_);
      std::vector<owner_index> tried = avoid;
      if (!call) {
        ++outcome_.rerouted;
        tried.push_back(owner);
        // Ends: each level avoids one more owner.
        asked = dispatch(its, tried, complete_only) || asked;
        continue;
      }
      calls_.push_back(owner_call{owner, std::move(tried), std::move(its), std::move(*call)});
    }
    return asked;
  }

  /// Gives up call `c` and asks the next owner for what it had not answered.
  void reroute(size_t c) {
    calls_[c].open = false;
    calls_[c].call.socket.reset(); // a late reply must not reach the next call
    ++outcome_.rerouted;
    auto avoid = calls_[c].avoid;
    avoid.push_back(calls_[c].owner);
    const auto items = calls_[c].items;
    dispatch(items, avoid);
  }

  /// Also asks the next owner for what call `c` has not answered yet.
  void hedge(size_t c) {
    calls_[c].hedged = true;
    auto avoid = calls_[c].avoid;
    avoid.push_back(calls_[c].owner);
    const auto items = calls_[c].items;
    if (dispatch(items, avoid, /*complete_only=*/true))
      ++outcome_.hedged;
  }

  /// Takes call `c`'s reply (it is readable), or reroutes it if broken.
  void take(size_t c, clock::time_point deadline) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock::now());
    auto flat = client_.wait(calls_[c].call, std::max(left, std::chrono::milliseconds{1}));
    if (!flat) {
      reroute(c);
      return;
    }
    calls_[c].open = false;
    std::vector<uint32_t> uncertain;
    size_t at = 0;
    for (uint32_t i : calls_[c].items) {
      if (at >= flat->size())
        break;
      const bool from_uncertain = ((*flat)[at] & peer_read_uncertain) != 0;
      const uint64_t count =
          std::min<uint64_t>((*flat)[at] & ~peer_read_uncertain, flat->size() - at - 1);
      if (answered_[i] != answered) {
        // A provisional answer adds to another provisional one; a certain
        // answer replaces it.
        const bool add = answered_[i] == provisionally && from_uncertain;
        routes_.fill(i, std::span<const uint64_t>{flat->data() + at + 1, count}, add);
        answered_[i] = from_uncertain ? provisionally : answered;
        if (from_uncertain)
          uncertain.push_back(i);
      }
      at += 1 + count;
    }
    if (!uncertain.empty()) {
      // The owner's copy may lack ops another owner's has: ask the next one,
      // keeping this answer if none is left (or none answers in time).
      ++outcome_.uncertain;
      auto avoid = calls_[c].avoid;
      avoid.push_back(calls_[c].owner);
      dispatch(uncertain, avoid);
    }
  }

  /// Closes the calls whose items others answered; the open ones remain.
  std::vector<size_t> open_calls() {
    std::vector<size_t> open;
    for (size_t c = 0; c < calls_.size(); ++c) {
      auto& call = calls_[c];
      if (call.open && std::all_of(call.items.begin(), call.items.end(),
                                   [&](uint32_t i) { return answered_[i] == answered; })) {
        call.open = false;
        call.call.socket.reset();
      }
      if (call.open)
        open.push_back(c);
    }
    return open;
  }

  std::vector<owner_call>& calls() { return calls_; }

  owner_read_outcome finish() {
    outcome_.unanswered =
        static_cast<uint32_t>(std::count(answered_.begin(), answered_.end(), unanswered));
    outcome_.provisional =
        static_cast<uint32_t>(std::count(answered_.begin(), answered_.end(), provisionally));
    outcome_.first_unsure = static_cast<uint32_t>(
        std::find_if(answered_.begin(), answered_.end(), [](uint8_t a) { return a != answered; }) -
        answered_.begin());
    return outcome_;
  }

private:
  /// Reads `items` from this node's copy: certain where it is, provisional
  /// (added to other provisional answers) where it is uncertain.
  void read_local(std::span<const uint32_t> items) {
    std::vector<uint32_t> replace, add;
    for (uint32_t i : items) {
      const bool unsure = routes_.local_uncertain && routes_.local_uncertain(i);
      (unsure && answered_[i] == provisionally ? add : replace).push_back(i);
      answered_[i] = unsure ? provisionally : answered;
    }
    if (!replace.empty())
      routes_.read_local(replace, false);
    if (!add.empty())
      routes_.read_local(add, true);
  }

  std::span<const uint64_t> keys_;
  const owner_read_routes& routes_;
  peer_read_client& client_;
  /// Per item: unanswered, answered provisionally (by an owner uncertain of
  /// its copy: another owner's answer replaces it), or answered.
  static constexpr uint8_t unanswered = 0, provisionally = 1, answered = 2;
  std::vector<uint8_t> answered_;
  std::vector<owner_call> calls_;
  std::vector<uint64_t> asked_;
  owner_read_outcome outcome_;
};

} // namespace

owner_read_outcome read_owners(std::span<const uint64_t> keys, const owner_read_routes& routes,
                               peer_read_client& client, const owner_read_options& options) {
  const auto start = clock::now();
  const auto deadline = start + options.timeout;
  const auto hedge_at = start + options.hedge_delay;
  bool hedge_due = options.hedge_delay.count() > 0;
  fan_out reads{keys, routes, client};
  std::vector<uint32_t> all(keys.size());
  for (uint32_t i = 0; i < all.size(); ++i)
    all[i] = i;
  reads.dispatch(all, {});
  auto next_recheck = start + options.recheck;
  while (true) {
    const auto open = reads.open_calls();
    const auto now = clock::now();
    if (open.empty() || now >= deadline)
      break;
    auto wake = std::min(deadline, next_recheck);
    if (hedge_due)
      wake = std::min(wake, hedge_at);
    std::vector<const peer_read_client::call*> waiting;
    waiting.reserve(open.size());
    for (size_t c : open)
      waiting.push_back(&reads.calls()[c].call);
    const auto wait = std::chrono::ceil<std::chrono::milliseconds>(wake - now);
    if (auto ready = peer_read_client::wait_any(waiting, wait)) {
      reads.take(open[*ready], deadline);
      continue; // the others may be readable too: no waiting before them
    }
    const auto after = clock::now();
    if (after >= next_recheck) {
      next_recheck = after + options.recheck;
      routes.refresh();
      for (size_t c : reads.open_calls())
        if (!routes.reachable(reads.calls()[c].owner))
          reads.reroute(c);
    }
    if (hedge_due && after >= hedge_at) {
      hedge_due = false;
      for (size_t c : reads.open_calls())
        if (!reads.calls()[c].hedged)
          reads.hedge(c);
    }
  }
  return reads.finish();
}

} // namespace lmcc::gateway
