// restart_race: frames of a restarted worker that reached its old entity
// before that entity heard of the worker's new registration.
//
// In a cluster a worker may register through one node (which answers at once)
// while its PUSH socket feeds another, where the worker's entity still runs
// under the old registration: the replicated registration can arrive there
// after the new process's first frames (milliseconds apart, or a partition's
// length when the registering node was cut off). Those frames are applied
// under the old incarnation, and the registration's drop then removes them:
// the index lacks keys the worker holds, and the worker may send nothing more
// that would show it (guarded by restart_race_test and test_partitions.py's
// test_frames_of_a_worker_restarted_through_a_cut_off_node_are_not_lost). One
// LMCache controller never sees this order, as the worker waits for its
// registration's answer before it pushes.
//
// The new process's frames start again at seq 0. An entity that sees a
// location's seq go back to 0 -- or, if it took the worker over or restored
// it, start at 0 on a location it had no seq for -- reports it with its
// incarnation; when the entity is renewed for a newer registration within
// `window_ms` of such a report from its old incarnation (in either order: a
// report may wait in the directory's mailbox behind the renewal), that is
// the proof: the worker is asked for a full sync. A duplicated first frame
// that happens to precede a re-registration within the window asks too: one
// full sync of a process that has just started, which holds little; so does
// a taken-over entity's first seq 0 of its own process on a new location, if
// the worker then registers again within the window.
//
//   restart_race race{30'000};
//   race.on_seq_start(uid, 5, now);          // false: nothing renewed yet
//   if (race.on_renewed(uid, 6, now + 40))   // true: ask for a full sync
//
// Context: CAF-free; owned by the directory actor (one thread).
#pragma once

#include <absl/container/flat_hash_map.h>

#include <cstdint>

namespace lmcc::actors {

class restart_race {
public:
  explicit restart_race(uint64_t window_ms) : window_ms_(window_ms) {}

  /// An entity of registration `incarnation` saw one of the worker's
  /// locations go back to seq 0. True: the entity had been renewed for a
  /// newer registration within the window (the start was the new process's).
  bool on_seq_start(uint64_t uid, uint64_t incarnation, uint64_t now_ms) {
    prune(now_ms);
    if (auto it = renewals_.find(uid);
        it != renewals_.end() && incarnation < it->second.incarnation) {
      renewals_.erase(it);
      starts_.erase(uid);
      return true;
    }
    starts_[uid] = {incarnation, now_ms};
    return false;
  }

  /// The worker's entity was renewed for registration `incarnation`. True: an
  /// older incarnation's entity saw a seq go back to 0 within the window.
  bool on_renewed(uint64_t uid, uint64_t incarnation, uint64_t now_ms) {
    prune(now_ms);
    bool race = false;
    if (auto it = starts_.find(uid); it != starts_.end()) {
      race = it->second.incarnation < incarnation;
      starts_.erase(it);
    }
    if (race)
      renewals_.erase(uid);
    else
      renewals_[uid] = {incarnation, now_ms};
    return race;
  }

  size_t tracked() const { return starts_.size() + renewals_.size(); }

private:
  struct seen {
    uint64_t incarnation = 0;
    uint64_t at_ms = 0;
  };

  void prune(uint64_t now_ms) {
    auto old = [&](const auto& kv) { return now_ms - kv.second.at_ms > window_ms_; };
    absl::erase_if(starts_, old);
    absl::erase_if(renewals_, old);
  }

  uint64_t window_ms_;
  absl::flat_hash_map<uint64_t, seen> starts_;
  absl::flat_hash_map<uint64_t, seen> renewals_;
};

} // namespace lmcc::actors
