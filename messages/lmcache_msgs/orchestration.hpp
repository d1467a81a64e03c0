// orchestration and orchestration_reply: an orchestrator's requests to the
// controller and its replies (HTTP, an in-process call, or fire-and-forget on
// the PULL socket): instance queries, lookups, and the cluster-wide forms of
// the control commands. Part of messages/lmcache_msgs.hpp; include that.
//
// Context: plain value types, thread-compatible.
#pragma once

#include "messages/lmcache_msgs/common.hpp"

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace lmcc::msg {

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
  /// Not on the wire (lmcc's own, for its HTTP reply): prefixes of at least
  /// this many tokens may be short, because a chunk from here on was read
  /// only from copies their owners were uncertain of, or from no owner
  /// (gateway/owner_reads.hpp). no_unsure_tokens: every chunk was read whole.
  uint64_t unsure_from_tokens = no_unsure_tokens;
  static constexpr uint64_t no_unsure_tokens = ~uint64_t{0};

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

} // namespace lmcc::msg
