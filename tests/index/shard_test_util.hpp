// Helpers for the KV shard tests (kv_shard_core_test, shard_restore_test): a
// shard core over a real store in a temp dir, sub-batch builders, and what
// readers see of an index, to compare a live shard with a restarted one.
//
//   shard_fixture f{64};
//   f.core->apply(sb(1, 1, h, {{key, true}}).mark_tracking(5));
//   auto r = f.core->commit(0);
//
// Context: test code, single-threaded.
#pragma once

#include "index/kv_shard_core.hpp"
#include "index/shard_restore.hpp"
#include "tests/persistence/test_util.hpp"

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <vector>

namespace lmcc::actors::test {

using persistence::test::temp_dir;

/// The holder id of location `loc` of worker ("inst", worker).
inline holder_id holder_of(int worker, const std::string& loc = "LocalCPUBackend") {
  return make_holder_id("inst", msg::wire_int{worker}, loc);
}

/// The holders of workers 1 and 2 at LocalCPUBackend, as most shard tests name them.
inline const holder_id h1 = holder_of(1);
inline const holder_id h2 = holder_of(2);

inline uint64_t uid_of(int worker) {
  return worker_uid("inst", msg::wire_int{worker});
}

/// A sub-batch builder: sb(stream, number, holder, ops).with_mark(...).
///
/// Unless pos() sets them, a sub-batch's stream positions are the order in
/// which the test built it (each one continues its holder's copy: its `prev`
/// is its era's start), so a test that does not look at positions sees its
/// sub-batches applied in that order, as a single writer's would be.
struct sb_builder {
  mutable kv_sub_batch sb;
  uint64_t order = 0;
  sb_builder& pos(stream_pos prev, stream_pos end) {
    sb.prev = prev;
    sb.end = end;
    return *this;
  }
  sb_builder& incarnation(uint64_t i) {
    sb.incarnation = i;
    return *this;
  }
  sb_builder& mark(seq_state s, uint64_t seq = 0) {
    sb.has_mark = true;
    sb.mark = seq_mark{s, seq};
    return *this;
  }
  sb_builder& durable(uint64_t seq) {
    sb.has_durable = true;
    sb.durable_seq = seq;
    return *this;
  }
  sb_builder& intro(uint64_t uid, std::string location) {
    sb.has_intro = true;
    sb.intro_worker_uid = uid;
    sb.intro_location = std::move(location);
    return *this;
  }
  sb_builder& drop() {
    sb.drop = true;
    sb.ops.clear();
    return *this;
  }
  operator const kv_sub_batch&() const { // NOLINT: a builder
    if (sb.end.none()) {
      sb.end = stream_pos{sb.incarnation, 0, order, 0};
      sb.prev = sb.end.era_start();
    }
    return sb;
  }
};

inline sb_builder sb(uint64_t stream, uint64_t number, holder_id h, std::vector<kv_op> ops = {}) {
  static uint64_t built = 0;
  sb_builder b;
  b.order = ++built;
  b.sb.stream = stream;
  b.sb.number = number;
  b.sb.holder = h;
  b.sb.ops = std::move(ops);
  return b;
}

/// `n` distinct keys in `slot`, starting the search at `from`.
inline std::vector<uint64_t> keys_in(uint32_t slot, size_t n, uint32_t slot_count,
                                     uint64_t from = 1) {
  std::vector<uint64_t> out;
  for (uint64_t k = from; out.size() < n; ++k)
    if (slot_of(k * 0x9e3779b97f4a7c15ULL, slot_count) == slot)
      out.push_back(k * 0x9e3779b97f4a7c15ULL);
  return out;
}

/// What readers see of an index: per slot (keys, entries, digest of the
/// visible entries), and the totals.
struct visible_state {
  std::vector<kv_index::slot_summary> slots;
  uint64_t entries = 0;
  holder_counts counts;
  std::map<uint64_t, std::vector<holder_id>> keys; ///< holders sorted
  friend bool operator==(const visible_state& a, const visible_state& b) {
    if (a.slots.size() != b.slots.size() || a.entries != b.entries || a.counts != b.counts ||
        a.keys != b.keys)
      return false;
    for (size_t s = 0; s < a.slots.size(); ++s)
      if (a.slots[s].keys != b.slots[s].keys || a.slots[s].entries != b.slots[s].entries ||
          a.slots[s].digest != b.slots[s].digest)
        return false;
    return true;
  }
};

/// The visible contents, with entries() and entries_by_holder().
inline visible_state visible(const kv_index& idx) {
  visible_state v;
  v.slots.resize(idx.slot_count());
  auto r = idx.read();
  for (uint32_t s = 0; s < idx.slot_count(); ++s)
    r.for_each_key(s, [&](uint64_t key, std::span<const holder_id> hs) {
      auto& sum = v.slots[s];
      ++sum.keys;
      auto& list = v.keys[key];
      for (holder_id h : hs) {
        ++sum.entries;
        sum.digest ^= kv_index::entry_hash(key, h);
        list.push_back(h);
      }
      std::sort(list.begin(), list.end());
    });
  v.entries = r.entries();
  v.counts = r.entries_by_holder();
  return v;
}

/// The entries a visible state holds, recounted from its keys.
inline uint64_t recount(const visible_state& v) {
  uint64_t n = 0;
  for (const auto& [k, hs] : v.keys)
    n += hs.size();
  return n;
}

/// A shard core over a real store (64 slots by default, small snapshot steps).
struct shard_fixture {
  explicit shard_fixture(uint32_t slot_count = 64) {
    opts.slot_count = slot_count;
    opts.snapshot_step_entries = 100; // a slot costs at least 64: one or two slots a step
    opts.drop_step_slots = 8;
    open_store();
    index = std::make_shared<kv_index>(slot_count);
    core = std::make_unique<kv_shard_core>(opts, index, store);
  }

