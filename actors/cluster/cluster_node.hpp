// cluster_node: one node's membership in the cluster, over CAF's middleman.
//
// The cluster_node connects to every configured peer (asynchronous connects
// with a timeout, retried with exponential backoff), joins it, monitors it,
// greets it every heartbeat interval and runs the failure detector
// (membership.hpp) on the greetings it gets. After every change it publishes a
// fresh cluster_table and tells the peer's peer_link the peer's new shard
// handle (or that it was lost). With TLS between nodes (lmcc_cluster_tls_*)
// each pair has one connection: a node dials only the peers whose id sorts
// after its own, and takes the others as joined when they dial it (its gate
// passes their handles on). Both nodes of a pair dialling at once leave BASP
// two connections to reconcile (it closes the later one); over CAF's OpenSSL
// module, which runs the TLS handshake inside BASP's stream, links flapped
// every 0.5-2 s that way. Over tls_transport both dialling held in a 30 s run,
// but one dialler makes one TLS session per pair by construction, not by BASP's
// reconciliation. Plain TCP keeps both nodes dialling, as before.
// CAF's own heartbeats and connection timeouts are enabled on every node as
// well (node_runtime), so a frozen peer's connection is torn down too.
//
//   auto node = sys.spawn(cluster_node_main, cluster_node_config{...});
//
// Context: a CAF actor; one per node, beside its gate (cluster_gate.hpp).
#pragma once

#include "actors/cluster/anti_entropy.hpp"
#include "actors/cluster/cluster_gate.hpp"
#include "actors/cluster/cluster_table.hpp"
#include "actors/cluster/peer_link.hpp"
#include "actors/cluster/slot_mover.hpp"
#include "actors/cluster/slot_refill.hpp"
#include "actors/sooner_tick.hpp"
#include "actors/type_ids.hpp"
#include "clock/clock.hpp"
#include "cluster/anti_entropy_logic.hpp"
#include "cluster/cluster_options.hpp"
#include "cluster/handshake.hpp"
#include "cluster/membership.hpp"
#include "cluster/peer_clock_offsets.hpp"
#include "cluster/refill_gate.hpp"

#include <caf/io/middleman_actor.hpp>

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

