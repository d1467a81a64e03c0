// handoff_marks: the values that move with a worker's entity between nodes
// (handoff.hpp explains the protocol; these are its messages).
//
// Context: plain value types; they cross CAF's middleman (inspect in
// actors/inspect.hpp). CAF-free.
#pragma once

#include "persistence/schema.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace lmcc::actors {

/// One location's seq watermark as an entity or a shard knows it.
struct location_mark {
  std::string location;
  uint64_t incarnation = 0;
  persistence::seq_mark mark;
  /// Where the holder's stream stands (the entity that takes it over
  /// continues from here: its first sub-batch to every owner names it).
  persistence::stream_pos pos;

  friend bool operator==(const location_mark&, const location_mark&) = default;
};

/// A peer's answer to "do you host this worker?".
struct worker_handoff {
  enum class answer : uint8_t {
    none = 0,  ///< not hosted here (nor handed off lately)
    found = 1, ///< hosted here until now: `marks` are its drained trackers
    retry = 2, ///< still its home in this node's view: ask again shortly
  };
  uint64_t uid = 0;
  answer status = answer::none;
  std::vector<location_mark> marks;
  /// A full sync the answering node knows the worker owes (its proof was
  /// made there or replicated to it), empty when none: it moves with the
  /// entity, so the new home asks for it at the worker's next heartbeat even
  /// if the proof's replication never reached it (the chaos suite's invariant
  /// 4, every proof answered by an ask, catches a reason lost on the way).
  std::string resync_reason;
};

} // namespace lmcc::actors
