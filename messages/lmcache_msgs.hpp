// The LMCache controller message set, one C++ type per class of
// shared/seed/message.py (lmcache 0.4.5.dev0), grouped by family.
//
// Each tagged type carries `type_tag` (the msgspec tag value = the Python class
// name), its `family`, its fields in declaration order (inherited fields first)
// with their Python defaults as initializers, and a static `fields(self, visit)`
// that walks them in wire order, naming each and saying whether msgspec requires
// it. The codecs (codec_msgpack.hpp, codec_json.hpp) are written once against
// `fields()`; nothing else in this file knows about bytes.
//
//   Msg m = RegisterMsg{.instance_id = "A", .worker_id = 0, .ip = "10.0.0.5",
//                       .port = 8500, .peer_init_url = std::nullopt};
//   std::string bytes = encode_msgpack(m);
//
// Names: the wire types keep LMCache's CamelCase class names so that a reader
// can match them against message.py and the spec one to one; everything else
// in lmcc is snake_case.
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

// -- tagged messages, by family ----------------------------------------------

// -- worker_push: Worker -> controller, fire-and-forget (PUSH -> PULL, socket S1) ---
struct DeRegisterMsg {
  static constexpr std::string_view type_tag = "DeRegisterMsg";
  static constexpr msg_family family = msg_family::worker_push;
  std::string instance_id;
  wire_int worker_id;
  std::string ip;
  wire_int port;

  template <class Self, class Visitor>
  static void fields(Self& self, Visitor&& v) {
    v("instance_id", self.instance_id, field_kind::required);
    v("worker_id", self.worker_id, field_kind::required);
    v("ip", self.ip, field_kind::required);
    v("port", self.port, field_kind::required);
  }
  friend bool operator==(const DeRegisterMsg&, const DeRegisterMsg&) = default;
};
struct KVAdmitMsg {
  static constexpr std::string_view type_tag = "KVAdmitMsg";
  static constexpr msg_family family = msg_family::worker_push;
  std::string instance_id;
  wire_int worker_id;
  wire_int key;
  std::string location;
  wire_int seq_num = 0;

  template <class Self, class Visitor>
  static void fields(Self& self, Visitor&& v) {
    v("instance_id", self.instance_id, field_kind::required);
    v("worker_id", self.worker_id, field_kind::required);
    v("key", self.key, field_kind::required);
    v("location", self.location, field_kind::required);
    v("seq_num", self.seq_num, field_kind::defaulted);
  }
  friend bool operator==(const KVAdmitMsg&, const KVAdmitMsg&) = default;
};
struct KVEvictMsg {
  static constexpr std::string_view type_tag = "KVEvictMsg";
  static constexpr msg_family family = msg_family::worker_push;
  std::string instance_id;
  wire_int worker_id;
  wire_int key;
  std::string location;
  wire_int seq_num = 0;

  template <class Self, class Visitor>
  static void fields(Self& self, Visitor&& v) {
    v("instance_id", self.instance_id, field_kind::required);
    v("worker_id", self.worker_id, field_kind::required);
    v("key", self.key, field_kind::required);
    v("location", self.location, field_kind::required);
    v("seq_num", self.seq_num, field_kind::defaulted);
  }
  friend bool operator==(const KVEvictMsg&, const KVEvictMsg&) = default;
};
struct BatchedKVOperationMsg {
  static constexpr std::string_view type_tag = "BatchedKVOperationMsg";
  static constexpr msg_family family = msg_family::worker_push;
  std::string instance_id;
  wire_int worker_id;
  std::string location;
  std::vector<KVOpEvent> operations;

  template <class Self, class Visitor>
  static void fields(Self& self, Visitor&& v) {
    v("instance_id", self.instance_id, field_kind::required);
    v("worker_id", self.worker_id, field_kind::required);
    v("location", self.location, field_kind::required);
    v("operations", self.operations, field_kind::required);
  }
  friend bool operator==(const BatchedKVOperationMsg&, const BatchedKVOperationMsg&) = default;
};
struct FullSyncBatchMsg {
  static constexpr std::string_view type_tag = "FullSyncBatchMsg";
  static constexpr msg_family family = msg_family::worker_push;
  std::string instance_id;
  wire_int worker_id;
  std::string location;
  std::string sync_id;
  wire_int batch_id;
  std::vector<wire_int> keys;

