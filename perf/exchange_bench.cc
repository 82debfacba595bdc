// exchange_bench: the floor of a small all-reduce between two processes on this machine. Each
// process writes a call number into a cache line of its own in shared memory (release) and
// spins until the other's line shows the same number (acquire): the least any library can
// do for an 8-byte all-reduce of two ranks, one cache line crossing each way at once, with
// no reduction, no bookkeeping and no timing of single calls. Also a ping-pong (one process
// answers the other's line), whose round trip is two crossings in a row. Times in
// microseconds per call, the best of ROUNDS rounds of CALLS calls.
//
// perf/compare_peers.sh prints it beside the 8-byte rows: the machine's speed for cache-line
// crossings moves by 2-3x from one minute to the next here, and this is the yardstick
// that moves with it.
//
// Usage: exchange_bench [CALLS [ROUNDS]]   (default 1000000 5; K/M/G suffixes)
#include <sched.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <new>

#include "base/config.h"

namespace {

// 128 bytes apart: the adjacent-line prefetcher pairs 64-byte lines.
struct alignas(128) Line {
  std::atomic<uint64_t> value;
};

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// The other process: the child's parent, or the parent's child (0 in the parent until fork).
pid_t g_parent = 0, g_child = 0;

// Spins until l shows v. Every 4096 spins it yields the core (both processes may share one:
// a cpuset or container of one CPU) and checks that the other process still runs, so that
// neither spins on forever once the other is gone.
void waitFor(const Line& l, uint64_t v) {
  for (uint32_t spins = 1; l.value.load(std::memory_order_acquire) < v; ++spins) {
    if (spins % 4096 != 0) continue;
    sched_yield();
    const bool gone = g_child ? waitpid(g_child, nullptr, WNOHANG) != 0 : getppid() != g_parent;
    // The other may have posted v and exited since the load above.
    if (gone && l.value.load(std::memory_order_acquire) < v) {
      std::fprintf(stderr, "exchange_bench: the other process is gone\n");
      _exit(1);
    }
  }
}

// One round of `calls` calls in process `me` (0 or 1) on lines[0..1]; the seconds it took.
// Call numbers run from `base` + 1, so a later round never sees an earlier round's numbers.
double round(Line* lines, int me, uint64_t base, uint64_t calls, bool pingPong) {
  Line& mine = lines[me];
  const Line& theirs = lines[1 - me];
  const double t = now();
  for (uint64_t i = base + 1; i <= base + calls; ++i) {
    if (pingPong && me == 1) waitFor(theirs, i);
    mine.value.store(i, std::memory_order_release);
    if (!pingPong || me == 0) waitFor(theirs, i);
  }
  return now() - t;
}

}  // namespace

int main(int argc, char** argv) {
  size_t calls = 1000000, rounds = 5;
  if ((argc > 1 && !braid::parseByteSize(argv[1], &calls)) ||
      (argc > 2 && !braid::parseByteSize(argv[2], &rounds)) || calls == 0 || rounds == 0 ||
      calls > (size_t{1} << 40) || rounds > 1000 || argc > 3) {
    std::fprintf(stderr,
                 "usage: exchange_bench [CALLS [ROUNDS]]  (CALLS in 1..2^40, ROUNDS in 1..1000; "
                 "K/M/G suffixes)\n");
    return 2;
  }
  void* mem = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) {
    std::perror("exchange_bench: mmap");
    return 1;
  }
  Line* lines = new (mem) Line[2];
  lines[0].value.store(0);
  lines[1].value.store(0);
  // The parent's figures are printed; the child runs the same rounds and exits.
  std::fflush(stdout);
  g_parent = getpid();
  const pid_t child = fork();
  if (child < 0) {
    std::perror("exchange_bench: fork");
    return 1;
  }
  if (child == 0) prctl(PR_SET_PDEATHSIG, SIGKILL);  // killed with its parent
  g_child = child;
  const int me = child == 0 ? 1 : 0;
  double exchange = 1e30, pingPong = 1e30;
  uint64_t base = 0;
  for (size_t r = 0; r < rounds; ++r) {
    exchange = std::min(exchange, round(lines, me, base, calls, false));
    base += calls;
    pingPong = std::min(pingPong, round(lines, me, base, calls, true));
    base += calls;
  }
  if (child == 0) _exit(0);
  int status = 0;
  waitpid(child, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::fprintf(stderr, "exchange_bench: the second process failed\n");
    return 1;
  }
  const double n = static_cast<double>(calls);
  std::printf("# two processes, %zu calls a round, best of %zu rounds\n", calls, rounds);
  std::printf("exchange %.3f us   ping-pong %.3f us\n", exchange / n * 1e6, pingPong / n * 1e6);
  return 0;
}
