// The convergence argument of docs/convergence.md as a property: three owners
// (real shard cores over real stores) fed by a real worker_logic, with faults
// -- a queue lost for one node, its disk lost, restarts from the store, a
// membership change that gives slots to nodes that held nothing of them, a
// stale sender replaying what it sent, full syncs (new eras), and a takeover
// by a node that kept marks from before the last era -- and copies taken
// between owners in
// random order and at random times. Once the stream is quiet and copies went
// every way, every owner of every slot holds exactly the stream's entries, none
// is left uncertain, and no copy was ever taken for a conflict.
//
// The classes this guards: an evicted entry brought back by a stale copy
// that won a whole-slot comparison, an entry lost when a node's empty copy
// came back to it through another owner, and the worker's new ops dropped as
// stale everywhere because a new home continued an era the copies had left
// (handoff.hpp, takeover_marks). Links lmcc_registry only.
#include "index/coverage.hpp"
#include "index/kv_shard_core.hpp"
#include "index/shard_restore.hpp"
#include "registry/handoff.hpp"
#include "registry/sync_session_logic.hpp"
#include "registry/worker_logic.hpp"
#include "tests/index/shard_test_util.hpp"
#include "tests/registry/worker_test_util.hpp"

#include <gtest/gtest.h>

#include <deque>
#include <map>
#include <random>
#include <set>

namespace lmcc::actors {
namespace {

constexpr uint32_t slots = 16;
constexpr uint32_t nodes = 3;

/// Which membership change the run makes.
enum class change {
  /// Slot s's owners: {s, s+1} mod 3 before; while it is joint, those and
  /// {s+1, s+2}: every node gains some slots.
  rotate,
  /// Node 2 is a standby that owns nothing before; joint, every slot also
  /// has it: it learns of the holder only from the sub-batches after.
  standby_joins,
};

uint64_t owners_mask(uint32_t s, bool changed, change kind) {
  if (kind == change::standby_joins)
    return changed ? 0b111 : 0b011;
  const uint64_t before = (uint64_t{1} << (s % nodes)) | (uint64_t{1} << ((s + 1) % nodes));
  const uint64_t after = (uint64_t{1} << ((s + 1) % nodes)) | (uint64_t{1} << ((s + 2) % nodes));
  return changed ? before | after : before;
}

std::vector<uint64_t> masks(bool changed, change kind) {
  std::vector<uint64_t> m(slots);
  for (uint32_t s = 0; s < slots; ++s)
    m[s] = owners_mask(s, changed, kind);
  return m;
}

/// Node n's ownership words (coverage_book::set_ownership).
std::vector<uint64_t> ownership(uint32_t n, bool changed, change kind) {
  std::vector<uint64_t> words(slots, not_owned);
  for (uint32_t s = 0; s < slots; ++s) {
    if ((owners_mask(s, false, kind) >> n) & 1)
      words[s] = 0;
    else if (changed && ((owners_mask(s, true, kind) >> n) & 1))
      words[s] = 1;
  }
  return words;
}

struct owner {
  std::unique_ptr<persistence::test::temp_dir> tmp;
  std::shared_ptr<persistence::store> store;
  std::shared_ptr<kv_index> index;
  std::unique_ptr<kv_shard_core> core;
  shard_options opts;