  template <class Self, class Visitor>
  static void fields(Self& self, Visitor&& v) {
    v("instance_id", self.instance_id, field_kind::required);
    v("worker_id", self.worker_id, field_kind::required);
    v("location", self.location, field_kind::required);
    v("sync_id", self.sync_id, field_kind::required);
    v("batch_id", self.batch_id, field_kind::required);
    v("keys", self.keys, field_kind::required);
  }
  friend bool operator==(const FullSyncBatchMsg&, const FullSyncBatchMsg&) = default;
};
struct FullSyncEndMsg {
  static constexpr std::string_view type_tag = "FullSyncEndMsg";
  static constexpr msg_family family = msg_family::worker_push;
  std::string instance_id;
  wire_int worker_id;
  std::string location;
  std::string sync_id;
  wire_int actual_total_keys;

  template <class Self, class Visitor>
  static void fields(Self& self, Visitor&& v) {
    v("instance_id", self.instance_id, field_kind::required);
    v("worker_id", self.worker_id, field_kind::required);
    v("location", self.location, field_kind::required);
    v("sync_id", self.sync_id, field_kind::required);
    v("actual_total_keys", self.actual_total_keys, field_kind::required);
  }
  friend bool operator==(const FullSyncEndMsg&, const FullSyncEndMsg&) = default;
};
using worker_push_msg = std::variant<DeRegisterMsg, KVAdmitMsg, KVEvictMsg, BatchedKVOperationMsg,
                                     FullSyncBatchMsg, FullSyncEndMsg>;

// -- worker_request: Worker -> controller requests (DEALER -> ROUTER, sockets S2/S3) ---
struct RegisterMsg {
  static constexpr std::string_view type_tag = "RegisterMsg";
  static constexpr msg_family family = msg_family::worker_request;
  std::string instance_id;
  wire_int worker_id;
  std::string ip;
  wire_int port;
  std::optional<std::string> peer_init_url;

  template <class Self, class Visitor>
  static void fields(Self& self, Visitor&& v) {
    v("instance_id", self.instance_id, field_kind::required);
    v("worker_id", self.worker_id, field_kind::required);
    v("ip", self.ip, field_kind::required);
    v("port", self.port, field_kind::required);
    v("peer_init_url", self.peer_init_url, field_kind::required);
  }
  friend bool operator==(const RegisterMsg&, const RegisterMsg&) = default;
};
struct HeartbeatMsg {
  static constexpr std::string_view type_tag = "HeartbeatMsg";
  static constexpr msg_family family = msg_family::worker_request;
  std::string instance_id;
  wire_int worker_id;
  std::string ip;
  wire_int port;
  std::optional<std::string> peer_init_url;

  template <class Self, class Visitor>
  static void fields(Self& self, Visitor&& v) {
    v("instance_id", self.instance_id, field_kind::required);
    v("worker_id", self.worker_id, field_kind::required);
    v("ip", self.ip, field_kind::required);
    v("port", self.port, field_kind::required);
    v("peer_init_url", self.peer_init_url, field_kind::required);
  }
  friend bool operator==(const HeartbeatMsg&, const HeartbeatMsg&) = default;
};
struct BatchedP2PLookupMsg {
  static constexpr std::string_view type_tag = "BatchedP2PLookupMsg";
  static constexpr msg_family family = msg_family::worker_request;
  std::vector<wire_int> hashes;
  std::string instance_id;
  wire_int worker_id;

  template <class Self, class Visitor>
  static void fields(Self& self, Visitor&& v) {
    v("hashes", self.hashes, field_kind::required);
    v("instance_id", self.instance_id, field_kind::required);
    v("worker_id", self.worker_id, field_kind::required);
  }
  friend bool operator==(const BatchedP2PLookupMsg&, const BatchedP2PLookupMsg&) = default;
};
struct FullSyncStartMsg {
  static constexpr std::string_view type_tag = "FullSyncStartMsg";
  static constexpr msg_family family = msg_family::worker_request;
  std::string instance_id;
  wire_int worker_id;
  std::string location;
  std::string sync_id;
  wire_int total_keys;
  wire_int batch_count;

  template <class Self, class Visitor>
  static void fields(Self& self, Visitor&& v) {
    v("instance_id", self.instance_id, field_kind::required);
    v("worker_id", self.worker_id, field_kind::required);
    v("location", self.location, field_kind::required);
    v("sync_id", self.sync_id, field_kind::required);
    v("total_keys", self.total_keys, field_kind::required);
    v("batch_count", self.batch_count, field_kind::required);
  }
  friend bool operator==(const FullSyncStartMsg&, const FullSyncStartMsg&) = default;
};
struct FullSyncStatusMsg {
  static constexpr std::string_view type_tag = "FullSyncStatusMsg";
  static constexpr msg_family family = msg_family::worker_request;
  std::string instance_id;
  wire_int worker_id;
  std::string sync_id;

