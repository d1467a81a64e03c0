#include "registry/lookup_logic.hpp"
#include "registry/lookup_reader.hpp"

#if defined(CAF_VERSION)
#error "lookup_logic pulls in CAF"
#endif

#include <gtest/gtest.h>

using namespace lmcc::actors;
using lmcc::msg::token_chunk;

namespace {

// Three instances: A (workers 0,1), B (worker 0), C (worker 0); registration order A, B, C.
struct fixture {
  registry reg;
  uint64_t a0, a1, b0, c0;
  fixture() {
    a0 = reg.register_worker("A", 0, "h", 1, "a0:1", 0, 10).uid;
    a1 = reg.register_worker("A", 1, "h", 2, "a1:1", 0, 11).uid;
    b0 = reg.register_worker("B", 0, "h", 3, "b0:1", 0, 12).uid;
    c0 = reg.register_worker("C", 0, "h", 4, std::nullopt, 0, 13).uid;
    for (auto w : {a0, a1, b0, c0}) {
      reg.add_location(w, "LocalCPUBackend");
      reg.add_location(w, "LocalDiskBackend");
    }
  }
  holder_id cpu(uint64_t w) const { return reg.record(w)->holder("LocalCPUBackend"); }
  holder_id disk(uint64_t w) const { return reg.record(w)->holder("LocalDiskBackend"); }
};

std::vector<token_chunk> chunks(size_t n) {
  std::vector<token_chunk> out;
  for (size_t i = 0; i < n; ++i)
    out.push_back(token_chunk{256 * i, 256 * (i + 1), static_cast<int64_t>(i)});
  return out;
}

} // namespace

TEST(multi_holder_layout, credits_each_instance_with_its_own_prefix) {
  fixture f;
  auto view = f.reg.make_view();
  // A holds chunks 0..2, B holds 0..1, C holds only chunk 2 (suffix-only).
  std::vector<holder_list> holders{
      {f.cpu(f.b0), f.cpu(f.a0)}, {f.cpu(f.a0), f.cpu(f.b0)}, {f.cpu(f.a0), f.cpu(f.c0)}};
  auto ret = multi_holder_layout(*view, "e", chunks(3), holders);
  EXPECT_EQ(ret.event_id, "e");
  ASSERT_EQ(ret.layout_info.size(), 2u);
  EXPECT_EQ(ret.layout_info[0].first, "A"); // first in registration order holding chunk 0
  EXPECT_EQ(ret.layout_info[0].second.second, lmcc::msg::wire_int{768});
  EXPECT_EQ(ret.layout_info[1].first, "B");
  EXPECT_EQ(ret.layout_info[1].second.second, lmcc::msg::wire_int{512});
}

TEST(multi_holder_layout, stops_at_the_first_chunk_nobody_holds_and_reports_the_location) {
  fixture f;
  auto view = f.reg.make_view();
  std::vector<holder_list> holders{{f.disk(f.a1)}, {}, {f.cpu(f.a0)}};
  auto ret = multi_holder_layout(*view, "e", chunks(3), holders);
  ASSERT_EQ(ret.layout_info.size(), 1u);
  EXPECT_EQ(ret.layout_info[0].second.first, "LocalDiskBackend");
  EXPECT_EQ(ret.layout_info[0].second.second, lmcc::msg::wire_int{256});
}

TEST(multi_holder_layout, misses_when_chunk_zero_has_no_known_holder) {
  fixture f;
  auto view = f.reg.make_view();
  std::vector<holder_list> holders{{make_holder_id("Z", 0, "LocalCPUBackend")}, {f.cpu(f.a0)}};
  EXPECT_TRUE(multi_holder_layout(*view, "e", chunks(2), holders).layout_info.empty());
}

TEST(p2p_layout, only_counts_peers_with_the_askers_worker_id_outside_its_instance) {
  fixture f;
  auto view = f.reg.make_view();
  // Asker is B rank 1: A rank 1 must be chosen even though A rank 0 is first.
  std::vector<holder_list> holders{
      {f.cpu(f.a0), f.cpu(f.a1)}, {f.cpu(f.a1)}, {f.cpu(f.a0)}, {f.cpu(f.a1)}};
  auto ret = p2p_layout(*view, "B", 1, holders);
  ASSERT_EQ(ret.layout_info.size(), 1u);
  EXPECT_EQ(ret.layout_info[0], (lmcc::msg::p2p_layout_entry{"A", "LocalCPUBackend", 2, "a1:1"}));
}

