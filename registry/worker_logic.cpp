#include "registry/worker_logic.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>

namespace lmcc::actors {

namespace {

constexpr std::string_view refused_text = "Failed to start sync: worker already syncing with "
                                          "different sync_id or worker not found";

} // namespace

worker_logic::worker_logic(worker_config cfg, worker_outbox& out)
  : cfg_(std::move(cfg)), out_(out), out_stream_(cfg_.stream_base, cfg_.destinations),
    split_(cfg_.destinations) {
  for (const auto& name : cfg_.locations) {
    auto& loc = locations_[name];
    loc.holder = make_holder_id(cfg_.instance_id, cfg_.worker_id, name);
    loc.intro_sent.assign(cfg_.destinations, false);
    auto p = cfg_.start_pos.find(name);
    loc.pos = p != cfg_.start_pos.end() ? p->second : stream_pos{cfg_.incarnation, 0, 0, 0};
    loc.sent_to.assign(cfg_.destinations, loc.pos);
    loc.placement_since = loc.pos; // what came before is not this entity's to vouch for
    if (auto it = cfg_.last_seq.find(name); it != cfg_.last_seq.end()) {
      loc.last_seq = it->second;
      loc.durable = it->second; // what the takeover trusted
    }
    if (cfg_.restored) {
      loc.fault_window = fault_window_batches;
      auto e = cfg_.expected_next.find(name);
      loc.expect_first = e != cfg_.expected_next.end() ? e->second : std::optional<uint64_t>{0};
    }
  }
}

worker_logic::location_state& worker_logic::location(const std::string& name) {
  auto [it, inserted] = locations_.try_emplace(name);
  if (inserted) {
    it->second.holder = make_holder_id(cfg_.instance_id, cfg_.worker_id, name);
    it->second.intro_sent.assign(cfg_.destinations, false);
    // A location's stream begins with its registration's drop (which every
    // owner got, or implies from the first sub-batch of the registration).
    auto p = cfg_.start_pos.find(name);
    it->second.pos = p != cfg_.start_pos.end() ? p->second : stream_pos{cfg_.incarnation, 0, 0, 0};
    it->second.sent_to.assign(cfg_.destinations, it->second.pos);
    it->second.placement_since = it->second.pos;
    // A location first reported after a restart must start at seq 0.
    if (cfg_.restored)
      it->second.expect_first = std::optional<uint64_t>{0};
    // So must one after a re-registration (which dropped the holder): a new
    // process starts at 0. Anything else is an older process's frame read
    // late, or a process that re-registered and went on counting: either way
    // the index cannot know what the worker holds, and its successor may send
    // nothing more that would tell (on_batch).
    if (reregistered_) {
      it->second.expect_first = std::optional<uint64_t>{0};
      it->second.expect_reason = "first_frame_after_reregistration";
    }
    it->second.after_reregistration = reregistered_;
    if (reregistered_ && cfg_.strict_after_reregistration) {
      it->second.fault_window = fault_window_batches;
      it->second.fault_reason = "frames_out_of_sequence_after_reregistration";
    }
  }
  // Told once per entity, also a location it took over with the marks: a node
  // whose own re-registration of the worker cleared its locations learns them
  // again only from the home's entity, or it answers lookups without the
  // worker for good (guarded by worker_logic_test's
  // a_taken_over_entity_reports_a_locations_first_seq_0_even_without_a_mark).
  if (!it->second.announced) {
    it->second.announced = true;
    out_.new_location(name);
  }
  return it->second;
}

// -- ingest --------------------------------------------------------------------

void worker_logic::on_push(pushed_msg&& m) {
  const bool kv_ops = std::holds_alternative<msg::BatchedKVOperationMsg>(m.msg) ||
                      std::holds_alternative<msg::KVAdmitMsg>(m.msg) ||
                      std::holds_alternative<msg::KVEvictMsg>(m.msg);
  if (held_.active && !kv_ops)
    flush_held(); // a sync frame, say: after the batches before it
  if (kv_ops && read_before_registration(m))
    return;
  std::visit(
      [&](auto& x) {
        using M = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<M, msg::BatchedKVOperationMsg>) {
          on_batch(x, m.credits);
        } else if constexpr (std::is_same_v<M, msg::KVAdmitMsg> ||
                             std::is_same_v<M, msg::KVEvictMsg>) {
          // Legacy single-op messages are applied as one-op batches (spec 4.3.3).
          msg::BatchedKVOperationMsg b{x.instance_id, x.worker_id, x.location, {}};
          b.operations.push_back(msg::KVOpEvent{
              std::is_same_v<M, msg::KVAdmitMsg> ? msg::OpType::admit : msg::OpType::evict, x.key,
              x.seq_num});
          on_batch(b, m.credits);
        } else if constexpr (std::is_same_v<M, msg::FullSyncBatchMsg> ||
                             std::is_same_v<M, msg::FullSyncEndMsg>) {
          if (gate_ != gate::open && x.sync_id == sync_id_) {
            out_.session_input(std::move(m));
            return;
          }
          if constexpr (std::is_same_v<M, msg::FullSyncBatchMsg>)
            spdlog::warn("full-sync-batch-dropped instance={} worker={} sync_id={} batch_id={} "
                         "keys={} reason=no-matching-session",
                         cfg_.instance_id, cfg_.worker_id.to_string(), x.sync_id,
                         x.batch_id.to_string(), x.keys.size());
          else
            spdlog::warn("full-sync-end-ignored instance={} worker={} sync_id={} "
                         "reason=no-running-session",
                         cfg_.instance_id, cfg_.worker_id.to_string(), x.sync_id);
          out_.give_credits(m.credits);
        } else {
          out_.give_credits(m.credits);
        }
      },
      m.msg);
}