  template <class Self, class Visitor>
  static void fields(Self& self, Visitor&& v) {
    v("instance_id", self.instance_id, field_kind::required);
    v("worker_id", self.worker_id, field_kind::required);
    v("sync_id", self.sync_id, field_kind::required);
  }
  friend bool operator==(const FullSyncStatusMsg&, const FullSyncStatusMsg&) = default;
};
using worker_request_msg = std::variant<RegisterMsg, HeartbeatMsg, BatchedP2PLookupMsg,
                                        FullSyncStartMsg, FullSyncStatusMsg>;

// -- worker_reply: Controller -> worker replies to worker requests ---
struct RegisterRetMsg {
  static constexpr std::string_view type_tag = "RegisterRetMsg";
  static constexpr msg_family family = msg_family::worker_reply;
  ordered_map<std::string, std::string> extra_config;

  template <class Self, class Visitor>
  static void fields(Self& self, Visitor&& v) {
    v("extra_config", self.extra_config, field_kind::defaulted);
  }
  friend bool operator==(const RegisterRetMsg&, const RegisterRetMsg&) = default;
};
struct HeartbeatRetMsg {
  static constexpr std::string_view type_tag = "HeartbeatRetMsg";
  static constexpr msg_family family = msg_family::worker_reply;
  std::vector<AnyCommand> commands;

  template <class Self, class Visitor>
  static void fields(Self& self, Visitor&& v) {
    v("commands", self.commands, field_kind::defaulted);
  }
  friend bool operator==(const HeartbeatRetMsg&, const HeartbeatRetMsg&) = default;
};
struct BatchedP2PLookupRetMsg {
  static constexpr std::string_view type_tag = "BatchedP2PLookupRetMsg";
  static constexpr msg_family family = msg_family::worker_reply;
  std::vector<p2p_layout_entry> layout_info;

  template <class Self, class Visitor>
  static void fields(Self& self, Visitor&& v) {
    v("layout_info", self.layout_info, field_kind::required);
  }
  friend bool operator==(const BatchedP2PLookupRetMsg&, const BatchedP2PLookupRetMsg&) = default;
};
struct FullSyncStartRetMsg {
  static constexpr std::string_view type_tag = "FullSyncStartRetMsg";
  static constexpr msg_family family = msg_family::worker_reply;
  std::string sync_id;
  bool accepted = false;
  std::optional<std::string> error_msg;

  template <class Self, class Visitor>
  static void fields(Self& self, Visitor&& v) {
    v("sync_id", self.sync_id, field_kind::required);
    v("accepted", self.accepted, field_kind::required);
    v("error_msg", self.error_msg, field_kind::defaulted);
  }
  friend bool operator==(const FullSyncStartRetMsg&, const FullSyncStartRetMsg&) = default;
};
struct FullSyncStatusRetMsg {
  static constexpr std::string_view type_tag = "FullSyncStatusRetMsg";
  static constexpr msg_family family = msg_family::worker_reply;
  std::string sync_id;
  bool is_complete = false;
  double global_progress = 0.0;
  bool can_exit_freeze = false;
  std::vector<wire_int> missing_batches;

  template <class Self, class Visitor>
  static void fields(Self& self, Visitor&& v) {
    v("sync_id", self.sync_id, field_kind::required);
    v("is_complete", self.is_complete, field_kind::required);
    v("global_progress", self.global_progress, field_kind::required);
    v("can_exit_freeze", self.can_exit_freeze, field_kind::required);
    v("missing_batches", self.missing_batches, field_kind::defaulted);
  }
  friend bool operator==(const FullSyncStatusRetMsg&, const FullSyncStatusRetMsg&) = default;
};
struct ErrorMsg {
  static constexpr std::string_view type_tag = "ErrorMsg";
  static constexpr msg_family family = msg_family::worker_reply;
  std::string error;

  template <class Self, class Visitor>
  static void fields(Self& self, Visitor&& v) {
    v("error", self.error, field_kind::required);
  }
  friend bool operator==(const ErrorMsg&, const ErrorMsg&) = default;
};
using worker_reply_msg = std::variant<RegisterRetMsg, HeartbeatRetMsg, BatchedP2PLookupRetMsg,
                                      FullSyncStartRetMsg, FullSyncStatusRetMsg, ErrorMsg>;

