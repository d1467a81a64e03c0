// memory_releaser: hands the allocator's free pages back to the kernel on a
// thread of its own, when the shard asks (see actors/memory_release.hpp for
// when and why).
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

#include <condition_variable>
#include <mutex>
#include <thread>

namespace lmcc::apps {

class memory_releaser {
public:
  memory_releaser();
  ~memory_releaser();
  memory_releaser(const memory_releaser&) = delete;
  memory_releaser& operator=(const memory_releaser&) = delete;

  /// Asks for one release; returns at once.
  void request();

private:
  void run(std::stop_token stop);

  std::mutex mutex_;
  std::condition_variable_any wake_;
  bool requested_ = false;
  std::jthread thread_; // last: started after the members it uses
};

} // namespace lmcc::apps
