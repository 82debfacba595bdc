// A communicator's device memory (braid_memory.h): its figures, suspend and resume.
#include <mutex>

#include "base/error.h"
#include "core/comm.h"
#include "device/device.h"

using braid::fail;

extern "C" {

braidResult_t braidCommMemStats(braidComm_t comm, braidCommMemStat_t stat, uint64_t* value) {
  return braid::guardApi("braidCommMemStats", [&]() -> braidResult_t {
    BRAID_TRY(braid::checkComm(comm, "braidCommMemStats"));
    if (!value) return fail(braidInvalidArgument, "braidCommMemStats: value is NULL");
    if (const int raw = braid::rawValue(stat); raw < 0 || raw > braidStatGpuMemTotal)
      return fail(braidInvalidArgument,
                  "braidCommMemStats: stat %d is not a braidCommMemStat_t (0..3)", raw);
    std::lock_guard<std::mutex> lock(comm->mu);
    const uint64_t held = comm->deviceScratch.bytes() + comm->deviceBlock.bytes();
    switch (stat) {
      case braidStatGpuMemSuspended:
        *value = comm->suspended ? 1 : 0;
        break;
      case braidStatGpuMemPersist:
        *value = 0;
        break;  // nothing must stay on the device
      default:
        *value = held;
        break;  // all of it can be released
    }
    return braidSuccess;
  });
}

braidResult_t braidCommSuspend(braidComm_t comm, int flags) {
  return braid::guardApi("braidCommSuspend", [&]() -> braidResult_t {
    BRAID_TRY(braid::checkComm(comm, "braidCommSuspend"));
    if (flags != 0 && flags != BRAID_SUSPEND_MEM)
      return fail(braidInvalidArgument,
                  "braidCommSuspend: flags is %d; give 0 or BRAID_SUSPEND_MEM (1)", flags);
    BRAID_TRY(braid::checkNotRevoked(comm, "braidCommSuspend"));
    braid::waitForQueuedWork(comm, false);
    std::lock_guard<std::mutex> lock(comm->mu);  // after the call running now
    if (comm->suspended)
      return fail(braidInvalidUsage, "braidCommSuspend: comm is suspended already");
    if (!comm->broken.empty())
      return fail(braidInvalidUsage, "braidCommSuspend: comm failed earlier: %s",
                  comm->broken.c_str());
    comm->suspended = true;
    if (flags & BRAID_SUSPEND_MEM) {
      comm->suspendedScratch = comm->deviceScratch.bytes();
      comm->suspendedBlock = comm->deviceBlock.bytes();
      comm->deviceScratch.release();
      comm->deviceBlock.release();
    }
    return braidSuccess;
  });
}

braidResult_t braidCommResume(braidComm_t comm) {
  return braid::guardApi("braidCommResume", [&]() -> braidResult_t {
    BRAID_TRY(braid::checkComm(comm, "braidCommResume"));
    std::lock_guard<std::mutex> lock(comm->mu);
    if (!comm->suspended)
      return fail(braidInvalidUsage, "braidCommResume: comm is not suspended (braidCommSuspend)");
    if (comm->suspendedScratch + comm->suspendedBlock > 0) {
      // On comm's device, leaving the calling thread's current device as it was.
      const braid::device::Runtime& rt = braid::device::runtime();
      const int previous = rt.currentDevice(nullptr);
      braidResult_t r = rt.setDevice(comm->cudaDevice);
      if (r == braidSuccess) r = comm->deviceScratch.reserve(comm->suspendedScratch);
      if (r == braidSuccess) r = comm->deviceBlock.reserve(comm->suspendedBlock);
      if (previous >= 0 && previous != comm->cudaDevice) rt.setDevice(previous);
      BRAID_TRY(r);
    }
    comm->suspendedScratch = comm->suspendedBlock = 0;
    comm->suspended = false;
    return braidSuccess;
  });
}

}  // extern "C"