// -- control: Controller -> worker commands (REQ -> REP, socket S4) ---
struct ClearWorkerMsg {
  static constexpr std::string_view type_tag = "ClearWorkerMsg";
  static constexpr msg_family family = msg_family::control;
  std::string worker_event_id;
  std::string location;

  template <class Self, class Visitor>
  static void fields(Self& self, Visitor&& v) {
    v("worker_event_id", self.worker_event_id, field_kind::required);
    v("location", self.location, field_kind::required);
  }
  friend bool operator==(const ClearWorkerMsg&, const ClearWorkerMsg&) = default;
};
struct PinWorkerMsg {
  static constexpr std::string_view type_tag = "PinWorkerMsg";
  static constexpr msg_family family = msg_family::control;
  std::string worker_event_id;
  std::string location;
  std::vector<wire_int> tokens;

  template <class Self, class Visitor>
  static void fields(Self& self, Visitor&& v) {
    v("worker_event_id", self.worker_event_id, field_kind::required);
    v("location", self.location, field_kind::required);
    v("tokens", self.tokens, field_kind::required);
  }
  friend bool operator==(const PinWorkerMsg&, const PinWorkerMsg&) = default;
};
struct CompressWorkerMsg {
  static constexpr std::string_view type_tag = "CompressWorkerMsg";
  static constexpr msg_family family = msg_family::control;
  std::string worker_event_id;
  std::string method;
  std::string location;
  std::optional<std::vector<wire_int>> tokens;

  template <class Self, class Visitor>
  static void fields(Self& self, Visitor&& v) {
    v("worker_event_id", self.worker_event_id, field_kind::required);
    v("method", self.method, field_kind::required);
    v("location", self.location, field_kind::required);
    v("tokens", self.tokens, field_kind::defaulted);
  }
  friend bool operator==(const CompressWorkerMsg&, const CompressWorkerMsg&) = default;
};
struct DecompressWorkerMsg {
  static constexpr std::string_view type_tag = "DecompressWorkerMsg";
  static constexpr msg_family family = msg_family::control;
  std::string worker_event_id;
  std::string method;
  std::string location;
  std::optional<std::vector<wire_int>> tokens;

  template <class Self, class Visitor>
  static void fields(Self& self, Visitor&& v) {
    v("worker_event_id", self.worker_event_id, field_kind::required);
    v("method", self.method, field_kind::required);
    v("location", self.location, field_kind::required);
    v("tokens", self.tokens, field_kind::defaulted);
  }
  friend bool operator==(const DecompressWorkerMsg&, const DecompressWorkerMsg&) = default;
};
struct MoveWorkerMsg {
  static constexpr std::string_view type_tag = "MoveWorkerMsg";
  static constexpr msg_family family = msg_family::control;
  std::string worker_event_id;
  std::string old_position;
  std::pair<std::string, std::string> new_position;
  std::optional<std::vector<wire_int>> tokens;
  std::optional<bool> copy = true;

  template <class Self, class Visitor>
  static void fields(Self& self, Visitor&& v) {
    v("worker_event_id", self.worker_event_id, field_kind::required);
    v("old_position", self.old_position, field_kind::required);
    v("new_position", self.new_position, field_kind::required);
    v("tokens", self.tokens, field_kind::defaulted);
    v("copy", self.copy, field_kind::defaulted);
  }
  friend bool operator==(const MoveWorkerMsg&, const MoveWorkerMsg&) = default;
};
struct HealthWorkerMsg {
  static constexpr std::string_view type_tag = "HealthWorkerMsg";
  static constexpr msg_family family = msg_family::control;
  std::string worker_event_id;

  template <class Self, class Visitor>
  static void fields(Self& self, Visitor&& v) {
    v("worker_event_id", self.worker_event_id, field_kind::required);
  }
  friend bool operator==(const HealthWorkerMsg&, const HealthWorkerMsg&) = default;
};
struct CheckFinishWorkerMsg {
  static constexpr std::string_view type_tag = "CheckFinishWorkerMsg";
  static constexpr msg_family family = msg_family::control;
  std::string worker_event_id;

