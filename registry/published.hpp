// published: the latest immutable value of something one actor replaces and
// other threads read (the directory's ingest routes and lookup view).
//
// Readers take a shared_ptr copy under a short lock and then use the value
// without any lock; the writer swaps in a fresh value. Nothing is ever changed
// in place, so a reader never sees half an update.
//
//   published<ingest_route_table> board;
//   board.publish(std::make_shared<const ingest_route_table>(...)); // writer
//   auto table = board.current();                                   // any thread
//
// Thread-safety: thread-safe. CAF-free.
#pragma once

#include <memory>
#include <mutex>

namespace lmcc::actors {

template <class T>
class published {
public:
  void publish(std::shared_ptr<const T> value) {
    std::lock_guard lock{mutex_};
    value_ = std::move(value);
  }

  std::shared_ptr<const T> current() const {
    std::lock_guard lock{mutex_};
    return value_;
  }

private:
  mutable std::mutex mutex_;
  std::shared_ptr<const T> value_ = std::make_shared<const T>();
};

} // namespace lmcc::actors
