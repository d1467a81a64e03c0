// propose_members (cluster/membership_change.hpp): an operator's new member
// set becomes the next epoch's joint record, or is refused with a reason that
// names the id. Expected records are written out from the inputs, not computed
// by the code under test; nothing sleeps.
#include "cluster/membership_change.hpp"

#if defined(CAF_VERSION)
#error "cluster/membership_change pulls in CAF"
#endif

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

namespace lmcc::cluster {
namespace {

constexpr uint32_t proposal_slots = 256;

member_address member(const std::string& id, bool standby = false) {
  return member_address{id, "10.0.0." + id.substr(1), static_cast<uint16_t>(7000 + id[1] - '0'),
                        standby};
}

/// n1..n3 members, n4 a standby; seen from n1, every peer presumed live.
membership three_and_a_standby() {
  cluster_options opts;
  opts.members = {member("n1"), member("n2"), member("n3"), member("n4", true)};
  opts.replicas = 2;
  auto m = membership::make(opts, "n1", proposal_slots);
  EXPECT_TRUE(m) << m.error().message;
  m->presume_live(std::chrono::steady_clock::now());
  return std::move(*m);
}

std::string refusal(const expected<membership_record>& r) {
  EXPECT_FALSE(r);
  if (r)
    return "";
  EXPECT_EQ(r.error().code, errc::member_change_refused);
  return r.error().message;
}

TEST(propose_members, adding_a_live_standby_makes_the_next_joint_record) {
  auto m = three_and_a_standby();
  const std::vector<std::string> ids{"n4", "n2", "n1", "n3"};
  auto next = propose_members(m, ids, 2);
  ASSERT_TRUE(next) << next.error().message;
  EXPECT_EQ(next->epoch, 1u);
  EXPECT_FALSE(next->committed);
  EXPECT_EQ(next->member_ids(), (std::vector<std::string>{"n1", "n2", "n3", "n4"}));
  EXPECT_EQ(next->previous, (std::vector<std::string>{"n1", "n2", "n3"}));
  for (const auto& a : next->members)
    EXPECT_FALSE(a.standby) << a.id;
  EXPECT_EQ(next->members[3].host, "10.0.0.4");
  EXPECT_EQ(next->members[3].port, 7004);
}

TEST(propose_members, removing_a_member_keeps_the_rest) {
  auto m = three_and_a_standby();
  const std::vector<std::string> ids{"n1", "n3"};
  auto next = propose_members(m, ids, 2);
  ASSERT_TRUE(next) << next.error().message;
  EXPECT_EQ(next->member_ids(), (std::vector<std::string>{"n1", "n3"}));
  EXPECT_EQ(next->previous, (std::vector<std::string>{"n1", "n2", "n3"}));
}

TEST(propose_members, an_id_outside_the_address_book_is_refused_by_name) {
  auto m = three_and_a_standby();
  const std::vector<std::string> ids{"n1", "n2", "n9"};
  EXPECT_EQ(refusal(propose_members(m, ids, 2)),
            "\"n9\" is not in this node's lmcc_cluster_members: add its address (standby: true) "
            "to every node's config first");
}

TEST(propose_members, an_id_listed_twice_is_refused) {
  auto m = three_and_a_standby();
  const std::vector<std::string> ids{"n1", "n2", "n2"};
  EXPECT_EQ(refusal(propose_members(m, ids, 2)), "\"n2\" is listed twice");
}

TEST(propose_members, an_empty_set_fewer_than_r_or_the_same_set_is_refused) {
  auto m = three_and_a_standby();
  EXPECT_EQ(refusal(propose_members(m, std::vector<std::string>{}, 2)),
            "the new member set is empty");
  EXPECT_EQ(refusal(propose_members(m, std::vector<std::string>{"n1"}, 2)),
            "lmcc_replicas is 2: a member set needs at least that many nodes");
  EXPECT_EQ(refusal(propose_members(m, std::vector<std::string>{"n3", "n1", "n2"}, 2)),
            "that is the current member set");
}

TEST(propose_members, a_node_added_must_be_live_but_a_member_that_is_down_may_stay) {
  auto m = three_and_a_standby();
  ASSERT_TRUE(m.on_lost("n4"));
  ASSERT_TRUE(m.on_lost("n3"));
  EXPECT_EQ(refusal(propose_members(m, std::vector<std::string>{"n1", "n2", "n3", "n4"}, 2)),
            "\"n4\" is not live: start it before adding it");
  auto shrink = propose_members(m, std::vector<std::string>{"n1", "n3"}, 2);
  EXPECT_TRUE(shrink) << shrink.error().message;
}

TEST(propose_members, no_change_while_the_last_one_still_moves_slots) {
  auto m = three_and_a_standby();
  auto joint = propose_members(m, std::vector<std::string>{"n1", "n2", "n3", "n4"}, 2);
  ASSERT_TRUE(joint);
  ASSERT_TRUE(m.adopt(*joint));
  EXPECT_EQ(refusal(propose_members(m, std::vector<std::string>{"n1", "n2"}, 2)),
            "a membership change (epoch 1) is still moving slots; wait until it commits");
}

} // namespace
} // namespace lmcc::cluster