  template <class Self, class Visitor>
  static void fields(Self& self, Visitor&& v) {
    v("worker_event_id", self.worker_event_id, field_kind::required);
  }
  friend bool operator==(const CheckFinishWorkerMsg&, const CheckFinishWorkerMsg&) = default;
};
using control_msg =
    std::variant<ClearWorkerMsg, PinWorkerMsg, CompressWorkerMsg, DecompressWorkerMsg,
                 MoveWorkerMsg, HealthWorkerMsg, CheckFinishWorkerMsg>;

// -- control_reply: Worker -> controller replies to commands -------
struct ClearWorkerRetMsg {
  static constexpr std::string_view type_tag = "ClearWorkerRetMsg";
  static constexpr msg_family family = msg_family::control_reply;
  wire_int num_tokens;

  template <class Self, class Visitor>
  static void fields(Self& self, Visitor&& v) {
    v("num_tokens", self.num_tokens, field_kind::required);
  }
  friend bool operator==(const ClearWorkerRetMsg&, const ClearWorkerRetMsg&) = default;
};
struct PinWorkerRetMsg {
  static constexpr std::string_view type_tag = "PinWorkerRetMsg";
  static constexpr msg_family family = msg_family::control_reply;
  wire_int num_tokens;

  template <class Self, class Visitor>
  static void fields(Self& self, Visitor&& v) {
    v("num_tokens", self.num_tokens, field_kind::required);
  }
  friend bool operator==(const PinWorkerRetMsg&, const PinWorkerRetMsg&) = default;
};
struct CompressWorkerRetMsg {
  static constexpr std::string_view type_tag = "CompressWorkerRetMsg";
  static constexpr msg_family family = msg_family::control_reply;
  wire_int num_tokens;

  template <class Self, class Visitor>
  static void fields(Self& self, Visitor&& v) {
    v("num_tokens", self.num_tokens, field_kind::required);
  }
  friend bool operator==(const CompressWorkerRetMsg&, const CompressWorkerRetMsg&) = default;
};
struct DecompressWorkerRetMsg {
  static constexpr std::string_view type_tag = "DecompressWorkerRetMsg";
  static constexpr msg_family family = msg_family::control_reply;
  wire_int num_tokens;

  template <class Self, class Visitor>
  static void fields(Self& self, Visitor&& v) {
    v("num_tokens", self.num_tokens, field_kind::required);
  }
  friend bool operator==(const DecompressWorkerRetMsg&, const DecompressWorkerRetMsg&) = default;
};
struct MoveWorkerRetMsg {
  static constexpr std::string_view type_tag = "MoveWorkerRetMsg";
  static constexpr msg_family family = msg_family::control_reply;
  wire_int num_tokens;

  template <class Self, class Visitor>
  static void fields(Self& self, Visitor&& v) {
    v("num_tokens", self.num_tokens, field_kind::required);
  }
  friend bool operator==(const MoveWorkerRetMsg&, const MoveWorkerRetMsg&) = default;
};
struct HealthWorkerRetMsg {
  static constexpr std::string_view type_tag = "HealthWorkerRetMsg";
  static constexpr msg_family family = msg_family::control_reply;
  wire_int error_code;

  template <class Self, class Visitor>
  static void fields(Self& self, Visitor&& v) {
    v("error_code", self.error_code, field_kind::required);
  }
  friend bool operator==(const HealthWorkerRetMsg&, const HealthWorkerRetMsg&) = default;
};
struct CheckFinishWorkerRetMsg {
  static constexpr std::string_view type_tag = "CheckFinishWorkerRetMsg";
  static constexpr msg_family family = msg_family::control_reply;
  std::string status;

  template <class Self, class Visitor>
  static void fields(Self& self, Visitor&& v) {
    v("status", self.status, field_kind::required);
  }
  friend bool operator==(const CheckFinishWorkerRetMsg&, const CheckFinishWorkerRetMsg&) = default;
};
using control_reply_msg =
    std::variant<ClearWorkerRetMsg, PinWorkerRetMsg, CompressWorkerRetMsg, DecompressWorkerRetMsg,
                 MoveWorkerRetMsg, HealthWorkerRetMsg, CheckFinishWorkerRetMsg>;

// -- orchestration: Orchestrator -> controller (HTTP, or fire-and-forget on PULL) ---
struct QueryInstMsg {
  static constexpr std::string_view type_tag = "QueryInstMsg";
  static constexpr msg_family family = msg_family::orchestration;
  std::string event_id;
  std::string ip;

