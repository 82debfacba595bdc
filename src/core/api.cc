// The C entry points that make no call on data: the version and unique ids (and their text
// form), communicators (init, split, destroy, abort, finalize, their queries and async error),
// memory (host and device allocation, braidMemcpy, registration), error strings, and the sizes
// and names of datatypes and ops. Bad arguments are refused here, before anything moves, with a
// message naming the argument; the communicator's machinery is comm.cc's. Calls on data enter
// in collectives.cc (groups: groups.cc; algorithms: algorithm_api.cc; streams: stream.cc) and
// run in calls.cc.
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "base/error.h"
#include "base/host_mem.h"
#include "braid/braid.h"
#include "core/bootstrap.h"
#include "core/comm.h"
#include "core/entry_points.h"
#include "core/stream.h"
#include "device/device.h"

using braid::checkComm;
using braid::fail;

namespace braid {
void waitForQueuedWork(braidComm* comm, bool close) {
  braid::QueuedWork& q = *comm->queuedWork;
  std::unique_lock<std::mutex> lock(q.mu);
  q.cv.wait(lock, [&q] { return q.pending == 0; });
  if (!close) return;
  q.closed = true;
  q.cv.wait(lock, [&q] { return q.running == 0; });
}
}  // namespace braid
using braid::waitForQueuedWork;

namespace {

// braidCommDestroy and braidCommAbort: a non-blocking init still running is stopped (its
// waits see comm->aborted within kAbortPollMs) and its thread joined; one that finished is
// joined. comm is then as a blocking init left it, whole or half made.
void stopInit(braidComm* comm) {
  if (!comm->initThread.joinable()) return;
  if (comm->initState.load(std::memory_order_acquire) == braidInProgress)
    comm->aborted.store(true, std::memory_order_release);
  comm->initThread.join();
}

// braidCommAbort: closes the queue at once, so work not started yet (a CUDA stream may never
// reach it) fails without touching comm, and waits for the work that has started (it fails
// at once now that comm is aborted).
void closeQueuedWork(braidComm* comm) {
  braid::QueuedWork& q = *comm->queuedWork;
  std::unique_lock<std::mutex> lock(q.mu);
  q.closed = true;
  q.cv.wait(lock, [&q] { return q.running == 0; });
}

}  // namespace

