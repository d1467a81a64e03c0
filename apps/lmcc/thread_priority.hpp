// thread_priority: the node's ingest threads under SCHED_IDLE
// (lmcc_ingest_idle_priority).
//
// On a box whose cores ingest keeps busy, a request's reply waits for its
// threads to get a core: each wake-up on its way (socket thread, libzmq I/O
// thread) may wait out a running ingest thread's time slice. A thread whose
// policy is SCHED_IDLE is preempted at once by any ordinary thread that wakes,
// and runs whenever nothing else wants the core, so ingest keeps every idle
// cycle while requests jump ahead of it. The price: on a host where other
// processes keep the cores busy, ingest gets almost nothing and falls behind
// (the PUSH sockets then push back on the workers). Hence an option, off by
// default. Under `lmcc-bench flood` on two cores it roughly halves request
// p99.
//
//   init->on_thread_start = idle_at_start(options.ingest_idle_priority, "lmcc-shard");
//
// Context: Linux; any thread. Lowering a thread's own policy needs no privilege.
#pragma once

#include <cstddef>
#include <functional>
#include <string_view>

namespace lmcc::apps {

/// Puts the calling thread under SCHED_IDLE; false (logged) when refused.
bool make_this_thread_idle(std::string_view what);

/// What a thread the node starts calls first: make_this_thread_idle(`what`)
/// when `idle`, else nothing (an empty function). `what` must outlive it.
std::function<void()> idle_at_start(bool idle, std::string_view what);

/// Puts this process's threads named `name` under SCHED_IDLE (threads the node
/// does not start itself: libzmq's I/O threads); how many it changed.
size_t make_threads_idle(std::string_view name);

} // namespace lmcc::apps
