// row_writer: persists the Directory's worker rows off the directory's thread.
//
// The directory answers registrations and heartbeats; it must never wait for
// the disk. It sends each row change here; this actor (spawned detached: a
// RocksDB write may block) applies them in order and commits everything that
// queued since its last commit in one write. A failed commit is kept and
// retried with backoff. Ordering with the op log does not matter: a restart
// reconciles rows and holder states by incarnation (restore_plan.hpp).
//
//   auto w = sys.spawn<caf::detached>(row_writer_main, store);
//   anon_send(w, row_put_atom::value, row);
//
// Context: a CAF actor on its own thread; one per node with persistence on.
#pragma once

#include "actors/type_ids.hpp"
#include "persistence/store.hpp"

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>

namespace lmcc::actors {

using row_writer_actor =
    caf::typed_actor<caf::reacts_to<row_put_atom, persistence::worker_row>,
                     caf::reacts_to<row_delete_atom, uint64_t>, caf::reacts_to<flush_atom>,
                     // Commits everything received so far; true when durable.
                     caf::replies_to<drain_atom>::with<bool>>;

struct row_writer_state {
  static inline const char* name = "lmcc.row_writer";

  std::shared_ptr<persistence::store> store;
  /// The latest change per uid since the last commit (nullopt: delete).
  std::map<uint64_t, std::optional<persistence::worker_row>> pending;
  bool flush_scheduled = false;
  std::chrono::milliseconds retry_delay{0};
  uint64_t failures = 0;

  /// Commits `pending`; false (and keeps it) on failure.
  bool commit();
};

row_writer_actor::behavior_type
row_writer_main(row_writer_actor::stateful_pointer<row_writer_state> self,
                std::shared_ptr<persistence::store> store,
                std::function<void()> on_thread_start = {});

} // namespace lmcc::actors