bool worker_logic::read_before_registration(const pushed_msg& m) {
  if (m.read_under == 0 || m.read_under >= cfg_.incarnation)
    return false;
  // One LMCache controller reads a worker's frames from one queue: an older
  // process's frames read before the registration are cleared by it. Here
  // they can come later -- forwarded by a node cut off from this one and
  // delivered at the heal, held in a takeover -- and, numbered from 0 like
  // the new process's first frames, nothing else tells them apart: kept, the
  // older process's keys would stay under the newer one (guarded by
  // worker_logic_stale_read_test and test_partitions.py's
  // test_an_older_process_frames_delivered_at_the_heal_are_not_kept).
  ++stale_read_dropped_;
  out_.give_credits(m.credits);
  if (cfg_.registered_here && !m.forwarded)
    return true; // read here before the registration was published: the older one's
  // Read by a node that had not heard of this registration yet: the older
  // process's, or the new one's first frames. Dropped either way, and one
  // full sync (cheap: the new process has just started) restores the rest.
  if (!stale_read_asked_ && gate_ == gate::open) {
    stale_read_asked_ = true;
    const auto* b = std::get_if<msg::BatchedKVOperationMsg>(&m.msg);
    spdlog::warn("seq-gap-proven instance={} worker={} location={} incarnation={} read_under={} "
                 "reason=frames_read_before_registration action=full-sync-requested",
                 cfg_.instance_id, cfg_.worker_id.to_string(), b ? b->location : "?",
                 cfg_.incarnation, m.read_under);
    out_.request_resync("frames_read_before_registration");
  }
  return true;
}

bool worker_logic::continues_held(const msg::BatchedKVOperationMsg& m) const {
  if (!held_.active || m.location != held_.location || m.operations.empty())
    return false;
  const auto it = locations_.find(m.location);
  return it != locations_.end() && it->second.last_seq && !it->second.expect_first &&
         m.operations.front().seq_num.bits() == *it->second.last_seq + 1;
}

