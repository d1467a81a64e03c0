// lmcc-wakeup-latency: how late a thread that sleeps wakes up on this box --
// the floor under every request latency a loaded node can give, since each
// request crosses several thread wake-ups (bench/RESULTS.md). Run it beside a
// flood: `lmcc-wakeup-latency [samples=3000] [slice_ns=0]`. With slice_ns, the
// thread first asks the kernel (6.12+, EEVDF) for that scheduling slice, to
// see whether a shorter slice wakes it sooner.
//
// Prints the lateness of 1 ms sleeps: p50, p90, p99 and max, in us, and how
// many were more than 5 ms late. Under `chrt -f 50` it says what no scheduling
// policy inside a node can win back: with a real-time priority the thread
// preempts every ordinary thread at once, so what lateness is left is the
// kernel or the hypervisor not running it (bench/RESULTS.md, twentieth cut).
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <sched.h>
#include <sys/syscall.h>
#include <thread>
#include <unistd.h>
#include <vector>

namespace {

/// struct sched_attr of sched_setattr(2); glibc 2.36 has no wrapper.
struct sched_attr_v1 {
  uint32_t size = sizeof(sched_attr_v1);
  uint32_t sched_policy = 0; // SCHED_OTHER
  uint64_t sched_flags = 0;
  int32_t sched_nice = 0;
  uint32_t sched_priority = 0;
  uint64_t sched_runtime = 0; // for SCHED_OTHER: the slice (6.12+)
  uint64_t sched_deadline = 0;
  uint64_t sched_period = 0;
};

} // namespace

int main(int argc, char** argv) {
  const size_t samples = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 3000;
  const uint64_t slice_ns = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 0;
  if (slice_ns != 0) {
    sched_attr_v1 attr;
    attr.sched_runtime = slice_ns;
    if (syscall(SYS_sched_setattr, 0, &attr, 0) != 0)
      std::perror("sched_setattr");
  }
  using clock = std::chrono::steady_clock;
  constexpr auto nap = std::chrono::milliseconds(1);
  std::vector<double> late_us;
  late_us.reserve(samples);
  for (size_t i = 0; i < samples; ++i) {
    const auto t0 = clock::now();
    std::this_thread::sleep_for(nap);
    late_us.push_back(std::chrono::duration<double, std::micro>(clock::now() - t0 - nap).count());
  }
  if (late_us.empty())
    return 0;
  std::sort(late_us.begin(), late_us.end());
  const auto at = [&](double q) { return late_us[static_cast<size_t>(q * (late_us.size() - 1))]; };
  const auto over_5ms = late_us.end() - std::upper_bound(late_us.begin(), late_us.end(), 5000.0);
  std::printf(
      "slice_ns=%llu samples=%zu late_us p50=%.0f p90=%.0f p99=%.0f max=%.0f over_5ms=%td\n",
      static_cast<unsigned long long>(slice_ns), late_us.size(), at(0.5), at(0.9), at(0.99),
      late_us.back(), over_5ms);
  return 0;
}
