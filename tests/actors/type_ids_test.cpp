// type_ids + inspect + cluster/wire: every value type that crosses nodes survives CAF 0.17's
// binary_serializer / binary_deserializer bit for bit, and
// register_message_types() registers the block, so a caf::message carrying
// them serializes through an actor system the way the middleman does it.
// The one actors test that links CAF (lmcc_actors).
#include "actors/type_ids.hpp"

#include <caf/binary_deserializer.hpp>
#include <caf/binary_serializer.hpp>
#include <gtest/gtest.h>

#include <algorithm>
#include <typeindex>

namespace lmcc::actors {
namespace {

using msg::wire_int;

/// x -> bytes -> a fresh T, with no actor system (the types' own inspect).
template <class T>
T round_trip(T x, size_t* bytes = nullptr) {
  std::vector<char> buf;
  caf::binary_serializer sink{nullptr, buf};
  auto e = sink(x);
  EXPECT_FALSE(e) << "serialize failed";
  if (bytes)
    *bytes = buf.size();
  T out{};
  caf::binary_deserializer source{nullptr, buf};
  auto d = source(out);
  EXPECT_FALSE(d) << "deserialize failed";
  return out;
}

kv_sub_batch full_sub_batch() {
  kv_sub_batch sb;
  sb.stream = UINT64_MAX;
  sb.number = 1ULL << 40;
  sb.holder = make_holder_id("vllm-0", wire_int{3}, "LocalCPUBackend");
  sb.incarnation = 0x123456789abcdefULL;
  sb.drop = false;
  sb.has_mark = true;
  sb.mark = seq_mark{seq_state::tracking, UINT64_MAX};
  sb.has_intro = true;
  sb.intro_worker_uid = worker_uid("vllm-0", wire_int{3});
  sb.intro_location = "LocalCPUBackend";
  sb.ops = {{0, true}, {UINT64_MAX, false}, {42, true}};
  return sb;
}

TEST(type_ids, a_sub_batch_round_trips_with_every_field) {
  const auto sb = full_sub_batch();
  EXPECT_EQ(round_trip(sb), sb);
  kv_sub_batch drop;
  drop.holder = 7;
  drop.drop = true;
  drop.has_mark = true;
  drop.mark = seq_mark{seq_state::syncing, 0};
  EXPECT_EQ(round_trip(drop), drop);
  EXPECT_EQ(round_trip(kv_sub_batch{}), kv_sub_batch{});
}

TEST(type_ids, a_sub_batch_crosses_in_little_more_than_eight_bytes_an_op) {
  kv_sub_batch sb;
  sb.stream = 9;
  sb.number = 1;
  sb.holder = 5;
  for (uint64_t k = 0; k < 1000; ++k)
    sb.ops.push_back({k * 0x9e3779b97f4a7c15ULL, k % 3 != 0});
  size_t bytes = 0;
  EXPECT_EQ(round_trip(sb, &bytes), sb);
  // 8 bytes a key and a bit an admit, plus a header well under 100 bytes
  // (field by field, CAF wrote 9 bytes an op plus its framing).
  EXPECT_GE(bytes, 8000u + 125u);
  EXPECT_LT(bytes, 8000u + 125u + 100u);
}

TEST(type_ids, a_damaged_sub_batch_is_refused_not_applied) {
  auto sb = full_sub_batch();
  std::vector<char> buf;
  caf::binary_serializer sink{nullptr, buf};
  ASSERT_FALSE(sink(sb));
  buf[buf.size() - 10] ^= 0x40; // inside the record: its checksum no longer matches
  kv_sub_batch out;
  caf::binary_deserializer source{nullptr, buf};
  EXPECT_TRUE(source(out));
}

TEST(type_ids, a_pushed_batch_keeps_keys_two_to_the_64_minus_1_and_minus_1_apart) {
  msg::BatchedKVOperationMsg b{"vllm-0", wire_int{-2}, "LocalCPUBackend", {}};
  b.operations.push_back({msg::OpType::admit, wire_int::from_unsigned(UINT64_MAX), 5});
  b.operations.push_back({msg::OpType::evict, wire_int{-1}, wire_int::from_unsigned(UINT64_MAX)});
  const pushed_msg in{msg::Msg{b}, 2};
  const auto out = round_trip(in);
  EXPECT_EQ(out.credits, 2u);
  const auto& back = std::get<msg::BatchedKVOperationMsg>(out.msg);
  EXPECT_EQ(back, b);
  ASSERT_EQ(back.operations.size(), 2u);
  EXPECT_FALSE(back.operations[0].key.is_negative());
  EXPECT_TRUE(back.operations[1].key.is_negative());
  EXPECT_EQ(back.operations[0].key.bits(), back.operations[1].key.bits());
  EXPECT_NE(back.operations[0].key, back.operations[1].key);
  EXPECT_TRUE(back.worker_id.is_negative());
}

TEST(type_ids, wire_ints_keep_their_sign_apart_from_their_bits) {
  for (auto v : {wire_int{0}, wire_int{-1}, wire_int::from_unsigned(UINT64_MAX),
                 wire_int{INT64_MIN}, wire_int::from_unsigned(1ULL << 63)}) {
    const auto back = round_trip(v);
    EXPECT_EQ(back, v);
    EXPECT_EQ(back.is_negative(), v.is_negative());
  }
}

TEST(type_ids, worker_rows_round_trip_with_and_without_a_peer_url) {
  persistence::worker_row r;
  r.uid = worker_uid("A", wire_int{-1});
  r.instance_id = "A";
  r.worker_id = wire_int{-1};
  r.ip = "10.0.0.1";
  r.port = wire_int::from_unsigned(UINT64_MAX);
  r.registration_time = 1700000000.125;
  r.last_heartbeat_time = -0.0;
  r.has_heartbeated = true;
  r.registration_order = 1ULL << 60;
  r.instance_order = 3;
  r.incarnation = UINT64_MAX;
  EXPECT_EQ(round_trip(r), r);
  EXPECT_FALSE(round_trip(r).peer_init_url);
  r.peer_init_url = ""; // present but empty is not absent
  EXPECT_EQ(round_trip(r), r);
  r.peer_init_url = "10.0.0.1:8200";
  EXPECT_EQ(round_trip(r), r);
  std::vector<persistence::worker_row> rows{r, persistence::worker_row{}};
  EXPECT_EQ(round_trip(rows), rows);
}

TEST(type_ids, marks_ops_params_and_phases_round_trip) {
  for (auto s : {seq_state::none, seq_state::tracking, seq_state::syncing, seq_state::resynced,
                 seq_state::gap})
    EXPECT_EQ(round_trip(seq_mark{s, 12345678901ULL}), (seq_mark{s, 12345678901ULL}));
  std::vector<kv_op> ops;
  for (uint64_t i = 0; i < 1000; ++i)
    ops.push_back({i * 0x9e3779b97f4a7c15ULL, i % 3 == 0});
  EXPECT_EQ(round_trip(ops), ops);
  EXPECT_TRUE(round_trip(std::vector<kv_op>{}).empty());
  const session_params p{"sync-1", "LocalDiskBackend", 99, 98, 97, 4000, 2};
  const auto back = round_trip(p);
  EXPECT_EQ(back.sync_id, p.sync_id);
  EXPECT_EQ(back.location, p.location);
  EXPECT_EQ(back.holder, p.holder);
  EXPECT_EQ(back.worker_uid, p.worker_uid);
  EXPECT_EQ(back.incarnation, p.incarnation);
  EXPECT_EQ(back.total_keys, p.total_keys);
  EXPECT_EQ(back.batch_count, p.batch_count);
  for (auto phase :
       {sync_phase::none, sync_phase::syncing, sync_phase::completed, sync_phase::failed})
    EXPECT_EQ(round_trip(phase), phase);
}

TEST(type_ids, a_handoff_answer_round_trips_with_its_marks_and_the_full_sync_owed) {
  worker_handoff h{42,
                   worker_handoff::answer::found,
                   {location_mark{"LocalCPUBackend", 7, seq_mark{seq_state::tracking, 99}}},
                   "seq_gap_after_restart"};
  const auto back = round_trip(h);
  EXPECT_EQ(back.uid, 42u);
  EXPECT_EQ(back.status, worker_handoff::answer::found);
  EXPECT_EQ(back.marks, h.marks);
  EXPECT_EQ(back.resync_reason, "seq_gap_after_restart");
  EXPECT_TRUE(round_trip(worker_handoff{}).resync_reason.empty());
}

TEST(type_ids, the_cluster_wire_records_round_trip_field_by_field) {
  const std::vector<cluster::stream_ack> acks{{7, 12}, {UINT64_MAX, 1ULL << 40}};
  EXPECT_EQ(round_trip(acks), acks);
  const std::vector<cluster::holder_count> counts{{make_holder_id("A", wire_int{0}, "cpu"), 3},
                                                  {1, UINT64_MAX}};
  EXPECT_EQ(round_trip(counts), counts);
  const cluster::slot_digests digests{{0, 0x9e3779b97f4a7c15ULL, UINT64_MAX}};
  EXPECT_EQ(round_trip(digests), digests);
  const std::vector<cluster::registration_ref> known{{worker_uid("A", wire_int{-1}), 7}, {2, 0}};
  EXPECT_EQ(round_trip(known), known);
  EXPECT_TRUE(round_trip(std::vector<cluster::stream_ack>{}).empty());
}

TEST(type_ids, a_greeting_and_a_directory_listing_round_trip_with_every_field) {
  const cluster::greeting g{"n2", true,  1ULL << 40,    UINT64_MAX,           true, false, true,
                            true, false, 1700000000123, 0x0123456789abcdefULL};
  EXPECT_EQ(round_trip(g), g);
  directory_listing listing;
  listing.node_id = "n3";
  listing.ring_version = UINT64_MAX;
  listing.rows.resize(2);
  listing.rows[0].uid = 7;
  listing.rows[0].instance_id = "vllm-0";
  listing.tombstones = {{9, 2}, {UINT64_MAX, 0}};
  listing.complete = true;
  const auto back = round_trip(listing);
  EXPECT_EQ(back.node_id, listing.node_id);
  EXPECT_EQ(back.ring_version, listing.ring_version);
  EXPECT_EQ(back.rows, listing.rows);
  EXPECT_EQ(back.tombstones, listing.tombstones);
  EXPECT_TRUE(back.complete);
}

TEST(type_ids, a_slot_copy_and_what_installing_it_did_round_trip_with_every_field) {
  slot_copy copy{4095, false, {}};
  copy.holders.push_back(holder_slot_copy{make_holder_id("A", wire_int{0}, "cpu"),
                                          worker_uid("A", wire_int{0}),
                                          true,
                                          {UINT64_MAX, 2, 3, 4},
                                          {1, UINT64_MAX, 42}});
  copy.holders.push_back(holder_slot_copy{5, 0, false, {}, {}}); // "none here as of p"
  EXPECT_EQ(round_trip(copy), copy);
  EXPECT_EQ(round_trip(slot_copy{}), slot_copy{});
  copy_outcome o{1, 2, 3, {{9, 10}, {UINT64_MAX, 1}}, {{11, 12}}, true};
  EXPECT_EQ(round_trip(o), o);
}

TEST(type_ids, messages_of_several_types_round_trip_through_their_msgpack_encoding) {
  msg::HeartbeatRetMsg hb;
  hb.commands.emplace_back(msg::FullSyncCommand{"worker_re_registered", std::nullopt});
  const std::vector<msg::Msg> msgs = {
      msg::Msg{msg::RegisterMsg{"A", 0, "10.0.0.1", 8500, "10.0.0.1:8200"}},
      msg::Msg{msg::RegisterMsg{"A", wire_int{-5}, "h", wire_int::from_unsigned(UINT64_MAX),
                                std::nullopt}},
      msg::Msg{hb},
      msg::Msg{msg::FullSyncBatchMsg{
          "A", 0, "cpu", "s1", 3, {wire_int{-1}, wire_int::from_unsigned(UINT64_MAX)}}},
      msg::Msg{msg::FullSyncStatusRetMsg{"s1", false, 0.25, false, {1, 2}}},
      msg::Msg{msg::ErrorMsg{"nope"}},
      msg::Msg{msg::ClearMsg{"e", "A", "cpu"}},
  };
  for (const auto& m : msgs) {
    SCOPED_TRACE(msg::type_tag_of(m));
    EXPECT_EQ(round_trip(m), m);
  }
  std::vector<pushed_msg> round;
  for (const auto& m : msgs)
    round.push_back(pushed_msg{m, 3});
  const auto back = round_trip(round);
  ASSERT_EQ(back.size(), round.size());
  for (size_t i = 0; i < back.size(); ++i)
    EXPECT_EQ(back[i].msg, round[i].msg);
}

TEST(type_ids, corrupted_bytes_fail_to_deserialize_instead_of_making_up_a_message) {
  std::vector<char> buf;
  caf::binary_serializer sink{nullptr, buf};
  msg::Msg m{msg::ErrorMsg{"nope"}};
  ASSERT_FALSE(sink(m));
  buf.resize(buf.size() - 2); // the msgpack bytes lose their tail
  msg::Msg out;
  caf::binary_deserializer source{nullptr, buf};
  EXPECT_TRUE(source(out));
}

TEST(type_ids, a_worker_row_with_a_time_that_is_not_finite_is_refused) {
  // CAF 0.17 reads a double's all-ones exponent as infinity, and its
  // serializer never returns from writing one (pack754 halves infinity
  // forever): a row a peer sent like that would hang the middleman thread
  // that next forwards it. It is refused when read instead.
  persistence::worker_row row;
  row.uid = 6;
  row.instance_id = "vllm-0";
  row.registration_time = 1.0;
  row.last_heartbeat_time = 2.0;
  std::vector<char> buf;
  caf::binary_serializer sink{nullptr, buf};
  ASSERT_FALSE(sink(row));
  // The two times are the only doubles: find them by their packed bits.
  auto set_exponent_all_ones = [&](double value) {
    std::vector<char> packed;
    caf::binary_serializer one{nullptr, packed};
    ASSERT_FALSE(one(value));
    auto at = std::search(buf.begin(), buf.end(), packed.begin(), packed.end());
    ASSERT_NE(at, buf.end());
    at[0] = static_cast<char>(at[0] | 0x7f); // big-endian: sign, then the exponent
    at[1] = static_cast<char>(at[1] | 0xf0);
  };
  for (double time : {1.0, 2.0}) {
    SCOPED_TRACE(time);
    std::vector<char> original = buf;
    set_exponent_all_ones(time);
    persistence::worker_row out;
    caf::binary_deserializer source{nullptr, buf};
    EXPECT_TRUE(source(out)) << "read a row whose time is " << out.registration_time << ", "
                             << out.last_heartbeat_time;
    buf = original;
  }
  persistence::worker_row out;
  caf::binary_deserializer source{nullptr, buf};
  ASSERT_FALSE(source(out));
  EXPECT_EQ(out.registration_time, 1.0);
}

TEST(type_ids, register_message_types_registers_the_block) {
  caf::actor_system_config cfg;
  register_message_types(cfg);
  const std::vector<std::pair<std::type_index, std::string>> expected = {
      {typeid(kv_sub_batch), "lmcc::actors::kv_sub_batch"},
      {typeid(pushed_msg), "lmcc::actors::pushed_msg"},
      {typeid(session_params), "lmcc::actors::session_params"},
      {typeid(sync_phase), "lmcc::actors::sync_phase"},
      {typeid(msg::Msg), "lmcc::msg::Msg"},
      {typeid(wire_int), "lmcc::msg::wire_int"},
      {typeid(kv_op), "lmcc::persistence::kv_op"},
      {typeid(seq_mark), "lmcc::persistence::seq_mark"},
      {typeid(persistence::worker_row), "lmcc::persistence::worker_row"},
      {typeid(std::vector<pushed_msg>), "std::vector<lmcc::actors::pushed_msg>"},
      {typeid(std::vector<kv_op>), "std::vector<lmcc::persistence::kv_op>"},
      {typeid(std::vector<persistence::worker_row>), "std::vector<lmcc::persistence::worker_row>"},
      {typeid(slot_copy), "lmcc::actors::slot_copy"},
      {typeid(copy_outcome), "lmcc::actors::copy_outcome"},
      {typeid(cluster::slot_digests), "lmcc::cluster::slot_digests"},
      {typeid(cluster::greeting), "lmcc::cluster::greeting"},
      {typeid(directory_listing), "lmcc::actors::directory_listing"},
      {typeid(peer_handles), "lmcc::actors::peer_handles"},
      {typeid(std::vector<cluster::stream_ack>), "std::vector<lmcc::cluster::stream_ack>"},
      {typeid(std::vector<cluster::holder_count>), "std::vector<lmcc::cluster::holder_count>"},
      {typeid(std::vector<cluster::registration_ref>),
       "std::vector<lmcc::cluster::registration_ref>"},
  };
  for (const auto& [type, name] : expected) {
    SCOPED_TRACE(name);
    auto it = cfg.type_names_by_rtti.find(type);
    ASSERT_NE(it, cfg.type_names_by_rtti.end());
    EXPECT_EQ(it->second, name);
    ASSERT_TRUE(cfg.value_factories_by_name.contains(name));
  }
}

TEST(type_ids, a_registered_message_survives_the_serializer_of_an_actor_system) {
  caf::actor_system_config cfg;
  register_message_types(cfg);
  cfg.set("scheduler.max-threads", 1);
  caf::actor_system sys{cfg};
  const auto sb = full_sub_batch();
  auto m = caf::make_message(apply_atom::value, sb);
  std::vector<char> buf;
  caf::binary_serializer sink{sys, buf};
  ASSERT_FALSE(sink(m));
  caf::message back;
  caf::binary_deserializer source{sys, buf};
  ASSERT_FALSE(source(back));
  ASSERT_TRUE((back.match_elements<apply_atom, kv_sub_batch>()));
  EXPECT_EQ(back.get_as<kv_sub_batch>(1), sb);
  // Local-only types are not in the block.
  EXPECT_FALSE(cfg.type_names_by_rtti.contains(typeid(node_stats)));
}

} // namespace
} // namespace lmcc::actors
