#include "base/host_mem.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <map>
#include <mutex>

#include "base/error.h"

namespace braid::hostmem {
namespace {

struct Allocation {
  size_t bytes;   // asked for
  size_t mapped;  // whole pages
  int fd;
  uint64_t id;
  uint64_t ino;
};

struct Registry {
  std::mutex mu;
  std::map<uintptr_t, Allocation> byBase;  // under mu
  uint64_t nextId = 1;                     // under mu
  std::atomic<uint32_t> epoch{0};
};

Registry& registry() {
  static Registry* r = new Registry;  // never destroyed: frees may run during exit
  return *r;
}

size_t pageBytes() {
  static const size_t p = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return p;
}

// Opens process pid's descriptor fd (a memfd) for reading; -1 with errno set on failure.
int openPeerFd(int pid, int fd) {
  const std::string path = "/proc/" + std::to_string(pid) + "/fd/" + std::to_string(fd);
  return open(path.c_str(), O_RDONLY | O_CLOEXEC);
}

}  // namespace

braidResult_t alloc(void** ptr, size_t size) {
  if (!ptr) return fail(braidInvalidArgument, "braidMemAllocHost: ptr is NULL");
  *ptr = nullptr;
  if (size == 0) return braidSuccess;
  const size_t page = pageBytes();
  if (size > (size_t{1} << 48))
    return fail(braidInvalidArgument, "braidMemAllocHost: size %zu is more than 2^48 bytes", size);
  const size_t mapped = (size + page - 1) / page * page;
  const int fd = memfd_create("braid-host", MFD_CLOEXEC);
  if (fd < 0)
    return fail(braidSystemError, "braidMemAllocHost: memfd_create failed: %s", strerror(errno));
  if (ftruncate(fd, static_cast<off_t>(mapped)) != 0) {
    const int e = errno;
    close(fd);
    return fail(braidSystemError, "braidMemAllocHost: cannot size a memfd to %zu bytes: %s", mapped,
                strerror(e));
  }
  void* p = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    const int e = errno;
    close(fd);
    return fail(braidSystemError, "braidMemAllocHost: cannot map %zu bytes: %s", mapped,
                strerror(e));
  }
  struct stat st {};
  fstat(fd, &st);
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  r.byBase[reinterpret_cast<uintptr_t>(p)] =
      Allocation{size, mapped, fd, r.nextId++, static_cast<uint64_t>(st.st_ino)};
  *ptr = p;
  return braidSuccess;
}

braidResult_t free(void* ptr) {
  if (!ptr) return braidSuccess;
  Registry& r = registry();
  Allocation a;
  {
    std::lock_guard<std::mutex> lock(r.mu);
    auto it = r.byBase.find(reinterpret_cast<uintptr_t>(ptr));
    if (it == r.byBase.end())
      return fail(braidInvalidArgument,
                  "braidMemFreeHost: ptr %p is not the start of memory from braidMemAllocHost "
                  "(or was freed already)",
                  ptr);
    a = it->second;
    r.byBase.erase(it);
    r.epoch.fetch_add(1, std::memory_order_release);
  }
  munmap(ptr, a.mapped);
  close(a.fd);
  return braidSuccess;
}

bool find(const void* p, size_t n, Ref* out) {
  Registry& r = registry();
  const uintptr_t at = reinterpret_cast<uintptr_t>(p);
  std::lock_guard<std::mutex> lock(r.mu);
  auto it = r.byBase.upper_bound(at);
  if (it == r.byBase.begin()) return false;
  --it;
  const Allocation& a = it->second;
  const size_t offset = at - it->first;
  if (offset > a.bytes || n > a.bytes - offset) return false;
  *out = Ref{a.fd, a.id, a.ino, offset, a.mapped};
  return true;
}

uint32_t freeEpoch() { return registry().epoch.load(std::memory_order_acquire); }

int probeFd(uint64_t token) {
  static const int fd = [token] {
    const int f = memfd_create("braid-probe", MFD_CLOEXEC);
    if (f < 0) return -1;
    if (pwrite(f, &token, sizeof(token), 0) != static_cast<ssize_t>(sizeof(token))) {
      close(f);
      return -1;
    }
    return f;
  }();
  return fd;
}

bool canMapPeer(int pid, int fd, uint64_t token, std::string* why) {
  if (fd < 0) {
    *why = "the peer has no probe (memfd_create failed there)";
    return false;
  }
  const int f = openPeerFd(pid, fd);
  if (f < 0) {
    *why = std::string("cannot open its memory through /proc: ") + strerror(errno);
    return false;
  }
  uint64_t theirs = 0;
  const ssize_t got = pread(f, &theirs, sizeof(theirs), 0);
  close(f);
  if (got != static_cast<ssize_t>(sizeof(theirs)) || theirs != token) {
    *why = "its probe through /proc holds other bytes (another process?)";
    return false;
  }
  *why = "through /proc/" + std::to_string(pid) + "/fd";
  return true;
}

const char* mapPeer(int pid, const Ref& ref, std::string* error) {
  const int f = openPeerFd(pid, ref.fd);
  if (f < 0) {
    *error = std::string("cannot open its buffer through /proc: ") + strerror(errno);
    return nullptr;
  }
  struct stat st {};
  if (fstat(f, &st) != 0 || static_cast<uint64_t>(st.st_ino) != ref.ino ||
      static_cast<size_t>(st.st_size) != ref.bytes) {
    close(f);
    *error = "its descriptor " + std::to_string(ref.fd) +
             " is no longer the allocation the piece names (was it closed or replaced?)";
    return nullptr;
  }
  void* p = mmap(nullptr, ref.bytes, PROT_READ, MAP_SHARED, f, 0);
  const int e = errno;
  close(f);
  if (p == MAP_FAILED) {
    *error = std::string("cannot map its buffer: ") + strerror(e);
    return nullptr;
  }
  return static_cast<const char*>(p);
}

bool peerStillHolds(int pid, int fd, uint64_t ino) {
  const std::string path = "/proc/" + std::to_string(pid) + "/fd/" + std::to_string(fd);
  struct stat st {};
  return stat(path.c_str(), &st) == 0 && static_cast<uint64_t>(st.st_ino) == ino;
}

void unmapPeer(const char* base, size_t bytes) { munmap(const_cast<char*>(base), bytes); }

}  // namespace braid::hostmem
