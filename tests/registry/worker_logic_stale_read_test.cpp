// worker_logic and frames read under an older registration
// (pushed_msg::read_under): the node that read a frame stamps it with the
// worker's registration it knew then. A KV batch stamped older than the
// entity's registration is dropped; when the stamp cannot be trusted (read
// by another node, or by an entity this node did not register) the worker
// is also asked for a full sync (chaos seed 1456). CAF-free: linked with
// lmcc_registry.
#include "registry/worker_logic.hpp"
#include "tests/registry/worker_test_util.hpp"

#include <gtest/gtest.h>

namespace lmcc::actors {
namespace {

using msg::wire_int;
using namespace worker_test;

pushed_msg stamped(pushed_msg m, uint64_t read_under, bool forwarded = false) {
  m.read_under = read_under;
  m.forwarded = forwarded;
  return m;
}

/// Keys of every op the entity sent to its destinations.
size_t ops_sent(const recording_outbox& out) {
  size_t n = 0;
  for (const auto& [d, sb] : out.sent)
    n += sb.ops.size();
  return n;
}

TEST(worker_logic_stale_read, a_frame_read_here_before_the_registration_is_dropped_silently) {
  // One node: the registration is published before its reply, so a frame
  // stamped with the older one was sent by the older process.
  recording_outbox out;
  worker_logic w{config(), out};
  w.on_reset(90);
  const size_t before = ops_sent(out);
  w.on_push(stamped(batch("cpu", 0, 4, 7), 77));
  EXPECT_EQ(ops_sent(out), before);
  EXPECT_EQ(out.credits, 7u);
  EXPECT_EQ(w.stale_read_dropped(), 1u);
  EXPECT_TRUE(out.resyncs.empty());
  // The new process's first frame, stamped with its registration, is applied
  // from seq 0 without a proof.
  w.on_push(stamped(batch("cpu", 0, 3), 90));
  EXPECT_EQ(ops_sent(out), before + 3);
  EXPECT_TRUE(out.resyncs.empty());
  EXPECT_TRUE(out.gaps.empty());
}

TEST(worker_logic_stale_read, a_forwarded_frame_read_under_an_older_registration_asks_once) {
  recording_outbox out;
  worker_logic w{config(), out};
  w.on_reset(90);
  const size_t before = ops_sent(out);
  // Read by a node that had not heard of registration 90: the older
  // process's frame, or the new one's -- dropped, and one full sync asked.
  w.on_push(stamped(batch("cpu", 0, 4), 77, true));
  w.on_push(stamped(batch("cpu", 4, 2), 77, true));
  EXPECT_EQ(ops_sent(out), before);
  EXPECT_EQ(w.stale_read_dropped(), 2u);
  EXPECT_EQ(out.resyncs, (std::vector<std::string>{"frames_read_before_registration"}));
  // The sync starts: a stale frame after it asks again (sent after the
  // worker took its snapshot, or not: the sync cannot tell).
  w.on_sync_start(msg::FullSyncStartMsg{"A", 0, "cpu", "s1", 0, 0});
  w.on_session_ended("s1", true);
  w.on_push(stamped(batch("cpu", 9, 1), 77, true));
  EXPECT_EQ(out.resyncs.size(), 2u);
  // Frames stamped with the current registration flow as usual.
  w.on_push(stamped(batch("cpu", 0, 2), 90, true));
  EXPECT_EQ(ops_sent(out), before + 2);
}

TEST(worker_logic_stale_read, an_entity_another_node_registered_cannot_trust_its_own_stamps) {
  // A taken-over or renewed entity: this node learned the registration from
  // its home, and may have read the new process's frames before it did.
  recording_outbox out;
  auto cfg = config();
  cfg.registered_here = false;
  cfg.incarnation = 90;
  worker_logic w{cfg, out};
  w.on_push(stamped(batch("cpu", 0, 4), 77));
  EXPECT_EQ(ops_sent(out), 0u);
  EXPECT_EQ(out.resyncs, (std::vector<std::string>{"frames_read_before_registration"}));
}

TEST(worker_logic_stale_read, unstamped_current_and_sync_frames_are_not_judged) {
  recording_outbox out;
  worker_logic w{config(), out};
  w.on_reset(90);
  w.on_push(batch("cpu", 0, 2));                    // not stamped (read_under 0)
  w.on_push(stamped(batch("cpu", 2, 2), 90, true)); // the current registration
  w.on_push(stamped(batch("cpu", 4, 2), 95, true)); // newer: the reset is on its way
  EXPECT_EQ(ops_sent(out), 6u);
  EXPECT_EQ(w.stale_read_dropped(), 0u);
  EXPECT_TRUE(out.resyncs.empty());
}

} // namespace
} // namespace lmcc::actors