void worker_logic::flush_held() {
  if (!held_.active)
    return;
  held_.active = false;
  const uint64_t credits = std::exchange(held_.credits, 0);
  // Present: nothing removes a location while a round runs (on_reset, which
  // clears them, flushes first).
  auto& loc = locations_.at(held_.location);
  send_ops(loc, held_.location, std::exchange(held_.ops, {}), held_.mark, credits);
}

void worker_logic::on_batch(const msg::BatchedKVOperationMsg& m, uint64_t credits) {
  if (held_.active && !continues_held(m))
    flush_held();
  if (m.operations.empty() || retired_) {
    out_.give_credits(credits);
    return;
  }
  if (gate_ != gate::open) {
    ++discarded_; // spec 4.8.5: increments are discarded while a sync runs
    out_.give_credits(credits);
    return;
  }
  auto& loc = location(m.location);
  const uint64_t first = m.operations.front().seq_num.bits();
  // A seq back at 0 -- or starting at 0 at an entity that took the worker
  // over or restored it, which cannot tell the first frame of its own
  // registration on this location from a newer process's -- may be a new
  // process's frame reaching the old registration's entity (restart_race.hpp).
  // So may a seq that goes back without reaching 0: the new process's first
  // frames went to another node (the old entity sees a lower seq than it
  // expects, and the renewal then drops the keys it applied; guarded by
  // worker_logic_test's a_seq_that_goes_back_without_reaching_zero_is_reported_too).
  const auto expected_next = loc.next_seq();
  const bool went_back = expected_next && first < *expected_next;
  if ((first == 0 && (loc.last_seq || cfg_.restored)) || went_back)
    out_.seq_started(cfg_.incarnation);
  bool resync_asked = false;
  if (loc.expect_first) {
    const auto expected = *loc.expect_first;
    const char* reason = loc.expect_reason;
    loc.expect_first.reset();
    loc.expect_reason = "seq_gap_after_restart";
    if (expected && first != *expected) {
      spdlog::warn("seq-gap-proven instance={} worker={} location={} expected={} got={} "
                   "reason={} action=full-sync-requested",
                   cfg_.instance_id, cfg_.worker_id.to_string(), m.location, *expected, first,
                   reason);
      out_.request_resync(reason);
      resync_asked = true;
      loc.fault_window = 0; // one full sync covers the loss
    }
  }
  if (loc.after_reregistration && first == 0 && loc.last_seq) {
    // A new process starts at seq 0. The batches applied before it since the
    // re-registration were frames of older processes, read after their
    // successor registered (they waited in ZMQ's queues, or behind a node
    // that held ingest back): their cache is gone, so are they.
    spdlog::warn("worker-stale-frames-dropped instance={} worker={} location={} last_seq={} "
                 "reason=sent-before-reregistration",
                 cfg_.instance_id, cfg_.worker_id.to_string(), m.location, *loc.last_seq);
    drop_location(loc, stream_pos{cfg_.incarnation, next_era(loc), 0, 0});
    forget_durable(loc);
    loc.last_seq.reset();
  } else if (loc.last_seq && first < *loc.last_seq) {
    // The worker's seq went back: a sequence of its own started again. The
    // owners hear that the watermark restarts, or a cluster's shard would
    // take the batch for a stale copy of this entity replaying older frames
    // (kv_shard_options::fence_older_batches) and drop it.
    forget_durable(loc);
    const uint64_t every_destination =
        cfg_.destinations >= 64 ? ~uint64_t{0} : (uint64_t{1} << cfg_.destinations) - 1;
    send_ops(loc, m.location, {}, seq_mark{}, 0, every_destination);
  }
  std::optional<std::pair<uint64_t, uint64_t>> gap;
  std::optional<uint64_t> last = loc.last_seq;
  // In a round the ops join the held ones (a continuation, or the first).
  std::vector<kv_op> own_ops;
  std::vector<kv_op>& ops = in_round_ ? held_.ops : own_ops;
  if (const size_t needed = ops.size() + m.operations.size(); needed > ops.capacity())
    ops.reserve(std::max(needed, 2 * ops.capacity())); // grows geometrically over a round
  uint64_t max_seq = 0;
  for (const auto& op : m.operations) {
    const uint64_t seq = op.seq_num.bits();
    if (last && seq != *last + 1 && !gap)
      gap = std::make_pair(*last + 1, seq);
    last = seq;
    max_seq = std::max(max_seq, seq);
    ops.push_back(kv_op{op.key.bits(), op.op_type == msg::OpType::admit});
  }
  loc.last_seq = last;
  // A round's sub-batch holds the ops of all its batches: its event began
  // before the first of them.
  if (!(in_round_ && held_.active && held_.location == m.location))
    loc.event_from = loc.pos;
  advance(loc, max_seq);
  if (gap) {
    loc.batches_since_gap = 0;
    out_.seq_gap(m.location, gap->first, gap->second);
    if (loc.fault_window > 0 && !resync_asked) {
      spdlog::warn("seq-gap-proven instance={} worker={} location={} expected={} got={} "
                   "reason={} action=full-sync-requested",
                   cfg_.instance_id, cfg_.worker_id.to_string(), m.location, gap->first,
                   gap->second, loc.fault_reason);
      out_.request_resync(loc.fault_reason);
      loc.fault_window = 0;
    }
  } else if (loc.batches_since_gap <= recent_gap_batches) {
    ++loc.batches_since_gap;
  }
  if (loc.fault_window > 0)
    --loc.fault_window;
  if (in_round_) {
    if (!held_.active)
      held_.location = m.location;
    held_.active = true;
    held_.mark = seq_mark{seq_state::tracking, *last};
    held_.credits += credits;
    return;
  }
  send_ops(loc, m.location, std::move(ops), seq_mark{seq_state::tracking, *last}, credits);
}

