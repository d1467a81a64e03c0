// directory_requests: the directory's answers to requests (registration,
// heartbeats, full-sync start and status, registry queries, control commands),
// and in a cluster the forwarding of a worker's requests to its home node.
#include "actors/internal/directory_impl.hpp"
#include "clock/clock.hpp"

#include <spdlog/spdlog.h>

#include <chrono>

namespace lmcc::actors {
namespace {

lookup_actor next_lookup(directory_self self) {
  auto& st = self->state;
  return st.cfg.lookups[st.next_lookup++ % st.cfg.lookups.size()];
}

/// Hands a FullSyncStartMsg to the worker's entity. Its session reports
/// `syncing` only after the reply has left, and the worker may heartbeat at
/// once: until the report (or a refusal) the registry treats the worker as
/// syncing (registry::expect_sync_state), as LMCache's controller, which
/// marks it syncing before it answers.
caf::result<msg::Msg> sync_start(directory_self self, const worker_actor& entity, uint64_t uid,
                                 msg::FullSyncStartMsg m) {
  auto& st = self->state;
  st.logic->on_sync_start_sent(uid);
  publish_heartbeats(self);
  auto rp = self->make_response_promise<msg::Msg>();
  auto sync_id = m.sync_id;
  self->request(entity, st.cfg.options.internal_timeout, sync_start_atom::value,
                msg::Msg{std::move(m)})
      .then(
          [self, rp, uid](msg::Msg& reply) mutable {
            const auto* ret = std::get_if<msg::FullSyncStartRetMsg>(&reply);
            if (ret == nullptr || !ret->accepted)
              self->state.logic->on_sync_start_refused(uid);
            rp.deliver(std::move(reply));
          },
          [self, rp, uid, sync_id](caf::error& e) mutable {
            self->state.logic->on_sync_start_refused(uid);
            rp.deliver(msg::Msg{msg::FullSyncStartRetMsg{
                sync_id, false, "Failed to start sync: " + caf::to_string(e)}});
          });
  return rp;
}

/// The worker answers its own part first; the global progress is filled in
/// when that answer is back, so it already counts the worker's latest state.
caf::result<msg::Msg> sync_status(directory_self self, msg::FullSyncStatusMsg m) {
  auto& st = self->state;
  const auto* rec = st.logic->reg().find(m.instance_id, m.worker_id);
  auto it = rec ? st.workers.find(rec->uid) : st.workers.end();
  if (it == st.workers.end()) {
    msg::FullSyncStatusRetMsg ret;
    ret.sync_id = m.sync_id;
    st.logic->complete_status(ret);
    return msg::Msg{std::move(ret)};
  }
  auto rp = self->make_response_promise<msg::Msg>();
  auto sync_id = m.sync_id;
  self->request(it->second, st.cfg.options.internal_timeout, sync_status_atom::value,
                msg::Msg{std::move(m)})
      .then(
          [self, rp](msg::Msg& reply) mutable {
            if (auto* ret = std::get_if<msg::FullSyncStatusRetMsg>(&reply))
              self->state.logic->complete_status(*ret);
            rp.deliver(std::move(reply));
          },
          [rp, sync_id](caf::error& e) mutable {
            rp.deliver(msg::Msg{msg::ErrorMsg{"full sync status for " + sync_id +
                                              " failed: " + caf::to_string(e)}});
          });
  return rp;
}

/// The worker a request is about, when it has one (its entity answers it).
std::optional<uint64_t> worker_in(const msg::Msg& m) {
  return std::visit(
      [](const auto& x) -> std::optional<uint64_t> {
        using M = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<M, msg::RegisterMsg> || std::is_same_v<M, msg::HeartbeatMsg> ||
                      std::is_same_v<M, msg::FullSyncStartMsg> ||
                      std::is_same_v<M, msg::FullSyncStatusMsg> ||
                      std::is_same_v<M, msg::DeRegisterMsg>)
          return worker_uid(x.instance_id, x.worker_id);
        else
          return std::nullopt;
      },
      m);
}

/// `reply` once every live peer's directory has applied the rows this one sent
/// it so far -- the registration's among them -- or after
/// registration_replica_wait; at once on a single node.
caf::result<msg::Msg> once_peers_have_the_row(directory_self self, msg::Msg reply) {
  auto& st = self->state;
  if (!st.cfg.cluster)
    return reply;
  std::vector<directory_actor> peers;
  auto table = st.cfg.cluster->current();
  for (size_t i = 0; i < table->peers.size(); ++i)
    if (i != table->self && table->peers[i].live && table->peers[i].handles.directory)
      peers.push_back(caf::actor_cast<directory_actor>(table->peers[i].handles.directory));
  if (peers.empty())
    return reply;
  struct waiting {
    caf::response_promise rp;
    msg::Msg reply;
    size_t left;
  };
  auto w = std::make_shared<waiting>(
      waiting{self->make_response_promise<msg::Msg>(), std::move(reply), peers.size()});
  auto one_done = [self, w] {
    if (--w->left == 0)
      w->rp.deliver(std::move(w->reply));
  };
  for (const auto& peer : peers)
    self->request(peer, st.cfg.registration_replica_wait, rows_applied_atom::value)
        .then([one_done](bool) { one_done(); },
              [self, one_done](caf::error&) {
                self->state.cfg.hooks.count_event("registration_replica_wait_expired");
                one_done();
              });
  return w->rp;
}

} // namespace

