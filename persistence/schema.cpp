#include "persistence/schema.hpp"

#include <msgpack.hpp>

#include <bit>

namespace lmcc::persistence {

namespace {

void put_be(std::string& out, uint64_t v, int bytes) {
  for (int i = bytes - 1; i >= 0; --i)
    out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

uint64_t get_be(std::string_view in, size_t offset, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i)
    v = (v << 8) | static_cast<uint8_t>(in[offset + static_cast<size_t>(i)]);
  return v;
}

constexpr uint32_t row_fields = 11;

void pack_wire_int(msgpack::packer<msgpack::sbuffer>& pk, const msg::wire_int& v) {
  // msgpack's signed/unsigned families carry the sign, as on the LMCache wire.
  if (v.is_negative())
    pk.pack_int64(v.as_int64());
  else
    pk.pack_uint64(v.bits());
}

/// Always float64 (0xcb): msgpack-cxx's pack_double writes integral values as
/// integers, which would lose -0.0 and make a row's shape depend on its values.
void pack_float64(msgpack::sbuffer& buf, double d) {
  char bytes[9];
  bytes[0] = static_cast<char>(0xcb);
  auto bits = std::bit_cast<uint64_t>(d);
  for (int i = 0; i < 8; ++i)
    bytes[1 + i] = static_cast<char>((bits >> (8 * (7 - i))) & 0xff);
  buf.write(bytes, sizeof bytes);
}

std::optional<msg::wire_int> unpack_wire_int(const msgpack::object& o) {
  if (o.type == msgpack::type::POSITIVE_INTEGER)
    return msg::wire_int::from_unsigned(o.via.u64);
  if (o.type == msgpack::type::NEGATIVE_INTEGER)
    return msg::wire_int{o.via.i64};
  return std::nullopt;
}

std::optional<std::string> unpack_str(const msgpack::object& o) {
  if (o.type != msgpack::type::STR)
    return std::nullopt;
  return std::string{o.via.str.ptr, o.via.str.size};
}

std::optional<double> unpack_double(const msgpack::object& o) {
  if (o.type != msgpack::type::FLOAT64 && o.type != msgpack::type::FLOAT32)
    return std::nullopt;
  return o.via.f64;
}

} // namespace

// -- keys --------------------------------------------------------------------------

std::string to_string(const stream_pos& p) {
  return std::to_string(p.incarnation) + "." + std::to_string(p.era) + "." + std::to_string(p.n) +
         "." + std::to_string(p.sub);
}

const char* to_string(seq_state s) noexcept {
  switch (s) {
  case seq_state::none:
    return "none";
  case seq_state::tracking:
    return "tracking";
  case seq_state::syncing:
    return "syncing";
  case seq_state::resynced:
    return "resynced";
  case seq_state::gap:
    return "gap";
  }
  return "?";
}

std::string format_version_key() {
  return std::string{format_prefix} + "format_version";
}

std::string node_id_key() {
  return std::string{format_prefix} + "node_id";
}

std::string log_floor_key() {
  return std::string{floor_prefix} + "log_floor";
}

namespace {

std::string prefixed(char prefix, uint64_t v, int bytes) {
  std::string k;
  k.reserve(1 + static_cast<size_t>(bytes));
  k.push_back(prefix);
  put_be(k, v, bytes);
  return k;
}

std::optional<uint64_t> unprefixed(std::string_view k, char prefix, int bytes) {
  if (k.size() != 1 + static_cast<size_t>(bytes) || k[0] != prefix)
    return std::nullopt;
  return get_be(k, 1, bytes);
}

} // namespace

std::string worker_key(uint64_t uid) {
  return prefixed(worker_prefix, uid, 8);
}

std::optional<uint64_t> decode_worker_key(std::string_view k) {
  return unprefixed(k, worker_prefix, 8);
}

std::string holder_key(uint64_t holder) {
  return prefixed(holder_prefix, holder, 8);
}

std::optional<uint64_t> decode_holder_key(std::string_view k) {
  return unprefixed(k, holder_prefix, 8);
}

std::string slot_key(uint32_t slot) {
  return prefixed(slot_prefix, slot, 4);
}

std::optional<uint32_t> decode_slot_key(std::string_view k) {
  auto v = unprefixed(k, slot_prefix, 4);
  if (!v)
    return std::nullopt;
  return static_cast<uint32_t>(*v);
}

std::string log_key(uint64_t position) {
  return prefixed(log_prefix, position, 8);
}

std::optional<uint64_t> decode_log_key(std::string_view k) {
  return unprefixed(k, log_prefix, 8);
}

std::string encode_u32(uint32_t v) {
  std::string out;
  put_be(out, v, 4);
  return out;
}

std::optional<uint32_t> decode_u32(std::string_view v) {
  if (v.size() != 4)
    return std::nullopt;
  return static_cast<uint32_t>(get_be(v, 0, 4));
}

std::string encode_u64(uint64_t v) {
  std::string out;
  put_be(out, v, 8);
  return out;
}

std::optional<uint64_t> decode_u64(std::string_view v) {
  if (v.size() != 8)
    return std::nullopt;
  return get_be(v, 0, 8);
}

// -- worker rows -----------------------------------------------------------------------

std::string encode_worker_row(const worker_row& row) {
  msgpack::sbuffer buf;
  msgpack::packer<msgpack::sbuffer> pk{buf};
  pk.pack_array(row_fields);
  pk.pack(row.instance_id);
  pack_wire_int(pk, row.worker_id);
  pk.pack(row.ip);
  pack_wire_int(pk, row.port);
  if (row.peer_init_url)
    pk.pack(*row.peer_init_url);
  else
    pk.pack_nil();
  pack_float64(buf, row.registration_time);
  pack_float64(buf, row.last_heartbeat_time);
  if (row.has_heartbeated)
    pk.pack_true();
  else
    pk.pack_false();
  pk.pack_uint64(row.registration_order);
  pk.pack_uint64(row.instance_order);
  pk.pack_uint64(row.incarnation);
  return std::string{buf.data(), buf.size()};
}

expected<worker_row> decode_worker_row(uint64_t uid, std::string_view value) {
  auto fail = [uid](const std::string& what) {
    return error{"worker row " + std::to_string(uid) + ": " + what};
  };
  msgpack::object_handle handle;
  try {
    size_t offset = 0;
    handle = msgpack::unpack(value.data(), value.size(), offset);
    if (offset != value.size())
      return fail("trailing bytes after the row");
  } catch (const std::exception& e) {
    return fail(std::string{"not msgpack: "} + e.what());
  }
  const msgpack::object& o = handle.get();
  if (o.type != msgpack::type::ARRAY || o.via.array.size != row_fields)
    return fail("expected an array of " + std::to_string(row_fields) + " fields");
  const msgpack::object* f = o.via.array.ptr;
  worker_row row;
  row.uid = uid;
  auto instance_id = unpack_str(f[0]);
  auto worker_id = unpack_wire_int(f[1]);
  auto ip = unpack_str(f[2]);
  auto port = unpack_wire_int(f[3]);
  auto reg_time = unpack_double(f[5]);
  auto hb_time = unpack_double(f[6]);
  if (!instance_id || !worker_id || !ip || !port || !reg_time || !hb_time)
    return fail("a field has the wrong type");
  row.instance_id = std::move(*instance_id);
  row.worker_id = *worker_id;
  row.ip = std::move(*ip);
  row.port = *port;
  if (f[4].type != msgpack::type::NIL) {
    auto url = unpack_str(f[4]);
    if (!url)
      return fail("peer_init_url is neither a string nor nil");
    row.peer_init_url = std::move(*url);
  }
  row.registration_time = *reg_time;
  row.last_heartbeat_time = *hb_time;
  if (f[7].type != msgpack::type::BOOLEAN)
    return fail("has_heartbeated is not a bool");
  row.has_heartbeated = f[7].via.boolean;
  if (f[8].type != msgpack::type::POSITIVE_INTEGER)
    return fail("registration_order is not an unsigned integer");
  row.registration_order = f[8].via.u64;
  if (f[9].type != msgpack::type::POSITIVE_INTEGER)
    return fail("instance_order is not an unsigned integer");
  row.instance_order = f[9].via.u64;
  if (f[10].type != msgpack::type::POSITIVE_INTEGER)
    return fail("incarnation is not an unsigned integer");
  row.incarnation = f[10].via.u64;
  return row;
}

} // namespace lmcc::persistence
