#include "actors/cluster/peer_link.hpp"

#include "clock/clock.hpp"
#include "cluster/hash.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>

namespace lmcc::actors {
namespace {

using link_self = peer_link_actor::stateful_pointer<peer_link_state>;

void ack_sender(link_self self, const caf::strong_actor_ptr& sender, uint64_t stream,
                uint64_t number) {
  if (sender)
    self->send(caf::actor_cast<ack_receiver_actor>(sender), ack_atom::value, stream, number);
}

void publish_counts(link_self self) {
  auto& st = self->state;
  if (!st.cfg.counters)
    return;
  uint64_t n = 0;
  for (const auto& [stream, q] : st.streams)
    n += q.size();
  st.cfg.counters->queued_sub_batches = n;
  st.cfg.counters->queued_ops = st.queued_ops;
}

/// Drops the oldest queued sub-batches while more than buffer_ops ops wait.
void enforce_bound(link_self self) {
  auto& st = self->state;
  while (st.queued_ops > st.cfg.buffer_ops) {
    // The stream whose front is oldest.
    auto oldest = st.streams.end();
    for (auto it = st.streams.begin(); it != st.streams.end(); ++it)
      if (!it->second.empty() && (oldest == st.streams.end() ||
                                  it->second.front().sent_at < oldest->second.front().sent_at))
        oldest = it;
    if (oldest == st.streams.end())
      break;
    auto p = std::move(oldest->second.front());
    oldest->second.pop_front();
    if (p.in_flight && st.in_flight > 0)
      --st.in_flight;
    st.queued_ops -= p.sb.ops.size();
    if (st.cfg.counters)
      st.cfg.counters->dropped_ops += p.sb.ops.size();
    if (!p.released)
      ack_sender(self, p.sender, p.sb.stream, p.sb.number);
    spdlog::warn("peer-link-dropped peer={} stream={} number={} ops={} reason=buffer-full",
                 st.cfg.peer_id, p.sb.stream, p.sb.number, p.sb.ops.size());
  }
}

/// Acks to their senders the queued sub-batches that are overdue -- or all of
/// them when the peer is down (`everything`): the failure detector already
/// decided, so a sender (a full sync, a drain) need not wait out the timeout.
/// They stay queued and are re-sent when the peer joins again.
uint64_t release(link_self self, bool everything) {
  auto& st = self->state;
  const auto now = steady_now();
  uint64_t released = 0;
  for (auto& [stream, q] : st.streams) {
    // Cumulative: release the longest prefix that is overdue.
    uint64_t up_to = 0;
    caf::strong_actor_ptr sender;
    for (auto& p : q) {
      if (!everything && now - p.sent_at < st.cfg.replication_timeout)
        break;
      if (!p.released) {
        p.released = true;
        up_to = p.sb.number;
        sender = p.sender;
        ++released;
      }
    }
    if (up_to != 0)
      ack_sender(self, sender, stream, up_to);
  }
  return released;
}

void on_timeout_check(link_self self) {
  auto& st = self->state;
  const uint64_t released = release(self, false);
  if (released > 0) {
    if (st.cfg.counters)
      st.cfg.counters->timeouts += released;
    spdlog::warn("replication-timeout peer={} sub_batches={} live={}", st.cfg.peer_id, released,
                 static_cast<bool>(st.remote));
  }
}

/// How often an armed link looks for sub-batches past the replication timeout.
constexpr auto timeout_check_interval = std::chrono::milliseconds{200};

/// Arms the timeout check while a sub-batch waits for its ack and nobody was
/// told it is held yet; an idle link (everything acked or released) has no
/// timer at all. Released sub-batches are a prefix of their stream's queue
/// (release() takes prefixes, and a link to a peer found down releases each
/// one as it comes), so a stream's last one tells whether any waits.
void arm_timeout_check(link_self self) {
  auto& st = self->state;
  if (st.timeout_check_armed)
    return;
  const bool waiting = !st.outbox.empty() || // an outbox held back by an unacknowledged message
                       std::any_of(st.streams.begin(), st.streams.end(), [](const auto& entry) {
                         return !entry.second.empty() && !entry.second.back().released;
                       });
  if (!waiting)
    return;
  st.timeout_check_armed = true;
  self->delayed_send(self, timeout_check_interval, tick_atom::value);
}

/// How long a message may stay unacknowledged before what queued behind it
/// goes anyway (an ack lost to a peer's restart, a peer that drops a
/// sub-batch without acking it): a stall costs at most this, never the
/// replication timeout.
constexpr auto in_flight_patience = std::chrono::milliseconds{100};

/// Sends the outbox now unless a message is unacknowledged (then the ack, or
/// the timeout check past in_flight_patience, sends it).
void schedule_flush(link_self self) {
  auto& st = self->state;
  if (st.flush_scheduled || st.outbox.empty() || !st.remote)
    return;
  const bool unacknowledged = st.in_flight > st.outbox.size(); // a sent one is, not just the outbox
  if (unacknowledged && steady_now() - st.last_flush < in_flight_patience)
    return;
  // Lands behind whatever queued meanwhile: one send for all.
  st.flush_scheduled = true;
  self->send(self, flush_atom::value);
}

void on_ack(link_self self, uint64_t stream, uint64_t number) {
  auto& st = self->state;
  auto it = st.streams.find(stream);
  if (it == st.streams.end())
    return;
  auto& q = it->second;
  caf::strong_actor_ptr sender;
  bool owed = false;
  while (!q.empty() && q.front().sb.number <= number) {
    sender = q.front().sender;
    owed = owed || !q.front().released;
    if (q.front().in_flight && st.in_flight > 0)
      --st.in_flight;
    st.queued_ops -= q.front().sb.ops.size();
    q.pop_front();
  }
  if (owed)
    ack_sender(self, sender, stream, number);
  if (q.empty())
    st.streams.erase(it);
  publish_counts(self);
  schedule_flush(self);
}

void enqueue(link_self self, kv_sub_batch&& sb, caf::strong_actor_ptr sender) {
  auto& st = self->state;
  if (!sb.ops.empty() && st.cfg.planted.strikes(faults::planted_bug::skip_replica)) {
    ack_sender(self, sender, sb.stream, sb.number); // planted bug: "replicated", never sent
    return;
  }
  const bool to_send = static_cast<bool>(st.remote);
  if (to_send)
    st.outbox.push_back(sb);
  st.queued_ops += sb.ops.size();
  const uint64_t stream = sb.stream;
  auto& q = st.streams[stream];
  q.push_back(
      peer_link_state::pending{std::move(sb), std::move(sender), steady_now(), false, to_send});
  if (to_send) {
    ++st.in_flight; // in the outbox now, sent with it
    schedule_flush(self);
  }
  if (st.peer_down) {
    // The peer is down: held for it at once (queued for its return).
    q.back().released = true;
    ack_sender(self, q.back().sender, stream, q.back().sb.number);
  }
  enforce_bound(self);
  publish_counts(self);
  arm_timeout_check(self);
}

} // namespace

peer_link_actor::behavior_type
peer_link_main(peer_link_actor::stateful_pointer<peer_link_state> self, peer_link_config cfg) {
  self->state.cfg = std::move(cfg);
  return {
      [self](apply_atom, kv_sub_batch& sb) {
        enqueue(self, std::move(sb), self->current_sender());
      },
      [self](apply_atom, std::vector<kv_sub_batch>& sbs) {
        for (auto& sb : sbs)
          enqueue(self, std::move(sb), self->current_sender());
      },
      [self](ack_atom, uint64_t stream, uint64_t number) { on_ack(self, stream, number); },
      [self](ack_atom, const std::vector<cluster::stream_ack>& acks) {
        for (const auto& a : acks)
          on_ack(self, a.stream, a.number);
      },
      [self](peer_atom, caf::actor& remote) {
        auto& st = self->state;
        st.remote = std::move(remote);
        st.peer_down = !st.remote;
        st.in_flight = 0; // down: nothing waits for its ack; up: all is re-sent below
        for (auto& [stream, q] : st.streams)
          for (auto& p : q)
            p.in_flight = static_cast<bool>(st.remote);
        if (!st.remote) {
          st.outbox.clear(); // kept in `streams`; re-sent on the next join
          const uint64_t released = release(self, true);
          spdlog::info("peer-link-down peer={} queued_ops={} released_sub_batches={}",
                       st.cfg.peer_id, st.queued_ops, released);
          return;
        }
        // Everything unacknowledged, in order per stream, in messages of at
        // most 256 sub-batches; what the outbox held is among it.
        st.outbox.clear();
        uint64_t n = 0;
        std::vector<kv_sub_batch> chunk;
        auto send_chunk = [&] {
          if (!chunk.empty())
            self->send(caf::actor_cast<kv_shard_actor>(st.remote), apply_atom::value,
                       std::move(chunk));
          chunk = {};
        };
        for (auto& [stream, q] : st.streams)
          for (auto& p : q) {
            chunk.push_back(p.sb);
            ++n;
            if (chunk.size() == 256)
              send_chunk();
          }
        send_chunk();
        st.in_flight = n;
        st.last_flush = steady_now();
        if (st.cfg.counters)
          st.cfg.counters->resent_sub_batches += n;
        spdlog::info("peer-link-up peer={} resent_sub_batches={} queued_ops={}", st.cfg.peer_id, n,
                     st.queued_ops);
      },
      [self](flush_atom) {
        auto& st = self->state;
        st.flush_scheduled = false;
        if (!st.remote || st.outbox.empty()) {
          st.outbox.clear();
          return;
        }
        st.last_flush = steady_now();
        if (st.cfg.counters) {
          st.cfg.counters->sent_sub_batches += st.outbox.size();
          st.cfg.counters->sent_messages += 1;
          st.cfg.counters->sent_mark_only += static_cast<uint64_t>(std::count_if(
              st.outbox.begin(), st.outbox.end(), [](const auto& sb) { return sb.ops.empty(); }));
        }
        if (st.outbox.size() == 1)
          self->send(caf::actor_cast<kv_shard_actor>(st.remote), apply_atom::value,
                     std::move(st.outbox.front()));
        else
          self->send(caf::actor_cast<kv_shard_actor>(st.remote), apply_atom::value,
                     std::move(st.outbox));
        st.outbox = {};
      },
      [](background_atom) {},
      [](ack_atom) {},
      [self](tick_atom) {
        self->state.timeout_check_armed = false;
        on_timeout_check(self);
        publish_counts(self);
        schedule_flush(self); // an ack that stalls past in_flight_patience
        arm_timeout_check(self);
      },
      // The senders' own drains wait for these acks (or their timeouts).
      [](drain_atom) { return true; },
      [](snapshot_atom) { return true; },
      [](snapshot_atom, bool) { return true; },
      [](marks_atom, uint64_t) { return std::vector<location_mark>{}; },
      [](repair_atom, uint64_t) {},
      [](copy_atom, uint64_t) -> caf::result<slot_copy> {
        return caf::make_error(caf::sec::unexpected_message, "a peer link keeps no slot copies");
      },
      [](install_atom, const slot_copy&) { return copy_outcome{}; },
      [](members_atom, const std::vector<uint64_t>&) {},
      [](refill_atom, const std::vector<uint64_t>&) {},
      [](settled_atom) {},
      // The peer's own directory tells its shard of the registrations.
      [](retire_atom, const std::vector<cluster::registration_ref>&) {},
      [](resync_atom, const caf::actor&) {},
  };
}

} // namespace lmcc::actors
