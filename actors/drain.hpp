// drain: asks a set of actors to commit everything they were sent so far and
// answers once all have (true) or any failed or timed out (false). A clean stop
// drains the directory, which drains every worker actor, which drains every
// shard: CAF delivers each drain after the sender's earlier messages, so when
// the answer arrives every batch that reached the directory is on disk.
//
//   [self](drain_atom) -> caf::result<bool> { return drain_all(self, handles); }
//
// Context: called inside an actor's handler.
#pragma once

#include "actors/type_ids.hpp"

#include <chrono>
#include <memory>
#include <vector>

namespace lmcc::actors {

template <class Self, class Handle>
caf::result<bool> drain_all(Self* self, const std::vector<Handle>& targets,
                            std::chrono::milliseconds timeout = std::chrono::seconds(30)) {
  if (targets.empty())
    return true;
  struct tally {
    size_t waiting;
    bool ok = true;
  };
  auto t = std::make_shared<tally>(tally{targets.size(), true});
  auto rp = self->template make_response_promise<bool>();
  for (const auto& target : targets)
    self->request(target, timeout, drain_atom::value)
        .then(
            [t, rp](bool ok) mutable {
              t->ok = t->ok && ok;
              if (--t->waiting == 0)
                rp.deliver(t->ok);
            },
            [t, rp](caf::error&) mutable {
              t->ok = false;
              if (--t->waiting == 0)
                rp.deliver(false);
            });
  return rp;
}

} // namespace lmcc::actors