  void open_store() {
    auto s = persistence::store::open(persistence::test::options_at(tmp.sub("db")), "n1");
    ASSERT_TRUE(s) << s.error().message;
    store = std::shared_ptr<persistence::store>(std::move(*s));
  }

  /// Commits and expects success; the acks.
  absl::flat_hash_map<uint64_t, uint64_t> commit(uint64_t now = 0) {
    auto r = core->commit(now);
    EXPECT_TRUE(r.ok) << r.error;
    return r.acks;
  }

  /// Runs background steps until nothing is due; how many.
  int settle(uint64_t now = 0) {
    int steps = 0;
    while (core->background_due(now) && steps < 100'000) {
      auto r = core->background_step(now);
      EXPECT_TRUE(r.ok) << r.error;
      ++steps;
    }
    return steps;
  }

  /// A whole snapshot round now (drops cleaned first).
  void snapshot(uint64_t now = 0) {
    core->request_snapshot();
    settle(now);
    EXPECT_FALSE(core->snapshot_running());
  }

  /// Restores a fresh index from the same store.
  struct restored {
    std::shared_ptr<kv_index> index;
    shard_start_state start;
    shard_restore_report report;
  };
  restored restore(uint32_t threads = 2, uint32_t slot_count = 0) const {
    restored out;
    out.index = std::make_shared<kv_index>(slot_count ? slot_count : opts.slot_count);
    auto dir = store->load_directory();
    EXPECT_TRUE(dir) << (dir ? "" : dir.error().message);
    if (!dir)
      return out;
    auto start = restore_shard(*store, *out.index, *dir, threads, out.report);
    EXPECT_TRUE(start) << (start ? "" : start.error().message);
    if (start)
      out.start = std::move(*start);
    return out;
  }

  temp_dir tmp;
  shard_options opts;
  std::shared_ptr<persistence::store> store;
  std::shared_ptr<kv_index> index;
  std::unique_ptr<kv_shard_core> core;
};

} // namespace lmcc::actors::test
