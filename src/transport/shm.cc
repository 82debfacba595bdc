#include "transport/shm.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <linux/mempolicy.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <string>

#include "base/error.h"
#include "base/socket.h"

namespace braid {

bool processGone(int pid) {
  if (pid <= 0) return false;
  if (kill(pid, 0) != 0) return errno == ESRCH;
  // An exited process stays a zombie until its parent reaps it.
  char path[64], state = 0;
  std::snprintf(path, sizeof(path), "/proc/%d/stat", pid);
  if (FILE* f = std::fopen(path, "r")) {
    if (std::fscanf(f, "%*d (%*[^)]) %c", &state) != 1) state = 0;
    std::fclose(f);
  }
  return state == 'Z' || state == 'X';
}

namespace {

constexpr size_t kLine = kFifoLine;

struct SegmentHeader {
  uint64_t magic;
  uint32_t nfifos;
  uint32_t slots;
  uint64_t slotBytes;
  uint64_t fifoBytes;
};
// Line 0: the header; line 1: the owner's doorbell; then its owner area (a CallPosition), then
// the FIFOs.
constexpr size_t kPositionOffset = 2 * kLine;
constexpr size_t kFifosOffset = kPositionOffset + ShmSegment::kOwnerAreaBytes;
static_assert(sizeof(SegmentHeader) <= kLine);
static_assert(sizeof(Doorbell) <= kLine);
static_assert(ShmSegment::kOwnerAreaBytes % kLine == 0);
// Changed with the layout (0x4d48532d44495242 had the CallPosition in line 0 and the FIFOs at
// line 2): a segment of another build is refused rather than read at other offsets.
constexpr uint64_t kSegMagic = 0x3253532d44495242ull;

}  // namespace

struct ShmSegment::Mapping {
  Mapping(void* b, size_t n) : base(b), bytes(n) {}
  ~Mapping() { munmap(base, bytes); }
  void* const base;
  const size_t bytes;
};

namespace {

// This process's mappings by segment name, so that thread ranks share one.
class Mappings {
 public:
  std::shared_ptr<ShmSegment::Mapping> find(const std::string& name) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = byName_.find(name);
    return it == byName_.end() ? nullptr : it->second.lock();
  }
  void add(const std::string& name, const std::shared_ptr<ShmSegment::Mapping>& m) {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = byName_.begin(); it != byName_.end();)
      it = it->second.expired() ? byName_.erase(it) : std::next(it);
    byName_[name] = m;
  }

 private:
  std::mutex mu_;
  std::map<std::string, std::weak_ptr<ShmSegment::Mapping>> byName_;
};

Mappings& mappings() {
  static Mappings* m = new Mappings;  // never destroyed: segments may outlive static teardown
  return *m;
}

// Names this process created and has not unlinked yet. If the process exits while a rank
// is still inside init (another thread's exit(), say), its destructor unlinks them, so
// nothing is left in /dev/shm; std::quick_exit does the same (perf binaries abort with it).
class LinkedSegments {
 public:
  LinkedSegments() {
    std::at_quick_exit(+[] { linkedSegmentsUnlinkAll(); });
  }
  void add(const std::string& name) {
    std::lock_guard<std::mutex> lock(mu_);
    names_.insert(name);
  }
  void remove(const std::string& name) {
    std::lock_guard<std::mutex> lock(mu_);
    names_.erase(name);
  }
  // From exit or quick_exit, while other threads may still run: waits at most ~100 ms
  // for a thread that is adding or removing a name, never forever.
  void unlinkAll() {
    bool locked = false;
    for (int i = 0; i < 1000 && !(locked = mu_.try_lock()); ++i) usleep(100);
    if (!locked) return;
    for (const std::string& n : names_) shm_unlink(n.c_str());
    names_.clear();
    mu_.unlock();
  }
  ~LinkedSegments() { unlinkAll(); }

 private:
  static void linkedSegmentsUnlinkAll();
  std::mutex mu_;
  std::set<std::string> names_;
};

