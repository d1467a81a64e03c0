#include "persistence/records.hpp"

#include "persistence/crc32c.hpp"
#include "persistence/internal/byte_codec.hpp"

#include <absl/container/flat_hash_map.h>

#include <algorithm>
#include <bit>

namespace lmcc::persistence {

static_assert(std::endian::native == std::endian::little,
              "the record codecs read keys with memcpy; port them for big-endian hosts");

namespace {

using internal::byte_reader;
using internal::byte_writer;

constexpr uint8_t record_format = 2;
constexpr uint8_t flag_mark = 1;
constexpr uint8_t flag_intro = 2;
constexpr uint8_t flag_drop = 4;
constexpr uint8_t known_flags = flag_mark | flag_intro | flag_drop;

constexpr uint8_t slot_format = 2;
constexpr uint8_t holder_state_format = 2;

/// Appends the crc32c of out[from..] to out.
void seal(std::string& out, size_t from) {
  byte_writer{out}.u32(crc32c::value(std::string_view{out}.substr(from)));
}

/// True when `value` ends with the crc32c of what precedes it.
bool sealed(std::string_view value) {
  if (value.size() < 4)
    return false;
  byte_reader tail{value.substr(value.size() - 4)};
  uint32_t stored = 0;
  tail.u32(stored);
  return crc32c::value(value.substr(0, value.size() - 4)) == stored;
}

void write_pos(byte_writer& w, const stream_pos& p) {
  w.varint(p.incarnation);
  w.varint(p.era);
  w.varint(p.n);
  w.varint(p.sub);
}

bool read_pos(byte_reader& r, stream_pos& p) {
  return r.varint(p.incarnation) && r.varint(p.era) && r.varint(p.n) && r.varint(p.sub);
}

bool read_mark(byte_reader& r, seq_mark& m) {
  uint8_t state = 0;
  if (!r.u8(state) || state > max_seq_state || !r.varint(m.seq))
    return false;
  m.state = static_cast<seq_state>(state);
  return true;
}

} // namespace

// -- op-log records ------------------------------------------------------------------

void encode_log_record(const log_header& head, const std::optional<seq_mark>& mark,
                       const holder_intro* intro, std::span<const kv_op> ops, std::string& out) {
  const size_t start = out.size();
  out.reserve(start + 120 + ops.size() * 9 + (intro ? intro->location.size() : 0));
  byte_writer w{out};
  w.u8(record_format);
  w.u8(static_cast<uint8_t>((mark ? flag_mark : 0) | (intro ? flag_intro : 0) |
                            (head.drop ? flag_drop : 0)));
  w.u64(head.holder);
  w.varint(head.incarnation);
  write_pos(w, head.prev);
  write_pos(w, head.end);
  w.varint(head.placement_epoch);
  write_pos(w, head.placement_since);
  if (mark) {
    w.u8(static_cast<uint8_t>(mark->state));
    w.varint(mark->seq);
  }
  if (intro) {
    w.u64(intro->worker_uid);
    w.bytes(intro->location);
  }
  w.varint(ops.size());
  // Keys first, then the admit bits: the keys copy as one run.
  const size_t keys_at = out.size();
  out.resize(keys_at + ops.size() * 8 + (ops.size() + 7) / 8);
  char* keys = out.data() + keys_at;
  char* bits = keys + ops.size() * 8;
  std::fill(bits, bits + (ops.size() + 7) / 8, 0);
  for (size_t i = 0; i < ops.size(); ++i) {
    std::memcpy(keys + i * 8, &ops[i].key, 8);
    if (ops[i].admit)
      bits[i / 8] = static_cast<char>(static_cast<uint8_t>(bits[i / 8]) | (1u << (i % 8)));
  }
  seal(out, start);
}

void encode_log_record(const log_record& rec, std::string& out) {
  encode_log_record(log_header{rec.holder, rec.incarnation, rec.drop, rec.prev, rec.end,
                               rec.placement_epoch, rec.placement_since},
                    rec.mark, rec.intro ? &*rec.intro : nullptr, rec.ops, out);
}

expected<void> decode_log_record(std::string_view value, log_record& rec) {
  if (!sealed(value))
    return error{"op-log record: checksum mismatch (torn or corrupted, " +
                 std::to_string(value.size()) + " bytes)"};
  byte_reader r{value.substr(0, value.size() - 4)};
  uint8_t format = 0, flags = 0;
  if (!r.u8(format) || format != record_format)
    return error{"op-log record: unknown format " + std::to_string(format)};
  if (!r.u8(flags) || (flags & ~known_flags) != 0)
    return error{"op-log record: unknown flags"};
  rec.drop = (flags & flag_drop) != 0;
  rec.mark.reset();
  rec.intro.reset();
  rec.ops.clear();
  if (!r.u64(rec.holder) || !r.varint(rec.incarnation) || !read_pos(r, rec.prev) ||
      !read_pos(r, rec.end) || !r.varint(rec.placement_epoch) || !read_pos(r, rec.placement_since))
    return error{"op-log record: truncated header"};
  if (flags & flag_mark) {
    seq_mark m;
    if (!read_mark(r, m))
      return error{"op-log record: bad seq mark"};
    rec.mark = m;
  }
  if (flags & flag_intro) {
    holder_intro intro;
    std::string_view location;
    if (!r.u64(intro.worker_uid) || !r.bytes(location))
      return error{"op-log record: bad holder intro"};
    intro.location.assign(location);
    rec.intro = std::move(intro);
  }
  uint64_t n = 0;
  if (!r.varint(n) || n > r.remaining() / 8)
    return error{"op-log record: bad op count"};
  std::string_view keys, bits;
  if (!r.raw(n * 8, keys) || !r.raw((n + 7) / 8, bits) || r.remaining() != 0)
    return error{"op-log record: ops do not match the record's length"};
  rec.ops.resize(n);
  for (size_t i = 0; i < n; ++i) {
    std::memcpy(&rec.ops[i].key, keys.data() + i * 8, 8);
    rec.ops[i].admit = (static_cast<uint8_t>(bits[i / 8]) >> (i % 8)) & 1;
  }
  return {};
}

// -- slot snapshots --------------------------------------------------------------------

void slot_snapshot_writer::add(uint64_t key, std::span<const uint64_t> holders) {
  keys_.push_back(
      {key, static_cast<uint32_t>(holders_.size()), static_cast<uint32_t>(holders.size())});
  if (holders.size() == 1) // most keys: one holder
    holders_.push_back(holders[0]);
  else
    holders_.insert(holders_.end(), holders.begin(), holders.end());
}

namespace {

/// Sorts `v` by `key_of`. Keys are
/// chunk hashes, spread evenly over their range: one pass puts each in a
/// bucket by its high bits (about one key a bucket), and sorting inside the
/// buckets is then a short insertion sort; a bucket that keys crowd into
/// (keys that are not spread) gets std::sort, so the worst case stays
/// O(n log n). A snapshot round sorts every dirty slot; this takes a third of
/// std::sort's time on a slot of a few thousand keys (bench/snapshot_bench.cpp).
template <class T, class KeyOf>
void sort_by_key(std::vector<T>& v, KeyOf key_of) {
  const auto less = [&](const T& a, const T& b) { return key_of(a) < key_of(b); };
  const size_t n = v.size();
  if (n < 64) {
    std::sort(v.begin(), v.end(), less);
    return;
  }
  uint64_t lo = UINT64_MAX;
  uint64_t hi = 0;
  for (const auto& x : v) {
    lo = std::min(lo, key_of(x));
    hi = std::max(hi, key_of(x));
  }
  const int bucket_bits = static_cast<int>(std::bit_width(n)) - 1;
  const int shift = std::max(0, static_cast<int>(std::bit_width(hi - lo)) - bucket_bits);
  std::vector<uint32_t> start((size_t{1} << bucket_bits) + 1, 0);
  for (const auto& x : v)
    ++start[((key_of(x) - lo) >> shift) + 1];
  for (size_t b = 1; b < start.size(); ++b)
    start[b] += start[b - 1];
  std::vector<T> scratch(n);
  {
    std::vector<uint32_t> next(start.begin(), start.end() - 1);
    for (const auto& x : v)
      scratch[next[(key_of(x) - lo) >> shift]++] = x;
  }
  for (size_t b = 0; b + 1 < start.size(); ++b) {
    const auto first = scratch.begin() + start[b];
    const auto last = scratch.begin() + start[b + 1];
    if (last - first > 32) {
      std::sort(first, last, less);
      continue;
    }
    for (auto i = first + (first != last); i < last; ++i)
      for (auto j = i; j > first && less(*j, *(j - 1)); --j)
        std::iter_swap(j, j - 1);
  }
  v.swap(scratch);
}

/// Numbers the distinct holders of a slot in order of first appearance. A
/// slot usually has a few holders (a node's workers): a scan of those beats
/// hashing, so the map is built only past `scan_limit` holders.
class holder_dictionary {
public:
  uint32_t index_of(uint64_t holder) {
    if (!order_.empty() && order_[last_] == holder)
      return last_;
    if (map_.empty()) {
      for (uint32_t i = 0; i < order_.size(); ++i)
        if (order_[i] == holder)
          return last_ = i;
      order_.push_back(holder);
      if (order_.size() > scan_limit)
        for (uint32_t i = 0; i < order_.size(); ++i)
          map_.emplace(order_[i], i);
      return last_ = static_cast<uint32_t>(order_.size() - 1);
    }
    auto [it, inserted] = map_.try_emplace(holder, static_cast<uint32_t>(order_.size()));
    if (inserted)
      order_.push_back(holder);
    return last_ = it->second;
  }
  const std::vector<uint64_t>& order() const noexcept { return order_; }

private:
  static constexpr size_t scan_limit = 16;
  std::vector<uint64_t> order_;
  absl::flat_hash_map<uint64_t, uint32_t> map_;
  uint32_t last_ = 0;
};

} // namespace

void slot_snapshot_writer::finish(std::string& out) {
  // Dictionary indexes in the order the holders were added (the format's
  // dictionary order), looked up once per entry.
  holder_dictionary dictionary;
  std::vector<uint32_t> holder_index(holders_.size());
  for (size_t i = 0; i < holders_.size(); ++i)
    holder_index[i] = dictionary.index_of(holders_[i]);
  const auto& order = dictionary.order();
  sort_by_key(keys_, [](const key_run& k) { return k.key; });

  const size_t header_at = out.size();
  out.reserve(header_at + 32 + order.size() * 8 + 10 * (1 + keys_.size() + holders_.size()) + 4);
  byte_writer w{out};
  w.u8(slot_format);
  w.varint(slot_);
  w.u64(position_);
  w.varint(order.size());
  for (uint64_t h : order)
    w.u64(h);
  w.varint(covers_.size());
  for (const auto& c : covers_) {
    w.u64(c.holder);
    w.u8(c.state);
    w.u8(c.uncovered ? 1 : 0);
    write_pos(w, c.pos);
    write_pos(w, c.hole);
  }
  seal(out, header_at);

  // The body straight into `out`'s bytes: at most 10 bytes a varint.
  const size_t body_at = out.size();
  out.resize(body_at + 10 * (1 + keys_.size() + holders_.size()));
  char* const begin = out.data() + body_at;
  char* p = internal::put_varint(begin, keys_.size());
  uint64_t previous = 0;
  for (const auto& k : keys_) {
    p = internal::put_varint(p, k.key - previous);
    previous = k.key;
    for (uint32_t i = 0; i < k.count; ++i)
      p = internal::put_varint(p, (uint64_t{holder_index[k.first + i]} << 1) |
                                      (i + 1 < k.count ? 1 : 0));
  }
  out.resize(body_at + static_cast<size_t>(p - begin));
  seal(out, body_at);
}

slot_read_result
read_slot_snapshot(std::string_view value,
                   const std::function<void(uint64_t key, std::span<const uint64_t>)>& on_key,
                   const std::function<void(uint64_t keys)>& on_count) {
  slot_read_result result;
  auto damaged = [&](slot_damage d, std::string what) {
    result.damage = d;
    result.what = std::move(what);
    return result;
  };
  byte_reader r{value};
  uint8_t format = 0;
  uint64_t slot = 0, holders = 0;
  if (!r.u8(format) || format != slot_format || !r.varint(slot) || !r.u64(result.header.position) ||
      !r.varint(holders) || holders > r.remaining() / 8)
    return damaged(slot_damage::header, "unreadable header");
  result.header.slot = static_cast<uint32_t>(slot);
  result.header.holders.resize(holders);
  for (auto& h : result.header.holders)
    r.u64(h);
  // A cover takes at least 8 + 2 + 8 bytes: a count past what is left is damage.
  uint64_t covers = 0;
  if (!r.varint(covers) || covers > r.remaining() / 18)
    return damaged(slot_damage::header, "unreadable header");
  result.header.covers.resize(covers);
  for (auto& c : result.header.covers) {
    uint8_t flags = 0;
    if (!r.u64(c.holder) || !r.u8(c.state) || !r.u8(flags) || !read_pos(r, c.pos) ||
        !read_pos(r, c.hole))
      return damaged(slot_damage::header, "unreadable header");
    c.uncovered = (flags & 1) != 0;
  }
  uint32_t header_crc = 0;
  const size_t header_end = r.position();
  if (!r.u32(header_crc) || crc32c::value(value.substr(0, header_end)) != header_crc)
    return damaged(slot_damage::header, "header checksum mismatch");
  const std::string_view body = value.substr(r.position());
  if (!sealed(body))
    return damaged(slot_damage::body, "body checksum mismatch");

  byte_reader b{body.substr(0, body.size() - 4)};
  uint64_t n = 0;
  if (!b.varint(n) || n > b.remaining())
    return damaged(slot_damage::body, "bad key count");
  if (on_count)
    on_count(n);
  std::vector<uint64_t> key_holders;
  uint64_t key = 0;
  for (uint64_t i = 0; i < n; ++i) {
    uint64_t delta = 0;
    if (!b.varint(delta))
      return damaged(slot_damage::body, "truncated key " + std::to_string(i));
    key += delta;
    key_holders.clear();
    for (;;) {
      uint64_t v = 0;
      if (!b.varint(v) || (v >> 1) >= result.header.holders.size())
        return damaged(slot_damage::body, "bad holder of key " + std::to_string(i));
      key_holders.push_back(result.header.holders[v >> 1]);
      if ((v & 1) == 0)
        break;
    }
    on_key(key, key_holders);
    result.entries += key_holders.size();
  }
  if (b.remaining() != 0)
    return damaged(slot_damage::body, "trailing bytes");
  return result;
}

// -- holder states -------------------------------------------------------------------

std::string encode_holder_state(const holder_state& s) {
  std::string out;
  byte_writer w{out};
  w.u8(holder_state_format);
  w.u64(s.worker_uid);
  w.bytes(s.location);
  w.varint(s.incarnation);
  w.u8(static_cast<uint8_t>(s.mark.state));
  w.varint(s.mark.seq);
  write_pos(w, s.applied);
  write_pos(w, s.hole);
  w.varint(s.placement_epoch);
  seal(out, 0);
  return out;
}

expected<holder_state> decode_holder_state(uint64_t holder, std::string_view value) {
  auto fail = [holder](const std::string& what) {
    return error{"holder state " + std::to_string(holder) + ": " + what};
  };
  if (!sealed(value))
    return fail("checksum mismatch");
  byte_reader r{value.substr(0, value.size() - 4)};
  holder_state s;
  s.holder = holder;
  uint8_t format = 0;
  std::string_view location;
  if (!r.u8(format) || format != holder_state_format)
    return fail("unknown format");
  if (!r.u64(s.worker_uid) || !r.bytes(location) || !r.varint(s.incarnation) ||
      !read_mark(r, s.mark) || !read_pos(r, s.applied) || !read_pos(r, s.hole) ||
      !r.varint(s.placement_epoch) || r.remaining() != 0)
    return fail("malformed");
  s.location.assign(location);
  return s;
}

} // namespace lmcc::persistence