void worker_logic::send_ops(location_state& loc, const std::string& name, std::vector<kv_op>&& ops,
                            std::optional<seq_mark> mark, uint64_t credits, uint64_t also_mark_to) {
  auto make = [&](uint32_t d, std::vector<kv_op>&& part, uint64_t placement_epoch) {
    kv_sub_batch sb;
    sb.holder = loc.holder;
    sb.incarnation = cfg_.incarnation;
    sb.prev = loc.sent_to[d];
    sb.end = loc.pos;
    loc.sent_to[d] = loc.pos;
    sb.placement_epoch = placement_epoch;
    sb.placement_since = loc.placement_since;
    if (mark) {
      sb.has_mark = true;
      sb.mark = *mark;
    }
    if (loc.durable) {
      sb.has_durable = true;
      sb.durable_seq = *loc.durable;
    }
    if (!loc.intro_sent[d]) {
      sb.has_intro = true;
      sb.intro_worker_uid = cfg_.uid;
      sb.intro_location = name;
      loc.intro_sent[d] = true;
    }
    sb.ops = std::move(part);
    return sb;
  };
  if (cfg_.destinations == 1 || !cfg_.placement) {
    auto sb = make(0, std::move(ops), 0);
    out_stream_.stamp(0, sb, credits);
    out_.send(0, std::move(sb));
    return;
  }
  const auto masks = cfg_.placement->load();
  const auto& table = *masks;
  if (table.epoch != loc.placement_epoch) {
    // A new placement: the slots a destination gains get ops from here on.
    if (loc.placement_epoch != unknown_epoch)
      loc.placement_since = ops.empty() ? loc.pos : loc.event_from;
    loc.placement_epoch = table.epoch;
  }
  for (const auto& op : ops)
    for_each_destination(table[slot_of(op.key, cfg_.slot_count)],
                         [&](uint32_t d) { split_[d].push_back(op); });
  // The mark destinations keep the watermark (worker_config::mark_mask).
  const uint64_t marks_at = cfg_.mark_slot ? table[*cfg_.mark_slot] : cfg_.mark_mask;
  const uint64_t mark_to = mark ? (marks_at == 0 ? 1 : marks_at) | also_mark_to : 0;
  uint64_t total = 0;
  uint32_t last_used = cfg_.destinations;
  for (uint32_t d = 0; d < cfg_.destinations; ++d)
    if (!split_[d].empty() || ((mark_to >> d) & 1U)) {
      last_used = d;
      total += split_[d].size();
    }
  // Credits are shared by op count over every copy (replicas included), so
  // they all come back only once every owner acknowledged its copy.
  uint64_t left = credits;
  if (last_used == cfg_.destinations) {
    out_.give_credits(credits); // nothing to send
    return;
  }
  if (total == 0)
    total = 1;
  const bool track = mark && mark->state == seq_state::tracking;
  if (track) {
    loc.unacked.push_back({mark->seq, {}});
    ++loc.tracked_batches;
  }
  for (uint32_t d = 0; d < cfg_.destinations; ++d) {
    if (split_[d].empty() && !((mark_to >> d) & 1U))
      continue;
    const uint64_t share = d == last_used ? left : credits * split_[d].size() / total;
    left -= share;
    auto sb = make(d, std::move(split_[d]), table.epoch);
    split_[d] = {};
    out_stream_.stamp(d, sb, share);
    if (track) {
      loc.unacked.back().numbers.emplace_back(d, sb.number);
      loc.behind_mask |= uint64_t{1} << d;
    }
    out_.send(d, std::move(sb));
  }
}