LinkedSegments& linkedSegments() {
  static LinkedSegments segments;
  return segments;
}

void LinkedSegments::linkedSegmentsUnlinkAll() { linkedSegments().unlinkAll(); }

// Segments whose creator has died without unlinking them (killed during init, or exiting
// while another rank thread was still in init): the name carries the creator's pid, so the
// next Braid process on the host removes them, once, before creating its own.
void removeSegmentsOfDeadProcesses() {
  DIR* d = opendir("/dev/shm");
  if (!d) return;
  while (dirent* e = readdir(d)) {
    int pid = 0;
    if (std::sscanf(e->d_name, "braid-%d-", &pid) != 1 || pid <= 0) continue;
    if (processGone(pid)) shm_unlink(("/" + std::string(e->d_name)).c_str());
  }
  closedir(d);
}

}  // namespace

void sweepDeadSegments() { removeSegmentsOfDeadProcesses(); }

static_assert(sizeof(std::atomic<uint64_t>) == 8 && std::atomic<uint64_t>::is_always_lock_free);

namespace {

// Places the pages of [base, base + bytes), a shared mapping, on NUMA node `node` whoever
// faults them in (the policy belongs to the shared object, so the peers' first writes obey
// it too): a rank then reads its inbound FIFOs from local memory, and its peers' stores
// cross the interconnect instead (a store is posted; a load waits for the far node).
// MPOL_PREFERRED, not BIND: a full node spills to another rather than failing. No-op for
// node < 0; a kernel without NUMA support (ENOSYS) or a refusal only logs.
void preferNode(void* base, size_t bytes, int node) {
  constexpr int kNodes = 1024;  // the mask's bits (Linux's MAX_NUMNODES on x86-64 and arm64)
  if (node < 0) return;
  if (node >= kNodes) {
    BRAID_INFO("INIT", "shared-memory FIFOs not placed on NUMA node %d (beyond %d)", node, kNodes);
    return;
  }
  const size_t bits = 8 * sizeof(unsigned long);
  unsigned long mask[kNodes / bits] = {};
  mask[static_cast<size_t>(node) / bits] |= 1ul << (static_cast<size_t>(node) % bits);
  // maxnode is the mask's bit count plus one: the kernel reads maxnode - 1 bits (mbind(2)).
  if (syscall(SYS_mbind, base, bytes, MPOL_PREFERRED, mask, kNodes + 1, 0) != 0)
    BRAID_INFO("INIT", "shared-memory FIFOs not placed on NUMA node %d (mbind: %s)", node,
               strerror(errno));
}

}  // namespace

braidResult_t ShmSegment::create(int nfifos, int slots, size_t slotBytes, int numaNode,
                                 std::unique_ptr<ShmSegment>* out) {
  slotBytes = (slotBytes + kLine - 1) / kLine * kLine;
  size_t fifoBytes = fifoBytesFor(slots, slotBytes);
  size_t bytes = kFifosOffset + static_cast<size_t>(nfifos) * fifoBytes;
  std::unique_ptr<ShmSegment> s(new ShmSegment());
  static std::once_flag swept;
  std::call_once(swept, removeSegmentsOfDeadProcesses);
  uint8_t rnd[12];
  BRAID_TRY(randomBytes(rnd, sizeof(rnd)));
  char name[64];
  // The creator's pid in the name says whose segment it is, should one ever be left behind.
  int n = snprintf(name, sizeof(name), "/braid-%d-", static_cast<int>(getpid()));
  for (uint8_t b : rnd) n += snprintf(name + n, sizeof(name) - n, "%02x", b);
  int fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0)
    return fail(braidSystemError, "shm_open(%s) failed: %s (is /dev/shm mounted and writable?)",
                name, strerror(errno));
  s->name_ = name;
  s->owner_ = true;
  s->linked_ = true;
  linkedSegments().add(s->name_);
  if (ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    int e = errno;
    ::close(fd);
    return fail(braidSystemError, "ftruncate of %s to %zu bytes failed: %s (/dev/shm full?)", name,
                bytes, strerror(e));
  }
  void* base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  if (base == MAP_FAILED)
    return fail(braidSystemError, "mmap of %s failed: %s", name, strerror(errno));
  s->mapping_ = std::make_shared<Mapping>(base, bytes);
  s->base_ = base;
  preferNode(base, bytes, numaNode);
  auto* h = static_cast<SegmentHeader*>(base);
  h->nfifos = static_cast<uint32_t>(nfifos);
  h->slots = static_cast<uint32_t>(slots);
  h->slotBytes = slotBytes;
  h->fifoBytes = fifoBytes;
  std::memset(static_cast<char*>(base) + kPositionOffset, 0, ShmSegment::kOwnerAreaBytes);
  new (static_cast<char*>(base) + kLine) Doorbell();
  for (int i = 0; i < nfifos; ++i) {
    Fifo::init(s->fifo(i));
  }
  std::atomic_thread_fence(std::memory_order_release);
  h->magic = kSegMagic;
  mappings().add(s->name_, s->mapping_);
  *out = std::move(s);
  return braidSuccess;
}

