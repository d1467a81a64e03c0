// The pure parts of `lmcc lookup`, `lmcc members add|remove` and `lmcc drain`
// (apps/lmcc/client/lookup_view.hpp, members_view.hpp): the token list read
// from a file or stdin, the layout people read, the member set asked for,
// and the progress of a change judged from made-up /cluster/status answers.
// tests/integration/test_client.py runs the commands against a real cluster.
#include "apps/lmcc/client/lookup_view.hpp"
#include "apps/lmcc/client/members_view.hpp"

#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

namespace lmcc::apps::client {
namespace {

using json = nlohmann::json;
using ids = std::vector<std::string>;

std::string refusal(const msg::expected<json>& e) {
  return e ? std::string{"accepted"} : e.error().message;
}

std::string refusal(const msg::expected<ids>& e) {
  return e ? std::string{"accepted"} : e.error().message;
}

// -- lmcc lookup: tokens -----------------------------------------------------------------

TEST(Tokens, AJsonArrayAndBlankSeparatedIntegersGiveTheSameList) {
  const auto from_json = parse_tokens(" [1, 2, 3,\n 40000]\n");
  const auto from_words = parse_tokens("1 2\t3\n40000\n");
  const auto from_commas = parse_tokens("1,2, 3 ,40000");
  ASSERT_TRUE(from_json) << from_json.error().message;
  ASSERT_TRUE(from_words) << from_words.error().message;
  ASSERT_TRUE(from_commas) << from_commas.error().message;
  EXPECT_EQ(*from_json, json::parse("[1, 2, 3, 40000]"));
  EXPECT_EQ(*from_words, *from_json);
  EXPECT_EQ(*from_commas, *from_json);
}

TEST(Tokens, IdsSpanWhatLookupAccepts) {
  const auto t = parse_tokens("-9223372036854775808 18446744073709551615 0");
  ASSERT_TRUE(t) << t.error().message;
  EXPECT_EQ(t->dump(), "[-9223372036854775808,18446744073709551615,0]");
  EXPECT_EQ(parse_tokens("[18446744073709551615]")->dump(), "[18446744073709551615]");
}

TEST(Tokens, WhatIsNotAnIntegerIsRefusedByPosition) {
  EXPECT_EQ(refusal(parse_tokens("1 2 x")), "token 2 (\"x\") is not an integer in -2^63..2^64-1");
  EXPECT_EQ(refusal(parse_tokens("1 18446744073709551616")),
            "token 1 (\"18446744073709551616\") is not an integer in -2^63..2^64-1");
  EXPECT_EQ(refusal(parse_tokens("1.5")), "token 0 (\"1.5\") is not an integer in -2^63..2^64-1");
  EXPECT_EQ(refusal(parse_tokens("[1, 2.5]")), "token 1 (2.5) is not an integer");
  EXPECT_EQ(refusal(parse_tokens("[1, \"2\"]")), "token 1 (\"2\") is not an integer");
  EXPECT_EQ(refusal(parse_tokens("[1, 2")), "the tokens start with '[' but are not a JSON array");
  EXPECT_EQ(refusal(parse_tokens("  \n")),
            "no tokens given (a JSON array of integers, or integers separated by blanks)");
  EXPECT_EQ(refusal(parse_tokens("[]")),
            "no tokens given (a JSON array of integers, or integers separated by blanks)");
}

// -- lmcc lookup: the layout --------------------------------------------------------------

const json two_instances = json::parse(R"({"event_id": "Lookup1", "layout_info": {
    "vllm-b": ["LocalDiskBackend", 256], "vllm-a": ["LocalCPUBackend", 1024]}})");

TEST(Lookup, TheLayoutIsATableOfInstancesThenWhoAnsweredAndHowFast) {
  std::ostringstream out;
  render_lookup(two_instances, {.node = "n2", .endpoint = "127.0.0.1:9010", .elapsed_ms = 3.04},
                1280, out);
  EXPECT_EQ(out.str(), "INSTANCE  LOCATION          TOKENS\n"
                       "vllm-a    LocalCPUBackend     1024\n"
                       "vllm-b    LocalDiskBackend     256\n"
                       "\n"
                       "n2 (127.0.0.1:9010) answered in 3.0 ms: 2 instances hold a prefix of the "
                       "1280 tokens\n");
  EXPECT_EQ(layout_instances(two_instances), 2U);
}