void worker_logic::advance_durable() {
  for (auto& [name, loc] : locations_) {
    bool advanced = false;
    while (!loc.unacked.empty()) {
      const auto& b = loc.unacked.front();
      const bool acked = std::all_of(b.numbers.begin(), b.numbers.end(), [&](const auto& dn) {
        return out_stream_.acked_up_to(dn.first) >= dn.second;
      });
      if (!acked)
        break;
      if (!loc.durable || b.seq > *loc.durable) {
        loc.durable = b.seq;
        advanced = true;
      }
      loc.unacked.pop_front();
    }
    if (advanced && loc.unacked.empty()) {
      if (!loc.durable_untold) // the quiet period counts from the first wish
        loc.untold_since_batch = loc.tracked_batches;
      loc.durable_untold = true;
      out_.durable_flush_wanted();
    }
  }
}

void worker_logic::flush_durable(bool only_if_quiet) {
  flush_held();
  for (auto& [name, loc] : locations_) {
    if (!loc.durable_untold || !loc.unacked.empty())
      continue; // a batch in flight: its acks ask again
    if (only_if_quiet && loc.tracked_batches != loc.untold_since_batch) {
      // Still sending (and its owners got the durable seq with the batches
      // since): ask again, the flush is for a worker that went quiet.
      loc.untold_since_batch = loc.tracked_batches;
      out_.durable_flush_wanted();
      continue;
    }
    loc.durable_untold = false;
    if (gate_ != gate::open || retired_ || !loc.last_seq)
      continue;
    // Every shard that got one of these batches hears it is durable now (a
    // takeover may ask any of them), the mark owners always.
    const uint64_t behind = loc.behind_mask;
    send_ops(loc, name, {}, seq_mark{seq_state::tracking, *loc.last_seq}, 0, behind);
    loc.behind_mask = 0;
  }
}

std::optional<uint64_t> worker_logic::next_seq(const std::string& location) const {
  auto it = locations_.find(location);
  return it == locations_.end() ? std::nullopt : it->second.next_seq();
}