/// In a cluster, the directory of the worker's home node when that is another
/// node; nullopt when this node answers. An error when the home is down.
std::optional<msg::expected<directory_actor>> home_elsewhere(directory_self self,
                                                             const msg::Msg& m) {
  if (!self->state.cfg.cluster)
    return std::nullopt;
  auto uid = worker_in(m);
  if (!uid)
    return std::nullopt;
  auto table = self->state.cfg.cluster->current();
  const node_index home = table->home_of(*uid);
  if (home == table->self)
    return std::nullopt;
  const auto& peer = table->peers[home];
  if (!peer.live || !peer.handles.directory)
    return msg::expected<directory_actor>{msg::codec_error{"the node that keeps this worker (" +
                                                           table->members[home].address.id +
                                                           ") is unreachable; retry later"}};
  return msg::expected<directory_actor>{caf::actor_cast<directory_actor>(peer.handles.directory)};
}

namespace {

/// A registration answered by the worker's home elsewhere names the heartbeat
/// URL of this node, the one the worker reached: its home may move
/// (worker_homes.hpp), and any node forwards heartbeats home.
void rewrite_heartbeat_url(msg::Msg& reply, const std::optional<std::string>& url) {
  auto* ret = std::get_if<msg::RegisterRetMsg>(&reply);
  if (!ret)
    return;
  auto& extra = ret->extra_config;
  auto it = std::find_if(extra.begin(), extra.end(),
                         [](const auto& kv) { return kv.first == "heartbeat_url"; });
  if (it != extra.end() && url)
    it->second = *url; // in place: the answer keeps LMCache's key order
  else if (it != extra.end())
    extra.erase(it);
  else if (url)
    extra.emplace_back("heartbeat_url", *url);
}

/// The handler of a reply to deliver to `rp`, with this node's heartbeat URL.
auto deliver_to(caf::response_promise rp, std::optional<std::string> url) {
  return [rp, url = std::move(url)](msg::Msg& reply) mutable {
    rewrite_heartbeat_url(reply, url);
    rp.deliver(std::move(reply));
  };
}

/// `home`'s wall clock minus this node's (0 when unknown).
uint64_t home_clock_offset(directory_self self, const directory_actor& home) {
  auto table = self->state.cfg.cluster->current();
  const auto peer = table->peer_with_directory(caf::actor_cast<caf::actor>(home));
  if (!peer || *peer >= table->members.size())
    return 0;
  return static_cast<uint64_t>(self->state.cfg.peer_clocks->of(table->members[*peer].address.id));
}

/// Asks the worker's home (another node) and delivers its answer to `rp`. A
/// home that does not answer within one failure-detection period died or
/// froze before the detector said so; the request is then asked again
/// through this directory, which by then routes it to the worker's new home
/// (possibly this node) -- until the internal timeout is spent. A failed
/// registration kills an LMCache worker's start, so it is worth the retry.
/// Every attempt carries a deadline the home enforces: a frozen or cut-off
/// home that thaws does not apply the first attempt late (two registrations
/// of one worker on both sides would be two incarnations clearing each
/// other's entries, which the chaos suite's convergence invariant catches as
/// lost entries). A sync start is asked once: the worker retries it itself
/// (3 x 1 s).
void ask_home(directory_self self, const directory_actor& home, msg::Msg m,
              std::optional<std::string> url, caf::response_promise rp,
              std::chrono::steady_clock::time_point deadline) {
  const auto now = steady_now();
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now);
  const bool may_repeat = !std::holds_alternative<msg::FullSyncStartMsg>(m);
  const auto attempt = may_repeat ? std::min(left, self->state.cfg.home_request_timeout) : left;
  auto again = m; // kept for a retry; requests are small
  // The home refuses it past `expires` + the slack, i.e. by the time this
  // attempt times out: a retry never meets a late first try. In the home's
  // clock, as measured from its greetings (clock.hpp).
  const uint64_t expires = wall_ms(self) + home_clock_offset(self, home) +
                           static_cast<uint64_t>(attempt.count()) -
                           std::min<uint64_t>(home_request_deadline_slack_ms, attempt.count());
  self->request(home, attempt, request_atom::value, std::move(m), expires)
      .then(deliver_to(rp, url),
            [self, rp, url, deadline, again = std::move(again)](caf::error& e) mutable {
              const bool time_left = steady_now() + std::chrono::milliseconds(50) < deadline;
              if (e != caf::sec::request_timeout || !time_left) {
                rp.deliver(msg::Msg{
                    msg::ErrorMsg{"the worker's home node did not answer: " + caf::to_string(e)}});
                return;
              }
              self->state.cfg.hooks.count_event("request_home_retried");
              auto next = home_elsewhere(self, again);
              if (next && *next) {
                spdlog::info("home-request-retry reason=no-answer");
                ask_home(self, **next, std::move(again), std::move(url), std::move(rp), deadline);
                return;
              }
              if (next) { // unreachable now: say so
                rp.deliver(msg::Msg{msg::ErrorMsg{next->error().message}});
                return;
              }
              // The worker's home is this node now: answer here.
              const auto rest =
                  std::chrono::duration_cast<std::chrono::milliseconds>(deadline - steady_now());
              self->request(caf::actor_cast<directory_actor>(self), rest, request_atom::value,
                            std::move(again))
                  .then(deliver_to(rp, std::move(url)), [rp](caf::error& e2) mutable {
                    rp.deliver(msg::Msg{msg::ErrorMsg{caf::to_string(e2)}});
                  });
            });
}

} // namespace

