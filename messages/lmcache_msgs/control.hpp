// control and control_reply: the controller's commands to one worker and the
// worker's replies (REQ -> REP, socket S4): clear, pin, compress, decompress,
// move, health and check-finish. Part of messages/lmcache_msgs.hpp; include that.
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

} // namespace lmcc::msg
