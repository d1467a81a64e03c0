// directory_impl: what the directory's files share: the logic's effects as
// actors and hooks (directory_effects), this node's wall clock, publishing a
// registry change, and the handlers each file implements. By concept:
// directory.cpp is the actor (its behaviour, local registrations and
// heartbeats, stats); directory_requests.cpp answers requests here or forwards
// them to the worker's home node; directory_replication.cpp keeps the peers'
// copies of the registry alike; actors/cluster/worker_homes.cpp moves worker
// entities between nodes.
//
// Private to actors/: included by the directory's files only.
#pragma once

#include "actors/cluster/worker_homes.hpp"
#include "actors/directory.hpp"

#include <optional>
#include <string>
#include <vector>

namespace lmcc::actors {

/// The directory logic's effects, as actors and hooks.
class directory_effects final : public directory_outbox {
public:
  explicit directory_effects(directory_self self) : self_(self) {}

  void spawn_worker(const worker_record& rec, const restored_worker* restored) override {
    auto& st = self_->state;
    if (!st.logic->is_home(rec.uid))
      return; // a replica: the entity lives on its home node
    // A restarted cluster node asks its peers first: one of them may have
    // hosted the worker while this node was down (worker_homes.hpp).
    if (restored && st.homes) {
      start_takeover(self_, rec);
      return;
    }
    st.workers[rec.uid] = spawn_worker_actor(self_, rec, restored, false);
  }
  void reset_worker(uint64_t uid, uint64_t incarnation) override {
    if (auto it = self_->state.workers.find(uid); it != self_->state.workers.end()) {
      self_->send(it->second, reset_atom::value, incarnation);
      self_->state.entity_incarnations[uid] = incarnation;
    }
  }
  void retire_worker(uint64_t uid) override {
    auto& workers = self_->state.workers;
    if (auto it = workers.find(uid); it != workers.end()) {
      // It quits by itself once its drops are acknowledged.
      self_->send(it->second, retire_atom::value);
      workers.erase(it);
    }
  }
  void put_row(const persistence::worker_row& row) override {
    if (self_->state.cfg.hooks.put_row)
      self_->state.cfg.hooks.put_row(row);
    if (self_->state.logic->is_home(row.uid))
      replicate(self_, row_put_atom::value, row);
  }
  void delete_row(uint64_t uid, uint64_t incarnation) override {
    if (self_->state.cfg.hooks.delete_row)
      self_->state.cfg.hooks.delete_row(uid);
    if (self_->state.logic->is_home(uid))
      replicate(self_, row_delete_atom::value, uid, incarnation);
  }

  /// Sends `xs` to every live peer's directory (a cluster; nothing otherwise).
  template <class... Ts>
  static void replicate(directory_self self, Ts&&... xs) {
    if (!self->state.cfg.cluster)
      return;
    auto table = self->state.cfg.cluster->current();
    for (size_t i = 0; i < table->peers.size(); ++i)
      if (i != table->self && table->peers[i].live && table->peers[i].handles.directory)
        self->send(caf::actor_cast<directory_actor>(table->peers[i].handles.directory), xs...);
  }
  void forget_control(const std::string& endpoint) override {
    if (self_->state.cfg.hooks.forget_control)
      self_->state.cfg.hooks.forget_control(endpoint);
  }
  void count(std::string_view event) override {
    if (self_->state.cfg.hooks.count_event)
      self_->state.cfg.hooks.count_event(event);
  }

private:
  directory_self self_;
};

inline double wall_s(directory_self self) {
  return self->state.cfg.clock->wall_s();
}

inline uint64_t wall_ms(directory_self self) {
  return self->state.cfg.clock->wall_ms();
}

/// How late (wall clock) a node may still apply a request forwarded to it:
/// covers the error of the measured clock offset between nodes (the one-way
/// delay of a greeting, a jump since the last one); beyond it the sender
/// stopped waiting.
inline constexpr uint64_t home_request_deadline_slack_ms = 1000;

/// Publishes what changed to the lookups and the PULL thread (directory.cpp).
void publish(directory_self self);
/// A fresh heartbeat_view when the published one went stale.
void publish_heartbeats(directory_self self);

/// A cluster: tells the peers the heartbeat time of `uid` (homed here) with
/// the next gathered message (directory_config::heartbeat_replication_delay).
void replicate_heartbeat(directory_self self, uint64_t uid);

/// A cluster: tells the home of `uid` (another node) that the worker
/// heartbeated here, with the next gathered message.
void tell_home_heard(directory_self self, uint64_t uid);

/// Schedules the flush_atom that sends both of the above (next in the
/// mailbox when the delay is 0).
void schedule_heartbeat_flush(directory_self self);

// -- replication between nodes (directory_replication.cpp) -----------------------

/// A row from the worker's home, on its own or among gathered heartbeat rows.
void apply_peer_row(directory_self self, const persistence::worker_row& row);
/// Workers homed here that heartbeated at another node (heard_atom).
void on_heard_elsewhere(directory_self self, std::vector<uint64_t>& uids);
/// Sends the gathered heartbeat rows to the peers and heard workers to their
/// homes (flush_atom).
void flush_heartbeats(directory_self self);
/// A worker's sync phase, from its entity here or a peer's copy.
void on_sync_state(directory_self self, uint64_t uid, sync_phase phase, uint64_t missing);
/// A full sync the worker owes, proven here or told by a peer.
void on_resync(directory_self self, uint64_t uid, const std::string& reason);
/// A location the worker reported, here or at its home.
void on_location(directory_self self, uint64_t uid, const std::string& location);
/// A deregistration at the worker's home.
void on_row_delete(directory_self self, uint64_t uid, uint64_t incarnation);
/// A peer (re)joined: it gets the rows, phases and proofs it needs from here.
void send_directory_to(directory_self self, const caf::actor& peer_directory);
/// A node back empty lost `lost_slots` slots: every worker is asked to resync.
void on_slots_lost(directory_self self, uint64_t lost_slots);
/// A peer's whole directory (send_directory_to at the peer).
void on_directory_sync(directory_self self, const directory_listing& listing);

/// In a cluster, the directory of the worker's home node when that is another
/// node (directory_requests.cpp).
std::optional<msg::expected<directory_actor>> home_elsewhere(directory_self self,
                                                             const msg::Msg& m);

/// Answers a request here, or at the worker's home node (directory_requests.cpp).
caf::result<msg::Msg> on_request(directory_self self, msg::Msg& m);

} // namespace lmcc::actors
