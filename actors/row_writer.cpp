#include "actors/row_writer.hpp"

#include <spdlog/spdlog.h>

#include <pthread.h>

namespace lmcc::actors {

bool row_writer_state::commit() {
  if (pending.empty())
    return true;
  auto b = store->new_batch();
  for (const auto& [uid, row] : pending) {
    if (row)
      b.put_worker(*row);
    else
      b.delete_worker(uid);
  }
  if (auto r = store->commit(b); !r) {
    if (++failures % 100 == 1)
      spdlog::error("store-row-write-failed rows={} failures={} error={}", pending.size(), failures,
                    r.error().message);
    return false;
  }
  pending.clear();
  return true;
}

row_writer_actor::behavior_type
row_writer_main(row_writer_actor::stateful_pointer<row_writer_state> self,
                std::shared_ptr<persistence::store> store, std::function<void()> on_thread_start) {
  pthread_setname_np(pthread_self(), "lmcc-rows"); // detached: its own thread
  if (on_thread_start)
    on_thread_start(); // may set its scheduling
  self->state.store = std::move(store);
  auto schedule = [self](std::chrono::milliseconds delay) {
    auto& st = self->state;
    if (st.flush_scheduled)
      return;
    st.flush_scheduled = true;
    if (delay.count() == 0)
      self->send(self, flush_atom::value);
    else
      self->delayed_send(self, delay, flush_atom::value);
  };
  self->set_exit_handler([self](caf::exit_msg& m) {
    self->state.commit(); // a clean stop leaves nothing pending behind
    self->quit(m.reason);
  });
  return {
      [self, schedule](row_put_atom, persistence::worker_row& row) {
        const uint64_t uid = row.uid;
        self->state.pending[uid] = std::move(row);
        schedule(std::chrono::milliseconds{0});
      },
      [self, schedule](row_delete_atom, uint64_t uid) {
        self->state.pending[uid] = std::nullopt;
        schedule(std::chrono::milliseconds{0});
      },
      [self, schedule](flush_atom) {
        auto& st = self->state;
        st.flush_scheduled = false;
        if (st.commit()) {
          st.retry_delay = std::chrono::milliseconds{0};
          return;
        }
        st.retry_delay = std::min(std::chrono::milliseconds{1000},
                                  std::max(std::chrono::milliseconds{10}, st.retry_delay * 2));
        schedule(st.retry_delay);
      },
      [self](drain_atom) { return self->state.commit(); },
  };
}

} // namespace lmcc::actors
