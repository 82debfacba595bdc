/// @file braid_memory.h
/// A communicator's device memory: how much it holds, and releasing it while the communicator
/// is idle (NCCL 2.29's ncclCommMemStats, ncclCommSuspend and ncclCommResume map onto these).
/// Part of the public API: braid.h includes it (inside its extern "C"); not meant to be
/// included alone.
///
/// A host communicator holds no device memory. A communicator made on a thread with a CUDA
/// device holds, once calls on device buffers have run device to device, a scratch buffer and
/// a staging block on the device (grown on demand to the largest call's need); nothing else of
/// it lives on the device (its FIFOs are host shared memory), so all of it can be released.
#ifndef BRAID_BRAID_MEMORY_H_
#define BRAID_BRAID_MEMORY_H_

#ifndef BRAID_BRAID_H_
#error "include braid/braid.h, which includes braid/braid_memory.h"
#endif

/// What braidCommMemStats reports; the values of NCCL's ncclCommMemStat_t.
typedef enum {
  braidStatGpuMemSuspend = 0,    ///< bytes of device memory braidCommSuspend releases
  braidStatGpuMemSuspended = 1,  ///< 1 while the communicator is suspended, else 0
  braidStatGpuMemPersist = 2,    ///< bytes of device memory kept while suspended (0 in Braid)
  braidStatGpuMemTotal = 3       ///< bytes of device memory the communicator holds
} braidCommMemStat_t;

/// braidCommSuspend's flag (NCCL_SUSPEND_MEM): release the device memory.
#define BRAID_SUSPEND_MEM 0x01

/// *value = the statistic `stat` of comm (ncclCommMemStats). Local; allowed while suspended.
/// @return braidInvalidArgument for a bad comm, a stat outside braidCommMemStat_t or NULL value.
braidResult_t braidCommMemStats(braidComm_t comm, braidCommMemStat_t stat, uint64_t* value);

/// Suspends comm (ncclCommSuspend): waits for the calls queued on its streams, then every
/// call on comm fails with braidInvalidUsage until braidCommResume; with BRAID_SUSPEND_MEM its
/// device memory is freed (braidStatGpuMemTotal reads 0). Local: each rank suspends its own.
/// @param flags 0 or BRAID_SUSPEND_MEM
/// @return braidInvalidArgument for a bad comm or flags; braidInvalidUsage if comm is
///         suspended already or failed earlier.
braidResult_t braidCommSuspend(braidComm_t comm, int flags);

/// Resumes a suspended comm (ncclCommResume): the device memory it released is allocated
/// again, at the sizes it had, and calls run again.
/// @return braidInvalidUsage if comm is not suspended; braidUnhandledCudaError (or the device
///         runtime's error) if the memory cannot be had back, comm staying suspended.
braidResult_t braidCommResume(braidComm_t comm);

#endif  // BRAID_BRAID_MEMORY_H_
