// frame_forwarder (frame_forwarder.hpp) against a fake home node's service in a
// real actor system: frames for a node gather while a forward to it is
// unanswered, go on their own after max_wait when the answer is slow (a
// stuck worker at the home must not hold every worker homed there until the
// forward timeout), credits come back with each answer, a drain waits for
// every forward, and a forward given up names its workers for a full sync. Links CAF (lmcc_actors).
#include "actors/cluster/cluster_service.hpp"
#include "actors/cluster/frame_forwarder.hpp"
#include "actors/type_ids.hpp"
#include "index/ids.hpp"
#include "registry/credit_gate.hpp"

#include <caf/all.hpp>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

namespace lmcc::actors {
namespace {

using namespace std::chrono_literals;

/// A home node's cluster_service as the forwarder sees it: tells `observer`
/// how many frames each forward carried; holds its first answer until asked.
struct fake_home_state {
  int forwards = 0;
  std::vector<caf::typed_response_promise<bool>> held;
};

caf::behavior fake_home(caf::stateful_actor<fake_home_state>* self, caf::actor observer) {
  return {
      [self, observer](push_atom, pushed_msgs& msgs) -> caf::result<bool> {
        self->send(observer, static_cast<uint64_t>(msgs.size()));
        if (self->state.forwards++ > 0)
          return true;
        auto rp = self->make_response_promise<bool>();
        self->state.held.push_back(rp);
        return rp;
      },
      [self](go_atom) {
        for (auto& rp : self->state.held)
          rp.deliver(true);
        self->state.held.clear();
      },
  };
}

pushed_msgs frames(size_t n, uint64_t credits_each) {
  pushed_msgs out;
  for (size_t i = 0; i < n; ++i) {
    msg::BatchedKVOperationMsg b{"inst", msg::wire_int{0}, "LocalCPUBackend", {}};
    b.operations.push_back(msg::KVOpEvent{msg::OpType::admit,
                                          msg::wire_int{static_cast<int64_t>(i)},
                                          msg::wire_int{static_cast<int64_t>(i)}});
    out.push_back(pushed_msg{msg::Msg{std::move(b)}, credits_each});
  }
  return out;
}

struct forwarder_fixture {
  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> sys;
  std::unique_ptr<caf::scoped_actor> observer;
  caf::actor home;
  std::shared_ptr<credit_gate> gate = std::make_shared<credit_gate>(1000, 500);
  frame_forwarder_actor forwarder;

  std::shared_ptr<std::atomic<int>> dropped = std::make_shared<std::atomic<int>>(0);
  /// The workers the forwarder said frames were lost for.
  struct lost_workers {
    std::mutex mutex;
    std::vector<uint64_t> uids;
  };
  std::shared_ptr<lost_workers> lost = std::make_shared<lost_workers>();

