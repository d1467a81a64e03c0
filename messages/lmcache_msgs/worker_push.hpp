// worker_push: what a worker sends the controller fire-and-forget (PUSH -> PULL,
// socket S1): KV admit/evict events, batched or not, deregistration and the
// full-sync key batches. Part of messages/lmcache_msgs.hpp; include that.
//
// Context: plain value types, thread-compatible.
#pragma once

#include "messages/lmcache_msgs/common.hpp"

#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace lmcc::msg {

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

} // namespace lmcc::msg
