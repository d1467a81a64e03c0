#include "registry/sync_session_logic.hpp"

#include <spdlog/spdlog.h>

namespace lmcc::actors {

sync_session_logic::sync_session_logic(session_config cfg, session_outbox& out)
  : cfg_(std::move(cfg)), out_(out), stream_(cfg_.stream_base, cfg_.destinations),
    intro_sent_(cfg_.destinations, false), split_(cfg_.destinations) {}

void sync_session_logic::give_buffered() {
  for (auto& m : buffered_)
    out_.give_credits(m.credits);
  buffered_.clear();
}

void sync_session_logic::start(const session_params& p, double now) {
  give_buffered();
  if (p.holder != params_.holder)
    intro_sent_.assign(cfg_.destinations, false);
  params_ = p;
  pos_ = stream_pos{p.incarnation, p.era, 0, 0};
  left_ = session_stream{std::vector<stream_pos>(cfg_.destinations, pos_), UINT64_MAX, pos_};
  book_.emplace(p.sync_id, p.total_keys, p.batch_count, now);
  go_ = false;
  ending_ = false;
  actual_total_keys_ = 0;
  out_.report(sync_phase::syncing, book_->missing_batch_count());
}

void sync_session_logic::go() {
  // A sync that failed (or ended) before the worker said go sends nothing.
  if (!book_ || go_ || book_->phase() != sync_phase::syncing)
    return;
  go_ = true;
  // Whatever the location held goes first; the mark says its entries are
  // partial until the sync ends.
  send_mark(seq_mark{seq_state::syncing, 0}, true);
  auto buffered = std::move(buffered_);
  buffered_.clear();
  const double now = book_->last_activity();
  for (auto& m : buffered)
    on_input(std::move(m), now);
}

void sync_session_logic::send_mark(seq_mark mark, bool drop) {
  // The drop is the era's first event; the end mark an event of its own, so
  // that every destination stands at the same place when the sync ends.
  const stream_pos before = pos_;
  if (!drop)
    ++pos_.sub;
  const uint64_t epoch = placement_epoch(before);
  for (uint32_t d = 0; d < cfg_.destinations; ++d) {
    kv_sub_batch sb;
    sb.holder = params_.holder;
    sb.incarnation = params_.incarnation;
    sb.drop = drop;
    sb.prev = left_.sent_to[d];
    sb.end = pos_;
    sb.placement_epoch = epoch;
    sb.placement_since = left_.placement_since;
    left_.sent_to[d] = pos_;
    sb.has_mark = true;
    sb.mark = mark;
    if (!intro_sent_[d]) {
      sb.has_intro = true;
      sb.intro_worker_uid = params_.worker_uid;
      sb.intro_location = params_.location;
      intro_sent_[d] = true;
    }
    stream_.stamp(d, sb, 0);
    out_.send(d, std::move(sb));
  }
}

uint64_t sync_session_logic::placement_epoch(const stream_pos& before) {
  const uint64_t epoch = cfg_.placement ? cfg_.placement->load()->epoch : 0;
  if (epoch != left_.placement_epoch) {
    // The drop empties every slot, so a placement seen first at it needs no
    // start; one that changes later gives the gained slots ops from here on.
    if (left_.placement_epoch != UINT64_MAX)
      left_.placement_since = before;
    left_.placement_epoch = epoch;
  }
  return epoch;
}

void sync_session_logic::on_input(pushed_msg&& m, double now) {
  if (auto* batch = std::get_if<msg::FullSyncBatchMsg>(&m.msg))
    on_batch(*batch, m.credits, now);
  else if (auto* end = std::get_if<msg::FullSyncEndMsg>(&m.msg))
    on_end(*end, m.credits, now);
  else
    out_.give_credits(m.credits);
}

void sync_session_logic::on_batch(const msg::FullSyncBatchMsg& m, uint64_t credits, double now) {
  if (!book_ || m.sync_id != params_.sync_id || book_->phase() != sync_phase::syncing || ending_) {
    spdlog::warn("full-sync-batch-dropped sync_id={} batch_id={} keys={} "
                 "reason=no-matching-session",
                 m.sync_id, m.batch_id.to_string(), m.keys.size());
    out_.give_credits(credits);
    return;
  }
  if (!go_) {
    buffered_.push_back(pushed_msg{m, credits});
    return;
  }
  book_->record_batch(m.batch_id.is_negative() ? UINT64_MAX : m.batch_id.bits(), m.keys.size(),
                      now);
  const uint64_t epoch = placement_epoch(pos_);
  ++pos_.sub; // full-sync batches carry no seq: one position each
  const auto masks = cfg_.placement ? cfg_.placement->load() : nullptr;
  auto make = [&](uint32_t d, std::vector<kv_op>&& ops, uint64_t share) {
    kv_sub_batch sb;
    sb.holder = params_.holder;
    sb.incarnation = params_.incarnation;
    sb.prev = left_.sent_to[d];
    sb.end = pos_;
    sb.placement_epoch = epoch;
    sb.placement_since = left_.placement_since;
    left_.sent_to[d] = pos_;
    sb.ops = std::move(ops);
    stream_.stamp(d, sb, share);
    out_.send(d, std::move(sb));
  };
  if (cfg_.destinations == 1 || !cfg_.placement) {
    std::vector<kv_op> ops;
    ops.reserve(m.keys.size());
    for (const auto& k : m.keys)
      ops.push_back(kv_op{k.bits(), true});
    make(0, std::move(ops), credits);
  } else {
    uint64_t total = 0;
    for (const auto& k : m.keys)
      for_each_destination((*masks)[slot_of(k.bits(), cfg_.slot_count)], [&](uint32_t d) {
        split_[d].push_back(kv_op{k.bits(), true});
        ++total;
      });
    uint64_t left = credits;
    for (uint32_t d = 0; d < cfg_.destinations; ++d) {
      if (split_[d].empty())
        continue;
      const uint64_t share = std::min(left, credits * split_[d].size() / total);
      left -= share;
      make(d, std::move(split_[d]), share);
      split_[d] = {};
    }
    out_.give_credits(left);
  }
  out_.report(sync_phase::syncing, book_->missing_batch_count());
}

void sync_session_logic::on_end(const msg::FullSyncEndMsg& m, uint64_t credits, double now) {
  out_.give_credits(credits);
  if (!book_ || m.sync_id != params_.sync_id || book_->phase() != sync_phase::syncing || ending_) {
    spdlog::warn("full-sync-end-ignored sync_id={} reason={}", m.sync_id,
                 book_ && book_->phase() == sync_phase::failed ? "session-expired"
                                                               : "no-matching-session");
    return;
  }
  if (!go_) {
    buffered_.push_back(pushed_msg{m, 0});
    return;
  }
  ending_ = true;
  actual_total_keys_ = m.actual_total_keys.is_negative() ? 0 : m.actual_total_keys.bits();
  send_mark(seq_mark{seq_state::resynced, 0}, false);
  check_done(now);
}

void sync_session_logic::on_ack(uint64_t stream, uint64_t up_to, double now) {
  if (uint64_t released = stream_.ack(stream, up_to); released > 0)
    out_.give_credits(released);
  check_done(now);
}

void sync_session_logic::check_done(double now) {
  if (!ending_ || !stream_.idle() || !book_ || book_->phase() != sync_phase::syncing)
    return;
  const bool counts_match = book_->complete(actual_total_keys_, now);
  if (counts_match)
    spdlog::info("full-sync-complete holder={} location={} sync_id={} keys={}", params_.holder,
                 params_.location, params_.sync_id, actual_total_keys_);
  else
    spdlog::warn("full-sync-complete-count-mismatch location={} sync_id={} received={} "
                 "actual_total_keys={}",
                 params_.location, params_.sync_id, book_->received_keys(), actual_total_keys_);
  out_.report(sync_phase::completed, 0);
  out_.ended(params_.sync_id, true, left_);
}

bool sync_session_logic::expire(double now) {
  if (!book_ || ending_ || !book_->expire(now, cfg_.timeout_s))
    return false;
  spdlog::warn("full-sync-timeout location={} sync_id={} idle_s>{}", params_.location,
               params_.sync_id, cfg_.timeout_s);
  give_buffered();
  out_.report(sync_phase::failed, 0);
  out_.ended(params_.sync_id, false, left_);
  return true;
}

msg::FullSyncStatusRetMsg sync_session_logic::status(const msg::FullSyncStatusMsg& m) const {
  msg::FullSyncStatusRetMsg ret;
  ret.sync_id = m.sync_id;
  const bool matches = book_ && params_.sync_id == m.sync_id;
  ret.is_complete = matches && book_->phase() == sync_phase::completed;
  if (matches)
    for (uint64_t b : book_->missing_batches())
      ret.missing_batches.push_back(msg::wire_int::from_unsigned(b));
  return ret;
}

void sync_session_logic::abort() {
  give_buffered();
  if (uint64_t n = stream_.outstanding_credits(); n > 0)
    out_.give_credits(n);
}

} // namespace lmcc::actors
