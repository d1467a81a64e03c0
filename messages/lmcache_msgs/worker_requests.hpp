// worker_request and worker_reply: a worker's requests to the controller and
// the controller's replies (DEALER -> ROUTER, sockets S2/S3): registration,
// heartbeats, P2P lookups, full-sync start/status, and ErrorMsg, the reply to
// any request that failed. Part of messages/lmcache_msgs.hpp; include that.
//
// Context: plain value types, thread-compatible.
#pragma once

#include "messages/lmcache_msgs/common.hpp"

#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace lmcc::msg {

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

} // namespace lmcc::msg