TEST(p2p_layout, excludes_the_askers_own_instance_and_peers_without_a_url) {
  fixture f;
  auto view = f.reg.make_view();
  lmcc::msg::p2p_layout_entry miss{"", "", 0, ""};
  EXPECT_EQ(p2p_layout(*view, "A", 0, {{f.cpu(f.a0)}}).layout_info[0], miss);
  EXPECT_EQ(p2p_layout(*view, "A", 0, {{f.cpu(f.c0)}}).layout_info[0], miss); // C has no peer URL
  EXPECT_EQ(p2p_layout(*view, "A", 0, {}).layout_info[0], miss);
  EXPECT_EQ(p2p_layout(*view, "A", 0, {{f.cpu(f.b0)}}).layout_info[0],
            (lmcc::msg::p2p_layout_entry{"B", "LocalCPUBackend", 1, "b0:1"}));
}

TEST(multi_holder_layout, a_worker_with_a_chunk_in_two_locations_reports_its_first_seen_one) {
  fixture f;
  auto view = f.reg.make_view();
  const std::vector<holder_list> both{{f.disk(f.b0), f.cpu(f.b0)}};
  auto one = multi_holder_layout(*view, "e", chunks(1), both);
  ASSERT_EQ(one.layout_info.size(), 1u);
  EXPECT_EQ(one.layout_info[0].second.first, "LocalCPUBackend"); // reported first
  // The walk reports the location that holds the last chunk it credits.
  std::vector<holder_list> holders{both[0], {f.disk(f.b0)}};
  auto two = multi_holder_layout(*view, "e", chunks(2), holders);
  ASSERT_EQ(two.layout_info.size(), 1u);
  EXPECT_EQ(two.layout_info[0].first, "B");
  EXPECT_EQ(two.layout_info[0].second.first, "LocalDiskBackend");
  EXPECT_EQ(two.layout_info[0].second.second, lmcc::msg::wire_int{512});
}

TEST(multi_holder_layout, holders_missing_from_the_view_are_skipped) {
  fixture f;
  f.reg.remove("A", 0); // deregistered a moment ago: its entries may still be in the index
  auto view = f.reg.make_view();
  std::vector<holder_list> holders{{make_holder_id("A", 0, "LocalCPUBackend"), f.cpu(f.c0)}};
  auto ret = multi_holder_layout(*view, "e", chunks(1), holders);
  ASSERT_EQ(ret.layout_info.size(), 1u);
  EXPECT_EQ(ret.layout_info[0].first, "C");
}

TEST(answer_lookup, says_from_which_token_a_prefix_may_be_short) {
  fixture f;
  auto view = f.reg.make_view();
  lmcc::msg::chunk_hasher hasher;
  lmcc::msg::LookupMsg lookup;
  lookup.event_id = "e";
  lookup.tokens.assign(3 * 256, lmcc::msg::wire_int{7});
  size_t first_unsure = 3; // none
  holder_source source = [&](const std::vector<uint64_t>& keys) {
    return holder_reads{std::vector<holder_list>(keys.size(), holder_list{f.cpu(f.a0)}),
                        first_unsure};
  };
  auto whole = std::get<lmcc::msg::LookupRetMsg>(answer_lookup(*view, source, hasher, lookup));
  EXPECT_EQ(whole.unsure_from_tokens, lmcc::msg::LookupRetMsg::no_unsure_tokens);
  first_unsure = 1; // the second chunk came only from uncertain copies
  auto unsure = std::get<lmcc::msg::LookupRetMsg>(answer_lookup(*view, source, hasher, lookup));
  EXPECT_EQ(unsure.unsure_from_tokens, 256u);
  EXPECT_EQ(unsure.layout_info, whole.layout_info); // the answer itself is the same
}