caf::result<msg::Msg> on_request(directory_self self, msg::Msg& m) {
  auto& st = self->state;
  auto& logic = *st.logic;
  // A heartbeat reaches the directory when the socket thread's view is stale
  // (heartbeat_reader.hpp): make it current even if the home elsewhere
  // answers this one, or every later heartbeat of workers homed elsewhere
  // would come here too until some other change publishes.
  if (std::holds_alternative<msg::HeartbeatMsg>(m))
    publish_heartbeats(self);
  if (auto home = home_elsewhere(self, m)) {
    if (!*home) {
      st.cfg.hooks.count_event("request_home_unreachable");
      return msg::Msg{msg::ErrorMsg{home->error().message}};
    }
    std::optional<std::string> url;
    if (const auto* reg = std::get_if<msg::RegisterMsg>(&m); reg && st.cfg.hooks.heartbeat_url_for)
      url = st.cfg.hooks.heartbeat_url_for(reg->ip);
    auto rp = self->make_response_promise<msg::Msg>();
    ask_home(self, **home, std::move(m), std::move(url), rp,
             steady_now() + st.cfg.options.internal_timeout);
    return rp;
  }
  return std::visit(
      [&](auto& x) -> caf::result<msg::Msg> {
        using M = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<M, msg::RegisterMsg>) {
          std::optional<std::string> url;
          if (st.cfg.hooks.heartbeat_url_for)
            url = st.cfg.hooks.heartbeat_url_for(x.ip);
          auto reply = logic.on_register(x, wall_s(self), wall_ms(self), url);
          publish(self);
          return once_peers_have_the_row(self, std::move(reply));
        } else if constexpr (std::is_same_v<M, msg::HeartbeatMsg>) {
          auto reply = logic.on_heartbeat(x, wall_s(self), wall_ms(self), monotonic_s());
          publish(self);
          // A first heartbeat or a re-registration is stored, and storing a
          // row of a worker homed here sends it to the peers at once
          // (directory_effects::put_row); the time goes with the gathered ones.
          if (const auto* rec = logic.reg().find(x.instance_id, x.worker_id))
            replicate_heartbeat(self, rec->uid);
          return reply;
        } else if constexpr (std::is_same_v<M, msg::FullSyncStartMsg>) {
          const auto* rec = logic.reg().find(x.instance_id, x.worker_id);
          auto it = rec ? st.workers.find(rec->uid) : st.workers.end();
          if (it == st.workers.end())
            return msg::Msg{msg::FullSyncStartRetMsg{
                x.sync_id, false,
                "Failed to start sync: worker already syncing with different sync_id or worker not "
                "found"}};
          return sync_start(self, it->second, rec->uid, std::move(x));
        } else if constexpr (std::is_same_v<M, msg::FullSyncStatusMsg>) {
          return sync_status(self, std::move(x));
        } else if constexpr (std::is_same_v<M, msg::BatchedP2PLookupMsg> ||
                             std::is_same_v<M, msg::LookupMsg>) {
          return self->delegate(next_lookup(self), request_atom::value, msg::Msg{std::move(x)});
        } else if constexpr (std::is_same_v<M, msg::QueryInstMsg>) {
          return msg::Msg{msg::QueryInstRetMsg{x.event_id, logic.reg().instance_by_ip(x.ip)}};
        } else if constexpr (std::is_same_v<M, msg::QueryWorkerInfoMsg>) {
          return msg::Msg{msg::QueryWorkerInfoRetMsg{
              x.event_id, logic.reg().worker_infos(x.instance_id, x.worker_ids)}};
        } else if constexpr (std::is_same_v<M, msg::ClearMsg> || std::is_same_v<M, msg::PinMsg> ||
                             std::is_same_v<M, msg::CompressMsg> ||
                             std::is_same_v<M, msg::DecompressMsg> ||
                             std::is_same_v<M, msg::MoveMsg> || std::is_same_v<M, msg::HealthMsg> ||
                             std::is_same_v<M, msg::CheckFinishMsg>) {
          auto plan = plan_control(m, logic.reg(), [self] { return self->state.random_hex(); });
          if (auto* err = std::get_if<msg::ErrorMsg>(&plan))
            return msg::Msg{std::move(*err)};
          return self->delegate(st.cfg.fanout, fanout_atom::value,
                                std::move(std::get<control_plan>(plan)));
        } else {
          return msg::Msg{msg::ErrorMsg{"Unknown message type: " + std::string(M::type_tag)}};
        }
      },
      m);
}

} // namespace lmcc::actors