  explicit owner(const std::vector<uint64_t>& words) {
    opts.slot_count = slots;
    opts.snapshot_step_entries = 50;
    wipe(words);
  }
  /// A new, empty disk (and index).
  void wipe(const std::vector<uint64_t>& words) {
    core.reset();
    store.reset();
    tmp = std::make_unique<persistence::test::temp_dir>();
    auto s = persistence::store::open(persistence::test::options_at(tmp->sub("db")), "n");
    ASSERT_TRUE(s) << s.error().message;
    store = std::shared_ptr<persistence::store>(std::move(*s));
    index = std::make_shared<kv_index>(slots);
    shard_start_state start;
    start.covers = std::make_shared<coverage_book>(slots);
    start.covers->set_ownership(words);
    core = std::make_unique<kv_shard_core>(opts, index, store, std::move(start));
  }
  /// kill -9 and a start from the store (everything applied is committed).
  void restart(const std::vector<uint64_t>& words) {
    core.reset();
    index = std::make_shared<kv_index>(slots);
    auto dir = store->load_directory();
    ASSERT_TRUE(dir);
    shard_restore_report report;
    auto start = restore_shard(*store, *index, *dir, 1, report, words);
    ASSERT_TRUE(start) << start.error().message;
    core = std::make_unique<kv_shard_core>(opts, index, store, std::move(*start));
  }
  void apply(const kv_sub_batch& sb) {
    core->apply(sb);
    auto r = core->commit(0);
    ASSERT_TRUE(r.ok) << r.error;
    if (core->background_due(0))
      core->background_step(0);
  }
  std::set<uint64_t> keys_of(holder_id h, uint32_t slot) const {
    std::set<uint64_t> out;
    index->read().for_each_key(slot, [&](uint64_t key, std::span<const holder_id> hs) {
      if (std::find(hs.begin(), hs.end(), h) != hs.end())
        out.insert(key);
    });
    return out;
  }
};

/// A full sync's session as its actor runs it: what it sends is queued like
/// the entity's sub-batches; its end is told to the entity.
struct session_recorder : session_outbox {
  std::vector<std::pair<uint32_t, kv_sub_batch>> sent;
  std::optional<std::pair<std::string, session_stream>> ended_ok;
  void send(uint32_t d, kv_sub_batch&& sb) override { sent.emplace_back(d, std::move(sb)); }
  void give_credits(uint64_t) override {}
  void report(sync_phase, uint64_t) override {}
  void ended(const std::string& id, bool completed, const session_stream& left) override {
    if (completed)
      ended_ok.emplace(id, left);
  }
};

class simulation {
public:
  simulation(uint64_t seed, change kind)
    : rng_(seed), victim_(static_cast<uint32_t>(seed % nodes)), kind_(kind) {
    cell_ = std::make_shared<placement_cell>(masks(false, kind_), 0);
    for (uint32_t n = 0; n < nodes; ++n)
      owners_.push_back(std::make_unique<owner>(ownership(n, false, kind_)));
    for (uint64_t k = 1; pool_.size() < 160; ++k)
      pool_.push_back(k * 0x9e3779b97f4a7c15ULL);
    start_entity({});
  }

  void run(int steps) {
    for (int i = 0; i < steps; ++i)
      step();
    // Quiet: what is queued arrives (a running sync ends), the worker says its last batches are
    // durable (every owner learns where the stream stands), copies go both
    // ways until nothing changes.
    deliver_all();
    worker_->flush_durable(/*only_if_quiet=*/false);
    deliver_all();
    for (int round = 0; round < 8; ++round)
      if (exchange_everything() == 0)
        break;
  }

  void check() {
    const bool changed = switched_owners_;
    for (uint32_t s = 0; s < slots; ++s) {
      std::set<uint64_t> want;
      for (const auto& [k, present] : truth_)
        if (present && slot_of(k, slots) == s)
          want.insert(k);
      for (uint32_t n = 0; n < nodes; ++n) {
        if (!((owners_mask(s, changed, kind_) >> n) & 1))
          continue;
        EXPECT_EQ(owners_[n]->keys_of(holder_, s), want) << "node " << n << " slot " << s;
        EXPECT_FALSE(owners_[n]->index->uncertain(s)) << "node " << n << " slot " << s;
      }
    }
    EXPECT_EQ(conflicts_, 0u);
  }

  uint64_t installs() const noexcept { return installs_; }
  uint64_t syncs() const noexcept { return syncs_; }
  uint64_t stale_takeovers() const noexcept { return stale_takeovers_; }
  uint64_t holes() const {
    uint64_t n = 0;
    for (const auto& o : owners_)
      n += o->core->counters().holes;
    return n + holes_before_;
  }

private:
  void start_entity(std::map<std::string, stream_pos> start) {
    auto cfg = worker_test::config();
    cfg.slot_count = slots;
    cfg.destinations = nodes;
    cfg.placement = cell_;
    // Marks go to the nodes that own something (a standby hears nothing).
    cfg.mark_mask = kind_ == change::standby_joins ? 0b011 : 0b111;
    cfg.stream_base = (++entities_) << 8;
    if (!start.empty()) { // a takeover: the stream goes on from where it stood
      cfg.restored = true;
      cfg.locations = {"cpu"};
      cfg.start_pos = std::move(start);
      cfg.last_seq["cpu"] = seq_ - 1;
      cfg.expected_next["cpu"] = seq_;
    }
    if (worker_) {
      old_.insert(old_.end(), out_.sent.begin(), out_.sent.end());
      handed_ = worker_->marks(); // a node that hands the worker off keeps these
    }
    out_ = worker_test::recording_outbox{};
    worker_ = std::make_unique<worker_logic>(std::move(cfg), out_);
  }

  void push_batch() {
    if (!worker_->gate_open())
      return; // a sync runs: the worker's increments wait for its end
    msg::BatchedKVOperationMsg b{"A", 0, "cpu", {}};
    const size_t n = 1 + rng_() % 5;
    for (size_t i = 0; i < n; ++i) {
      const uint64_t key = pool_[rng_() % pool_.size()];
      const bool admit = rng_() % 3 != 0;
      b.operations.push_back(msg::KVOpEvent{admit ? msg::OpType::admit : msg::OpType::evict,
                                            msg::wire_int::from_unsigned(key),
                                            msg::wire_int::from_unsigned(seq_++)});
      truth_[key] = admit;
    }
    worker_->on_push(pushed_msg{msg::Msg{std::move(b)}, n});
    enqueue();
  }