void worker_logic::check_next_batches() {
  flush_held();
  for (auto& [name, loc] : locations_) {
    if (loc.batches_since_gap <= recent_gap_batches && gate_ == gate::open) {
      spdlog::warn("seq-gap-proven instance={} worker={} location={} batches_since_gap={} "
                   "reason=frames_lost_with_node action=full-sync-requested",
                   cfg_.instance_id, cfg_.worker_id.to_string(), name, loc.batches_since_gap);
      loc.batches_since_gap = recent_gap_batches + 1;
      out_.request_resync("frames_lost_with_node");
      continue;
    }
    loc.fault_window = fault_window_batches;
    loc.fault_reason = "frames_lost_with_node";
    if (loc.last_seq && !loc.expect_first) {
      loc.expect_first = std::optional<uint64_t>{*loc.last_seq + 1};
      loc.expect_reason = "frames_lost_with_node";
    }
  }
}

std::vector<location_mark> worker_logic::marks() const {
  using persistence::seq_mark;
  using persistence::seq_state;
  std::vector<location_mark> out;
  for (const auto& [name, loc] : locations_) {
    location_mark m{name, cfg_.incarnation, seq_mark{seq_state::resynced, 0}, loc.pos};
    if (gate_ != gate::open && name == sync_location_)
      m.mark = seq_mark{seq_state::syncing, 0};
    else if (loc.last_seq)
      m.mark = seq_mark{seq_state::tracking, *loc.last_seq};
    else if (loc.expect_first && *loc.expect_first)
      m.mark = **loc.expect_first == 0 ? seq_mark{}
                                       : seq_mark{seq_state::tracking, **loc.expect_first - 1};
    out.push_back(std::move(m));
  }
  return out;
}

void worker_logic::on_ack(uint64_t stream, uint64_t up_to) {
  flush_held();
  if (uint64_t released = out_stream_.ack(stream, up_to); released > 0)
    out_.give_credits(released);
  if (cfg_.destinations > 1 && cfg_.placement)
    advance_durable();
  maybe_go();
}

// -- full sync -------------------------------------------------------------------

msg::FullSyncStartRetMsg worker_logic::on_sync_start(const msg::FullSyncStartMsg& m) {
  flush_held();
  if (retired_ || (gate_ != gate::open && sync_id_ != m.sync_id))
    return msg::FullSyncStartRetMsg{m.sync_id, false, std::string{refused_text}};
  const uint64_t batches = m.batch_count.is_negative() ? 0 : m.batch_count.bits();
  if (batches > max_batch_count)
    return msg::FullSyncStartRetMsg{m.sync_id, false,
                                    "Failed to start sync: batch_count " +
                                        m.batch_count.to_string() + " exceeds the limit of " +
                                        std::to_string(max_batch_count)};
  auto& loc = location(m.location);
  loc.last_seq.reset();     // the next increment re-initialises the tracker
  loc.expect_first.reset(); // the sync rebuilds the location
  loc.batches_since_gap = recent_gap_batches + 1;
  loc.fault_window = 0;
  loc.durable.reset(); // the sync starts the location's seqs over
  loc.unacked.clear();
  sync_id_ = m.sync_id;
  sync_location_ = m.location;
  gate_ = gate::draining;
  stale_read_asked_ = false; // a frame read before the registration after this asks again
  // The sync is a new era of the location: its session's drop starts it.
  const uint64_t era = next_era(loc);
  new_era(loc, stream_pos{cfg_.incarnation, era, 0, 0});
  out_.session_start(session_params{m.sync_id, m.location, loc.holder, cfg_.uid, cfg_.incarnation,
                                    era, m.total_keys.is_negative() ? 0 : m.total_keys.bits(),
                                    batches});
  maybe_go();
  return msg::FullSyncStartRetMsg{m.sync_id, true, std::nullopt};
}

void worker_logic::maybe_go() {
  if (gate_ == gate::draining && out_stream_.idle()) {
    gate_ = gate::syncing;
    out_.session_go();
  }
}