namespace braid {

braidResult_t checkConfig(const braidConfig_t* config, const char* fn) {
  if (!config) return braidSuccess;
  // The layout before checkCalls (offsetof) is still accepted: its programs read as -1.
  if ((config->size != sizeof(braidConfig_t) &&
       config->size != offsetof(braidConfig_t, checkCalls)) ||
      config->magic != BRAID_CONFIG_MAGIC)
    return fail(braidInvalidArgument,
                "%s: config was not initialised with BRAID_CONFIG_INITIALIZER (config->size "
                "%zu, expected %zu; config->magic 0x%x)",
                fn, config->size, sizeof(braidConfig_t), config->magic);
  if (!(config->timeoutSec >= 0) || config->timeoutSec > 1e9)
    return fail(braidInvalidArgument,
                "%s: config->timeoutSec is %g; give seconds in [0, 1e9] (0: BRAID_TIMEOUT)", fn,
                config->timeoutSec);
  if (config->stallWarnSec != config->stallWarnSec || config->stallWarnSec > 1e9)
    return fail(braidInvalidArgument,
                "%s: config->stallWarnSec is %g; give seconds up to 1e9 (0: off, negative: "
                "BRAID_STALL_WARN)",
                fn, config->stallWarnSec);
  return braidSuccess;
}

braidConfig_t childConfig(const braidComm* comm, const braidConfig_t* config) {
  braidConfig_t merged = BRAID_CONFIG_INITIALIZER;
  if (config) std::memcpy(&merged, config, config->size);  // a size checkConfig accepted
  merged.size = sizeof merged;
  if (!(merged.timeoutSec > 0)) merged.timeoutSec = comm->timeoutSec;
  if (merged.stallWarnSec < 0) merged.stallWarnSec = comm->stallWarnSec;
  if (merged.checkCalls < 0) merged.checkCalls = comm->checkCalls ? 1 : 0;
  // blocking = 0 too: the call's last steps need the new communicator, so it finishes before
  // returning (NCCL may complete a non-blocking call at once, too).
  merged.blocking = 1;
  return merged;
}

namespace {

// One rank's part in a split round: its result so far (and why it failed), and its data.
struct SplitEntry {
  int32_t code;  // braidResult_t
  int32_t color;
  int32_t key;
  char why[244];
};
static_assert(sizeof(SplitEntry) == 256);

SplitEntry splitEntry(braidResult_t code, int color, int key) {
  SplitEntry e{};
  e.code = code;
  e.color = color;
  e.key = key;
  if (code != braidSuccess) std::snprintf(e.why, sizeof(e.why), "%s", lastError());
  return e;
}

// After a round: braidSuccess if every rank's entry is; else this rank's own failure, or
// braidInvalidUsage naming the ranks that failed and the first one's reason.
braidResult_t splitVerdict(const std::vector<SplitEntry>& all, int rank, const char* stage) {
  std::string failed;
  int first = -1;
  for (size_t r = 0; r < all.size(); ++r) {
    if (all[r].code == braidSuccess) continue;
    if (!failed.empty()) failed += ',';
    failed += std::to_string(r);
    if (first < 0) first = static_cast<int>(r);
  }
  if (first < 0) return braidSuccess;
  const SplitEntry& mine = all[static_cast<size_t>(rank)];
  if (mine.code != braidSuccess)
    return failVerbatim(static_cast<braidResult_t>(mine.code), mine.why);
  return fail(braidInvalidUsage,
              "braidCommSplit: %s failed on rank%s %s of the parent communicator, so it failed "
              "on every rank (rank %d: %s)",
              stage, failed.find(',') == std::string::npos ? "" : "s", failed.c_str(), first,
              all[static_cast<size_t>(first)].why);
}

}  // namespace

braidResult_t splitComm(braidComm* comm, int color, int key, braidComm_t* newcomm,
                        const braidConfig_t* config, braidResult_t local) {
  // Round 1: every rank's (result, color, key). Round 2: each new rank 0's unique id. Round
  // 3: every rank's result of creating its new communicator. Every rank takes part in every
  // round, failed or not, and all return an error if any rank failed: none waits for a rank
  // that has left.
  const int n = comm->nranks;
  std::vector<SplitEntry> all(static_cast<size_t>(n));
  const SplitEntry mine = splitEntry(local, color, key);
  BRAID_TRY(braidAllGather(&mine, all.data(), sizeof mine, braidUint8, comm, nullptr));
  BRAID_TRY(splitVerdict(all, comm->rank, "checking the arguments"));
  std::vector<int> members;  // parent ranks of my color, in new-rank order
  if (color != BRAID_SPLIT_NOCOLOR) {
    for (int r = 0; r < n; ++r)
      if (all[r].color == color) members.push_back(r);
    std::stable_sort(members.begin(), members.end(),
                     [&](int a, int b) { return all[a].key < all[b].key; });
  }
  struct IdEntry {
    int32_t code;
    char why[124];
    braidUniqueId id;
  };
  IdEntry idMine{};
  const bool leader = !members.empty() && members[0] == comm->rank;
  if (leader && (idMine.code = braidGetUniqueId(&idMine.id)) != braidSuccess)
    std::snprintf(idMine.why, sizeof(idMine.why), "%s", lastError());
  std::vector<IdEntry> ids(static_cast<size_t>(n));
  BRAID_TRY(braidAllGather(&idMine, ids.data(), sizeof idMine, braidUint8, comm, nullptr));
  for (int r = 0; r < n; ++r) {
    all[r].code = ids[r].code;
    std::snprintf(all[r].why, sizeof(all[r].why), "%s", ids[r].why);
  }
  BRAID_TRY(splitVerdict(all, comm->rank, "starting a new communicator's bootstrap"));
  braidResult_t made = braidSuccess;
  if (!members.empty()) {
    const int newRank =
        static_cast<int>(std::find(members.begin(), members.end(), comm->rank) - members.begin());
    // Fields the caller's config leaves unset (timeoutSec 0, stallWarnSec and checkCalls
    // negative) are comm's, as with a NULL config.
    braidConfig_t merged = childConfig(comm, config);
    made = braidCommInitRankConfig(newcomm, static_cast<int>(members.size()), ids[members[0]].id,
                                   newRank, &merged);
    if (made != braidSuccess)
      made = failVerbatim(made, std::string("braidCommSplit: ") + lastError());
    else {
      (*newcomm)->parentRanks = members;
      braid::inheritRecorder(*newcomm, comm, color, key);
    }
  }
  const SplitEntry madeEntry = splitEntry(made, color, key);
  const braidResult_t round3 =
      braidAllGather(&madeEntry, all.data(), sizeof madeEntry, braidUint8, comm, nullptr);
  braidResult_t verdict = round3 != braidSuccess
                              ? round3
                              : splitVerdict(all, comm->rank, "creating the new communicators");
  if (verdict != braidSuccess && made == braidSuccess && newcomm && *newcomm) {
    const std::string why = lastError();
    braidCommDestroy(*newcomm);
    *newcomm = nullptr;
    verdict = failVerbatim(verdict, why);
  }
  return verdict;
}

braidResult_t commSplit(braidComm* comm, int color, int key, braidComm_t* newcomm,
                        const braidConfig_t* config, braidResult_t prior) {
  BRAID_TRY(checkComm(comm, "braidCommSplit"));
  // In flight across its rounds: a braidCommAbort from another thread waits for it (its
  // abort flag makes the remaining rounds fail at once) instead of freeing comm under it.
  InFlight running(comm);
  if (braid::insideGroup())  // the split's all-gathers would be deferred: nothing can run
    return fail(braidInvalidUsage,
                "braidCommSplit: called inside braidGroupStart/End; split outside a group");
  if (newcomm) *newcomm = nullptr;
  // A bad argument on this rank alone: it still takes part in the exchange, so that its
  // peers fail with it instead of waiting for it.
  braidResult_t local = prior;  // the caller's failure, if any (its message in lastError())
  if (local == braidSuccess && !newcomm)
    local = fail(braidInvalidArgument, "braidCommSplit: newcomm is NULL");
  if (local == braidSuccess && color < BRAID_SPLIT_NOCOLOR)
    local =
        fail(braidInvalidArgument,
             "braidCommSplit: color is %d; it must be >= 0, or BRAID_SPLIT_NOCOLOR (-1)", color);
  if (local == braidSuccess) local = checkConfig(config, "braidCommSplit");
  return splitComm(comm, color, key, newcomm, config, local);
}

}  // namespace braid