  void enqueue() {
    for (auto& [d, sb] : out_.sent)
      queues_[d].push_back(sb);
    out_.sent.clear();
    if (!session_)
      return;
    if (out_.go > sessions_gone_) { // the entity's increments before the sync are acknowledged
      sessions_gone_ = out_.go;
      session_->go();
    }
    for (auto& [d, sb] : session_out_.sent)
      queues_[d].push_back(sb);
    session_out_.sent.clear();
    if (auto ended = std::exchange(session_out_.ended_ok, std::nullopt)) {
      worker_->on_session_ended(ended->first, true, ended->second);
      session_.reset();
      enqueue();
    }
  }

  /// The worker is asked for a full sync and sends every key it holds: a new
  /// era of its stream, whose drop goes to every node.
  void full_sync() {
    if (session_ || !worker_->gate_open())
      return;
    std::vector<msg::wire_int> keys;
    for (const auto& [k, present] : truth_)
      if (present)
        keys.push_back(msg::wire_int::from_unsigned(k));
    const std::string id = "sync" + std::to_string(++syncs_);
    const auto n = msg::wire_int::from_unsigned(keys.size());
    ASSERT_TRUE(
        worker_->on_sync_start(msg::FullSyncStartMsg{"A", 0, "cpu", id, n, msg::wire_int{1}})
            .accepted);
    session_cfg_.slot_count = slots;
    session_cfg_.destinations = nodes;
    session_cfg_.placement = cell_;
    session_cfg_.stream_base = (session_stream_tag + syncs_) << 8;
    session_ = std::make_unique<sync_session_logic>(session_cfg_, session_out_);
    session_->start(out_.starts.back(), 0);
    session_->on_input(
        pushed_msg{msg::Msg{msg::FullSyncBatchMsg{"A", 0, "cpu", id, msg::wire_int{0}, keys}},
                   keys.size()},
        0);
    session_->on_input(pushed_msg{msg::Msg{msg::FullSyncEndMsg{"A", 0, "cpu", id, n}}, 1}, 0);
    enqueue();
  }

  /// The worker's home dies and the node that hosted it before takes it over
  /// again: it finds the marks it kept at its own handoff -- from before the
  /// era the home in between started -- and its own shard's copy of the
  /// stream, whose queue from the dead home had arrived.
  void takeover_from_kept_marks() {
    if (session_ || handed_.empty())
      return;
    const auto home = static_cast<uint32_t>((victim_ + 1) % nodes);
    while (!queues_[home].empty())
      deliver(home);
    if (session_)
      return; // the delivery started a sync's data: the home is busy with it
    queues_[victim_].clear();
    const auto own = owners_[home]->core->marks_of(worker_uid("A", msg::wire_int{0}));
    std::map<std::string, stream_pos> at;
    for (const auto& m : takeover_marks({handed_}, own))
      at[m.location] = m.pos;
    ++stale_takeovers_;
    start_entity(std::move(at));
  }

  void deliver(uint32_t d) {
    if (queues_[d].empty())
      return;
    auto sb = std::move(queues_[d].front());
    queues_[d].pop_front();
    owners_[d]->apply(sb);
    if (sb.stream >> 8 == entities_)
      worker_->on_ack(sb.stream, sb.number);
    else if (session_ && sb.stream >> 8 == session_cfg_.stream_base >> 8)
      session_->on_ack(sb.stream, sb.number, 0);
    enqueue(); // the durable seq may move: a flush
  }

  void deliver_all() {
    for (bool any = true; any;) {
      any = false;
      for (uint32_t d = 0; d < nodes; ++d)
        if (!queues_[d].empty()) {
          deliver(d);
          any = true;
        }
    }
  }

  /// One copy of `slot` from `from` into `to`.
  void copy(uint32_t to, uint32_t from, uint32_t slot) {
    const auto outcome = owners_[to]->core->install(owners_[from]->core->copy_of(slot));
    installs_ += outcome.installed;
    conflicts_ += outcome.conflicts.size();
  }

  uint64_t exchange_everything() {
    const uint64_t before = installs_;
    for (uint32_t s = 0; s < slots; ++s)
      for (uint32_t a = 0; a < nodes; ++a)
        for (uint32_t b = 0; b < nodes; ++b)
          if (a != b && ((owners_mask(s, switched_owners_, kind_) >> a) & 1) &&
              ((owners_mask(s, switched_owners_, kind_) >> b) & 1))
            copy(a, b, s);
    return installs_ - before;
  }

