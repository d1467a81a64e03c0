// inspect: CAF 0.17 `inspect` overloads for the value types that cross nodes
// and are defined in the CAF-free folders for their own use (type_ids.hpp
// registers them), so CAF's binary serializer (and the middleman) can carry
// them. Each lives in its type's namespace for ADL; the modules that define
// the types stay CAF-free. The records only the cluster's messages use are
// declared with their inspect in cluster/wire.hpp.
//
// - wire_int keeps its sign bit apart from its 64-bit pattern (2^64-1 and -1
//   stay distinct, as on the LMCache wire).
// - msg::Msg, the variant of every LMCache message, travels as its msgpack
//   encoding: the codec is exact and already tested byte for byte, so the
//   cluster reuses it rather than walking a 51-way variant a second time.
//
// Context: header-only; include through actors/type_ids.hpp.
#pragma once

#include "cluster/wire.hpp"
#include "index/slot_copy.hpp"
#include "index/sub_batch.hpp"
#include "messages/codec_msgpack.hpp"
#include "persistence/records.hpp"
#include "persistence/schema.hpp"
#include "registry/directory_logic.hpp"
#include "registry/registry.hpp"
#include "registry/worker_logic.hpp"

#include <caf/error.hpp>
#include <caf/meta/load_callback.hpp>
#include <caf/meta/save_callback.hpp>
#include <caf/meta/type_name.hpp>
#include <caf/sec.hpp>

#include <cmath>
#include <string>

namespace lmcc::msg {

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, wire_int& x) {
  uint64_t bits = x.bits();
  bool negative = x.is_negative();
  auto load = caf::meta::load_callback([&]() -> caf::error {
    x = negative ? wire_int{static_cast<int64_t>(bits)} : wire_int::from_unsigned(bits);
    return caf::none;
  });
  return f(caf::meta::type_name("lmcc.wire_int"), bits, negative, load);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, Msg& x) {
  std::string bytes;
  auto save = caf::meta::save_callback([&]() -> caf::error {
    bytes = encode_msgpack(x);
    return caf::none;
  });
  auto load = caf::meta::load_callback([&]() -> caf::error {
    auto decoded = decode_msgpack(bytes);
    if (!decoded)
      return caf::make_error(caf::sec::invalid_argument, decoded.error().message);
    x = std::move(*decoded);
    return caf::none;
  });
  return f(caf::meta::type_name("lmcc.Msg"), save, bytes, load);
}

} // namespace lmcc::msg

namespace lmcc::persistence {

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, kv_op& x) {
  return f(caf::meta::type_name("lmcc.kv_op"), x.key, x.admit);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, seq_mark& x) {
  return f(caf::meta::type_name("lmcc.seq_mark"), x.state, x.seq);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, stream_pos& x) {
  return f(caf::meta::type_name("lmcc.stream_pos"), x.incarnation, x.era, x.n, x.sub);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, worker_row& x) {
  // CAF 0.17 has no std::optional support: a flag and a string.
  bool has_peer = x.peer_init_url.has_value();
  std::string peer = x.peer_init_url.value_or("");
  auto load = caf::meta::load_callback([&]() -> caf::error {
    // CAF 0.17 reads a double's all-ones exponent as infinity, and its
    // serializer never returns from writing one: such a row would hang the
    // middleman thread that next sends it on.
    if (!std::isfinite(x.registration_time) || !std::isfinite(x.last_heartbeat_time))
      return caf::make_error(caf::sec::invalid_argument, "worker row: a time that is not finite");
    x.peer_init_url = has_peer ? std::optional<std::string>{peer} : std::nullopt;
    return caf::none;
  });
  return f(caf::meta::type_name("lmcc.worker_row"), x.uid, x.instance_id, x.worker_id, x.ip, x.port,
           has_peer, peer, x.registration_time, x.last_heartbeat_time, x.has_heartbeated,
           x.registration_order, x.instance_order, x.incarnation, load);
}

} // namespace lmcc::persistence

