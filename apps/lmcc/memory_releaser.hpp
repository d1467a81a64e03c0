// memory_releaser: hands the allocator's free pages back to the kernel on a
// thread of its own, when the shard asks (see index/memory_release.hpp for
// when and why) and whenever the process keeps more than `free_limit` bytes
// resident beyond what malloc has handed out (RSS minus mallinfo2's in-use
// bytes, checked every `check_interval`). Ingest
// allocates decoded frames on one thread and frees them on others; glibc keeps
// what was freed in each thread's arena, so under a long churn (keys admitted
// and evicted, the index not growing) RSS climbed to 400 MiB with 8 MiB in use
// (45 s at 2.3 M ops/s); one malloc_trim took it back to 34 MiB.
//
// The check itself walks the arenas (mallinfo2), so it runs only when the
// process did work since the last one (its CPU time grew by more than a
// fiftieth of the interval): freed memory comes from work. A quiet process
// waits twice as long each time, up to 32 intervals, and none at all without
// a free_limit; an idle node's thread then barely wakes.
//
// malloc_trim walks every glibc arena and can take tens of milliseconds after
// a multi-GiB drop; running it here keeps it off the actor threads, so no
// lookup or commit waits for it. Requests that arrive while a trim runs fold
// into one more trim.
//
//   memory_releaser releaser;           // starts its thread
//   releaser.request();                 // from any thread; never blocks
//   // the destructor stops and joins the thread
//
// Context: thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <mutex>
#include <thread>

namespace lmcc::apps {

class memory_releaser {
public:
  /// free_limit 0: only explicit requests release.
  explicit memory_releaser(size_t free_limit, std::chrono::milliseconds check_interval);
  ~memory_releaser();
  memory_releaser(const memory_releaser&) = delete;
  memory_releaser& operator=(const memory_releaser&) = delete;

  /// Asks for one release; returns at once.
  void request();

private:
  void run(std::stop_token stop);

  /// Whether the process used more CPU than a quiet one would since the
  /// last check; remembers the reading for the next.
  bool worked_since_last_check();

  const size_t free_limit_;
  const std::chrono::milliseconds check_interval_;
  double cpu_at_last_check_ = 0;
  std::mutex mutex_;
  std::condition_variable_any wake_;
  bool requested_ = false;
  std::jthread thread_; // last: started after the members it uses
};

} // namespace lmcc::apps
