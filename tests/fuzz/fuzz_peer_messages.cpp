#include "tests/fuzz/fuzz_peer_messages.hpp"

#include "actors/type_ids.hpp"
#include "cluster/handshake.hpp"
#include "cluster/membership_record.hpp"
#include "messages/codec_msgpack.hpp"
#include "persistence/crc32c.hpp"
#include "persistence/records.hpp"

#include <caf/binary_deserializer.hpp>
#include <caf/binary_serializer.hpp>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace lmcc::fuzz {
namespace {

using namespace lmcc::actors;
using persistence::kv_op;
using persistence::seq_mark;
using persistence::seq_state;

// -- one type of the block, read alone ---------------------------------------------------------

constexpr caf::type_id_t first_type_id = caf::id_block::lmcc::begin;
constexpr size_t block_types = caf::id_block::lmcc::end - caf::id_block::lmcc::begin;

template <class T>
std::optional<std::vector<char>> written(T& x) {
  std::vector<char> bytes;
  caf::binary_serializer sink{nullptr, bytes};
  if (sink(x))
    return std::nullopt;
  return bytes;
}

/// Reads a T as the middleman would; what it accepts must survive a round trip.
/// Values are compared by their bytes: a NaN in a message or a row is never
/// equal to itself, and every type of the block is written canonically.
template <class T>
std::string check_value(std::string_view bytes, const char* name) {
  T x{};
  caf::binary_deserializer source{nullptr, bytes.data(), bytes.size()};
  if (source(x))
    return {};
  const auto first = written(x);
  if (!first)
    return std::string(name) + ": a value it read cannot be written back";
  T y{};
  caf::binary_deserializer again{nullptr, *first};
  if (again(y))
    return std::string(name) + ": the bytes it wrote for a value it read are refused";
  if (again.remaining() != 0)
    return std::string(name) + ": the bytes it wrote are not all read back";
  const auto second = written(y);
  if (!second || *second != *first)
    return std::string(name) + ": a value read back is written differently";
  return {};
}

using value_check = std::string (*)(std::string_view);

template <caf::type_id_t Id>
std::string check_block_type(std::string_view bytes) {
  return check_value<typename caf::type_by_id<Id>::type>(bytes, caf::type_name_by_id<Id>::value);
}

template <size_t... I>
constexpr std::array<value_check, sizeof...(I)> block_checks(std::index_sequence<I...>) {
  return {&check_block_type<static_cast<caf::type_id_t>(first_type_id + I)>...};
}

constexpr auto value_checks = block_checks(std::make_index_sequence<block_types>{});

// -- a whole message, through an actor system --------------------------------------------------

/// The actor system messages are read with: lmcc's types registered, as on a node.
class message_reader {
public:
  message_reader() {
    register_message_types(cfg_);
    cfg_.set("scheduler.max-threads", 1);
    system_.emplace(cfg_);
  }
  caf::actor_system& system() { return *system_; }

private:
  caf::actor_system_config cfg_;
  std::optional<caf::actor_system> system_;
};

caf::actor_system& message_system() {
  // CAF 0.17.6 corrupts its heap when an actor system is destroyed after main
  // returns (measured with a bare static actor_system, g++ and clang alike):
  // this one is made once and lives as long as the process.
  static message_reader* const reader = std::make_unique<message_reader>().release();
  return reader->system();
}

std::optional<std::vector<char>> written_message(caf::message& m) {
  std::vector<char> bytes;
  caf::binary_serializer sink{message_system(), bytes};
  if (sink(m))
    return std::nullopt;
  return bytes;
}

template <size_t... I>
bool is_block_type_name(std::string_view name, std::index_sequence<I...>) {
  return ((name == caf::type_name_by_id<static_cast<caf::type_id_t>(first_type_id + I)>::value) ||
          ...);
}

/// True when every value the message names is of a type lmcc's actors
/// exchange: one of the block, or a plain value of their interfaces (CAF's
/// names for atoms, strings, integers and bool). A message's bytes start with
/// a 16-bit 0 and its type names, "@<>+name+name...". CAF's other built-in
/// types are CAF's own code, and some of it trusts the bytes (a @charbuf
/// allocates the length its header claims, up to 4 GiB, before reading it;
/// an @error nests a whole message): lmcc's actors take none of them.
bool names_only_lmcc_types(std::string_view bytes) {
  if (bytes.size() < 3 || bytes[0] != 0 || bytes[1] != 0)
    return false;
  bytes.remove_prefix(2);
  uint32_t length = 0;
  for (int shift = 0; shift <= 28 && !bytes.empty(); shift += 7) {
    const auto b = static_cast<uint8_t>(bytes.front());
    bytes.remove_prefix(1);
    length |= uint32_t{b & 0x7fu} << shift;
    if ((b & 0x80) == 0) {
      std::string_view names = bytes.substr(0, length);
      if (names.size() != length || !names.starts_with("@<>+"))
        return false;
      names.remove_prefix(4);
      while (true) {
        const size_t plus = names.find('+');
        const std::string_view name = names.substr(0, plus);
        static constexpr std::string_view plain[] = {"@atom", "@str", "@u64", "@u32", "@u16",
                                                     "@u8",   "@i64", "@i32", "bool"};
        if (std::find(std::begin(plain), std::end(plain), name) == std::end(plain) &&
            !is_block_type_name(name, std::make_index_sequence<block_types>{}))
          return false;
        if (plus == std::string_view::npos)
          return true;
        names.remove_prefix(plus + 1);
      }
    }
  }
  return false;
}

std::string check_message(std::string_view bytes) {
  if (!names_only_lmcc_types(bytes))
    return {};
  auto& sys = message_system();
  caf::message m;
  caf::binary_deserializer source{sys, bytes.data(), bytes.size()};
  if (source(m))
    return {};
  const auto first = written_message(m);
  if (!first)
    return "caf::message: a message it read cannot be written back: " + caf::to_string(m);
  caf::message back;
  caf::binary_deserializer again{sys, *first};
  if (again(back) || again.remaining() != 0)
    return "caf::message: the bytes it wrote for a message it read are refused";
  const auto second = written_message(back);
  if (!second || *second != *first)
    return "caf::message: a message read back is written differently";
  return {};
}

// -- records, snapshots, holder states ---------------------------------------------------------

/// `body` followed by its crc32c, as the record codecs seal a value.
std::string sealed(std::string_view body) {
  std::string out{body};
  const uint32_t crc = persistence::crc32c::value(body);
  for (int i = 0; i < 4; ++i)
    out += static_cast<char>(crc >> (8 * i));
  return out;
}

std::string check_log_record(std::string_view value) {
  persistence::log_record rec;
  if (auto r = persistence::decode_log_record(value, rec); !r)
    return r.error().message.empty() ? "op-log record: refused without a reason" : "";
  std::string encoded;
  persistence::encode_log_record(rec, encoded);
  persistence::log_record back;
  if (auto r = persistence::decode_log_record(encoded, back); !r)
    return "op-log record: its own encoding is refused: " + r.error().message;
  if (!(back == rec))
    return "op-log record: changed by a round trip";
  std::string again;
  persistence::encode_log_record(back, again);
  if (again != encoded)
    return "op-log record: encoded differently the second time";
  return {};
}

using slot_entry = std::pair<uint64_t, std::vector<uint64_t>>;

struct slot_reading {
  persistence::slot_read_result result;
  std::vector<slot_entry> entries;
  std::optional<uint64_t> counted;
};

slot_reading read_slot(std::string_view value) {
  slot_reading out;
  out.result = persistence::read_slot_snapshot(
      value,
      [&](uint64_t key, std::span<const uint64_t> holders) {
        out.entries.emplace_back(key, std::vector<uint64_t>(holders.begin(), holders.end()));
      },
      [&](uint64_t keys) { out.counted = keys; });
  return out;
}

std::string check_slot_snapshot(std::string_view value) {
  using persistence::slot_damage;
  slot_reading got = read_slot(value);
  if (got.result.damage != slot_damage::none) {
    if (got.result.what.empty())
      return "slot snapshot: damage without a reason";
    if (got.result.damage == slot_damage::header && !got.entries.empty())
      return "slot snapshot: keys given from a snapshot whose header is damaged";
    return {};
  }
  if (!got.counted || *got.counted != got.entries.size())
    return "slot snapshot: announced a key count other than the keys it gave";
  uint64_t pairs = 0;
  for (const auto& [key, holders] : got.entries) {
    pairs += holders.size();
    for (uint64_t h : holders)
      if (std::find(got.result.header.holders.begin(), got.result.header.holders.end(), h) ==
          got.result.header.holders.end())
        return "slot snapshot: a key held by a holder outside the dictionary";
  }
  if (pairs != got.result.entries)
    return "slot snapshot: counted other entries than it gave";

  persistence::slot_snapshot_writer writer{got.result.header.slot, got.result.header.position};
  for (const auto& [key, holders] : got.entries)
    writer.add(key, holders);
  std::string encoded;
  writer.finish(encoded);
  slot_reading back = read_slot(encoded);
  if (back.result.damage != slot_damage::none)
    return "slot snapshot: its own encoding is damaged: " + back.result.what;
  if (back.result.header.slot != got.result.header.slot ||
      back.result.header.position != got.result.header.position)
    return "slot snapshot: slot or position changed by a round trip";
  std::sort(got.entries.begin(), got.entries.end());
  std::sort(back.entries.begin(), back.entries.end());
  if (back.entries != got.entries)
    return "slot snapshot: entries changed by a round trip";
  return {};
}

/// A slot snapshot from two parts, each sealed: the first two bytes give the
/// header's length (the rest is the body).
std::string check_sealed_slot_snapshot(std::string_view bytes) {
  if (bytes.size() < 2)
    return check_slot_snapshot(bytes);
  const size_t header =
      std::min<size_t>(bytes.size() - 2, static_cast<uint8_t>(bytes[0]) |
                                             size_t{static_cast<uint8_t>(bytes[1])} << 8);
  return check_slot_snapshot(sealed(bytes.substr(2, header)) + sealed(bytes.substr(2 + header)));
}

std::string check_holder_state(std::string_view value) {
  constexpr uint64_t holder = 42;
  auto state = persistence::decode_holder_state(holder, value);
  if (!state)
    return state.error().message.empty() ? "holder state: refused without a reason" : "";
  if (state->holder != holder)
    return "holder state: decoded under another holder";
  const std::string encoded = persistence::encode_holder_state(*state);
  auto back = persistence::decode_holder_state(holder, encoded);
  if (!back)
    return "holder state: its own encoding is refused: " + back.error().message;
  if (!(*back == *state))
    return "holder state: changed by a round trip";
  if (persistence::encode_holder_state(*back) != encoded)
    return "holder state: encoded differently the second time";
  return {};
}

// -- membership records and the handshake ------------------------------------------------------

std::string check_membership_record(std::string_view text) {
  auto r = cluster::record_from_json(text);
  if (!r)
    return r.error().message.empty() ? "membership record: refused without a reason" : "";
  const std::string json = cluster::to_json(*r);
  auto back = cluster::record_from_json(json);
  if (!back)
    return "membership record: its own JSON is refused: " + back.error().message;
  if (!(*back == *r))
    return "membership record: changed by a round trip through " + json.substr(0, 200);
  if (cluster::to_json(*back) != json)
    return "membership record: written differently the second time";
  return {};
}

/// Bytes: u8 role | u8 client id length | client id | server id (up to a 0
/// byte) | 0 | u64 client nonce | u64 server nonce | a MAC as received.
std::string check_handshake(std::string_view bytes) {
  static constexpr std::string_view secret = "a cluster secret of 32 bytes....";
  auto take = [&](size_t n) {
    const auto piece = bytes.substr(0, std::min(n, bytes.size()));
    bytes.remove_prefix(piece.size());
    return piece;
  };
  auto u64 = [&] {
    uint64_t v = 0;
    const auto piece = take(8);
    std::memcpy(&v, piece.data(), piece.size());
    return v;
  };
  const auto role_byte = take(1);
  const auto role = !role_byte.empty() && (role_byte[0] & 1) ? cluster::handshake_role::accept
                                                             : cluster::handshake_role::join;
  const auto length = take(1);
  const auto client = take(length.empty() ? 0 : static_cast<uint8_t>(length[0]));
  const auto server = take(bytes.find('\0'));
  take(1);
  const uint64_t client_nonce = u64();
  const uint64_t server_nonce = u64();
  const std::string_view received = bytes;

  const std::string mac =
      cluster::handshake_mac(secret, role, client, server, client_nonce, server_nonce);
  if (mac.size() != 64 || !std::all_of(mac.begin(), mac.end(), [](char c) {
        return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
      }))
    return "handshake: the MAC is not 64 lower-case hex digits: " + mac;
  if (!cluster::mac_equal(mac, mac) || cluster::mac_equal(mac, received) != (mac == received))
    return "handshake: mac_equal disagrees with ==";
  // The fields are length-prefixed: moving the boundary between the ids
  // changes the MAC, and so does the role.
  if (!client.empty()) {
    const std::string moved_client{client.substr(0, client.size() - 1)};
    const std::string moved_server =
        std::string(client.substr(client.size() - 1)) + std::string(server);
    if (cluster::handshake_mac(secret, role, moved_client, moved_server, client_nonce,
                               server_nonce) == mac)
      return "handshake: two splits of the same ids give one MAC";
  }
  const auto other = role == cluster::handshake_role::join ? cluster::handshake_role::accept
                                                           : cluster::handshake_role::join;
  if (cluster::handshake_mac(secret, other, client, server, client_nonce, server_nonce) == mac)
    return "handshake: both roles give one MAC";
  return {};
}

// -- the cases -------------------------------------------------------------------------------

enum class record_case : size_t {
  message,
  log_record,
  sealed_log_record,
  sealed_slot_snapshot,
  sealed_holder_state,
  membership_record,
  handshake,
  count
};

constexpr size_t record_cases = static_cast<size_t>(record_case::count);
constexpr size_t case_count = record_cases + block_types;

char selector_of(record_case c) {
  return static_cast<char>(c);
}

/// The block's types come after the fixed cases: a type added to the block
/// moves only the types after it to other selectors.
char selector_of_block_type(size_t index) {
  return static_cast<char>(record_cases + index);
}

} // namespace