namespace lmcc::actors {

/// A sub-batch crosses as its op-log record (records.hpp: 8 bytes a key, a
/// bit an admit, checksummed) plus what only the wire needs: CAF's binary
/// serializer walks a vector field by field, several virtual calls and an
/// error value per op, which was a tenth of a node's middleman time under
/// ingest.
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, kv_sub_batch& x) {
  std::string record;
  auto save = caf::meta::save_callback([&]() -> caf::error {
    persistence::holder_intro intro;
    if (x.has_intro)
      intro = {x.intro_worker_uid, x.intro_location};
    encode_log_record(persistence::log_header{x.holder, x.incarnation, x.drop, x.prev, x.end,
                                              x.placement_epoch, x.placement_since},
                      x.has_mark ? std::optional<seq_mark>{x.mark} : std::nullopt,
                      x.has_intro ? &intro : nullptr, x.ops, record);
    return caf::none;
  });
  auto load = caf::meta::load_callback([&]() -> caf::error {
    persistence::log_record rec;
    rec.ops = std::move(x.ops); // reuses its capacity
    if (auto r = decode_log_record(record, rec); !r)
      return caf::make_error(caf::sec::invalid_argument, "sub-batch: " + r.error().message);
    x.holder = rec.holder;
    x.incarnation = rec.incarnation;
    x.drop = rec.drop;
    x.prev = rec.prev;
    x.end = rec.end;
    x.placement_epoch = rec.placement_epoch;
    x.placement_since = rec.placement_since;
    x.has_mark = rec.mark.has_value();
    x.mark = rec.mark.value_or(seq_mark{});
    x.has_intro = rec.intro.has_value();
    x.intro_worker_uid = x.has_intro ? rec.intro->worker_uid : 0;
    x.intro_location = x.has_intro ? std::move(rec.intro->location) : std::string{};
    x.ops = std::move(rec.ops);
    return caf::none;
  });
  return f(caf::meta::type_name("lmcc.sub_batch"), save, x.stream, x.number, x.has_durable,
           x.durable_seq, record, load);
}

/// A slot's copy crosses field by field: a refill or a move sends every slot
/// once, anti-entropy a few a round, so its size is what matters, and it is
/// checked where it is used (check_slot_copy), not where it is read.
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, holder_slot_copy& x) {
  return f(caf::meta::type_name("lmcc.holder_slot_copy"), x.holder, x.worker_uid, x.certain, x.pos,
           x.keys);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, slot_copy& x) {
  return f(caf::meta::type_name("lmcc.slot_copy"), x.slot, x.complete, x.holders);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, copy_outcome& x) {
  return f(caf::meta::type_name("lmcc.copy_outcome"), x.installed, x.waiting, x.changed,
           x.conflicts, x.unresolved, x.still_blank);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, pushed_msg& x) {
  return f(caf::meta::type_name("lmcc.pushed_msg"), x.msg, x.credits, x.read_under, x.forwarded);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, location_mark& x) {
  return f(caf::meta::type_name("lmcc.location_mark"), x.location, x.incarnation, x.mark, x.pos);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, worker_tombstone& x) {
  return f(caf::meta::type_name("lmcc.worker_tombstone"), x.uid, x.incarnation);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, worker_handoff& x) {
  return f(caf::meta::type_name("lmcc.worker_handoff"), x.uid, x.status, x.marks, x.resync_reason);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, directory_listing& x) {
  return f(caf::meta::type_name("lmcc.directory_listing"), x.node_id, x.ring_version, x.rows,
           x.tombstones, x.complete);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, session_params& x) {
  return f(caf::meta::type_name("lmcc.session_params"), x.sync_id, x.location, x.holder,
           x.worker_uid, x.incarnation, x.era, x.total_keys, x.batch_count);
}

} // namespace lmcc::actors
