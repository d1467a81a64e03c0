// The full-sync half of simulated_worker (spec 4.8-4.9): what an LMCache worker
// does after a FullSyncCommand, minus the random start-up delay and the 5 ms
// pause between batches, which would only measure the worker's own pacing.
#include "apps/lmcc-bench/simulated_worker.hpp"
#include "messages/codec_msgpack.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>

namespace lmcc::bench {
namespace {

using namespace std::chrono_literals;

/// LMCache full_sync_max_retry_count / full_sync_retry_delay_s.
constexpr int start_attempts = 3;
constexpr auto start_retry_delay = 1s;

/// LMCache resends missing batches at most this many times.
constexpr uint32_t max_resends = 3;

/// LMCache polls every 5 s, so the batches a poll calls missing are lost.
/// Polling every few ms, a batch can still be on its way: resend only what is
/// still missing this long after the last send.
constexpr auto resend_grace = 1s;

std::string describe(const request_result& r) {
  switch (r.status) {
  case request_status::timeout:
    return "no reply (timeout)";
  case request_status::send_failed:
    return "send timed out";
  case request_status::bad_reply:
    return "undecodable reply: " + r.error;
  case request_status::ok:
    break;
  }
  if (auto* error = std::get_if<msg::ErrorMsg>(&*r.reply))
    return "ErrorMsg: " + error->error;
  return fmt::format("unexpected {}", msg::type_tag_of(*r.reply));
}

} // namespace

std::optional<std::string> simulated_worker::take_full_sync_request() {
  std::lock_guard lock{mutex_};
  return std::exchange(pending_full_sync_, std::nullopt);
}

void simulated_worker::serve_full_sync_requests(const push_limits& limits) {
  while (!limits.stop.stop_requested() && steady::now() < limits.deadline) {
    if (auto reason = take_full_sync_request())
      (void)full_sync(std::move(*reason), limits.stop);
    else
      std::this_thread::sleep_for(10ms);
  }
}

std::vector<full_sync_result> simulated_worker::full_sync_results() const {
  std::lock_guard lock{mutex_};
  return full_sync_results_;
}

full_sync_result simulated_worker::full_sync(std::string reason, std::stop_token stop) {
  ++sync_epoch_; // odd while syncing: the controller has cleared this location
  const double started_s = std::chrono::duration<double>(steady::now().time_since_epoch()).count();
  full_sync_result result = run_full_sync(std::move(reason), std::move(stop));
  result.started_s = started_s;
  ++sync_epoch_;
  ++counters_.full_syncs;
  std::lock_guard lock{mutex_};
  full_sync_results_.push_back(result);
  return result;
}

bool simulated_worker::send_full_sync_batches(const std::vector<int64_t>& keys,
                                              const std::string& sync_id,
                                              std::span<const int64_t> batch_ids) {
  const size_t per_batch = config_.full_sync_batch_keys;
  const push_limits limits{.deadline =
                               steady::now() + std::chrono::milliseconds(config_.timeout_ms)};
  std::vector<std::string> frames;
  msg::Msg m = msg::FullSyncBatchMsg{.instance_id = identity_.instance_id,
                                     .worker_id = identity_.worker_id,
                                     .location = config_.location,
                                     .sync_id = sync_id,
                                     .batch_id = 0,
                                     .keys = {}};
  auto& batch = std::get<msg::FullSyncBatchMsg>(m);
  for (int64_t id : batch_ids) {
    const size_t begin = static_cast<size_t>(id) * per_batch;
    const size_t end = std::min(begin + per_batch, keys.size());
    batch.batch_id = id;
    batch.keys.assign(keys.begin() + static_cast<ptrdiff_t>(std::min(begin, end)),
                      keys.begin() + static_cast<ptrdiff_t>(end));
    frames.push_back(msg::encode_msgpack(m));
    // LMCache's push loop packs what is queued, up to 50 messages per multipart.
    if (frames.size() == config_.msgs_per_multipart) {
      if (!send_until(frames, limits))
        return false;
      frames.clear();
    }
  }
  frames.push_back(msg::encode_msgpack(msg::FullSyncEndMsg{
      .instance_id = identity_.instance_id,
      .worker_id = identity_.worker_id,
      .location = config_.location,
      .sync_id = sync_id,
      .actual_total_keys = static_cast<int64_t>(keys.size()),
  }));
  return send_until(frames, limits);
}

full_sync_result simulated_worker::run_full_sync(std::string reason, std::stop_token stop) {
  full_sync_result result;
  result.reason = std::move(reason);
  if (!reply_) {
    result.error = "no controller reply socket";
    return result;
  }
  const std::vector<int64_t> keys = truth_.snapshot();
  const size_t per_batch = config_.full_sync_batch_keys;
  const auto batch_count = std::max<size_t>(1, (keys.size() + per_batch - 1) / per_batch);
  // LMCache uses uuid4 here. The suffix comes from random_device, not the
  // seeded generator: two runs with the same --seed must not reuse sync ids
  // (a persistent controller would see the old session), and sync ids do not
  // shape the workload.
  const std::string sync_id = fmt::format("{}_{}_{:08x}", identity_.instance_id,
                                          identity_.worker_id, std::random_device{}());
  result.keys = keys.size();
  result.batches = static_cast<uint32_t>(batch_count);

  const auto t0 = steady::now();
  for (int attempt = 0; attempt < start_attempts && !result.accepted; ++attempt) {
    if (attempt > 0)
      std::this_thread::sleep_for(start_retry_delay);
    auto r =
        reply_->request(msg::FullSyncStartMsg{.instance_id = identity_.instance_id,
                                              .worker_id = identity_.worker_id,
                                              .location = config_.location,
                                              .sync_id = sync_id,
                                              .total_keys = static_cast<int64_t>(keys.size()),
                                              .batch_count = static_cast<int64_t>(batch_count)});
    auto* ret = r.reply ? std::get_if<msg::FullSyncStartRetMsg>(&*r.reply) : nullptr;
    if (ret != nullptr && ret->accepted)
      result.accepted = true;
    else if (ret != nullptr)
      result.error = "FullSyncStartMsg refused: " + ret->error_msg.value_or("");
    else
      result.error = "FullSyncStartMsg: " + describe(r);
  }
  if (!result.accepted)
    return result;
  result.error.clear();

  std::vector<int64_t> all_ids(batch_count);
  std::iota(all_ids.begin(), all_ids.end(), int64_t{0});
  if (!send_full_sync_batches(keys, sync_id, all_ids)) {
    result.error = "FullSyncBatchMsg: PUSH blocked past the request timeout";
    return result;
  }
  auto last_send = steady::now();

  const auto poll_deadline = t0 + std::chrono::duration_cast<steady::duration>(
                                      std::chrono::duration<double>(config_.full_sync_timeout_s));
  const msg::Msg status_msg = msg::FullSyncStatusMsg{
      .instance_id = identity_.instance_id, .worker_id = identity_.worker_id, .sync_id = sync_id};
  while (steady::now() < poll_deadline && !stop.stop_requested()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(config_.full_sync_poll_ms));
    auto r = reply_->request(status_msg);
    ++result.polls;
    auto* status = r.reply ? std::get_if<msg::FullSyncStatusRetMsg>(&*r.reply) : nullptr;
    if (status == nullptr) {
      result.error = "FullSyncStatusMsg: " + describe(r);
      continue;
    }
    result.error.clear();
    if (status->can_exit_freeze && result.exit_freeze_s == 0)
      result.exit_freeze_s = seconds_since(t0);
    // Stop on completion of *this* sync, not on can_exit_freeze alone: idle
    // workers count as ready, so the threshold can pass before our keys landed.
    if (status->is_complete && status->can_exit_freeze) {
      result.complete = true;
      result.can_exit_freeze = true;
      result.elapsed_s = seconds_since(t0);
      return result;
    }
    if (!status->missing_batches.empty() && !status->is_complete && result.resends < max_resends &&
        steady::now() - last_send >= resend_grace) {
      std::vector<int64_t> missing;
      for (const auto& id : status->missing_batches)
        if (auto v = id.to_int64(); v && *v >= 0 && static_cast<size_t>(*v) < batch_count)
          missing.push_back(*v);
      ++result.resends;
      (void)send_full_sync_batches(keys, sync_id, missing);
      last_send = steady::now();
    }
  }
  result.elapsed_s = seconds_since(t0);
  if (stop.stop_requested())
    result.error = "stopped before it completed";
  else if (result.error.empty())
    result.error = fmt::format("not complete within {:g} s", config_.full_sync_timeout_s);
  return result;
}

} // namespace lmcc::bench
