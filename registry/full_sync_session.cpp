#include "registry/full_sync_session.hpp"

#include <algorithm>

namespace lmcc::actors {

const char* to_string(sync_phase p) noexcept {
  switch (p) {
  case sync_phase::none:
    return "none";
  case sync_phase::syncing:
    return "syncing";
  case sync_phase::completed:
    return "completed";
  case sync_phase::failed:
    return "failed";
  }
  return "?";
}

full_sync_session::full_sync_session(std::string sync_id, uint64_t expected_keys,
                                     uint64_t batch_count, double now)
  : sync_id_(std::move(sync_id)), expected_keys_(expected_keys),
    batch_count_(std::min(batch_count, max_batch_count)), received_(batch_count_, false),
    last_activity_(now) {}

void full_sync_session::record_batch(uint64_t batch_id, uint64_t key_count, double now) {
  if (batch_id < batch_count_ && !received_[batch_id]) {
    received_[batch_id] = true;
    ++received_distinct_;
  }
  received_keys_ += key_count;
  last_activity_ = now;
}

bool full_sync_session::complete(uint64_t actual_total_keys, double now) {
  phase_ = sync_phase::completed;
  last_activity_ = now;
  return received_keys_ == actual_total_keys;
}

bool full_sync_session::expire(double now, double timeout_s) {
  if (phase_ != sync_phase::syncing || now - last_activity_ <= timeout_s)
    return false;
  phase_ = sync_phase::failed;
  return true;
}

std::vector<uint64_t> full_sync_session::missing_batches() const {
  std::vector<uint64_t> out;
  if (phase_ != sync_phase::syncing)
    return out;
  for (uint64_t i = 0; i < batch_count_; ++i)
    if (!received_[i])
      out.push_back(i);
  return out;
}

uint64_t full_sync_session::missing_batch_count() const {
  return phase_ == sync_phase::syncing ? batch_count_ - received_distinct_ : 0;
}

} // namespace lmcc::actors