braidResult_t ShmSegment::open(const std::string& name, std::unique_ptr<ShmSegment>* out,
                               bool quiet) {
  // One open at a time in this process, so that two thread ranks opening the same peer
  // segment at once share one mapping too.
  static std::mutex opening;
  std::lock_guard<std::mutex> lock(opening);
  if (std::shared_ptr<Mapping> m = mappings().find(name)) {  // a rank of this process made it
    std::unique_ptr<ShmSegment> s(new ShmSegment());
    s->name_ = name;
    s->mapping_ = std::move(m);
    s->base_ = s->mapping_->base;
    *out = std::move(s);
    return braidSuccess;
  }
  int fd = shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0 && quiet) return braidSystemError;
  if (fd < 0)
    return fail(braidSystemError,
                "cannot open a peer's shared memory %s: %s (different /dev/shm namespace, e.g. "
                "containers? set BRAID_HOST_ID to tell the hosts apart)",
                name.c_str(), strerror(errno));
  off_t size = lseek(fd, 0, SEEK_END);
  void* base =
      size > 0 ? mmap(nullptr, static_cast<size_t>(size), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)
               : MAP_FAILED;
  ::close(fd);
  if (base == MAP_FAILED && quiet) return braidSystemError;
  if (base == MAP_FAILED)
    return fail(braidSystemError, "mmap of peer segment %s failed: %s", name.c_str(),
                strerror(errno));
  std::unique_ptr<ShmSegment> s(new ShmSegment());
  s->name_ = name;
  s->mapping_ = std::make_shared<Mapping>(base, static_cast<size_t>(size));
  s->base_ = base;
  if (static_cast<SegmentHeader*>(base)->magic != kSegMagic)
    return quiet ? braidInternalError
                 : fail(braidInternalError, "peer segment %s is not initialised", name.c_str());
  mappings().add(name, s->mapping_);
  *out = std::move(s);
  return braidSuccess;
}

ShmSegment::~ShmSegment() { unlink(); }

void ShmSegment::unlink() {
  if (owner_ && linked_) {
    shm_unlink(name_.c_str());
    linkedSegments().remove(name_);
  }
  linked_ = false;
}

void* ShmSegment::fifo(int index) const {
  auto* h = static_cast<SegmentHeader*>(base_);
  return static_cast<char*>(base_) + kFifosOffset + static_cast<size_t>(index) * h->fifoBytes;
}
int ShmSegment::slots() const {
  return static_cast<int>(static_cast<SegmentHeader*>(base_)->slots);
}
size_t ShmSegment::slotBytes() const { return static_cast<SegmentHeader*>(base_)->slotBytes; }

void* ShmSegment::ownerArea() const { return static_cast<char*>(base_) + kPositionOffset; }

Doorbell* ShmSegment::doorbell() const {
  return reinterpret_cast<Doorbell*>(static_cast<char*>(base_) + kLine);
}

}  // namespace braid