  template <class Self, class Visitor>
  static void fields(Self& self, Visitor&& v) {
    v("event_id", self.event_id, field_kind::required);
    v("ip", self.ip, field_kind::required);
  }
  friend bool operator==(const QueryInstMsg&, const QueryInstMsg&) = default;
};
struct LookupMsg {
  static constexpr std::string_view type_tag = "LookupMsg";
  static constexpr msg_family family = msg_family::orchestration;
  std::string event_id;
  std::vector<wire_int> tokens;

  template <class Self, class Visitor>
  static void fields(Self& self, Visitor&& v) {
    v("event_id", self.event_id, field_kind::required);
    v("tokens", self.tokens, field_kind::required);
  }
  friend bool operator==(const LookupMsg&, const LookupMsg&) = default;
};
struct ClearMsg {
  static constexpr std::string_view type_tag = "ClearMsg";
  static constexpr msg_family family = msg_family::orchestration;
  std::string event_id;
  std::string instance_id;
  std::string location;

  template <class Self, class Visitor>
  static void fields(Self& self, Visitor&& v) {
    v("event_id", self.event_id, field_kind::required);
    v("instance_id", self.instance_id, field_kind::required);
    v("location", self.location, field_kind::required);
  }
  friend bool operator==(const ClearMsg&, const ClearMsg&) = default;
};
struct PinMsg {
  static constexpr std::string_view type_tag = "PinMsg";
  static constexpr msg_family family = msg_family::orchestration;
  std::string event_id;
  std::string instance_id;
  std::string location;
  std::vector<wire_int> tokens;

  template <class Self, class Visitor>
  static void fields(Self& self, Visitor&& v) {
    v("event_id", self.event_id, field_kind::required);
    v("instance_id", self.instance_id, field_kind::required);
    v("location", self.location, field_kind::required);
    v("tokens", self.tokens, field_kind::required);
  }
  friend bool operator==(const PinMsg&, const PinMsg&) = default;
};
struct CompressMsg {
  static constexpr std::string_view type_tag = "CompressMsg";
  static constexpr msg_family family = msg_family::orchestration;
  std::string event_id;
  std::string instance_id;
  std::string method;
  std::string location;
  std::optional<std::vector<wire_int>> tokens;

  template <class Self, class Visitor>
  static void fields(Self& self, Visitor&& v) {
    v("event_id", self.event_id, field_kind::required);
    v("instance_id", self.instance_id, field_kind::required);
    v("method", self.method, field_kind::required);
    v("location", self.location, field_kind::required);
    v("tokens", self.tokens, field_kind::defaulted);
  }
  friend bool operator==(const CompressMsg&, const CompressMsg&) = default;
};
struct DecompressMsg {
  static constexpr std::string_view type_tag = "DecompressMsg";
  static constexpr msg_family family = msg_family::orchestration;
  std::string event_id;
  std::string instance_id;
  std::string method;
  std::string location;
  std::optional<std::vector<wire_int>> tokens;

  template <class Self, class Visitor>
  static void fields(Self& self, Visitor&& v) {
    v("event_id", self.event_id, field_kind::required);
    v("instance_id", self.instance_id, field_kind::required);
    v("method", self.method, field_kind::required);
    v("location", self.location, field_kind::required);
    v("tokens", self.tokens, field_kind::defaulted);
  }
  friend bool operator==(const DecompressMsg&, const DecompressMsg&) = default;
};
struct MoveMsg {
  static constexpr std::string_view type_tag = "MoveMsg";
  static constexpr msg_family family = msg_family::orchestration;
  std::string event_id;
  std::pair<std::string, std::string> old_position;
  std::pair<std::string, std::string> new_position;
  std::optional<std::vector<wire_int>> tokens;
  std::optional<bool> copy = false;

  template <class Self, class Visitor>
  static void fields(Self& self, Visitor&& v) {
    v("event_id", self.event_id, field_kind::required);
    v("old_position", self.old_position, field_kind::required);
    v("new_position", self.new_position, field_kind::required);
    v("tokens", self.tokens, field_kind::defaulted);
    v("copy", self.copy, field_kind::defaulted);
  }
  friend bool operator==(const MoveMsg&, const MoveMsg&) = default;
};
struct HealthMsg {
  static constexpr std::string_view type_tag = "HealthMsg";
  static constexpr msg_family family = msg_family::orchestration;
  std::string event_id;
  std::string instance_id;

