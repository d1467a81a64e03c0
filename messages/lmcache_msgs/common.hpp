// The parts of the LMCache message set that are not messages themselves: the
// field and family enums, ordered_map, and the untagged helper types the
// messages carry (OpType, KVOpEvent, WorkerInfo, the heartbeat commands, the
// P2P layout tuple). Part of messages/lmcache_msgs.hpp; include that.
//
// Context: plain value types, thread-compatible.
#pragma once

#include "messages/any_value.hpp"
#include "messages/wire_int.hpp"

#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <variant>
#include <vector>

namespace lmcc::msg {

/// Whether msgspec insists on a field being present when decoding.
enum class field_kind {
  required,  ///< no default in message.py: missing -> "Object missing required field"
  defaulted, ///< has a default: missing -> the C++ initializer, which equals it
};

/// The seven message families of message.py (the comment at its line 25).
enum class msg_family {
  worker_push,
  worker_request,
  worker_reply,
  control,
  control_reply,
  orchestration,
  orchestration_reply,
};

/// A Python dict on the wire: insertion order is part of the encoding.
template <class Key, class Value>
using ordered_map = std::vector<std::pair<Key, Value>>;

// -- untagged helper types ----------------------------------------------------

/// message.py OpType: a string-valued enum, encoded as its value.
enum class OpType { admit, evict };

constexpr std::string_view op_type_name(OpType t) noexcept {
  return t == OpType::admit ? "admit" : "evict";
}

/// message.py KVOpEvent: untagged msgspec.Struct, a map of its three fields.
struct KVOpEvent {
  OpType op_type = OpType::admit;
  wire_int key;
  wire_int seq_num;

  template <class Self, class Visitor>
  static void fields(Self& self, Visitor&& v) {
    v("op_type", self.op_type, field_kind::required);
    v("key", self.key, field_kind::required);
    v("seq_num", self.seq_num, field_kind::required);
  }
  friend bool operator==(const KVOpEvent&, const KVOpEvent&) = default;
};

/// message.py WorkerInfo: a dataclass, encoded as an untagged map.
struct WorkerInfo {
  std::string instance_id;
  wire_int worker_id;
  std::string ip;
  wire_int port;
  std::optional<std::string> peer_init_url;
  double registration_time = 0;
  double last_heartbeat_time = 0;

  template <class Self, class Visitor>
  static void fields(Self& self, Visitor&& v) {
    v("instance_id", self.instance_id, field_kind::required);
    v("worker_id", self.worker_id, field_kind::required);
    v("ip", self.ip, field_kind::required);
    v("port", self.port, field_kind::required);
    v("peer_init_url", self.peer_init_url, field_kind::required);
    v("registration_time", self.registration_time, field_kind::required);
    v("last_heartbeat_time", self.last_heartbeat_time, field_kind::required);
  }
  friend bool operator==(const WorkerInfo&, const WorkerInfo&) = default;
};

// -- heartbeat commands (commands/base.py, commands/full_sync.py) --------------

/// Optional[Dict[str, Any]]
using command_args = std::optional<ordered_map<std::string, any_value>>;

/// commands/base.py HeartbeatCommand: tag field `command_type`, tag = class name.
struct HeartbeatCommand {
  static constexpr std::string_view tag_field = "command_type";
  static constexpr std::string_view type_tag = "HeartbeatCommand";
  std::optional<std::string> reason;
  command_args args;

  template <class Self, class Visitor>
  static void fields(Self& self, Visitor&& v) {
    v("reason", self.reason, field_kind::defaulted);
    v("args", self.args, field_kind::defaulted);
  }
  friend bool operator==(const HeartbeatCommand&, const HeartbeatCommand&) = default;
};

/// commands/full_sync.py FullSyncCommand(HeartbeatCommand, tag="full_sync").
struct FullSyncCommand {
  static constexpr std::string_view tag_field = "command_type";
  static constexpr std::string_view type_tag = "full_sync";
  std::optional<std::string> reason;
  command_args args;

  template <class Self, class Visitor>
  static void fields(Self& self, Visitor&& v) {
    v("reason", self.reason, field_kind::defaulted);
    v("args", self.args, field_kind::defaulted);
  }
  friend bool operator==(const FullSyncCommand&, const FullSyncCommand&) = default;
};

/// message.py AnyCommand = Union[FullSyncCommand, HeartbeatCommand]
using AnyCommand = std::variant<FullSyncCommand, HeartbeatCommand>;

/// (instance_id, location, num_hit_chunks, peer_init_url)
using p2p_layout_entry = std::tuple<std::string, std::string, wire_int, std::string>;

} // namespace lmcc::msg
