// owner_reads: a lookup's reads from the owners of its slots, with real
// peer_read servers on loopback standing in for the other nodes; one of them
// stuck (its answer waits on a gate), cut off, or gone.
#include "gateway/owner_reads.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <map>
#include <mutex>

namespace lmcc::gateway {
namespace {

using namespace std::chrono_literals;

constexpr peer_read_key test_key{0x1111222233334444ULL, 0x5555666677778888ULL};

/// Key k is held by holders k+1 and k+2 at every owner: what a replica holds.
std::vector<uint64_t> owner_answer(std::span<const uint64_t> keys) {
  std::vector<uint64_t> flat;
  for (uint64_t k : keys) {
    flat.push_back(2);
    flat.push_back(k + 1);
    flat.push_back(k + 2);
  }
  return flat;
}

/// Holds a server's answers until opened (a frozen node: connected, silent).
/// Declare it before the server and a thaw after it: the server's stop joins
/// the thread the gate holds.
class answer_gate {
public:
  void open() {
    std::lock_guard lock{mutex_};
    open_ = true;
    cv_.notify_all();
  }
  std::vector<uint64_t> answer(std::span<const uint64_t> keys) {
    std::unique_lock lock{mutex_};
    cv_.wait(lock, [this] { return open_; });
    return owner_answer(keys);
  }

private:
  std::mutex mutex_;
  std::condition_variable cv_;
  bool open_ = false;
};

/// Opens the gate when the test ends, before the server it holds stops.
struct thaw {
  answer_gate& gate;
  ~thaw() { gate.open(); }
};

/// Node 0 reads locally; key k's slot is owned by nodes k % 3 and
/// (k + 1) % 3, in that order (R = 2).
struct three_nodes {
  std::map<owner_index, std::string> endpoints;
  std::vector<uint8_t> down = {0, 0, 0};
  /// Still copying the slots a membership change gave it: holds only part.
  std::vector<uint8_t> copying = {0, 0, 0};
  std::atomic<int> refreshes{0};
  std::vector<uint64_t> keys;
  std::vector<std::vector<uint64_t>> got;
  std::vector<uint8_t> local;

  explicit three_nodes(size_t n) : got(n), local(n, 0) {
    for (uint64_t k = 0; k < n; ++k)
      keys.push_back(1000 + k);
  }

  owner_read_routes routes() {
    owner_read_routes r;
    r.self = 0;
    r.owner = [this](uint32_t i, std::span<const owner_index> avoid, bool complete_only) {
      for (owner_index step = 0; step < 2; ++step) { // R = 2
        const auto n = static_cast<owner_index>((keys[i] + step) % 3);
        if (std::find(avoid.begin(), avoid.end(), n) == avoid.end() && !down[n] &&
            !(complete_only && copying[n]))
          return n;
      }
      return no_owner;
    };
    r.endpoint = [this](owner_index n) { return endpoints.count(n) ? endpoints[n] : ""; };
    r.refresh = [this] { ++refreshes; };
    r.reachable = [this](owner_index n) { return !down[n]; };
    r.read_local = [this](std::span<const uint32_t> items, bool add) {
      for (uint32_t i : items) {
        auto mine = local_uncertain[i] ? std::vector<uint64_t>{keys[i] + 2}
                                       : std::vector<uint64_t>{keys[i] + 1, keys[i] + 2};
        put(i, mine, add);
        local[i] = 1;
      }
    };
    r.fill = [this](uint32_t i, std::span<const uint64_t> holders, bool add) {
      put(i, holders, add);
    };
    r.local_uncertain = [this](uint32_t i) { return local_uncertain[i] != 0; };
    return r;
  }

  /// Node 0's copy of item i's slot is uncertain: it holds only key k + 2.
  std::vector<uint8_t> local_uncertain = std::vector<uint8_t>(64, 0);

  /// Records holders for item i: in place, or added (in order, no repeats).
  void put(uint32_t i, std::span<const uint64_t> holders, bool add) {
    if (!add)
      got[i].clear();
    for (uint64_t h : holders)
      if (std::find(got[i].begin(), got[i].end(), h) == got[i].end())
        got[i].push_back(h);
    std::sort(got[i].begin(), got[i].end());
  }