  template <class Self, class Visitor>
  static void fields(Self& self, Visitor&& v) {
    v("event_id", self.event_id, field_kind::required);
    v("instance_id", self.instance_id, field_kind::required);
  }
  friend bool operator==(const HealthMsg&, const HealthMsg&) = default;
};
struct CheckFinishMsg {
  static constexpr std::string_view type_tag = "CheckFinishMsg";
  static constexpr msg_family family = msg_family::orchestration;
  std::string event_id;

  template <class Self, class Visitor>
  static void fields(Self& self, Visitor&& v) {
    v("event_id", self.event_id, field_kind::required);
  }
  friend bool operator==(const CheckFinishMsg&, const CheckFinishMsg&) = default;
};
struct QueryWorkerInfoMsg {
  static constexpr std::string_view type_tag = "QueryWorkerInfoMsg";
  static constexpr msg_family family = msg_family::orchestration;
  std::string event_id;
  std::string instance_id;
  std::optional<std::vector<wire_int>> worker_ids;

  template <class Self, class Visitor>
  static void fields(Self& self, Visitor&& v) {
    v("event_id", self.event_id, field_kind::required);
    v("instance_id", self.instance_id, field_kind::required);
    v("worker_ids", self.worker_ids, field_kind::required);
  }
  friend bool operator==(const QueryWorkerInfoMsg&, const QueryWorkerInfoMsg&) = default;
};
using orchestration_msg =
    std::variant<QueryInstMsg, LookupMsg, ClearMsg, PinMsg, CompressMsg, DecompressMsg, MoveMsg,
                 HealthMsg, CheckFinishMsg, QueryWorkerInfoMsg>;

// -- orchestration_reply: Controller -> orchestrator replies -------
struct QueryInstRetMsg {
  static constexpr std::string_view type_tag = "QueryInstRetMsg";
  static constexpr msg_family family = msg_family::orchestration_reply;
  std::string event_id;
  std::optional<std::string> instance_id;

  template <class Self, class Visitor>
  static void fields(Self& self, Visitor&& v) {
    v("event_id", self.event_id, field_kind::required);
    v("instance_id", self.instance_id, field_kind::required);
  }
  friend bool operator==(const QueryInstRetMsg&, const QueryInstRetMsg&) = default;
};
struct LookupRetMsg {
  static constexpr std::string_view type_tag = "LookupRetMsg";
  static constexpr msg_family family = msg_family::orchestration_reply;
  std::string event_id;
  ordered_map<std::string, std::pair<std::string, wire_int>> layout_info;

  template <class Self, class Visitor>
  static void fields(Self& self, Visitor&& v) {
    v("event_id", self.event_id, field_kind::required);
    v("layout_info", self.layout_info, field_kind::required);
  }
  friend bool operator==(const LookupRetMsg&, const LookupRetMsg&) = default;
};
struct ClearRetMsg {
  static constexpr std::string_view type_tag = "ClearRetMsg";
  static constexpr msg_family family = msg_family::orchestration_reply;
  std::string event_id;
  wire_int num_tokens;

  template <class Self, class Visitor>
  static void fields(Self& self, Visitor&& v) {
    v("event_id", self.event_id, field_kind::required);
    v("num_tokens", self.num_tokens, field_kind::required);
  }
  friend bool operator==(const ClearRetMsg&, const ClearRetMsg&) = default;
};
struct PinRetMsg {
  static constexpr std::string_view type_tag = "PinRetMsg";
  static constexpr msg_family family = msg_family::orchestration_reply;
  std::string event_id;
  wire_int num_tokens;

  template <class Self, class Visitor>
  static void fields(Self& self, Visitor&& v) {
    v("event_id", self.event_id, field_kind::required);
    v("num_tokens", self.num_tokens, field_kind::required);
  }
  friend bool operator==(const PinRetMsg&, const PinRetMsg&) = default;
};
struct CompressRetMsg {
  static constexpr std::string_view type_tag = "CompressRetMsg";
  static constexpr msg_family family = msg_family::orchestration_reply;
  std::string event_id;
  wire_int num_tokens;

  template <class Self, class Visitor>
  static void fields(Self& self, Visitor&& v) {
    v("event_id", self.event_id, field_kind::required);
    v("num_tokens", self.num_tokens, field_kind::required);
  }
  friend bool operator==(const CompressRetMsg&, const CompressRetMsg&) = default;
};
struct DecompressRetMsg {
  static constexpr std::string_view type_tag = "DecompressRetMsg";
  static constexpr msg_family family = msg_family::orchestration_reply;
  std::string event_id;
  wire_int num_tokens;