  void step() {
    if (const auto rare = rng_() % 100; rare < 2) {
      full_sync();
      return;
    } else if (rare < 4) {
      takeover_from_kept_marks();
      return;
    }
    const auto dice = rng_() % 100;
    if (dice < 40) {
      push_batch();
    } else if (dice < 75) {
      deliver(static_cast<uint32_t>(rng_() % nodes));
    } else if (dice < 85) {
      const auto s = static_cast<uint32_t>(rng_() % slots);
      const auto a = static_cast<uint32_t>(rng_() % nodes);
      const auto b = static_cast<uint32_t>(rng_() % nodes);
      const uint64_t mask = owners_mask(s, switched_owners_, kind_);
      if (a != b && ((mask >> a) & 1) && ((mask >> b) & 1))
        copy(a, b, s);
    } else if (dice < 88 && !session_) {
      // The worker's entity moves while the victim is away: the old home's
      // queue for the victim dies, what it sent the others is still on its
      // way (they may lag behind the victim's hole), and a new entity goes
      // on from exactly where the stream stood.
      queues_[victim_].clear();
      std::map<std::string, stream_pos> at;
      for (const auto& m : worker_->marks())
        at[m.location] = m.pos;
      start_entity(std::move(at));
    } else if (dice < 90) {
      // The victim's disk is replaced: it comes back empty.
      holes_before_ += owners_[victim_]->core->counters().holes;
      owners_[victim_]->wipe(ownership(victim_, switched_owners_, kind_));
    } else if (dice < 93) {
      const auto n = static_cast<uint32_t>(rng_() % nodes);
      holes_before_ += owners_[n]->core->counters().holes;
      owners_[n]->restart(ownership(n, switched_owners_, kind_));
    } else if (dice < 96 && !old_.empty()) {
      // A stale entity (a node that was frozen) replays what it had sent.
      const auto& [d, sb] = old_[rng_() % old_.size()];
      queues_[d].push_back(sb);
    } else if (dice < 98 && !switched_cell_) {
      switched_cell_ = true; // the home splits with the joint placement from now on
      cell_->store(masks(true, kind_), 1);
    } else if (!switched_owners_) {
      // The nodes learn they gained slots (before or after the home switched).
      switched_owners_ = true;
      for (uint32_t n = 0; n < nodes; ++n)
        owners_[n]->core->set_ownership_words(ownership(n, true, kind_));
    }
  }

  std::mt19937_64 rng_;
  uint32_t victim_;
  change kind_;
  std::shared_ptr<placement_cell> cell_;
  std::vector<std::unique_ptr<owner>> owners_;
  std::vector<uint64_t> pool_;
  std::map<uint64_t, bool> truth_;
  uint64_t seq_ = 0;
  worker_test::recording_outbox out_;
  std::unique_ptr<worker_logic> worker_;
  uint64_t entities_ = 0;
  /// Sessions' stream ids lie above any entity's.
  static constexpr uint64_t session_stream_tag = uint64_t{1} << 20;
  session_config session_cfg_;
  session_recorder session_out_;
  std::unique_ptr<sync_session_logic> session_;
  int sessions_gone_ = 0;
  uint64_t syncs_ = 0;
  uint64_t stale_takeovers_ = 0;
  std::vector<location_mark> handed_;                  ///< what the last entity handed off
  std::vector<std::pair<uint32_t, kv_sub_batch>> old_; ///< what earlier entities sent
  std::deque<kv_sub_batch> queues_[nodes];
  bool switched_cell_ = false;
  bool switched_owners_ = false;
  uint64_t installs_ = 0;
  uint64_t conflicts_ = 0;
  uint64_t holes_before_ = 0;
  const holder_id holder_ = make_holder_id("A", msg::wire_int{0}, "cpu");
};

void every_owner_converges(change kind) {
  uint64_t holes = 0;
  uint64_t installs = 0;
  uint64_t syncs = 0;
  uint64_t stale_takeovers = 0;
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    SCOPED_TRACE(seed);
    simulation sim{seed, kind};
    sim.run(400);
    sim.check();
    holes += sim.holes();
    installs += sim.installs();
    syncs += sim.syncs();
    stale_takeovers += sim.stale_takeovers();
    if (::testing::Test::HasFailure())
      break;
  }
  // The faults did what they are for: copies missed sub-batches and were
  // made whole from other owners.
  EXPECT_GT(holes, 0u);
  EXPECT_GT(installs, 0u);
  EXPECT_GT(syncs, 0u);
  EXPECT_GT(stale_takeovers, 0u);
}

TEST(copy_convergence, every_owner_ends_with_the_streams_entries_whatever_the_order) {
  every_owner_converges(change::rotate);
}

// The class of test_membership's partial lookups: a node that owned nothing
// hears of the holder only after its gain, from sub-batches that continue
// from the drop it never got.
TEST(copy_convergence, a_standby_that_joins_ends_with_the_streams_entries_too) {
  every_owner_converges(change::standby_joins);
}

} // namespace
} // namespace lmcc::actors