  void expect_all_answered() const {
    for (size_t i = 0; i < keys.size(); ++i)
      EXPECT_EQ(got[i], (std::vector<uint64_t>{keys[i] + 1, keys[i] + 2})) << "key " << keys[i];
  }
};

/// Owner 1 stuck (connected, silent until the test ends) and owner 2
/// answering, wired into three_nodes over 30 keys. Members end in reverse:
/// the gate opens before owner 1's server stops.
struct owner_one_stuck {
  answer_gate frozen;
  peer_read_server one{"127.0.0.1", "127.0.0.1", test_key,
                       [this](std::span<const uint64_t> keys) { return frozen.answer(keys); }};
  const thaw thaw_at_exit{frozen};
  peer_read_server two{"127.0.0.1", "127.0.0.1", test_key, owner_answer};
  three_nodes nodes{30};

  owner_one_stuck() { nodes.endpoints = {{1, one.access_endpoint()}, {2, two.access_endpoint()}}; }
};

TEST(owner_reads, every_owner_answers_its_keys_and_the_local_index_its_own) {
  peer_read_server one{"127.0.0.1", "127.0.0.1", test_key, owner_answer};
  peer_read_server two{"127.0.0.1", "127.0.0.1", test_key, owner_answer};
  three_nodes nodes{30};
  nodes.endpoints = {{1, one.access_endpoint()}, {2, two.access_endpoint()}};
  peer_read_client client;
  const auto outcome = read_owners(nodes.keys, nodes.routes(), client, {});
  nodes.expect_all_answered();
  EXPECT_EQ(outcome.hedged, 0u);
  EXPECT_EQ(outcome.rerouted, 0u);
  EXPECT_EQ(outcome.unanswered, 0u);
  EXPECT_EQ(one.requests(), 1u); // one request per owner, not per key
  EXPECT_EQ(two.requests(), 1u);
  for (size_t i = 0; i < nodes.keys.size(); ++i)
    EXPECT_EQ(nodes.local[i], nodes.keys[i] % 3 == 0) << nodes.keys[i];
}

TEST(owner_reads, a_stuck_owner_is_hedged_to_the_next_owner) {
  owner_one_stuck stuck;
  auto& nodes = stuck.nodes;
  auto& two = stuck.two;
  peer_read_client client;
  owner_read_options options;
  options.timeout = 60s; // the hedge answers, not the timeout
  options.hedge_delay = 50ms;
  const auto outcome = read_owners(nodes.keys, nodes.routes(), client, options);
  nodes.expect_all_answered();
  EXPECT_EQ(outcome.hedged, 1u);
  EXPECT_EQ(outcome.unanswered, 0u);
  EXPECT_EQ(two.requests(), 2u); // its own keys, then owner 1's
}

TEST(owner_reads, a_stuck_owner_is_not_hedged_to_an_owner_still_copying) {
  owner_one_stuck stuck;
  auto& nodes = stuck.nodes;
  auto& two = stuck.two;
  nodes.copying[2] = 1; // its answer for owner 1's keys would be partial
  peer_read_client client;
  owner_read_options options;
  options.timeout = 300ms;
  options.hedge_delay = 50ms;
  const auto outcome = read_owners(nodes.keys, nodes.routes(), client, options);
  EXPECT_EQ(outcome.hedged, 0u);
  EXPECT_EQ(two.requests(), 1u) << "only its own keys: owner 1's were not hedged to it";
  for (size_t i = 0; i < nodes.keys.size(); ++i) {
    if (nodes.keys[i] % 3 == 1) {
      EXPECT_TRUE(nodes.got[i].empty()) << "key " << nodes.keys[i] << " filled by a partial owner";
    }
  }
}

/// An owner uncertain of its copy (it missed ops): its answers carry
/// peer_read_uncertain and hold only key k's first holder.
std::vector<uint64_t> uncertain_answer(std::span<const uint64_t> keys) {
  std::vector<uint64_t> flat;
  for (uint64_t k : keys) {
    flat.push_back(1 | peer_read_uncertain);
    flat.push_back(k + 1);
  }
  return flat;
}

TEST(owner_reads, an_owner_uncertain_of_its_copy_is_read_around) {
  peer_read_server one{"127.0.0.1", "127.0.0.1", test_key, uncertain_answer};
  peer_read_server two{"127.0.0.1", "127.0.0.1", test_key, owner_answer};
  three_nodes nodes{30};
  nodes.endpoints = {{1, one.access_endpoint()}, {2, two.access_endpoint()}};
  peer_read_client client;
  owner_read_options options;
  options.hedge_delay = 0ms; // the uncertain flag re-asks, not a hedge
  const auto outcome = read_owners(nodes.keys, nodes.routes(), client, options);
  nodes.expect_all_answered();
  EXPECT_EQ(outcome.uncertain, 1u); // one answer of owner 1, asked again
  EXPECT_EQ(outcome.unanswered, 0u);
  EXPECT_EQ(two.requests(), 2u); // its own keys, then owner 1's
}

TEST(owner_reads, an_uncertain_answer_stands_when_no_other_owner_is_left) {
  peer_read_server one{"127.0.0.1", "127.0.0.1", test_key, uncertain_answer};
  three_nodes nodes{30};
  nodes.endpoints = {{1, one.access_endpoint()}};
  nodes.down[2] = 1; // owner 1's keys (k % 3 == 1) have no other owner up
  peer_read_client client;
  owner_read_options options;
  options.hedge_delay = 0ms;
  options.timeout = 2s;
  const auto outcome = read_owners(nodes.keys, nodes.routes(), client, options);
  for (size_t i = 0; i < nodes.keys.size(); ++i) {
    if (nodes.keys[i] % 3 == 1) {
      EXPECT_EQ(nodes.got[i], std::vector<uint64_t>{nodes.keys[i] + 1}) << nodes.keys[i];
    }
  }
  EXPECT_EQ(outcome.uncertain, 1u);
  EXPECT_EQ(outcome.unanswered, 0u);
  size_t owner_1s = 0;
  for (uint64_t k : nodes.keys)
    owner_1s += k % 3 == 1 ? 1 : 0;
  EXPECT_EQ(outcome.provisional, owner_1s); // and the caller is told they may be short
}

/// An uncertain copy that holds only key k + 2 (another owner's gap differs).
std::vector<uint64_t> other_uncertain_answer(std::span<const uint64_t> keys) {
  std::vector<uint64_t> flat;
  for (uint64_t k : keys) {
    flat.push_back(1 | peer_read_uncertain);
    flat.push_back(k + 2);
  }
  return flat;
}

TEST(owner_reads, uncertain_owners_answer_the_union_of_their_copies) {
  // Keys k % 3 == 1 are owned by nodes 1 and 2, both uncertain, each lacking
  // what the other holds: neither answer alone is the whole one.
  peer_read_server one{"127.0.0.1", "127.0.0.1", test_key, uncertain_answer};
  peer_read_server two{"127.0.0.1", "127.0.0.1", test_key, other_uncertain_answer};
  three_nodes nodes{30};
  nodes.endpoints = {{1, one.access_endpoint()}, {2, two.access_endpoint()}};
  peer_read_client client;
  owner_read_options options;
  options.hedge_delay = 0ms;
  const auto outcome = read_owners(nodes.keys, nodes.routes(), client, options);
  uint32_t both_uncertain = 0;
  uint32_t first = 0xffffffff;
  for (size_t i = 0; i < nodes.keys.size(); ++i) {
    const uint64_t k = nodes.keys[i];
    if (k % 3 == 1) {
      EXPECT_EQ(nodes.got[i], (std::vector<uint64_t>{k + 1, k + 2})) << k;
      ++both_uncertain;
      first = std::min(first, static_cast<uint32_t>(i));
    }
  }
  EXPECT_EQ(outcome.provisional, both_uncertain); // still told: it may be short
  EXPECT_EQ(outcome.unanswered, 0u);
  EXPECT_EQ(outcome.first_unsure, first);
}

TEST(owner_reads, this_nodes_uncertain_copy_adds_to_another_uncertain_answer) {
  // Keys k % 3 == 2 are owned by node 2 and this node (0): node 2 answers
  // k + 1 uncertainly, this node's uncertain copy holds k + 2.
  peer_read_server one{"127.0.0.1", "127.0.0.1", test_key, owner_answer};
  peer_read_server two{"127.0.0.1", "127.0.0.1", test_key, uncertain_answer};
  three_nodes nodes{30};
  nodes.endpoints = {{1, one.access_endpoint()}, {2, two.access_endpoint()}};
  for (size_t i = 0; i < nodes.keys.size(); ++i)
    nodes.local_uncertain[i] = nodes.keys[i] % 3 == 2 ? 1 : 0;
  peer_read_client client;
  owner_read_options options;
  options.hedge_delay = 0ms;
  const auto outcome = read_owners(nodes.keys, nodes.routes(), client, options);
  uint32_t unsure = 0;
  for (size_t i = 0; i < nodes.keys.size(); ++i) {
    const uint64_t k = nodes.keys[i];
    if (k % 3 == 2) {
      EXPECT_EQ(nodes.got[i], (std::vector<uint64_t>{k + 1, k + 2})) << k;
      ++unsure;
    }
  }
  EXPECT_EQ(outcome.provisional, unsure);
}

TEST(owner_reads, a_certain_answer_replaces_a_provisional_one) {
  peer_read_server one{"127.0.0.1", "127.0.0.1", test_key, uncertain_answer};
  peer_read_server two{"127.0.0.1", "127.0.0.1", test_key, owner_answer};
  three_nodes nodes{30};
  nodes.endpoints = {{1, one.access_endpoint()}, {2, two.access_endpoint()}};
  peer_read_client client;
  owner_read_options options;
  options.hedge_delay = 0ms;
  const auto outcome = read_owners(nodes.keys, nodes.routes(), client, options);
  nodes.expect_all_answered();
  EXPECT_EQ(outcome.provisional, 0u);
  EXPECT_EQ(outcome.first_unsure, nodes.keys.size());
}

TEST(owner_reads, an_owner_found_down_is_given_up_without_waiting_for_the_hedge) {
  owner_one_stuck stuck;
  auto& nodes = stuck.nodes;
  auto routes = nodes.routes();
  // The failure detector takes node 1 for down while its answer is awaited.
  routes.refresh = [&] {
    if (++nodes.refreshes == 3)
      nodes.down[1] = 1;
  };
  peer_read_client client;
  owner_read_options options;
  options.timeout = 60s;
  options.hedge_delay = 0ms; // never: only the detector can unblock it
  options.recheck = 5ms;
  const auto outcome = read_owners(nodes.keys, routes, client, options);
  nodes.expect_all_answered();
  EXPECT_EQ(outcome.hedged, 0u);
  EXPECT_EQ(outcome.rerouted, 1u);
  EXPECT_EQ(outcome.unanswered, 0u);
  EXPECT_GE(nodes.refreshes.load(), 3);
}

TEST(owner_reads, an_owner_that_cannot_be_reached_is_passed_over_at_once) {
  peer_read_server two{"127.0.0.1", "127.0.0.1", test_key, owner_answer};
  three_nodes nodes{30};
  // Node 1's endpoint names a port nothing listens on (a node gone).
  std::string gone;
  {
    peer_read_server briefly{"127.0.0.1", "127.0.0.1", test_key, owner_answer};
    gone = briefly.access_endpoint();
  }
  nodes.endpoints = {{1, gone}, {2, two.access_endpoint()}};
  peer_read_client client{200ms};
  owner_read_options options;
  options.timeout = 60s;
  options.hedge_delay = 0ms;
  const auto outcome = read_owners(nodes.keys, nodes.routes(), client, options);
  nodes.expect_all_answered();
  EXPECT_EQ(outcome.rerouted, 1u);
  EXPECT_EQ(outcome.unanswered, 0u);
}

TEST(owner_reads, keys_without_another_reachable_owner_stay_unanswered_at_the_timeout) {
  answer_gate frozen;
  peer_read_server one{"127.0.0.1", "127.0.0.1", test_key,
                       [&](std::span<const uint64_t> keys) { return frozen.answer(keys); }};
  const thaw thaw_at_exit{frozen};
  three_nodes nodes{30};
  nodes.endpoints = {{1, one.access_endpoint()}};
  nodes.down[2] = 1; // owner 1's keys have nowhere else to go
  peer_read_client client;
  owner_read_options options;
  options.timeout = 300ms;
  options.hedge_delay = 50ms;
  const auto outcome = read_owners(nodes.keys, nodes.routes(), client, options);
  size_t expected_unanswered = 0;
  for (size_t i = 0; i < nodes.keys.size(); ++i) {
    if (nodes.keys[i] % 3 == 1) {
      ++expected_unanswered;
      EXPECT_TRUE(nodes.got[i].empty());
    } else {
      EXPECT_EQ(nodes.got[i], (std::vector<uint64_t>{nodes.keys[i] + 1, nodes.keys[i] + 2}));
    }
  }
  EXPECT_EQ(outcome.unanswered, expected_unanswered);
  EXPECT_EQ(outcome.hedged, 0u); // nobody to hedge to
}

} // namespace
} // namespace lmcc::gateway
