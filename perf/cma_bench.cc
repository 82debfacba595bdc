// cma_bench: what single copy between processes through process_vm_readv (cross-memory
// attach, the only way one process reads another's heap memory) moves on this machine,
// beside memcpy within one process, in one run. A child process reads SIZE bytes of its
// parent's heap buffer in PIECE-sized calls, as Braid's BRAID_SINGLE_COPY=all path does, and
// copies the same bytes with memcpy; both in GB/s (1e9 B/s), the best of ROUNDS rounds.
// docs/host-performance.md uses it to show why heap buffers stay on the FIFO's two copies.
//
// Usage: cma_bench [SIZE [PIECE [ROUNDS]]]   (bytes, K/M/G suffixes; default 64M 1M 5)
// Exit status 77 (a skip, for the smoke test) where the kernel refuses process_vm_readv.
#include <sys/prctl.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "base/config.h"

namespace {

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

char* pageAligned(size_t bytes, int fill) {
  void* p = nullptr;
  if (posix_memalign(&p, 4096, bytes) != 0) {
    std::fprintf(stderr, "cma_bench: cannot allocate %zu bytes\n", bytes);
    std::exit(1);
  }
  std::memset(p, fill, bytes);  // first touch: no page faults in the timed copies
  return static_cast<char*>(p);
}

}  // namespace

int main(int argc, char** argv) {
  size_t size = size_t{64} << 20, piece = size_t{1} << 20, rounds = 5;
  if ((argc > 1 && !braid::parseByteSize(argv[1], &size)) ||
      (argc > 2 && !braid::parseByteSize(argv[2], &piece)) ||
      (argc > 3 && !braid::parseByteSize(argv[3], &rounds)) || size == 0 || piece == 0 ||
      rounds == 0 || argc > 4) {
    std::fprintf(stderr, "usage: cma_bench [SIZE [PIECE [ROUNDS]]]  (bytes; K/M/G suffixes)\n");
    return 2;
  }
  char* src = pageAligned(size, 1);
  const pid_t parent = getpid();
  // Under Yama's ptrace_scope 1 a process may read only its descendants; let the child read.
  prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
  std::fflush(stdout);
  const pid_t child = fork();
  if (child < 0) {
    std::perror("cma_bench: fork");
    return 1;
  }
  if (child == 0) {
    char* dst = pageAligned(size, 0);
    char* copy = pageAligned(size, 0);
    double cma = 0, mem = 0;
    for (size_t r = 0; r < rounds; ++r) {
      double t = now();
      for (size_t off = 0; off < size; off += piece) {
        const size_t n = std::min(piece, size - off);
        iovec local{dst + off, n};
        iovec remote{src + off, n};
        if (process_vm_readv(parent, &local, 1, &remote, 1, 0) != static_cast<ssize_t>(n)) {
          // Refused (ptrace rules, a container without the capability): nothing to measure.
          const bool refused = errno == EPERM;
          std::perror("cma_bench: process_vm_readv");
          _exit(refused ? 77 : 1);
        }
      }
      cma = std::max(cma, static_cast<double>(size) / (now() - t) / 1e9);
      t = now();
      std::memcpy(copy, dst, size);
      mem = std::max(mem, static_cast<double>(size) / (now() - t) / 1e9);
    }
    if (std::memcmp(dst, src, size) != 0) {  // src is the child's copy-on-write view: all 1s
      std::fprintf(stderr, "cma_bench: process_vm_readv read other bytes\n");
      _exit(1);
    }
    std::printf("# %zu bytes in pieces of %zu, best of %zu rounds\n", size, piece, rounds);
    std::printf("process_vm_readv %.2f GB/s   memcpy %.2f GB/s   ratio %.2f\n", cma, mem,
                mem > 0 ? cma / mem : 0.0);
    std::fflush(stdout);
    _exit(0);
  }
  int status = 0;
  waitpid(child, &status, 0);
  std::free(src);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}