namespace lmcc::actors {

using cluster_node_actor = caf::typed_actor<
    // A peer is alive, and where its membership stands (cluster/wire.hpp).
    caf::reacts_to<greet_atom, cluster::greeting>, caf::reacts_to<tick_atom>,
    // A newer membership record (JSON) from a peer.
    caf::reacts_to<members_atom, std::string>,
    // An operator's new member set (ids) -> the new record (JSON), or an
    // error saying why not (cluster/membership_change.hpp).
    caf::replies_to<propose_atom, std::vector<std::string>>::with<std::string>,
    // This node stops cleanly: leave the live set (every worker
    // home moves to the peers) and tell them at once; answers
    // once the new table is published.
    caf::replies_to<leave_atom>::with<bool>,
    // From this node's gate: a peer dialled us and proved the secret; its
    // (id, [node, shard, directory, service], HTTP address, key-read
    // endpoint). Taken only where this node does not dial that peer itself.
    caf::reacts_to<join_atom, std::string, peer_handles>>;

struct cluster_node_config {
  cluster::cluster_options options;
  std::string self_id;
  /// The middleman actor peers are dialled through (tls_transport.hpp when
  /// options.tls(); null: CAF's own middleman).
  caf::io::middleman_actor connector;
  uint32_t slot_count = 4096;
  /// This node's actors as handed to peers (see gate_config::handles).
  peer_handles local;
  /// One peer_link per member (null at this node's own index).
  std::vector<peer_link_actor> links;
  std::shared_ptr<cluster_board> board;
  std::shared_ptr<cluster_counters> counters;
  /// The member set to start from (read from record_path at start; empty:
  /// the configured non-standby members).
  std::optional<cluster::membership_record> record;
  /// Where every adopted record is written (empty: kept in memory only).
  std::string record_path;
  /// Copies the slots gained in a change, drops those lost (slot_mover.hpp).
  slot_mover_actor mover;
  /// Set when this node opened an empty store: until its peers' greetings
  /// tell whether they hold an index, lookups read its slots elsewhere; if
  /// one does, it copies every slot it owns first (refill_gate.hpp).
  slot_refill_actor refill;
  /// Called when the refill ends without copying: no peer holds an index (a
  /// new cluster). A copy reports to the refill actor's own hooks instead.
  std::function<void()> on_refill_skipped;
  /// Set by the refill once every owned slot is copied or known lost (null:
  /// this node did not start empty).
  std::shared_ptr<const std::atomic<bool>> refill_settled;
  /// Whether this node's index holds entries (sent in greetings). Null: no.
  std::function<bool()> holds_index;
  /// This node's summary of the slots it shares with a peer under a table
  /// (anti_entropy.hpp: shared_slots_summary), said in every greeting to
  /// that peer and compared with each greeting's; empty: none said.
  std::function<uint64_t(const cluster_table&, node_index)> shared_summary;
  /// Where the greetings' summaries that equal ours are noted, for
  /// anti-entropy's rounds; null: nowhere.
  std::shared_ptr<greeting_agreement> agreement;
  /// Called with the new table whenever the member set changes (the runtime
  /// swaps the write placement and the index's share of the counts).
  std::function<void(const cluster_table&)> on_members_changed;
  /// This node's wall clock (sent in greetings), and where each peer's
  /// offset from it is kept (the directory's forwarded deadlines use them).
  std::shared_ptr<const node_clock> clock = std::make_shared<node_clock>();
  std::shared_ptr<cluster::peer_clock_offsets> peer_clocks =
      std::make_shared<cluster::peer_clock_offsets>();
};

struct cluster_node_state {
  static inline const char* name = "lmcc.cluster_node";

  struct peer_conn {
    peer_handles handles;
    bool connecting = false;
    uint32_t failures = 0;
    std::chrono::steady_clock::time_point next_attempt{};
    /// When this node last greeted the peer (a quiet cluster greets each
    /// peer once per quiet_heartbeat_interval, whatever else wakes it).
    std::chrono::steady_clock::time_point last_greeted{};
  };

  cluster_node_config cfg;
  std::unique_ptr<cluster::membership> members;
  std::shared_ptr<const cluster::placement> owners;
  std::vector<peer_conn> peers;
  /// Which peers greeted as ready for the current record (by node_index).
  std::vector<uint8_t> peer_ready;
  /// Which joined peers greeted since they joined, and which of those with a
  /// newer record than this node's (it is pushed to us; until then our view
  /// of the member set is stale).
  std::vector<uint8_t> greeted;
  std::vector<uint8_t> ahead;
  /// This node copied every slot it gained under the current record.
  bool self_ready = true;
  refill_gate refill{false};
  /// Which peers greeted as refilling, and as unsettled (by node_index).
  std::vector<uint8_t> peer_refilling;
  std::vector<uint8_t> peer_unsettled;
  std::shared_ptr<const cluster_table> last_published;
  /// The failure detector's tick (a sooner need supersedes the armed one).
  sooner_tick tick;
  std::mt19937_64 rng{std::random_device{}()};
};

cluster_node_actor::behavior_type
cluster_node_main(cluster_node_actor::stateful_pointer<cluster_node_state> self,
                  cluster_node_config cfg);

/// The table a node has before any peer joined (for the runtime to publish
/// before the actors exist). Fails as membership::make does.
cluster::expected<std::shared_ptr<const cluster_table>>
initial_cluster_table(const cluster::cluster_options& options, const std::string& self_id,
                      uint32_t slot_count, std::optional<cluster::membership_record> record = {});

} // namespace lmcc::actors