TEST(Lookup, NothingCachedIsOneLineAndASingleNodeIsNamedByItsAddress) {
  std::ostringstream out;
  const auto empty = json::parse(R"({"event_id": "Lookup2", "layout_info": {}})");
  render_lookup(empty, {.node = "", .endpoint = "127.0.0.1:9000", .elapsed_ms = 0.4271}, 1, out);
  EXPECT_EQ(out.str(), "127.0.0.1:9000 answered in 0.4 ms: no instance holds a prefix of the 1 "
                       "token\n");
  EXPECT_EQ(layout_instances(empty), 0U);
  EXPECT_EQ(layout_instances(json::parse("{}")), 0U);
}

TEST(Lookup, JsonIsTheNodesAnswerWithTheNodeAdded) {
  const auto j =
      lookup_json(two_instances, {.node = "n2", .endpoint = "h:9010", .elapsed_ms = 7.12345});
  EXPECT_EQ(j["layout_info"], two_instances["layout_info"]);
  EXPECT_EQ(j["event_id"], "Lookup1");
  EXPECT_EQ(j["node"], "n2");
  EXPECT_EQ(j["asked"], "h:9010");
  EXPECT_DOUBLE_EQ(j["elapsed_ms"].get<double>(), 7.123);
  EXPECT_TRUE(lookup_json(two_instances, {.node = "", .endpoint = "h:1", .elapsed_ms = 0})["node"]
                  .is_null());
}

// -- lmcc members / drain: the member set --------------------------------------------------

TEST(Members, AddingAndRemovingGiveTheSortedSetTheNodesKeep) {
  EXPECT_EQ(*members_after({"n1", "n2", "n3"}, {"n4"}, {}), (ids{"n1", "n2", "n3", "n4"}));
  EXPECT_EQ(*members_after({"n2", "n3"}, {"n10", "n1"}, {}), (ids{"n1", "n10", "n2", "n3"}));
  EXPECT_EQ(*members_after({"n1", "n2", "n3", "n4"}, {}, {"n1", "n3"}), (ids{"n2", "n4"}));
  // The node, not the client, judges R for `members remove` (its reason is printed).
  EXPECT_EQ(*members_after({"n1", "n2"}, {}, {"n2"}), (ids{"n1"}));
}

TEST(Members, AChangeThatChangesNothingOrNamesAnIdBadlyIsRefused) {
  const ids three{"n1", "n2", "n3"};
  EXPECT_EQ(refusal(members_after(three, {"n2"}, {})),
            "n2 is already a member (the members are n1 n2 n3)");
  EXPECT_EQ(refusal(members_after(three, {}, {"n9"})),
            "n9 is not a member (the members are n1 n2 n3)");
  EXPECT_EQ(refusal(members_after(three, {"n4", "n4"}, {})), "n4 is given twice");
  EXPECT_EQ(refusal(members_after(three, {"n4,n5"}, {})), "\"n4,n5\" is not a node id");
  EXPECT_EQ(refusal(members_after(three, {""}, {})), "\"\" is not a node id");
  EXPECT_EQ(refusal(members_after(three, {}, {})), "no node id given");
}

TEST(Drain, LeavesTheOthersUnlessFewerThanRWouldBeLeft) {
  EXPECT_EQ(*drain_members({"n1", "n2", "n3"}, "n1", 2), (ids{"n2", "n3"}));
  EXPECT_EQ(refusal(drain_members({"n2", "n3"}, "n3", 2)),
            "draining n3 would leave 1 member, fewer than the replica count R = 2 "
            "(lmcc_replicas); add a node first (lmcc members add)");
  EXPECT_EQ(refusal(drain_members({"n1", "n2", "n3"}, "n1", 3)),
            "draining n1 would leave 2 members, fewer than the replica count R = 3 "
            "(lmcc_replicas); add a node first (lmcc members add)");
  EXPECT_EQ(refusal(drain_members({"n1", "n2", "n3"}, "n7", 2)),
            "n7 is not a member (the members are n1 n2 n3)");
}

