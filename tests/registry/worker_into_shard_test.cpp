// worker_logic's sub-batches applied by a cluster node's kv_shard_core (one
// that fences a stale entity's older batches), as the actors would: a
// re-registered worker's late frames and a seq that goes back. CAF-free:
// linked with lmcc_registry.
#include "index/kv_shard_core.hpp"
#include "registry/worker_logic.hpp"
#include "tests/index/shard_test_util.hpp"
#include "tests/registry/worker_test_util.hpp"

#if defined(CAF_VERSION)
#error "worker_logic or kv_shard_core pulls in CAF"
#endif

#include <gtest/gtest.h>

namespace lmcc::actors {
namespace {

using namespace worker_test;

/// One worker_logic whose sub-batches a fenced shard core (a cluster node's)
/// applies and acknowledges, as the actors would.
struct worker_into_shard {
  test::shard_fixture shard;
  recording_outbox out;
  std::unique_ptr<worker_logic> w;
  size_t applied = 0;

  worker_into_shard() {
    shard.core = std::make_unique<kv_shard_core>(shard.opts, shard.index, shard.store);
    w = std::make_unique<worker_logic>(config(), out);
  }
  void push(pushed_msg m) {
    w->on_push(std::move(m));
    for (; applied < out.sent.size(); ++applied)
      shard.core->apply(out.sent[applied].second);
    for (const auto& [stream, up_to] : shard.commit())
      w->on_ack(stream, up_to);
  }
  bool holds(uint64_t key) const { return shard.index->read().holds(key, cpu()); }
  static holder_id cpu() { return make_holder_id("A", wire_int{0}, "cpu"); }
};

TEST(worker_into_shard, frames_of_the_old_process_read_after_its_reregistration_are_dropped) {
  worker_into_shard f;
  f.push(batch("cpu", 0, 10));
  f.w->on_reset(90);
  // Frames the old process sent before it died, read only now (they waited
  // in ZMQ's queue while ingest was held back), then the new process.
  f.push(batch("cpu", 10, 5));
  EXPECT_TRUE(f.holds(1000)); // applied: nothing tells them apart yet
  // but a frame that does not start at seq 0 after a re-registration asks
  // for a full sync, in case nothing follows that would tell.
  EXPECT_EQ(f.out.resyncs, std::vector<std::string>{"first_frame_after_reregistration"});
  f.push(batch("cpu", 0, 5));
  f.push(batch("cpu", 5, 3));
  EXPECT_FALSE(f.holds(1000));
  EXPECT_FALSE(f.holds(0 * 100 + 8)); // the old process's first batch went with the reset
  for (uint64_t key : {0, 2, 4, 500, 502})
    EXPECT_TRUE(f.holds(key)) << key;
  EXPECT_EQ(f.shard.index->read().entries(), 5u);
  EXPECT_EQ(f.shard.core->counters().fenced, 0u);
  EXPECT_TRUE(f.out.gaps.empty()); // not a discontinuity: a new process
  EXPECT_EQ(f.shard.core->holders().at(worker_into_shard::cpu()).mark,
            (seq_mark{seq_state::tracking, 7}));
  // Two restarts while ingest was held back: the registrations came first,
  // then both processes' frames. Only the newest process's stay.
  f.w->on_reset(91);
  f.push(batch("cpu", 8, 2));
  f.push(batch("cpu", 0, 5));
  f.push(batch("cpu", 0, 1));
  EXPECT_TRUE(f.holds(0));
  EXPECT_EQ(f.shard.index->read().entries(), 1u);
  EXPECT_EQ(f.shard.core->counters().fenced, 0u);
  EXPECT_TRUE(f.out.gaps.empty());
  EXPECT_EQ(f.out.resyncs.size(), 2u);
}

TEST(worker_into_shard, a_late_frame_of_the_old_process_with_no_successor_frame_asks_a_full_sync) {
  worker_into_shard f;
  f.push(batch("cpu", 0, 10));
  f.push(batch("gpu", 0, 4));
  f.w->on_reset(90);
  // The new process sends nothing more on "cpu"; an old frame read late
  // would stay in the index for good if nothing asked the worker what it holds.
  f.push(batch("cpu", 10, 5));
  EXPECT_EQ(f.out.resyncs, std::vector<std::string>{"first_frame_after_reregistration"});
  // The new process's own first frames start at 0: nothing more is asked.
  f.push(batch("gpu", 0, 2));
  f.push(batch("gpu", 2, 2));
  EXPECT_EQ(f.out.resyncs.size(), 1u);
  EXPECT_TRUE(f.out.gaps.empty());
}

TEST(worker_into_shard, a_first_registration_does_not_expect_seq_zero) {
  // LMCache applies a new worker's first frame whatever its seq; so does lmcc
  // (the worker may have started before the controller).
  worker_into_shard f;
  f.push(batch("cpu", 42, 3));
  EXPECT_TRUE(f.out.resyncs.empty());
  EXPECT_TRUE(f.holds(4200));
}

TEST(worker_into_shard, a_seq_that_goes_back_starts_the_owners_watermark_again) {
  worker_into_shard f;
  // Without a re-registration a seq going back to 0 is LMCache's case too:
  // counted and applied.
  f.push(batch("cpu", 0, 3));
  f.push(batch("cpu", 0, 5));
  EXPECT_TRUE(f.holds(2));
  EXPECT_EQ(f.out.gaps.size(), 1u);
  f.out.gaps.clear();
  // An old process's straggler among the new one's frames (two connections,
  // fair-queued): counted as LMCache counts it, applied as LMCache applies it.
  f.push(batch("cpu", 483, 1));
  f.push(batch("cpu", 5, 3));
  EXPECT_TRUE(f.holds(48300));
  for (uint64_t key : {0, 2, 4, 500, 502})
    EXPECT_TRUE(f.holds(key)) << key; // not taken for a stale entity's
  EXPECT_EQ(f.shard.core->counters().fenced, 0u);
  EXPECT_EQ(f.out.gaps.size(), 2u); // to 483 and back
  EXPECT_EQ(f.shard.core->holders().at(worker_into_shard::cpu()).mark,
            (seq_mark{seq_state::tracking, 7}));
  // A stale copy of the entity replaying an older batch is still fenced.
  f.shard.core->apply(test::sb(base + 9, 1, worker_into_shard::cpu(), {{77, true}})
                          .incarnation(77)
                          .mark(seq_state::tracking, 6));
  f.shard.commit();
  EXPECT_FALSE(f.holds(77));
  EXPECT_EQ(f.shard.core->counters().fenced, 1u);
}

} // namespace
} // namespace lmcc::actors