std::string check_peer_message(std::string_view input) {
  const size_t selector = input.empty() ? 0 : static_cast<uint8_t>(input.front()) % case_count;
  const std::string_view bytes = input.empty() ? input : input.substr(1);
  if (selector >= record_cases)
    return value_checks[selector - record_cases](bytes);
  switch (static_cast<record_case>(selector)) {
  case record_case::message:
    return check_message(bytes);
  case record_case::log_record:
    return check_log_record(bytes);
  case record_case::sealed_log_record:
    return check_log_record(sealed(bytes));
  case record_case::sealed_slot_snapshot:
    return check_sealed_slot_snapshot(bytes);
  case record_case::sealed_holder_state:
    return check_holder_state(sealed(bytes));
  case record_case::membership_record:
    return check_membership_record(bytes);
  case record_case::handshake:
  case record_case::count:
    break;
  }
  return check_handshake(bytes);
}

// -- seeds -----------------------------------------------------------------------------------

namespace {

kv_sub_batch sample_sub_batch() {
  kv_sub_batch sb;
  sb.stream = 0x5eed;
  sb.number = 3;
  sb.holder = 0x1234567890abcdefULL;
  sb.incarnation = 2;
  sb.has_mark = true;
  sb.mark = seq_mark{seq_state::tracking, 41};
  sb.has_intro = true;
  sb.intro_worker_uid = 77;
  sb.intro_location = "LocalCPUBackend";
  sb.ops = {{0x9e3779b97f4a7c15ULL, true}, {7, false}, {UINT64_MAX, true}};
  return sb;
}

msg::Msg sample_msg() {
  msg::BatchedKVOperationMsg batch;
  batch.instance_id = "vllm-0";
  batch.worker_id = msg::wire_int{0};
  batch.location = "LocalCPUBackend";
  msg::KVOpEvent op;
  op.op_type = msg::OpType::admit;
  op.key = msg::wire_int{12345};
  op.seq_num = msg::wire_int{1};
  batch.operations.push_back(op);
  return batch;
}

template <class T>
T sample_value() {
  T x{};
  if constexpr (std::is_same_v<T, kv_sub_batch>) {
    x = sample_sub_batch();
  } else if constexpr (std::is_same_v<T, std::vector<kv_sub_batch>>) {
    x = {sample_sub_batch(), kv_sub_batch{}};
  } else if constexpr (std::is_same_v<T, msg::Msg>) {
    x = sample_msg();
  } else if constexpr (std::is_same_v<T, pushed_msg>) {
    x.msg = sample_msg();
    x.credits = 1;
    x.read_under = 2;
    x.forwarded = true;
  } else if constexpr (std::is_same_v<T, std::vector<uint64_t>>) {
    x = {3, 0, UINT64_MAX};
  } else if constexpr (std::is_same_v<T, location_mark>) {
    x.location = "LocalDiskBackend";
    x.incarnation = 4;
    x.mark = seq_mark{seq_state::gap, 9};
  } else if constexpr (std::is_same_v<T, worker_handoff>) {
    x.uid = 5;
    x.status = worker_handoff::answer::found;
    x.marks.resize(2);
    x.marks[0].location = "L";
    x.resync_reason = "a proof";
  } else if constexpr (std::is_same_v<T, slot_copy>) {
    x = slot_copy{7, false, {holder_slot_copy{9, 6, true, {1, 0, 5, 0}, {11, 12}}}};
  } else if constexpr (std::is_same_v<T, copy_outcome>) {
    x = copy_outcome{1, 0, 2, {{6, 9}}, {}, true};
  } else if constexpr (std::is_same_v<T, cluster::greeting>) {
    x = cluster::greeting{"n2",  false, 3,     0xfeed,        true,    true,
                          false, false, false, 1700000000000, 0xabcdef};
  } else if constexpr (std::is_same_v<T, cluster::slot_digests>) {
    x.digests = {0, UINT64_MAX};
  } else if constexpr (std::is_same_v<T, std::vector<cluster::stream_ack>>) {
    x = {{7, 12}, {8, 1}};
  } else if constexpr (std::is_same_v<T, std::vector<cluster::holder_count>>) {
    x = {{9, 3}};
  } else if constexpr (std::is_same_v<T, std::vector<cluster::registration_ref>>) {
    x = {{6, 4}};
  } else if constexpr (std::is_same_v<T, persistence::worker_row>) {
    x.uid = 6;
    x.instance_id = "vllm-0";
    x.ip = "10.0.0.5";
    x.peer_init_url = "10.0.0.5:8200";
  }
  return x;
}

template <class T>
void add_value_seeds(std::vector<std::string>& seeds, char selector) {
  for (T x : {T{}, sample_value<T>()})
    if (auto bytes = written(x))
      seeds.push_back(selector + std::string(bytes->begin(), bytes->end()));
}

template <size_t... I>
void add_block_seeds(std::vector<std::string>& seeds, std::index_sequence<I...>) {
  (add_value_seeds<typename caf::type_by_id<static_cast<caf::type_id_t>(first_type_id + I)>::type>(
       seeds, selector_of_block_type(I)),
   ...);
}

void add_message_seed(std::vector<std::string>& seeds, caf::message m) {
  if (auto bytes = written_message(m))
    seeds.push_back(selector_of(record_case::message) + std::string(bytes->begin(), bytes->end()));
}

} // namespace

