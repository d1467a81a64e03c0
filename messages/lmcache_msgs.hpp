// The LMCache controller message set, one C++ type per class of
// shared/seed/message.py (lmcache 0.4.5.dev0). This umbrella header is the one
// to include: it pulls in the per-family headers under messages/lmcache_msgs/
// (common helper types, worker push, worker requests and replies, control,
// orchestration) and defines `Msg`, the union of all 51 tagged types.
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

#include "messages/lmcache_msgs/common.hpp"
#include "messages/lmcache_msgs/control.hpp"
#include "messages/lmcache_msgs/orchestration.hpp"
#include "messages/lmcache_msgs/worker_push.hpp"
#include "messages/lmcache_msgs/worker_requests.hpp"

#include <string_view>
#include <variant>

namespace lmcc::msg {

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