void worker_logic::on_session_ended(const std::string& sync_id, bool completed,
                                    const session_stream& left) {
  if (sync_id != sync_id_ || gate_ == gate::open)
    return; // an older session's news
  gate_ = gate::open;
  // The location's stream goes on from where the session left it.
  if (auto it = locations_.find(sync_location_);
      it != locations_.end() && left.sent_to.size() == cfg_.destinations) {
    auto& loc = it->second;
    loc.sent_to = left.sent_to;
    for (const auto& p : left.sent_to)
      loc.pos = std::max(loc.pos, p);
    loc.placement_epoch = left.placement_epoch;
    loc.placement_since = left.placement_since;
  }
  spdlog::debug("full-sync-gate-open instance={} worker={} sync_id={} completed={}",
                cfg_.instance_id, cfg_.worker_id.to_string(), sync_id, completed);
}

// -- lifecycle --------------------------------------------------------------------

void worker_logic::drop_all(uint64_t incarnation) {
  for (auto& [name, loc] : locations_)
    drop_location(loc, stream_pos{incarnation, 0, 0, 0});
}

void worker_logic::drop_location(location_state& loc, const stream_pos& at) {
  new_era(loc, at);
  for (uint32_t d = 0; d < cfg_.destinations; ++d) {
    kv_sub_batch sb;
    sb.holder = loc.holder;
    sb.incarnation = at.incarnation;
    sb.drop = true;
    sb.prev = at;
    sb.end = at;
    sb.has_mark = true;
    sb.mark = seq_mark{};
    out_stream_.stamp(d, sb, 0);
    out_.send(d, std::move(sb));
  }
}

std::vector<uint64_t> session_stream::words() const {
  std::vector<stream_pos> all = sent_to;
  all.push_back(placement_since);
  auto out = position_words(all);
  out.push_back(placement_epoch);
  return out;
}

session_stream session_stream::from_words(const std::vector<uint64_t>& words) {
  session_stream s;
  if (words.size() < 5 || (words.size() - 1) % 4 != 0)
    return s;
  s.placement_epoch = words.back();
  auto all = positions_of(std::vector<uint64_t>(words.begin(), words.end() - 1));
  s.placement_since = all.back();
  all.pop_back();
  s.sent_to = std::move(all);
  return s;
}

void worker_logic::advance(location_state& loc, uint64_t max_seq) {
  if (max_seq > loc.pos.n)
    loc.pos = stream_pos{loc.pos.incarnation, loc.pos.era, max_seq, 0};
  else
    ++loc.pos.sub;
}

void worker_logic::new_era(location_state& loc, const stream_pos& at) {
  loc.pos = at;
  loc.sent_to.assign(cfg_.destinations, at);
  loc.placement_since = at; // the drop empties every slot of every owner
}

uint64_t worker_logic::next_era(const location_state& loc) const {
  const uint64_t clock = cfg_.era_clock ? cfg_.era_clock() : 0;
  return std::max(loc.pos.era + 1, clock);
}

void worker_logic::forget_durable(location_state& loc) {
  loc.durable.reset();
  loc.unacked.clear();
  loc.durable_untold = false;
}

void worker_logic::on_reset(uint64_t incarnation) {
  flush_held();
  drop_all(incarnation);
  reregistered_ = true;
  cfg_.registered_here = true; // only this node's directory resets an entity
  stale_read_asked_ = false;
  cfg_.incarnation = incarnation;
  cfg_.restored = false; // a new registration: nothing to continue
  cfg_.start_pos.clear();
  locations_.clear();
  gate_ = gate::open;
  sync_id_.clear();
}

void worker_logic::on_retire() {
  flush_held();
  // One above the registration's: sub-batches of it still in flight (from the
  // session, say) land after the drop and are ignored.
  drop_all(cfg_.incarnation + 1);
  retired_ = true;
  gate_ = gate::open;
  sync_id_.clear();
}

} // namespace lmcc::actors
