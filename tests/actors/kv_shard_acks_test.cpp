// kv_shard's acknowledgements in a real actor system: one commit covering
// several local senders' streams goes to the ack relay as one message, which
// hands each ack to its sender; a commit with a single ack, or a shard with
// no relay, acks the sender itself. Links CAF (lmcc_actors).
#include "actors/kv_shard.hpp"
#include "actors/type_ids.hpp"

#include <caf/all.hpp>
#include <gtest/gtest.h>

#include <chrono>
#include <map>

namespace lmcc::actors {
namespace {

using namespace std::chrono_literals;

constexpr uint32_t acks_slots = 64;

/// What the counting relay reports: the acks one relay message carried.
struct relay_report {
  size_t acks = 0;
};

} // namespace
} // namespace lmcc::actors

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(lmcc::actors::relay_report)

namespace lmcc::actors {
namespace {

/// An ack relay that tells `observer` how many acks each message carried,
/// then hands them out as the ingest router does.
caf::behavior counting_relay(caf::event_based_actor* self, caf::actor observer) {
  return {
      [self, observer](ack_atom, local_acks& acks) {
        caf::anon_send(observer, relay_report{acks.size()});
        for (auto& a : acks)
          self->send(caf::actor_cast<ack_receiver_actor>(std::move(a.sender)), ack_atom::value,
                     a.stream, a.number);
      },
  };
}

kv_sub_batch sub_batch(uint64_t stream, uint64_t number, uint64_t key) {
  kv_sub_batch sb;
  sb.stream = stream;
  sb.number = number;
  sb.holder = 7;
  sb.incarnation = 1;
  sb.ops = {persistence::kv_op{key, true}};
  return sb;
}

struct shard_fixture {
  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> sys;
  std::unique_ptr<caf::scoped_actor> self;
  kv_shard_actor shard;

  explicit shard_fixture(bool with_relay) {
    register_message_types(cfg);
    sys = std::make_unique<caf::actor_system>(cfg);
    self = std::make_unique<caf::scoped_actor>(*sys);
    auto init = std::make_shared<shard_init>();
    init->options.slot_count = acks_slots;
    init->index = std::make_shared<kv_index>(acks_slots);
    if (with_relay)
      init->ack_relay =
          caf::actor_cast<ack_relay_actor>(sys->spawn(counting_relay, caf::actor{*self}));
    shard = sys->spawn(kv_shard, std::move(init));
  }
  ~shard_fixture() {
    caf::anon_send_exit(shard, caf::exit_reason::user_shutdown);
    self.reset();
  }

  /// Receives what arrives within `timeout`: acks (stream -> number) and the
  /// relay's message sizes.
  void receive(size_t acks_wanted, std::map<uint64_t, uint64_t>& acks,
               std::vector<size_t>& relayed) {
    while (acks.size() < acks_wanted) {
      bool got = false;
      (*self)->receive(
          [&](ack_atom, uint64_t stream, uint64_t number) {
            acks[stream] = number;
            got = true;
          },
          [&](relay_report c) {
            relayed.push_back(c.acks);
            got = true;
          },
          caf::after(10s) >> [] {});
      if (!got)
        return;
    }
  }
};

TEST(kv_shard_acks, one_commit_of_several_streams_goes_through_the_relay_as_one_message) {
  shard_fixture f{true};
  // Three streams in one message: one apply, one commit, three acks.
  (*f.self)->send(
      f.shard, apply_atom::value,
      std::vector<kv_sub_batch>{sub_batch(100, 1, 1), sub_batch(200, 1, 2), sub_batch(300, 1, 3)});
  std::map<uint64_t, uint64_t> acks;
  std::vector<size_t> relayed;
  f.receive(3, acks, relayed);
  EXPECT_EQ(acks, (std::map<uint64_t, uint64_t>{{100, 1}, {200, 1}, {300, 1}}));
  EXPECT_EQ(relayed, std::vector<size_t>{3});
}

TEST(kv_shard_acks, a_single_ack_and_a_shard_without_a_relay_ack_the_sender_directly) {
  {
    shard_fixture f{true};
    (*f.self)->send(f.shard, apply_atom::value, sub_batch(100, 1, 1));
    std::map<uint64_t, uint64_t> acks;
    std::vector<size_t> relayed;
    f.receive(1, acks, relayed);
    EXPECT_EQ(acks, (std::map<uint64_t, uint64_t>{{100, 1}}));
    EXPECT_TRUE(relayed.empty());
  }
  shard_fixture f{false};
  (*f.self)->send(f.shard, apply_atom::value,
                  std::vector<kv_sub_batch>{sub_batch(100, 1, 1), sub_batch(200, 1, 2)});
  std::map<uint64_t, uint64_t> acks;
  std::vector<size_t> relayed;
  f.receive(2, acks, relayed);
  EXPECT_EQ(acks, (std::map<uint64_t, uint64_t>{{100, 1}, {200, 1}}));
  EXPECT_TRUE(relayed.empty());
}

} // namespace
} // namespace lmcc::actors