// -- lmcc members / drain: progress --------------------------------------------------------

/// A /cluster/status carrying only what the progress reads.
json status(uint64_t epoch, const char* state, uint64_t to_copy = 0, uint64_t copied = 0) {
  return {{"node", "nX"},
          {"membership",
           {{"epoch", epoch},
            {"state", state},
            {"members", {"n1", "n2"}},
            {"slots_to_copy", to_copy},
            {"slots_copied", copied}}}};
}

node_progress of(const std::string& id, const json& s) {
  return progress_of(id, &s);
}

TEST(Progress, EachNodesPhaseComesFromItsEpochStateAndCopies) {
  EXPECT_EQ(phase_of(of("n1", status(0, "committed")), 1), node_phase::behind);
  EXPECT_EQ(phase_of(of("n1", status(1, "joint", 100, 20)), 1), node_phase::joint);
  EXPECT_EQ(phase_of(of("n1", status(1, "committed", 100, 20)), 1), node_phase::copying);
  EXPECT_EQ(phase_of(of("n1", status(1, "committed", 100, 100)), 1), node_phase::committed);
  EXPECT_EQ(phase_of(of("n1", status(2, "joint")), 1), node_phase::committed); // superseded
  EXPECT_EQ(phase_of(progress_of("n1", nullptr, "refused"), 1), node_phase::unreachable);
  EXPECT_EQ(phase_of(of("n1", json{{"node", "n1"}}), 1), node_phase::unreachable);
}

TEST(Progress, TheLineNamesEveryNodesPhaseUntilAllThatAnswerHaveCommitted) {
  const auto joint =
      judge_change(1, {of("n1", status(1, "joint")), of("n2", status(0, "committed")),
                       of("n3", status(1, "committed")), of("n4", status(1, "joint", 1024, 120))});
  EXPECT_FALSE(joint.done);
  EXPECT_EQ(progress_line(1, joint, 3400),
            "  3s  epoch 1: 1/4 committed: n1 joint, n2 at epoch 0, n3 committed, n4 joint "
            "120/1024 slots copied");

  const auto down = judge_change(2, {of("n1", status(2, "committed")),
                                     progress_of("n2", nullptr, "h:1: connection refused"),
                                     of("n3", status(2, "committed", 10, 10))});
  EXPECT_TRUE(down.done); // a node down catches up when it returns
  EXPECT_EQ(down.unreachable, ids{"n2"});
  EXPECT_EQ(down.summary, "2/3 committed: n1 committed, n2 not answering, n3 committed");

  const auto copying = judge_change(2, {of("n1", status(2, "committed", 10, 4))});
  EXPECT_FALSE(copying.done);
  EXPECT_EQ(copying.summary, "0/1 committed: n1 copying 4/10 slots");

  EXPECT_FALSE(judge_change(1, {progress_of("n1", nullptr, "x")}).done); // nobody answered
  EXPECT_EQ(progress_line(1, judge_change(1, {of("n1", status(1, "committed"))}), 125000),
            "125s  epoch 1: 1/1 committed: n1 committed");
}

TEST(Progress, JsonCarriesEachNodesFigures) {
  const auto j = progress_json(of("n4", status(1, "joint", 1024, 120)), 1);
  EXPECT_EQ(j, json::parse(R"({"id": "n4", "answered": true, "phase": "joint", "epoch": 1,
      "state": "joint", "slots_to_copy": 1024, "slots_copied": 120})"));
  EXPECT_EQ(progress_json(progress_of("n2", nullptr, "refused"), 1),
            json::parse(R"({"id": "n2", "answered": false, "phase": "unreachable",
                            "error": "refused"})"));
}

} // namespace
} // namespace lmcc::apps::client