std::vector<std::string> peer_message_seeds() {
  std::vector<std::string> seeds;
  add_block_seeds(seeds, std::make_index_sequence<block_types>{});

  cluster::membership_record record;
  record.epoch = 3;
  record.members = {{"n1", "10.0.0.1", 9004, false}, {"n2", "10.0.0.2", 9014, false}};
  record.previous = {"n1"};
  record.committed = false;
  const std::string record_json = cluster::to_json(record);

  add_message_seed(seeds, caf::make_message(apply_atom::value, sample_sub_batch()));
  add_message_seed(seeds, caf::make_message(members_atom::value, record_json));
  add_message_seed(seeds, caf::make_message(digest_atom::value, std::vector<uint64_t>{1, 2, 3}));
  add_message_seed(seeds,
                   caf::make_message(push_atom::value, pushed_msgs{sample_value<pushed_msg>()}));
  add_message_seed(seeds, caf::make_message(greet_atom::value, sample_value<cluster::greeting>()));
  add_message_seed(seeds, caf::make_message(hello_atom::value, std::string("n2"), uint64_t{9},
                                            cluster::cluster_protocol_version));

  persistence::log_record rec;
  rec.holder = 0x1234567890abcdefULL;
  rec.incarnation = 2;
  rec.mark = seq_mark{seq_state::tracking, 41};
  rec.intro = persistence::holder_intro{77, "LocalCPUBackend"};
  rec.ops = {{1, true},  {2, false}, {3, true}, {4, true}, {5, true},
             {6, false}, {7, true},  {8, true}, {9, false}};
  persistence::log_record drop;
  drop.holder = 5;
  drop.drop = true;
  for (const auto* r : {&rec, &drop}) {
    std::string v;
    persistence::encode_log_record(*r, v);
    seeds.push_back(selector_of(record_case::log_record) + v);
    seeds.push_back(selector_of(record_case::sealed_log_record) + v.substr(0, v.size() - 4));
  }

  persistence::slot_snapshot_writer writer{17, 123456};
  const uint64_t one[] = {0xaaaa};
  const uint64_t two[] = {0xaaaa, 0xbbbb};
  writer.add(0x9e3779b97f4a7c15ULL, one);
  writer.add(42, two);
  writer.add(7, one);
  std::string snapshot;
  writer.finish(snapshot);
  // Split into header and body as check_sealed_slot_snapshot expects: the
  // header ends where its checksum is (found by trying each length).
  for (size_t header = 1; header + 8 <= snapshot.size(); ++header) {
    if (sealed(snapshot.substr(0, header)) != snapshot.substr(0, header + 4))
      continue;
    const std::string body = snapshot.substr(header + 4, snapshot.size() - header - 8);
    std::string seed{selector_of(record_case::sealed_slot_snapshot)};
    seed += static_cast<char>(header & 0xff);
    seed += static_cast<char>(header >> 8);
    seeds.push_back(seed + snapshot.substr(0, header) + body);
    break;
  }

  persistence::holder_state state;
  state.holder = 42;
  state.worker_uid = 77;
  state.location = "LocalCPUBackend";
  state.incarnation = 2;
  state.mark = seq_mark{seq_state::tracking, 41};
  const std::string state_value = persistence::encode_holder_state(state);
  seeds.push_back(selector_of(record_case::sealed_holder_state) +
                  state_value.substr(0, state_value.size() - 4));

  seeds.push_back(selector_of(record_case::membership_record) + record_json);
  seeds.push_back(selector_of(record_case::membership_record) +
                  cluster::to_json(cluster::membership_record::initial(record.members)));

  std::string handshake{selector_of(record_case::handshake)};
  handshake += '\0';
  handshake += '\2';
  handshake += "n2n1";
  handshake += '\0';
  handshake += std::string(16, '\7');
  handshake +=
      cluster::handshake_mac("a cluster secret of 32 bytes....", cluster::handshake_role::join,
                             "n2", "n1", 0x0707070707070707ULL, 0x0707070707070707ULL);
  seeds.push_back(handshake);
  return seeds;
}

} // namespace lmcc::fuzz