  explicit forwarder_fixture(std::chrono::milliseconds timeout = 60s) {
    register_message_types(cfg);
    sys = std::make_unique<caf::actor_system>(cfg);
    observer = std::make_unique<caf::scoped_actor>(*sys);
    home = sys->spawn(fake_home, caf::actor{*observer});
    auto table = std::make_shared<cluster_table>();
    table->self = 0;
    table->peers.resize(2);
    table->peers[1].live = true;
    table->peers[1].handles.node = home;
    table->peers[1].handles.service = home;
    auto board = std::make_shared<cluster_board>();
    board->publish(std::move(table));
    frame_forwarder_config fc;
    fc.board = board;
    fc.gate = gate;
    fc.timeout = timeout; // by default far beyond any wait below
    fc.count_event = [dropped = dropped](std::string_view what) {
      if (what == "forwarded_frames_dropped")
        ++*dropped;
    };
    fc.max_wait = 20ms;
    fc.frames_lost = [lost = lost](uint64_t uid) {
      std::lock_guard guard(lost->mutex);
      lost->uids.push_back(uid);
    };
    forwarder = sys->spawn(frame_forwarder_main, std::move(fc));
  }
  ~forwarder_fixture() {
    caf::anon_send_exit(forwarder, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(home, caf::exit_reason::user_shutdown);
    observer.reset();
  }

  void forward(size_t n, uint64_t credits_each) {
    gate->take(n * credits_each); // as the PULL thread does before routing
    caf::anon_send(forwarder, push_atom::value, uint16_t{1}, frames(n, credits_each));
  }

  /// The frame count of the next forward the home received.
  uint64_t next_forward() {
    uint64_t n = 0;
    (*observer)->receive([&](uint64_t frames) { n = frames; },
                         caf::after(10s) >> [&] { ADD_FAILURE() << "no forward arrived"; });
    return n;
  }
};

TEST(frame_forwarder, frames_behind_a_slow_answer_gather_and_go_after_max_wait) {
  forwarder_fixture f;
  f.forward(1, 10);
  EXPECT_EQ(f.next_forward(), 1u); // sent at once; its answer is held
  // Two pushes while it is unanswered travel together, long before the
  // forward's timeout.
  f.forward(2, 10);
  f.forward(3, 10);
  EXPECT_EQ(f.next_forward(), 5u);
  // A drain waits for the held forward.
  auto drained = std::make_shared<std::atomic<bool>>(false);
  auto asker = f.sys->spawn([&, drained](caf::event_based_actor* self) {
    self->request(f.forwarder, 10s, drain_atom::value).then([drained](bool ok) {
      drained->store(ok);
    });
  });
  f.forward(1, 5);
  EXPECT_EQ(f.next_forward(), 1u);
  EXPECT_FALSE(drained->load());
  caf::anon_send(f.home, go_atom::value);
  caf::scoped_actor waiter{*f.sys};
  waiter->wait_for(asker);
  EXPECT_TRUE(drained->load());
  EXPECT_EQ(f.gate->in_flight(), 0u); // every answer gave its credits back
}

TEST(frame_forwarder, an_unanswered_forward_times_out_once_and_its_late_answer_is_ignored) {
  forwarder_fixture f{200ms};
  f.forward(1, 10);
  EXPECT_EQ(f.next_forward(), 1u); // its answer is held
  // The forwarder's own tick gives it up: credits back, counted as dropped.
  const auto give_up_by = std::chrono::steady_clock::now() + 10s;
  while (f.gate->in_flight() != 0 && std::chrono::steady_clock::now() < give_up_by)
    std::this_thread::yield();
  ASSERT_EQ(f.gate->in_flight(), 0u);
  EXPECT_EQ(f.dropped->load(), 1);
  {
    // Its worker must be asked for a full sync: the frames may never arrive,
    // and no later frame of a quiet worker would show the gap.
    std::lock_guard guard(f.lost->mutex);
    EXPECT_EQ(f.lost->uids, std::vector<uint64_t>{worker_uid("inst", msg::wire_int{0})});
  }
  // Other work holds credits now; the late answer must not give them back.
  f.gate->take(7);
  (*f.observer)
      ->request(f.home, 10s, go_atom::value)
      .receive([] {}, [](caf::error& e) { ADD_FAILURE() << caf::to_string(e); });
  // The late answer is in the forwarder's mailbox before this push, and the
  // drain answers after the push's own answer.
  f.forward(1, 0);
  EXPECT_EQ(f.next_forward(), 1u);
  bool drained = false;
  (*f.observer)
      ->request(f.forwarder, 10s, drain_atom::value)
      .receive([&](bool ok) { drained = ok; },
               [](caf::error& e) { ADD_FAILURE() << caf::to_string(e); });
  EXPECT_TRUE(drained);
  EXPECT_EQ(f.gate->in_flight(), 7u);
  EXPECT_EQ(f.dropped->load(), 1);
  std::lock_guard guard(f.lost->mutex);
  EXPECT_EQ(f.lost->uids.size(), 1u); // answered forwards lose nothing
}

} // namespace
} // namespace lmcc::actors