extern "C" {

braidResult_t braidGetVersion(int* version) {
  return braid::guardApi("braidGetVersion", [&]() -> braidResult_t {
    if (!version) return fail(braidInvalidArgument, "braidGetVersion: version is NULL");
    *version = BRAID_VERSION_CODE;
    return braidSuccess;
  });
}

braidResult_t braidGetUniqueId(braidUniqueId* uniqueId) {
  return braid::guardApi("braidGetUniqueId", [&]() -> braidResult_t {
    if (!uniqueId) return fail(braidInvalidArgument, "braidGetUniqueId: uniqueId is NULL");
    return braid::createUniqueId(uniqueId);
  });
}

braidResult_t braidCommInitRank(braidComm_t* comm, int nranks, braidUniqueId commId, int rank) {
  return braid::guardApi("braidCommInitRank", [&]() -> braidResult_t {
    return braidCommInitRankConfig(comm, nranks, commId, rank, nullptr);
  });
}

braidResult_t braidCommInitRankConfig(braidComm_t* comm, int nranks, braidUniqueId commId, int rank,
                                      braidConfig_t* config) {
  return braid::guardApi("braidCommInitRankConfig", [&]() -> braidResult_t {
    if (!comm) return fail(braidInvalidArgument, "braidCommInitRank: comm is NULL");
    BRAID_TRY(braid::checkConfig(config, "braidCommInitRankConfig"));
    *comm = nullptr;
    if (nranks < 1)
      return fail(braidInvalidArgument, "braidCommInitRank: nranks is %d; it must be >= 1", nranks);
    if (rank < 0 || rank >= nranks)
      return fail(braidInvalidArgument,
                  "braidCommInitRank: rank %d is out of range; it must be in [0, nranks=%d)", rank,
                  nranks);
    braid::UniqueIdData data;
    BRAID_TRY(braid::decodeUniqueId(commId, &data));
    if (config && config->blocking == 0)
      return braid::commInitAsync(comm, nranks, commId, rank, *config);
    return braid::commInit(comm, nranks, commId, rank, config);
  });
}

braidResult_t braidCommInitAll(braidComm_t* comms, int ndev, const int* devlist) {
  return braid::guardApi("braidCommInitAll", [&]() -> braidResult_t {
    if (!comms) return fail(braidInvalidArgument, "braidCommInitAll: comms is NULL");
    if (ndev < 1)
      return fail(braidInvalidArgument, "braidCommInitAll: ndev is %d; it must be >= 1", ndev);
    // With a CUDA device, rank r's communicator is on devlist[r]; with devlist NULL every rank
    // is on the calling thread's current device (NCCL takes devices 0..ndev-1; Braid lets
    // more ranks than GPUs share one, as its tests and one-GPU machines do). Without a
    // device every rank is a host rank and devlist is not read. Each listed device is tried
    // here first: a rank that failed later would leave the others waiting for BRAID_TIMEOUT.
    const braid::device::Runtime& rt = braid::device::runtime();
    const int current = rt.currentDevice(nullptr);
    if (current >= 0 && devlist) {
      for (int r = 0; r < ndev; ++r)
        if (rt.setDevice(devlist[r]) != braidSuccess) {
          const std::string why = braid::lastError();
          rt.setDevice(current);
          return fail(braidInvalidArgument, "braidCommInitAll: devlist[%d] = %d: %s", r, devlist[r],
                      why.c_str());
        }
      rt.setDevice(current);
    }
    braidUniqueId id;
    BRAID_TRY(braidGetUniqueId(&id));
    std::vector<braidResult_t> results(ndev, braidSuccess);
    std::vector<std::string> messages(ndev);
    // jthreads: if one cannot start (std::system_error, made braidSystemError by guardApi),
    // those started are joined as the vector unwinds (after their ranks' init fails: the
    // missing rank never comes), never left joinable.
    std::vector<std::jthread> threads;
    for (int r = 0; r < ndev; ++r) {
      threads.emplace_back([&, r] {
        if (current >= 0) results[r] = rt.setDevice(devlist ? devlist[r] : current);
        if (results[r] == braidSuccess) results[r] = braidCommInitRank(&comms[r], ndev, id, r);
        if (results[r] != braidSuccess) messages[r] = braid::lastError();
      });
    }
    for (auto& t : threads) t.join();
    for (int r = 0; r < ndev; ++r) {
      if (results[r] != braidSuccess) {
        for (int k = 0; k < ndev; ++k)
          if (results[k] == braidSuccess && comms[k]) braidCommDestroy(comms[k]);
        for (int k = 0; k < ndev; ++k) comms[k] = nullptr;
        return braid::failVerbatim(results[r], "braidCommInitAll: " + messages[r]);
      }
    }
    return braidSuccess;
  });
}

braidResult_t braidCommSplit(braidComm_t comm, int color, int key, braidComm_t* newcomm,
                             braidConfig_t* config) {
  return braid::guardApi("braidCommSplit", [&]() -> braidResult_t {
    return braid::commSplit(comm, color, key, newcomm, config, braidSuccess);
  });
}

braidResult_t braidCommDestroy(braidComm_t comm) {
  return braid::guardApi("braidCommDestroy", [&]() -> braidResult_t {
    BRAID_TRY(braid::checkCommHandle(comm, "braidCommDestroy"));
    // Calls deferred to this thread's open group would run (or be predicted) on freed memory.
    if (std::any_of(braid::t_pending.begin(), braid::t_pending.end(),
                    [&](const braid::Pending& p) { return p.comm == comm; }))
      return fail(braidInvalidUsage,
                  "braidCommDestroy: comm has calls in this thread's open group; end the group "
                  "first (braidGroupEnd), or braidCommAbort, which drops them");
    stopInit(comm);
    waitForQueuedWork(comm, true);  // it would run on freed memory
    {
      std::lock_guard<std::mutex> lock(comm->mu);  // waits for a running collective
      comm->magic = 0;
    }
    if (comm->proxy && !comm->broken.empty()) comm->proxy->abandon();
    if (comm->control) comm->control->stop();  // its thread lands puts in the windows freed next
    braid::freeWindows(comm);
    delete comm;
    return braidSuccess;
  });
}

braidResult_t braidCommAbort(braidComm_t comm) {
  return braid::guardApi("braidCommAbort", [&]() -> braidResult_t {
    BRAID_TRY(braid::checkCommHandle(comm, "braidCommAbort"));
    // Its calls deferred to this thread's open group are dropped: they would run on freed memory.
    std::erase_if(braid::t_pending, [&](const braid::Pending& p) { return p.comm == comm; });
    stopInit(comm);
    comm->aborted.store(true);
    // Peers on this host that wait on this rank see the connection lost at their next
    // liveness check (within 0.1 s) instead of waiting for BRAID_TIMEOUT.
    for (braid::Connection* c : comm->connPtrs)
      if (c) c->abandon(-1);
    // Calls blocked in other threads end at their next wait: wake them until they have left.
    while (comm->inFlight.load() > 0) {
      if (comm->segment) comm->segment->doorbell()->ring();
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    closeQueuedWork(comm);
    {
      std::lock_guard<std::mutex> lock(comm->mu);
      comm->magic = 0;
    }
    if (comm->proxy) comm->proxy->abandon();
    if (comm->control) comm->control->stop();
    braid::freeWindows(comm);
    delete comm;
    return braidSuccess;
  });
}

braidResult_t braidCommGetAsyncError(braidComm_t comm, braidResult_t* asyncError) {
  return braid::guardApi("braidCommGetAsyncError", [&]() -> braidResult_t {
    BRAID_TRY(braid::checkCommHandle(comm, "braidCommGetAsyncError"));
    if (!asyncError)
      return fail(braidInvalidArgument, "braidCommGetAsyncError: asyncError is NULL");
    // No lock: a watchdog polls while a call runs, an application while init runs.
    const braidResult_t init = comm->initState.load(std::memory_order_acquire);
    *asyncError = init != braidSuccess ? init : comm->brokenCode.load();
    return braidSuccess;
  });
}

braidResult_t braidCommFinalize(braidComm_t comm) {
  return braid::guardApi("braidCommFinalize", [&]() -> braidResult_t {
    BRAID_TRY(checkComm(comm, "braidCommFinalize"));
    waitForQueuedWork(comm, false);
    std::lock_guard<std::mutex> lock(comm->mu);
    braid::LogRankScope rankScope(comm->rank);
    comm->finalized = true;
    if (comm->brokenCode != braidSuccess)
      return fail(comm->brokenCode, "braidCommFinalize: the communicator failed earlier: %s",
                  comm->broken.c_str());
    return braidSuccess;
  });
}

braidResult_t braidCommCount(const braidComm_t comm, int* count) {
  return braid::guardApi("braidCommCount", [&]() -> braidResult_t {
    BRAID_TRY(checkComm(comm, "braidCommCount"));
    if (!count) return fail(braidInvalidArgument, "braidCommCount: count is NULL");
    *count = comm->nranks;
    return braidSuccess;
  });
}

braidResult_t braidCommUserRank(const braidComm_t comm, int* rank) {
  return braid::guardApi("braidCommUserRank", [&]() -> braidResult_t {
    BRAID_TRY(checkComm(comm, "braidCommUserRank"));
    if (!rank) return fail(braidInvalidArgument, "braidCommUserRank: rank is NULL");
    *rank = comm->rank;
    return braidSuccess;
  });
}

braidResult_t braidCommCuDevice(const braidComm_t comm, int* device) {
  return braid::guardApi("braidCommCuDevice", [&]() -> braidResult_t {
    BRAID_TRY(checkComm(comm, "braidCommCuDevice"));
    if (!device) return fail(braidInvalidArgument, "braidCommCuDevice: device is NULL");
    *device = comm->cudaDevice;
    return braidSuccess;
  });
}

braidResult_t braidMemAllocHost(void** ptr, size_t size) {
  return braid::guardApi("braidMemAllocHost",
                         [&]() -> braidResult_t { return braid::hostmem::alloc(ptr, size); });
}

braidResult_t braidMemFreeHost(void* ptr) {
  return braid::guardApi("braidMemFreeHost",
                         [&]() -> braidResult_t { return braid::hostmem::free(ptr); });
}

braidResult_t braidMemAlloc(void** ptr, size_t size) {
  return braid::guardApi("braidMemAlloc", [&]() -> braidResult_t {
    if (!ptr) return fail(braidInvalidArgument, "braidMemAlloc: ptr is NULL");
    *ptr = nullptr;
    if (size == 0) return braidSuccess;
    return braid::device::runtime().alloc(ptr, size);
  });
}

braidResult_t braidMemFree(void* ptr) {
  return braid::guardApi("braidMemFree", [&]() -> braidResult_t {
    if (!ptr) return braidSuccess;
    braid::hostmem::Ref ref;
    if (braid::hostmem::find(ptr, 1, &ref) && !braid::device::runtime().isDevice(ptr))
      return braid::fail(braidInvalidArgument,
                         "braidMemFree: %p is host memory from braidMemAllocHost; free it with "
                         "braidMemFreeHost",
                         ptr);
    return braid::device::runtime().free(ptr);
  });
}

braidResult_t braidMemcpy(void* dst, const void* src, size_t bytes) {
  return braid::guardApi("braidMemcpy", [&]() -> braidResult_t {
    if (bytes == 0) return braidSuccess;
    if (!dst || !src)
      return fail(braidInvalidArgument, "braidMemcpy: %s is NULL with %zu bytes to copy",
                  dst ? "src" : "dst", bytes);
    const braid::device::Runtime& rt = braid::device::runtime();
    const bool devDst = rt.isDevice(dst), devSrc = rt.isDevice(src);
    if (devSrc && devDst) {  // through host memory: no device-to-device entry in the runtime
      std::vector<char> staging(bytes);
      BRAID_TRY(rt.toHost(staging.data(), src, bytes));
      return rt.toDevice(dst, staging.data(), bytes);
    }
    if (devSrc) return rt.toHost(dst, src, bytes);
    if (devDst) return rt.toDevice(dst, src, bytes);
    std::memmove(dst, src, bytes);  // the ranges may overlap
    return braidSuccess;
  });
}

braidResult_t braidCommRegister(const braidComm_t comm, void* buff, size_t size, void** handle) {
  return braid::guardApi("braidCommRegister", [&]() -> braidResult_t {
    BRAID_TRY(checkComm(comm, "braidCommRegister"));
    if (!handle) return fail(braidInvalidArgument, "braidCommRegister: handle is NULL");
    *handle = nullptr;
    if (!buff && size > 0)
      return fail(braidInvalidArgument, "braidCommRegister: buff is NULL with size %zu", size);
    auto reg = std::make_unique<braidComm::Registration>(braidComm::Registration{buff, size});
    std::lock_guard<std::mutex> lock(comm->mu);
    *handle = reg.get();
    comm->registrations.push_back(std::move(reg));
    return braidSuccess;
  });
}

braidResult_t braidCommDeregister(const braidComm_t comm, void* handle) {
  return braid::guardApi("braidCommDeregister", [&]() -> braidResult_t {
    BRAID_TRY(checkComm(comm, "braidCommDeregister"));
    std::lock_guard<std::mutex> lock(comm->mu);
    auto& regs = comm->registrations;
    auto it =
        std::find_if(regs.begin(), regs.end(), [&](const auto& r) { return r.get() == handle; });
    if (it == regs.end())
      return fail(braidInvalidArgument,
                  "braidCommDeregister: handle %p was not given by braidCommRegister on this "
                  "communicator (or was released already)",
                  handle);
    regs.erase(it);
    return braidSuccess;
  });
}

const char* braidGetErrorString(braidResult_t result) {
  switch (result) {
    case braidSuccess:
      return "no error";
    case braidUnhandledCudaError:
      return "unhandled cuda error";
    case braidSystemError:
      return "unhandled system error";
    case braidInternalError:
      return "internal error - please report this issue to the Braid developers";
    case braidInvalidArgument:
      return "invalid argument";
    case braidInvalidUsage:
      return "invalid usage";
    case braidRemoteError:
      return "remote process exited or there was a network error";
    case braidInProgress:
      return "Braid operation in progress";
    case braidTimeout:
      return "timed out (BRAID_TIMEOUT)";
    default:
      return "unknown result code";
  }
}

const char* braidGetLastError(braidComm_t comm) {
  if (comm && comm->magic == braidComm::kMagic) {
    const braidResult_t init = comm->initState.load(std::memory_order_acquire);
    if (init != braidSuccess && init != braidInProgress) return comm->initError.c_str();
  }
  if (comm && comm->magic == braidComm::kMagic && !comm->lastError.empty())
    return comm->lastError.c_str();
  return braid::lastError();
}

braidResult_t braidUniqueIdToString(const braidUniqueId* id,
                                    char out[2 * BRAID_UNIQUE_ID_BYTES + 1]) {
  return braid::guardApi("braidUniqueIdToString", [&]() -> braidResult_t {
    if (!id || !out) return fail(braidInvalidArgument, "braidUniqueIdToString: id or out is NULL");
    static const char* hex = "0123456789abcdef";
    for (int i = 0; i < BRAID_UNIQUE_ID_BYTES; ++i) {
      unsigned char b = static_cast<unsigned char>(id->internal[i]);
      out[2 * i] = hex[b >> 4];
      out[2 * i + 1] = hex[b & 15];
    }
    out[2 * BRAID_UNIQUE_ID_BYTES] = '\0';
    return braidSuccess;
  });
}

braidResult_t braidUniqueIdFromString(const char* text, braidUniqueId* id) {
  return braid::guardApi("braidUniqueIdFromString", [&]() -> braidResult_t {
    if (!text || !id)
      return fail(braidInvalidArgument, "braidUniqueIdFromString: text or id is NULL");
    if (std::strlen(text) != 2 * BRAID_UNIQUE_ID_BYTES)
      return fail(braidInvalidArgument,
                  "unique id text has %zu characters; it must be %d hex digits (BRAID_UNIQUE_ID)",
                  std::strlen(text), 2 * BRAID_UNIQUE_ID_BYTES);
    auto nibble = [](char c) -> int {
      if (c >= '0' && c <= '9') return c - '0';
      if (c >= 'a' && c <= 'f') return c - 'a' + 10;
      if (c >= 'A' && c <= 'F') return c - 'A' + 10;
      return -1;
    };
    for (int i = 0; i < BRAID_UNIQUE_ID_BYTES; ++i) {
      int hi = nibble(text[2 * i]), lo = nibble(text[2 * i + 1]);
      if (hi < 0 || lo < 0)
        return fail(braidInvalidArgument, "unique id text has a non-hex character at position %d",
                    hi < 0 ? 2 * i : 2 * i + 1);
      id->internal[i] = static_cast<char>(hi << 4 | lo);
    }
    return braidSuccess;
  });
}

size_t braidTypeSize(braidDataType_t datatype) {
  switch (datatype) {
    case braidInt8:
    case braidUint8:
    case braidFloat8e4m3:
    case braidFloat8e5m2:
      return 1;
    case braidFloat16:
    case braidBfloat16:
      return 2;
    case braidInt32:
    case braidUint32:
    case braidFloat32:
      return 4;
    case braidInt64:
    case braidUint64:
    case braidFloat64:
      return 8;
    default:
      return 0;
  }
}

const char* braidTypeName(braidDataType_t datatype) {
  switch (datatype) {
    case braidInt8:
      return "int8";
    case braidUint8:
      return "uint8";
    case braidInt32:
      return "int32";
    case braidUint32:
      return "uint32";
    case braidInt64:
      return "int64";
    case braidUint64:
      return "uint64";
    case braidFloat16:
      return "half";
    case braidFloat32:
      return "float";
    case braidFloat64:
      return "double";
    case braidBfloat16:
      return "bfloat16";
    case braidFloat8e4m3:
      return "f8e4m3";
    case braidFloat8e5m2:
      return "f8e5m2";
    default:
      return "unknown";
  }
}

const char* braidOpName(braidRedOp_t op) {
  switch (op) {
    case braidSum:
      return "sum";
    case braidProd:
      return "prod";
    case braidMax:
      return "max";
    case braidMin:
      return "min";
    case braidAvg:
      return "avg";
    default:
      return "unknown";
  }
}

}  // extern "C"
