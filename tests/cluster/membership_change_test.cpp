// membership changes: the member set as a versioned record (epoch, joint or
// committed), the ring over every configured address with standby nodes
// skipped, and what a change does to writes, reads and seniority. Expected
// owners come from placements computed here over the member ids alone, never
// from the code under test; nothing sleeps.
#include "cluster/membership.hpp"
#include "cluster/membership_record.hpp"

#if defined(CAF_VERSION)
#error "cluster/membership pulls in CAF"
#endif

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <unistd.h>

namespace lmcc::cluster {
namespace {

using namespace std::chrono_literals;
constexpr uint32_t slots = 1024;

member_address addr(const std::string& id, bool standby = false) {
  return member_address{id, "10.0.0." + id.substr(1), static_cast<uint16_t>(7000 + id[1] - '0'),
                        standby};
}

cluster_options options(std::vector<member_address> members) {
  cluster_options opts;
  opts.members = std::move(members);
  opts.replicas = 2;
  return opts;
}

membership make(const cluster_options& opts, const std::string& self,
                std::optional<membership_record> rec = {}) {
  auto m = membership::make(opts, self, slots, std::move(rec));
  EXPECT_TRUE(m) << m.error().message;
  return std::move(*m);
}

/// The owners' ids of `slot` in a placement over `ids` alone (a ring of just them).
std::vector<std::string> owners_over(const std::vector<std::string>& ids, uint32_t slot) {
  ring_options ro;
  ro.slot_count = slots;
  ro.replicas = 2;
  auto p = placement::compute(ids, ids, ro);
  EXPECT_TRUE(p) << p.error().message;
  std::vector<std::string> out;
  for (auto id : p->owners(slot))
    out.emplace_back(id);
  return out;
}

std::vector<std::string> ids_of_mask(const membership& m, uint64_t mask) {
  std::vector<std::string> out;
  for (node_index n = 0; n < m.size(); ++n)
    if ((mask >> n) & 1U)
      out.push_back(m.address(n).id);
  return out;
}

std::vector<std::string> sorted(std::vector<std::string> v) {
  std::sort(v.begin(), v.end());
  return v;
}

membership_record change(const membership& m, std::vector<std::string> to) {
  membership_record r;
  r.epoch = m.record().epoch + 1;
  for (const auto& id : to)
    r.members.push_back(m.address(*m.index_of(id)));
  for (auto& a : r.members)
    a.standby = false;
  r.previous = m.record().member_ids();
  r.committed = false;
  return r;
}

// -- standby nodes ---------------------------------------------------------------------

TEST(membership_change, a_standby_node_owns_nothing_and_the_members_place_as_if_alone) {
  const auto opts = options({addr("n1"), addr("n2"), addr("n3"), addr("n4", true)});
  auto m = make(opts, "n1");
  EXPECT_EQ(m.record().member_ids(), (std::vector<std::string>{"n1", "n2", "n3"}));
  EXPECT_EQ(m.size(), 4u);
  EXPECT_FALSE(m.member(*m.index_of("n4")));
  for (uint32_t s = 0; s < slots; ++s)
    ASSERT_EQ(sorted(ids_of_mask(m, m.owner_mask(s))), sorted(owners_over({"n1", "n2", "n3"}, s)))
        << "slot " << s;
  // Live or not, a standby node homes no worker.
  m.presume_live(std::chrono::steady_clock::now());
  for (uint64_t uid = 1; uid < 2000; uid += 7)
    ASSERT_NE(m.address(m.home_of(uid)).id, "n4");
  EXPECT_TRUE(m.all_live());
}

TEST(membership_change, a_standby_node_itself_starts_without_slots) {
  const auto opts = options({addr("n1"), addr("n2"), addr("n3"), addr("n4", true)});
  auto m = make(opts, "n4");
  for (uint32_t s = 0; s < slots; ++s)
    ASSERT_FALSE(m.holds(s));
}

TEST(membership_change, every_node_a_standby_is_refused) {
  auto m = membership::make(options({addr("n1", true)}), "n1", slots);
  EXPECT_FALSE(m);
}

// -- adding a node ---------------------------------------------------------------------

TEST(membership_change, joint_writes_reach_both_owner_sets_and_reads_stay_with_the_old) {
  const auto opts = options({addr("n1"), addr("n2"), addr("n3"), addr("n4", true)});
  auto m = make(opts, "n1");
  m.presume_live(std::chrono::steady_clock::now());
  ASSERT_TRUE(m.adopt(change(m, {"n1", "n2", "n3", "n4"})));
  EXPECT_TRUE(m.joint());
  const node_index n4 = *m.index_of("n4");
  uint32_t gained = 0;
  for (uint32_t s = 0; s < slots; ++s) {
    const auto before = owners_over({"n1", "n2", "n3"}, s);
    const auto after = owners_over({"n1", "n2", "n3", "n4"}, s);
    std::vector<std::string> both = before;
    both.insert(both.end(), after.begin(), after.end());
    std::sort(both.begin(), both.end());
    both.erase(std::unique(both.begin(), both.end()), both.end());
    ASSERT_EQ(ids_of_mask(m, m.write_mask(s)), both) << "slot " << s;
    ASSERT_EQ(sorted(ids_of_mask(m, m.owner_mask(s))), sorted(after)) << "slot " << s;
    // One node added: a changed slot keeps at least one of its owners, the
    // one reads go to (it saw every write before and during the change).
    const std::string reader = m.address(m.read_owner(s)).id;
    ASSERT_NE(std::find(before.begin(), before.end(), reader), before.end()) << "slot " << s;
    gained += m.gained(n4, s) ? 1 : 0;
    ASSERT_EQ(m.gained(n4, s), std::find(after.begin(), after.end(), "n4") != after.end());
  }
  // n4 takes about its share: 2 owners of 4 per slot, half the slots.
  EXPECT_NEAR(gained, slots / 2, slots / 10);
  // Committed: the new placement alone, the new node still the junior owner.
  auto committed = m.record();
  committed.committed = true;
  ASSERT_TRUE(m.adopt(committed));
  for (uint32_t s = 0; s < slots; ++s)
    ASSERT_EQ(m.write_mask(s), m.owner_mask(s));
  EXPECT_EQ(m.record().member_ids().size(), 4u);
}

TEST(membership_change, removing_a_node_keeps_a_previous_owner_on_every_slot) {
  const auto opts = options({addr("n1"), addr("n2"), addr("n3"), addr("n4")});
  for (const std::string gone : {"n1", "n2", "n3", "n4"}) {
    auto m = make(opts, gone == "n1" ? "n2" : "n1");
    std::vector<std::string> rest;
    for (const auto& id : m.record().member_ids())
      if (id != gone)
        rest.push_back(id);
    ASSERT_TRUE(m.adopt(change(m, rest)));
    const node_index g = *m.index_of(gone);
    EXPECT_FALSE(m.member(g));
    for (uint32_t s = 0; s < slots; ++s) {
      const auto before = owners_over({"n1", "n2", "n3", "n4"}, s);
      const auto after = owners_over(rest, s);
      ASSERT_EQ(sorted(ids_of_mask(m, m.owner_mask(s))), sorted(after));
      size_t kept = 0;
      for (const auto& id : after)
        kept += std::count(before.begin(), before.end(), id);
      ASSERT_GE(kept, 1u) << "slot " << s << " without " << gone;
      ASSERT_FALSE(m.gained(g, s));
    }
    for (uint64_t uid = 1; uid < 2000; uid += 7)
      ASSERT_NE(m.home_of(uid), g);
  }
}

TEST(membership_change, a_record_naming_an_unknown_node_is_refused_and_changes_nothing) {
  const auto opts = options({addr("n1"), addr("n2"), addr("n3")});
  auto m = make(opts, "n1");
  auto r = change(m, {"n1", "n2"});
  r.members.push_back(addr("n9"));
  const auto before = m.record();
  EXPECT_FALSE(m.adopt(r));
  EXPECT_EQ(m.record(), before);
}

TEST(membership_change, a_restart_with_an_older_config_takes_the_members_from_its_record) {
  // The record names n4, whose address the (older) YAML lacks.
  membership_record r;
  r.epoch = 3;
  r.members = {addr("n1"), addr("n2"), addr("n3"), addr("n4")};
  r.previous = {"n1", "n2", "n3"};
  r.committed = true;
  auto m = make(options({addr("n1"), addr("n2"), addr("n3")}), "n2", r);
  ASSERT_TRUE(m.index_of("n4"));
  EXPECT_EQ(m.address(*m.index_of("n4")).port, 7004);
  EXPECT_EQ(m.record().epoch, 3u);
  for (uint32_t s = 0; s < slots; ++s)
    ASSERT_EQ(sorted(ids_of_mask(m, m.owner_mask(s))),
              sorted(owners_over({"n1", "n2", "n3", "n4"}, s)));
}

// -- the record --------------------------------------------------------------------------

TEST(membership_record, later_epochs_then_identity_then_commit_supersede) {
  membership_record a = membership_record::initial({addr("n1"), addr("n2"), addr("n3", true)});
  EXPECT_EQ(a.member_ids(), (std::vector<std::string>{"n1", "n2"}));
  EXPECT_TRUE(a.committed);
  membership_record b = a;
  b.epoch = 1;
  b.members.push_back(addr("n3"));
  b.committed = false;
  EXPECT_TRUE(supersedes(b, a));
  EXPECT_FALSE(supersedes(a, b));
  membership_record c = b;
  c.committed = true;
  EXPECT_TRUE(supersedes(c, b));
  EXPECT_FALSE(supersedes(b, c));
  EXPECT_FALSE(supersedes(c, c));
  // Two changes of one epoch made at once: exactly one wins, the same everywhere.
  membership_record d = b;
  d.members.pop_back();
  d.members.pop_back();
  EXPECT_NE(supersedes(b, d), supersedes(d, b));
}

TEST(membership_record, json_round_trips_and_bad_records_are_refused) {
  membership_record r;
  r.epoch = 7;
  r.members = {addr("n2"), addr("n1")};
  r.previous = {"n3", "n1", "n2"};
  r.committed = false;
  auto back = record_from_json(to_json(r));
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(back->member_ids(), (std::vector<std::string>{"n1", "n2"}));
  EXPECT_EQ(back->previous, (std::vector<std::string>{"n1", "n2", "n3"}));
  EXPECT_EQ(back->epoch, 7u);
  EXPECT_FALSE(back->committed);
  for (
      const char* bad :
      {"", "[]", "{}", R"({"epoch":1,"members":[],"previous":[],"committed":true})",
       R"({"epoch":1,"members":[{"id":"n1","host":"h"}],"previous":[],"committed":true})",
       R"({"epoch":"x","members":[{"id":"n1","host":"h","port":1}],"previous":[],"committed":true})",
       R"({"epoch":1,"members":[{"id":"n1","host":"h","port":1},{"id":"n1","host":"h","port":2}],"previous":[],"committed":true})"})
    EXPECT_FALSE(record_from_json(bad)) << bad;
}

TEST(membership_record, an_epoch_or_a_port_out_of_its_range_is_refused_not_converted) {
  // nlohmann's get<uint16_t>() and get<uint64_t>() convert whatever number
  // they find: port 70000 became 4464, epoch -1 the largest epoch (a record
  // that would supersede every later one), and a float too large for the
  // type is undefined behaviour.
  auto record = [](const std::string& epoch, const std::string& port) {
    return R"({"epoch":)" + epoch + R"(,"members":[{"id":"n1","host":"h","port":)" + port +
           R"(}],"previous":["n1"],"committed":true})";
  };
  ASSERT_TRUE(record_from_json(record("1", "9004")));
  for (const auto& [epoch, port] :
       std::vector<std::pair<std::string, std::string>>{{"1", "70000"},
                                                        {"1", "-1"},
                                                        {"1", "9004.5"},
                                                        {"1", "9.0e67"},
                                                        {"-1", "9004"},
                                                        {"1.5", "9004"},
                                                        {"1e300", "9004"},
                                                        {"18446744073709551616", "9004"}}) {
    SCOPED_TRACE(record(epoch, port));
    auto r = record_from_json(record(epoch, port));
    EXPECT_FALSE(r) << "read as epoch " << r->epoch << ", port " << r->members.at(0).port;
  }
}

TEST(membership_record, a_record_past_its_bound_is_refused_before_it_is_parsed) {
  // A peer sends the record as text (members_atom); parsed as a whole
  // document, `[[[[...` costs ~40 bytes of memory per byte of it.
  const std::string nested(size_t{2} << 20, '['); // 2 MiB: ~80 MiB as a document
  auto deep = record_from_json(nested);
  ASSERT_FALSE(deep);
  EXPECT_NE(deep.error().message.find("larger than"), std::string::npos) << deep.error().message;
  // The largest real record, 64 members with long ids and hosts, is far below it.
  membership_record r;
  for (int i = 0; i < 64; ++i) {
    r.members.push_back(
        {std::string(200, 'n') + std::to_string(100 + i), std::string(250, 'h'), 9004, false});
    r.previous.push_back(r.members.back().id);
  }
  const std::string text = to_json(r);
  EXPECT_LT(text.size(), size_t{64} << 10);
  EXPECT_TRUE(record_from_json(text));
}

TEST(membership_record, store_then_load_and_a_missing_file_is_no_record) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("lmcc-record-test-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "lmcc-membership.json").string();
  auto none = load_record(path);
  ASSERT_TRUE(none);
  EXPECT_FALSE(none->has_value());
  membership_record r = membership_record::initial({addr("n1"), addr("n2")});
  r.epoch = 2;
  ASSERT_TRUE(store_record(path, r));
  auto loaded = load_record(path);
  ASSERT_TRUE(loaded);
  ASSERT_TRUE(loaded->has_value());
  EXPECT_EQ(**loaded, r);
  std::ofstream(path) << "{torn";
  EXPECT_FALSE(load_record(path));
  std::filesystem::remove_all(dir);
}

} // namespace
} // namespace lmcc::cluster