  template <class Self, class Visitor>
  static void fields(Self& self, Visitor&& v) {
    v("event_id", self.event_id, field_kind::required);
    v("num_tokens", self.num_tokens, field_kind::required);
  }
  friend bool operator==(const DecompressRetMsg&, const DecompressRetMsg&) = default;
};
struct MoveRetMsg {
  static constexpr std::string_view type_tag = "MoveRetMsg";
  static constexpr msg_family family = msg_family::orchestration_reply;
  std::string event_id;
  wire_int num_tokens;

  template <class Self, class Visitor>
  static void fields(Self& self, Visitor&& v) {
    v("event_id", self.event_id, field_kind::required);
    v("num_tokens", self.num_tokens, field_kind::required);
  }
  friend bool operator==(const MoveRetMsg&, const MoveRetMsg&) = default;
};
struct HealthRetMsg {
  static constexpr std::string_view type_tag = "HealthRetMsg";
  static constexpr msg_family family = msg_family::orchestration_reply;
  std::string event_id;
  ordered_map<wire_int, wire_int> error_codes;

  template <class Self, class Visitor>
  static void fields(Self& self, Visitor&& v) {
    v("event_id", self.event_id, field_kind::required);
    v("error_codes", self.error_codes, field_kind::required);
  }
  friend bool operator==(const HealthRetMsg&, const HealthRetMsg&) = default;
};
struct CheckFinishRetMsg {
  static constexpr std::string_view type_tag = "CheckFinishRetMsg";
  static constexpr msg_family family = msg_family::orchestration_reply;
  std::string status;

  template <class Self, class Visitor>
  static void fields(Self& self, Visitor&& v) {
    v("status", self.status, field_kind::required);
  }
  friend bool operator==(const CheckFinishRetMsg&, const CheckFinishRetMsg&) = default;
};
struct QueryWorkerInfoRetMsg {
  static constexpr std::string_view type_tag = "QueryWorkerInfoRetMsg";
  static constexpr msg_family family = msg_family::orchestration_reply;
  std::string event_id;
  std::vector<WorkerInfo> worker_infos;

  template <class Self, class Visitor>
  static void fields(Self& self, Visitor&& v) {
    v("event_id", self.event_id, field_kind::required);
    v("worker_infos", self.worker_infos, field_kind::required);
  }
  friend bool operator==(const QueryWorkerInfoRetMsg&, const QueryWorkerInfoRetMsg&) = default;
};
using orchestration_reply_msg =
    std::variant<QueryInstRetMsg, LookupRetMsg, ClearRetMsg, PinRetMsg, CompressRetMsg,
                 DecompressRetMsg, MoveRetMsg, HealthRetMsg, CheckFinishRetMsg,
                 QueryWorkerInfoRetMsg>;

/// message.py Msg: every concrete tagged class (51), the decoder's target.
using Msg = std::variant<
    DeRegisterMsg, KVAdmitMsg, KVEvictMsg, BatchedKVOperationMsg, FullSyncBatchMsg, FullSyncEndMsg,
    RegisterMsg, HeartbeatMsg, BatchedP2PLookupMsg, FullSyncStartMsg, FullSyncStatusMsg,
    RegisterRetMsg, HeartbeatRetMsg, BatchedP2PLookupRetMsg, FullSyncStartRetMsg,
    FullSyncStatusRetMsg, ErrorMsg, ClearWorkerMsg, PinWorkerMsg, CompressWorkerMsg,
    DecompressWorkerMsg, MoveWorkerMsg, HealthWorkerMsg, CheckFinishWorkerMsg, ClearWorkerRetMsg,
    PinWorkerRetMsg, CompressWorkerRetMsg, DecompressWorkerRetMsg, MoveWorkerRetMsg,
    HealthWorkerRetMsg, CheckFinishWorkerRetMsg, QueryInstMsg, LookupMsg, ClearMsg, PinMsg,
    CompressMsg, DecompressMsg, MoveMsg, HealthMsg, CheckFinishMsg, QueryWorkerInfoMsg,
    QueryInstRetMsg, LookupRetMsg, ClearRetMsg, PinRetMsg, CompressRetMsg, DecompressRetMsg,
    MoveRetMsg, HealthRetMsg, CheckFinishRetMsg, QueryWorkerInfoRetMsg>;

/// The tag (class name) of whatever `m` holds.
std::string_view type_tag_of(const Msg& m) noexcept;

/// The family of whatever `m` holds.
msg_family family_of(const Msg& m) noexcept;

} // namespace lmcc::msg
