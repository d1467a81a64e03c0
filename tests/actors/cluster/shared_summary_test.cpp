// shared_slots_summary: what a greeting says of the slots its two nodes
// share, so that anti-entropy may skip comparing them. Equal copies of the
// shared slots must give equal summaries on both nodes, and any difference in
// a shared slot a different one; slots the two do not share must not count.
#include "actors/cluster/anti_entropy.hpp"

#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace lmcc::actors::shared_summary_testing {
namespace {

constexpr uint32_t slots = 64;

/// n1, n2, n3, R = 2, as seen from `self`.
cluster_table table_of(const std::string& self) {
  cluster::ring_options ro;
  ro.slot_count = slots;
  ro.replicas = 2;
  auto p = cluster::placement::compute({"n1", "n2", "n3"}, {"n1", "n2", "n3"}, ro);
  EXPECT_TRUE(p) << p.error().message;
  cluster_table t;
  t.owners = std::make_shared<const cluster::placement>(std::move(*p));
  t.self = *t.owners->members().index_of(self);
  t.peers.resize(3);
  return t;
}

node_index index_of(const cluster_table& t, const std::string& id) {
  return *t.owners->members().index_of(id);
}

/// A key of `slot` (the index places keys by their hash's slot).
uint64_t key_in(uint32_t slot, uint64_t n) {
  for (uint64_t k = n * 1'000'003 + 1;; ++k)
    if (slot_of(k * 0x9e3779b97f4a7c15ULL, slots) == slot)
      return k * 0x9e3779b97f4a7c15ULL;
}

holder_id holder(int i) {
  return make_holder_id("inst", msg::wire_int{i}, "LocalCPUBackend");
}

/// A slot that both `a` and `b` own, and one that `a` owns without `b`.
std::pair<uint32_t, uint32_t> shared_and_not(const cluster_table& t, node_index a, node_index b) {
  std::optional<uint32_t> shared;
  std::optional<uint32_t> alone;
  for (uint32_t s = 0; s < slots; ++s) {
    const uint64_t mask = cluster::owner_mask(*t.owners, s);
    const bool has_a = (mask >> a) & 1U;
    const bool has_b = (mask >> b) & 1U;
    if (has_a && has_b && !shared)
      shared = s;
    if (has_a && !has_b && !alone)
      alone = s;
  }
  EXPECT_TRUE(shared && alone) << "the ring gave n1 no such slots";
  return {shared.value_or(0), alone.value_or(0)};
}

TEST(shared_slots_summary, equal_copies_of_the_shared_slots_agree_on_both_nodes) {
  const auto at_n1 = table_of("n1");
  const auto at_n2 = table_of("n2");
  kv_index n1{slots};
  kv_index n2{slots};
  const auto [shared, alone] = shared_and_not(at_n1, at_n1.self, index_of(at_n1, "n2"));
  for (uint64_t i = 0; i < 5; ++i) {
    n1.write().admit(key_in(shared, i), holder(1));
    n2.write().admit(key_in(shared, i), holder(1));
  }
  const uint64_t from_n1 = shared_slots_summary(at_n1, index_of(at_n1, "n2"), n1);
  EXPECT_NE(from_n1, 0u) << "0 means no summary";
  EXPECT_EQ(from_n1, shared_slots_summary(at_n2, index_of(at_n2, "n1"), n2));

  // A slot n1 holds without n2 is no business of theirs.
  n1.write().admit(key_in(alone, 9), holder(2));
  EXPECT_EQ(shared_slots_summary(at_n1, index_of(at_n1, "n2"), n1), from_n1);

  // One entry more on one side of a shared slot changes the summary.
  n2.write().admit(key_in(shared, 99), holder(3));
  EXPECT_NE(shared_slots_summary(at_n2, index_of(at_n2, "n1"), n2), from_n1);
}

} // namespace
} // namespace lmcc::actors::shared_summary_testing
