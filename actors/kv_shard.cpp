#include "actors/kv_shard.hpp"

#include "clock/clock.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <pthread.h>

namespace lmcc::actors {
namespace {

using self_ptr = kv_shard_actor::stateful_pointer<kv_shard_state>;

/// The shortest gap between two ticks while the shard has work of its own.
constexpr auto tick_interval = std::chrono::milliseconds{500};
constexpr auto max_retry_delay = std::chrono::milliseconds{1000};

void publish(self_ptr self) {
  auto& core = *self->state.core;
  self->state.monitor->publish(shard_stats{core.counters(), core.next_position(),
                                           core.log_bytes_since_round(), core.snapshot_running()});
}

/// Sends the held acks that are due (all of them with `all`: a drain) and
/// wakes up when the rest are.
void send_remote_acks(self_ptr self, bool all) {
  auto& st = self->state;
  const auto now = steady_now();
  for (auto& [sender, acks] : st.remote_acks->take_due(now, all))
    self->send(caf::actor_cast<batch_ack_receiver_actor>(sender), ack_atom::value, std::move(acks));
  if (auto due = st.remote_acks->next_due(); due && !st.remote_ack_scheduled) {
    st.remote_ack_scheduled = true;
    self->delayed_send(self, std::max<std::chrono::steady_clock::duration>(*due - now, {}),
                       ack_atom::value);
  }
}

void send_acks(self_ptr self, kv_shard_core::commit_result& r) {
  auto& st = self->state;
  auto& senders = st.senders;
  // A sender on another node is that node's peer_link for this shard: its acks
  // are held and go together (send_remote_acks).
  bool remote = false;
  local_acks local;
  for (const auto& [stream, number] : r.acks) {
    auto it = senders.find(stream);
    if (it == senders.end())
      continue; // a sub-batch sent anonymously (a restart's drops)
    if (const auto& sender = it->second; sender && sender->node() != self->node()) {
      st.remote_acks->add(sender, stream, number);
      remote = true;
    } else if (sender && st.ack_relay) {
      local.push_back(local_ack{std::move(it->second), stream, number});
    } else if (sender) {
      self->send(caf::actor_cast<ack_receiver_actor>(sender), ack_atom::value, stream, number);
    }
    senders.erase(it);
  }
  if (local.size() == 1)
    self->send(caf::actor_cast<ack_receiver_actor>(local[0].sender), ack_atom::value,
               local[0].stream, local[0].number);
  else if (!local.empty())
    self->send(st.ack_relay, ack_atom::value, std::move(local));
  if (remote)
    send_remote_acks(self, false);
}

/// Tells the directory of each worker whose ops this node dropped because
/// their sender was behind the stream's era (cover_step::era_behind): the
/// worker's full sync starts an era above every copy's.
void report_era_behind(self_ptr self) {
  auto& st = self->state;
  for (uint64_t uid : st.core->take_era_behind())
    if (st.resync_to)
      caf::anon_send(st.resync_to, resync_atom::value, uid, std::string{"stream_era_behind"});
}

void schedule_background(self_ptr self) {
  auto& st = self->state;
  if (!st.background_scheduled && st.core->background_due(monotonic_ms())) {
    st.background_scheduled = true;
    self->send(self, background_atom::value);
  }
}

/// Answers the background round requests whose round is complete and
/// committed (the step that completed it committed it).
void answer_round_waiters(self_ptr self) {
  auto& st = self->state;
  if (st.round_waiters.empty())
    return; // every commit passes here
  const uint64_t rounds = st.core->counters().snapshot_rounds;
  auto& w = st.round_waiters;
  auto done = std::stable_partition(w.begin(), w.end(),
                                    [rounds](const auto& x) { return x.first > rounds; });
  for (auto it = done; it != w.end(); ++it)
    it->second.deliver(true);
  w.erase(done, w.end());
}

/// Commits; on failure retries later with backoff (its acks wait until then).
void flush(self_ptr self) {
  auto& st = self->state;
  const auto start = steady_now();
  auto r = st.core->commit(monotonic_ms());
  const double ms = std::chrono::duration<double, std::milli>(steady_now() - start).count();
  st.core->note_commit_ms(ms);
  send_acks(self, r);
  if (!r.ok) {
    st.retry_delay =
        std::min(max_retry_delay, std::max(std::chrono::milliseconds{10}, st.retry_delay * 2));
    if (st.core->counters().commit_failures % 100 == 1)
      spdlog::error("store-commit-failed failures={} retry_ms={} error={}",
                    st.core->counters().commit_failures, st.retry_delay.count(), r.error);
    if (!st.flush_scheduled) {
      st.flush_scheduled = true;
      self->delayed_send(self, st.retry_delay, flush_atom::value);
    }
  } else {
    st.retry_delay = std::chrono::milliseconds{0};
    answer_round_waiters(self); // a round whose own commit had failed
  }
  schedule_background(self);
  publish(self);
}

/// Arms a tick `delay` from now unless one is armed that comes sooner. An
/// idle shard has none armed: what arrives arms one (flush(), and the
/// handlers that change the index without a commit).
void arm_tick(self_ptr self, std::chrono::milliseconds delay = tick_interval) {
  arm_sooner_tick(self, self->state.tick, delay);
}

void schedule_flush(self_ptr self) {
  auto& st = self->state;
  if (!st.flush_scheduled) {
    st.flush_scheduled = true;
    self->send(self, flush_atom::value);
  }
}

} // namespace

kv_shard_actor::behavior_type kv_shard(kv_shard_actor::stateful_pointer<kv_shard_state> self,
                                       std::shared_ptr<shard_init> init) {
  // Detached: this runs on the shard's own thread. Named so that top -H,
  // perf and /threads tell ingest's CPU from the requests'.
  pthread_setname_np(pthread_self(), "lmcc-shard");
  if (init->on_thread_start)
    init->on_thread_start();
  auto& st = self->state;
  st.monitor = init->monitor ? init->monitor : std::make_shared<shard_monitor>();
  st.remote_acks = std::make_unique<ack_batcher<caf::strong_actor_ptr>>(init->remote_ack_delay);
  st.index = init->index;
  st.ack_relay = init->ack_relay;
  st.release_policy = memory_release_policy{init->release};
  st.release_memory = std::move(init->release_memory);
  st.core = std::make_unique<kv_shard_core>(init->options, std::move(init->index),
                                            std::move(init->store), std::move(init->start));
  for (const auto& [h, incarnation] : init->drop_at_start)
    st.core->drop_holder(h, incarnation);
  if (!init->drop_at_start.empty()) {
    spdlog::info("store-stale-holders-dropped holders={}", init->drop_at_start.size());
    schedule_flush(self);
  }
  init.reset();
  arm_tick(self);
  self->set_exit_handler([self](caf::exit_msg& m) {
    // A clean stop leaves nothing pending behind, and what is cheap to
    // snapshot goes into slot snapshots (a faster next start).
    auto& core = *self->state.core;
    const uint64_t dirty = core.durable() ? core.dirty_entries() : 0;
    if (core.durable() && dirty <= core.options().stop_snapshot_entries) {
      const auto start = steady_now();
      const bool ok = core.snapshot_now(monotonic_ms(), [](auto&) {});
      spdlog::info("stop-snapshot entries={} ok={} seconds={:.3f}", dirty, ok,
                   std::chrono::duration<double>(steady_now() - start).count());
    }
    auto r = core.commit(monotonic_ms());
    if (!r.ok)
      spdlog::error("store-final-commit-failed error={}", r.error);
    publish(self);
    self->quit(m.reason);
  });
  return {
      [self](apply_atom, const kv_sub_batch& sb) {
        auto& st = self->state;
        st.core->apply(sb);
        if (auto& sender = st.senders[sb.stream]; !sender)
          sender = self->current_sender();
        schedule_flush(self);
        report_era_behind(self);
      },
      [self](apply_atom, const std::vector<kv_sub_batch>& sbs) {
        auto& st = self->state;
        for (const auto& sb : sbs) {
          st.core->apply(sb);
          if (auto& sender = st.senders[sb.stream]; !sender)
            sender = self->current_sender();
        }
        schedule_flush(self);
        report_era_behind(self);
      },
      [self](flush_atom) {
        self->state.flush_scheduled = false;
        flush(self);
      },
      [self](ack_atom) {
        self->state.remote_ack_scheduled = false;
        send_remote_acks(self, false);
      },
      [self](background_atom) {
        auto& st = self->state;
        st.background_scheduled = false;
        auto r = st.core->background_step(monotonic_ms());
        send_acks(self, r);
        if (r.ok)
          answer_round_waiters(self);
        if (!r.ok && !st.flush_scheduled) {
          st.flush_scheduled = true;
          self->delayed_send(self, std::chrono::milliseconds{50}, flush_atom::value);
        }
        schedule_background(self);
        publish(self);
      },
      [self](tick_atom) {
        auto& st = self->state;
        if (!st.tick.fire(steady_now()))
          return; // superseded by a sooner tick
        const uint64_t now = monotonic_ms();
        st.core->flush_if_idle(now);
        schedule_background(self);
        publish(self);
        if (st.release_memory &&
            st.release_policy.should_release(st.index->read().memory_bytes(), monotonic_ms()))
          st.release_memory();
        // Sleeps until its own next work; none (and no release owed): until
        // something arrives.
        auto next = st.core->next_idle_work_ms(now);
        if (st.release_memory && st.release_policy.owes())
          next = now;
        if (next)
          arm_tick(self, std::max(tick_interval, std::chrono::milliseconds{static_cast<int64_t>(
                                                     *next - std::min(*next, now))}));
      },
      [self](drain_atom) {
        auto& st = self->state;
        auto r = st.core->commit(monotonic_ms());
        send_acks(self, r);
        send_remote_acks(self, true); // whoever waits on the drain waits on them too
        publish(self);
        return r.ok && !st.core->work_pending();
      },
      [self](snapshot_atom) {
        auto& st = self->state;
        // An explicit round runs to the end in this handler (admin/tests).
        const bool ok =
            st.core->snapshot_now(monotonic_ms(), [self](auto& r) { send_acks(self, r); });
        if (ok)
          answer_round_waiters(self);
        publish(self);
        return ok;
      },
      [self](snapshot_atom, bool) -> caf::result<bool> {
        auto& st = self->state;
        if (!st.core->durable())
          return true; // nothing to make durable
        // A round running now began before the request: the one after it.
        const uint64_t rounds = st.core->counters().snapshot_rounds;
        const uint64_t target = rounds + (st.core->snapshot_running() ? 2 : 1);
        st.core->request_snapshot();
        auto rp = self->make_response_promise<bool>();
        st.round_waiters.emplace_back(target, rp);
        schedule_background(self);
        return rp;
      },
      [self](marks_atom, uint64_t worker_uid) { return self->state.core->marks_of(worker_uid); },
      [self](repair_atom, uint64_t slot) {
        auto& core = *self->state.core;
        if (slot >= core.options().slot_count)
          return;
        const uint64_t changed = core.repair_slot(static_cast<uint32_t>(slot), {});
        spdlog::info("slot-emptied slot={} changed={}", slot, changed);
        arm_tick(self);
      },
      [self](copy_atom, uint64_t slot) -> caf::result<slot_copy> {
        auto& core = *self->state.core;
        if (slot >= core.options().slot_count)
          return caf::make_error(caf::sec::invalid_argument,
                                 "slot " + std::to_string(slot) + " out of range");
        return core.copy_of(static_cast<uint32_t>(slot));
      },
      [self](install_atom, const slot_copy& copy) {
        auto& st = self->state;
        if (auto why = check_slot_copy(copy, st.core->options().slot_count); !why.empty()) {
          spdlog::warn("slot-copy-refused slot={} error={}", copy.slot, why);
          return copy_outcome{};
        }
        const auto outcome = st.core->install(copy);
        if (outcome.installed > 0 || !outcome.conflicts.empty())
          spdlog::info("slot-copy-installed slot={} holders={} changed={} waiting={} conflicts={}",
                       copy.slot, outcome.installed, outcome.changed, outcome.waiting,
                       outcome.conflicts.size());
        publish(self);
        arm_tick(self);
        return outcome;
      },
      [self](members_atom, const std::vector<uint64_t>& words) {
        self->state.core->set_ownership_words(words);
        publish(self);
      },
      [self](refill_atom, const std::vector<uint64_t>& slots) {
        std::vector<uint32_t> lost;
        for (uint64_t s : slots)
          lost.push_back(static_cast<uint32_t>(s));
        self->state.core->settle(lost);
      },
      [self](settled_atom) { self->state.core->settle_all(); },
      [self](resync_atom, const caf::actor& directory) { self->state.resync_to = directory; },
      [self](retire_atom, const std::vector<cluster::registration_ref>& known) {
        const size_t dropped = self->state.core->retire_older(known);
        if (dropped == 0)
          return;
        spdlog::info("store-stale-holders-dropped holders={} reason=newer-registration", dropped);
        schedule_flush(self);
        publish(self);
      },
  };
}

} // namespace lmcc::actors
