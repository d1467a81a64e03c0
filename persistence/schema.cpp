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

constexpr uint32_t row_fields = 10;

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

std::string format_version_key() {
  return std::string{format_prefix} + "format_version";
}

std::string node_id_key() {
  return std::string{format_prefix} + "node_id";
}

std::string entry_key(uint32_t slot, uint64_t key, uint32_t holder) {
  std::string k;
  k.reserve(entry_key_size);
  k.push_back(entry_prefix);
  put_be(k, slot, 2);
  put_be(k, key, 8);
  put_be(k, holder, 4);
  return k;
}

std::optional<entry> decode_entry_key(std::string_view k) {
  if (k.size() != entry_key_size || k[0] != entry_prefix)
    return std::nullopt;
  return entry{static_cast<uint32_t>(get_be(k, 1, 2)), get_be(k, 3, 8),
               static_cast<uint32_t>(get_be(k, 11, 4))};
}

std::string worker_key(uint32_t worker_num) {
  std::string k;
  k.reserve(worker_key_size);
  k.push_back(worker_prefix);
  put_be(k, worker_num, 4);
  return k;
}

std::optional<uint32_t> decode_worker_key(std::string_view k) {
  if (k.size() != worker_key_size || k[0] != worker_prefix)
    return std::nullopt;
  return static_cast<uint32_t>(get_be(k, 1, 4));
}

std::string watermark_key(uint32_t worker_num, uint32_t location_index, uint32_t shard) {
  std::string k;
  k.reserve(watermark_key_size);
  k.push_back(watermark_prefix);
  put_be(k, worker_num, 4);
  put_be(k, location_index, 4);
  put_be(k, shard, 4);
  return k;
}

std::optional<watermark> decode_watermark_key(std::string_view k) {
  if (k.size() != watermark_key_size || k[0] != watermark_prefix)
    return std::nullopt;
  return watermark{static_cast<uint32_t>(get_be(k, 1, 4)), static_cast<uint32_t>(get_be(k, 5, 4)),
                   static_cast<uint32_t>(get_be(k, 9, 4)), 0};
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
  pk.pack_array(static_cast<uint32_t>(row.locations.size()));
  for (const auto& loc : row.locations)
    pk.pack(loc);
  if (row.reset_pending)
    pk.pack_true();
  else
    pk.pack_false();
  return std::string{buf.data(), buf.size()};
}

expected<worker_row> decode_worker_row(uint32_t worker_num, std::string_view value) {
  auto fail = [worker_num](const std::string& what) {
    return error{"worker row " + std::to_string(worker_num) + ": " + what};
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
  row.worker_num = worker_num;
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
  if (f[8].type != msgpack::type::ARRAY)
    return fail("locations is not an array");
  for (uint32_t i = 0; i < f[8].via.array.size; ++i) {
    auto loc = unpack_str(f[8].via.array.ptr[i]);
    if (!loc)
      return fail("location " + std::to_string(i) + " is not a string");
    row.locations.push_back(std::move(*loc));
  }
  if (f[9].type != msgpack::type::BOOLEAN)
    return fail("reset_pending is not a bool");
  row.reset_pending = f[9].via.boolean;
  return row;
}

} // namespace lmcc::persistence
