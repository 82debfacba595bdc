// libnccl.so.2: NCCL's names forwarding to Braid's (include/compat/nccl.h). Types are
// converted field by field or checked to share layout; result codes are NCCL 2.30's (Braid's
// are the same values, braidTimeout ncclTimeout). Each ncclX is a weak symbol with a strong
// pncclX alias, as in NCCL, so profilers can interpose; libnccl.map exports those alone.
#include "compat/nccl.h"

#include <climits>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>
#include <tuple>
#include <utility>

#include "base/error.h"
#include "braid/braid.h"
#include "braid/braid_config.h"
#include "core/comm.h"

static_assert(sizeof(ncclUniqueId) == sizeof(braidUniqueId), "unique ids differ in size");
static_assert(NCCL_UNIQUE_ID_BYTES == BRAID_UNIQUE_ID_BYTES);
static_assert(static_cast<int>(ncclNumTypes) == static_cast<int>(braidNumTypes));
static_assert(static_cast<int>(ncclBfloat16) == static_cast<int>(braidBfloat16) &&
              static_cast<int>(ncclFloat8e5m2) == static_cast<int>(braidFloat8e5m2));
static_assert(static_cast<int>(ncclAvg) == static_cast<int>(braidAvg) &&
              static_cast<int>(ncclNumOps) == static_cast<int>(braidNumOps));
static_assert(static_cast<int>(ncclInProgress) == static_cast<int>(braidInProgress) &&
              static_cast<int>(ncclTimeout) == static_cast<int>(braidTimeout) &&
              static_cast<int>(ncclNumResults) == static_cast<int>(braidNumResults));
// NCCL 2.30's layout (LP64), which code built against NCCL passes.
static_assert(sizeof(ncclConfig_t) == 96 && offsetof(ncclConfig_t, maxP2pPeers) == 88);

namespace {

ncclResult_t toNccl(braidResult_t r) { return static_cast<ncclResult_t>(r); }
braidComm_t toBraid(ncclComm_t comm) { return reinterpret_cast<braidComm_t>(comm); }
braidDataType_t toBraid(ncclDataType_t t) { return static_cast<braidDataType_t>(t); }
braidRedOp_t toBraid(ncclRedOp_t op) { return static_cast<braidRedOp_t>(op); }
braidUniqueId toBraid(const ncclUniqueId& id) {
  braidUniqueId b;
  std::memcpy(b.internal, id.internal, sizeof b.internal);
  return b;
}
// NCCL's calls are ordered on the caller's cudaStream_t. On a device communicator each
// cudaStream_t gets a Braid stream ordered with it (braidStreamCreateCuda), made on its first
// use and kept for the process (a handle the application destroys and CUDA reuses stays
// valid: the Braid stream holds nothing of it but its value). The special handles name
// another stream on each device (NULL, cudaStreamLegacy) and cudaStreamPerThread on each
// thread too, so the key holds the communicator's device and, for that one, the thread. The proxy
// stages on the communicator's device, whatever thread made the stream. On a host communicator (no
// CUDA device) a call has finished when it returns. If the Braid stream cannot be made, the call
// runs synchronously (the device synchronized first), as said once on stderr.
braidStream_t toBraid(cudaStream_t stream, ncclComm_t comm) {
  int device = -1;
  if (!comm || braidCommCuDevice(toBraid(comm), &device) != braidSuccess || device < 0)
    return nullptr;
  const cudaStream_t kPerThread = reinterpret_cast<cudaStream_t>(0x2);  // cudaStreamPerThread
  const std::thread::id thread =
      stream == kPerThread ? std::this_thread::get_id() : std::thread::id();
  static std::mutex mu;
  static std::map<std::tuple<cudaStream_t, int, std::thread::id>, braidStream_t> streams;
  std::lock_guard<std::mutex> lock(mu);
  braidStream_t& s = streams[{stream, device, thread}];
  if (!s && braidStreamCreateCuda(&s, stream) != braidSuccess) {
    static bool said = false;
    if (!said)
      std::fprintf(stderr,
                   "BRAID WARN NCCL drop-in: calls run synchronously, not ordered on their CUDA "
                   "stream: %s\n",
                   braidGetLastError(nullptr));
    said = true;
    s = nullptr;
  }
  return s;
}

// ncclConfig_t -> braidConfig_t. NULL stays NULL (defaults; ncclCommSplit: inherit). A
// config not made by NCCL_CONFIG_INITIALIZER is refused as NCCL refuses it.
braidResult_t toBraid(const ncclConfig_t* in, braidConfig_t* out, const char* fn,
                      braidConfig_t** result) {
  *result = nullptr;
  if (!in) return braidSuccess;
  if (in->magic != 0xcafebeef || in->size < offsetof(ncclConfig_t, splitShare))
    return braid::fail(braidInvalidArgument,
                       "%s: config was not initialised with NCCL_CONFIG_INITIALIZER (size %zu, "
                       "magic 0x%x)",
                       fn, in->size, in->magic);
  if (in->blocking != NCCL_CONFIG_UNDEF_INT && in->blocking != 0 && in->blocking != 1)
    return braid::fail(braidInvalidArgument, "%s: config->blocking is %d; it must be 0 or 1", fn,
                       in->blocking);
  *out = braidConfig_t BRAID_CONFIG_INITIALIZER;
  if (in->blocking != NCCL_CONFIG_UNDEF_INT) out->blocking = in->blocking;
  *result = out;
  return braidSuccess;
}

}  // namespace

extern "C" {

#define NCCL_EXPORT __attribute__((visibility("default"), weak))

NCCL_EXPORT ncclResult_t ncclGetVersion(int* version) {
  if (!version) return toNccl(braid::fail(braidInvalidArgument, "ncclGetVersion: version is NULL"));
  *version = NCCL_VERSION_CODE;
  return ncclSuccess;
}
NCCL_EXPORT ncclResult_t ncclGetUniqueId(ncclUniqueId* uniqueId) {
  return toNccl(braidGetUniqueId(reinterpret_cast<braidUniqueId*>(uniqueId)));
}
NCCL_EXPORT ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId,
                                          int rank) {
  return toNccl(
      braidCommInitRank(reinterpret_cast<braidComm_t*>(comm), nranks, toBraid(commId), rank));
}
NCCL_EXPORT ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId commId,
                                                int rank, ncclConfig_t* config) {
  braidConfig_t storage, *converted;
  if (braidResult_t r = toBraid(config, &storage, "ncclCommInitRankConfig", &converted))
    return toNccl(r);
  return toNccl(braidCommInitRankConfig(reinterpret_cast<braidComm_t*>(comm), nranks,
                                        toBraid(commId), rank, converted));
}
NCCL_EXPORT ncclResult_t ncclCommInitAll(ncclComm_t* comm, int ndev, const int* devlist) {
  return toNccl(braidCommInitAll(reinterpret_cast<braidComm_t*>(comm), ndev, devlist));
}
NCCL_EXPORT ncclResult_t ncclCommFinalize(ncclComm_t comm) {
  return toNccl(braidCommFinalize(toBraid(comm)));
}
NCCL_EXPORT ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  return toNccl(braidCommDestroy(toBraid(comm)));
}
NCCL_EXPORT ncclResult_t ncclCommAbort(ncclComm_t comm) {
  return toNccl(braidCommAbort(toBraid(comm)));
}
NCCL_EXPORT ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm,
                                       ncclConfig_t* config) {
  braidConfig_t storage, *converted = nullptr;
  // A config refused on this rank alone must not leave its peers waiting in the split: the
  // rank takes part and every rank fails, naming it.
  return toNccl(braid::guardApi("ncclCommSplit", [&]() -> braidResult_t {
    const braidResult_t r = toBraid(config, &storage, "ncclCommSplit", &converted);
    return braid::commSplit(toBraid(comm), color, key, reinterpret_cast<braidComm_t*>(newcomm),
                            r == braidSuccess ? converted : nullptr, r);
  }));
}
NCCL_EXPORT void ncclResetDebugInit(void) { braidResetDebugInit(); }
NCCL_EXPORT const char* ncclGetErrorString(ncclResult_t result) {
  return braidGetErrorString(static_cast<braidResult_t>(result));
}
NCCL_EXPORT const char* ncclGetLastError(ncclComm_t comm) {
  return braidGetLastError(toBraid(comm));
}
NCCL_EXPORT ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError) {
  braidResult_t braidError = braidSuccess;
  const braidResult_t r = braidCommGetAsyncError(toBraid(comm), asyncError ? &braidError : nullptr);
  if (asyncError && r == braidSuccess) *asyncError = toNccl(braidError);
  return toNccl(r);
}
NCCL_EXPORT ncclResult_t ncclCommCount(const ncclComm_t comm, int* count) {
  return toNccl(braidCommCount(toBraid(comm), count));
}
NCCL_EXPORT ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int* device) {
  return toNccl(braidCommCuDevice(toBraid(comm), device));
}
NCCL_EXPORT ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank) {
  return toNccl(braidCommUserRank(toBraid(comm), rank));
}
NCCL_EXPORT ncclResult_t ncclMemAlloc(void** ptr, size_t size) {
  return toNccl(braidMemAlloc(ptr, size));
}
NCCL_EXPORT ncclResult_t ncclMemFree(void* ptr) { return toNccl(braidMemFree(ptr)); }
NCCL_EXPORT ncclResult_t ncclCommRegister(const ncclComm_t comm, void* buff, size_t size,
                                          void** handle) {
  return toNccl(braidCommRegister(toBraid(comm), buff, size, handle));
}
NCCL_EXPORT ncclResult_t ncclCommDeregister(const ncclComm_t comm, void* handle) {
  return toNccl(braidCommDeregister(toBraid(comm), handle));
}
NCCL_EXPORT ncclResult_t ncclRedOpCreatePreMulSum(ncclRedOp_t* op, void* scalar,
                                                  ncclDataType_t datatype,
                                                  ncclScalarResidence_t residence,
                                                  ncclComm_t comm) {
  return toNccl(
      braidRedOpCreatePreMulSum(reinterpret_cast<braidRedOp_t*>(op), scalar, toBraid(datatype),
                                static_cast<braidScalarResidence_t>(residence), toBraid(comm)));
}
NCCL_EXPORT ncclResult_t ncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm) {
  return toNccl(braidRedOpDestroy(toBraid(op), toBraid(comm)));
}
NCCL_EXPORT ncclResult_t ncclReduce(const void* sendbuff, void* recvbuff, size_t count,
                                    ncclDataType_t datatype, ncclRedOp_t op, int root,
                                    ncclComm_t comm, cudaStream_t stream) {
  return toNccl(braidReduce(sendbuff, recvbuff, count, toBraid(datatype), toBraid(op), root,
                            toBraid(comm), toBraid(stream, comm)));
}
NCCL_EXPORT ncclResult_t ncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root,
                                   ncclComm_t comm, cudaStream_t stream) {
  return toNccl(
      braidBcast(buff, count, toBraid(datatype), root, toBraid(comm), toBraid(stream, comm)));
}
NCCL_EXPORT ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                                       ncclDataType_t datatype, int root, ncclComm_t comm,
                                       cudaStream_t stream) {
  return toNccl(braidBroadcast(sendbuff, recvbuff, count, toBraid(datatype), root, toBraid(comm),
                               toBraid(stream, comm)));
}
NCCL_EXPORT ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                                       ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                       cudaStream_t stream) {
  return toNccl(braidAllReduce(sendbuff, recvbuff, count, toBraid(datatype), toBraid(op),
                               toBraid(comm), toBraid(stream, comm)));
}
NCCL_EXPORT ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                                           ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                           cudaStream_t stream) {
  return toNccl(braidReduceScatter(sendbuff, recvbuff, recvcount, toBraid(datatype), toBraid(op),
                                   toBraid(comm), toBraid(stream, comm)));
}
NCCL_EXPORT ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                                       ncclDataType_t datatype, ncclComm_t comm,
                                       cudaStream_t stream) {
  return toNccl(braidAllGather(sendbuff, recvbuff, sendcount, toBraid(datatype), toBraid(comm),
                               toBraid(stream, comm)));
}
NCCL_EXPORT ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype,
                                  int peer, ncclComm_t comm, cudaStream_t stream) {
  return toNccl(
      braidSend(sendbuff, count, toBraid(datatype), peer, toBraid(comm), toBraid(stream, comm)));
}
NCCL_EXPORT ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer,
                                  ncclComm_t comm, cudaStream_t stream) {
  return toNccl(
      braidRecv(recvbuff, count, toBraid(datatype), peer, toBraid(comm), toBraid(stream, comm)));
}
NCCL_EXPORT ncclResult_t ncclGroupStart(void) { return toNccl(braidGroupStart()); }
NCCL_EXPORT ncclResult_t ncclGroupEnd(void) { return toNccl(braidGroupEnd()); }

// ---- NCCL 2.22-2.30 ----------------------------------------------------------------------
NCCL_EXPORT ncclResult_t ncclAlltoAll(const void* sendbuff, void* recvbuff, size_t count,
                                      ncclDataType_t datatype, ncclComm_t comm,
                                      cudaStream_t stream) {
  return toNccl(braidAllToAll(sendbuff, recvbuff, count, toBraid(datatype), toBraid(comm),
                              toBraid(stream, comm)));
}
NCCL_EXPORT ncclResult_t ncclGather(const void* sendbuff, void* recvbuff, size_t count,
                                    ncclDataType_t datatype, int root, ncclComm_t comm,
                                    cudaStream_t stream) {
  return toNccl(braidGather(sendbuff, recvbuff, count, toBraid(datatype), root, toBraid(comm),
                            toBraid(stream, comm)));
}
NCCL_EXPORT ncclResult_t ncclScatter(const void* sendbuff, void* recvbuff, size_t count,
                                     ncclDataType_t datatype, int root, ncclComm_t comm,
                                     cudaStream_t stream) {
  return toNccl(braidScatter(sendbuff, recvbuff, count, toBraid(datatype), root, toBraid(comm),
                             toBraid(stream, comm)));
}
NCCL_EXPORT ncclResult_t ncclCommInitRankScalable(ncclComm_t* newcomm, int nranks, int myrank,
                                                  int nId, ncclUniqueId* commIds,
                                                  ncclConfig_t* config) {
  if (nId < 1)
    return toNccl(braid::fail(braidInvalidArgument,
                              "ncclCommInitRankScalable: nId is %d; it must be at least 1", nId));
  if (!commIds)
    return toNccl(braid::fail(braidInvalidArgument, "ncclCommInitRankScalable: commIds is NULL"));
  braidConfig_t storage, *converted;
  if (braidResult_t r = toBraid(config, &storage, "ncclCommInitRankScalable", &converted))
    return toNccl(r);
  return toNccl(braidCommInitRankConfig(reinterpret_cast<braidComm_t*>(newcomm), nranks,
                                        toBraid(commIds[0]), myrank, converted));
}
// NCCL 2.27-2.29's fault tolerance, over braid_fault.h's (the same arguments and flags).
static_assert(NCCL_SHRINK_DEFAULT == BRAID_SHRINK_DEFAULT &&
              NCCL_SHRINK_ABORT == BRAID_SHRINK_ABORT &&
              NCCL_REVOKE_DEFAULT == BRAID_REVOKE_DEFAULT);
NCCL_EXPORT ncclResult_t ncclCommShrink(ncclComm_t comm, int* excludeRanksList,
                                        int excludeRanksCount, ncclComm_t* newcomm,
                                        ncclConfig_t* config, int shrinkFlags) {
  braidConfig_t storage, *converted;
  if (braidResult_t r = toBraid(config, &storage, "ncclCommShrink", &converted)) return toNccl(r);
  return toNccl(braidCommShrink(toBraid(comm), excludeRanksList, excludeRanksCount,
                                reinterpret_cast<braidComm_t*>(newcomm), converted, shrinkFlags));
}
NCCL_EXPORT ncclResult_t ncclCommGetUniqueId(ncclComm_t comm, ncclUniqueId* uniqueId) {
  return toNccl(braidCommGetUniqueId(toBraid(comm), reinterpret_cast<braidUniqueId*>(uniqueId)));
}
NCCL_EXPORT ncclResult_t ncclCommGrow(ncclComm_t comm, int nRanks, const ncclUniqueId* uniqueId,
                                      int rank, ncclComm_t* newcomm, ncclConfig_t* config) {
  braidConfig_t storage, *converted;
  if (braidResult_t r = toBraid(config, &storage, "ncclCommGrow", &converted)) return toNccl(r);
  return toNccl(braidCommGrow(toBraid(comm), nRanks,
                              reinterpret_cast<const braidUniqueId*>(uniqueId), rank,
                              reinterpret_cast<braidComm_t*>(newcomm), converted));
}
NCCL_EXPORT ncclResult_t ncclCommRevoke(ncclComm_t comm, int revokeFlags) {
  return toNccl(braidCommRevoke(toBraid(comm), revokeFlags));
}
// NCCL 2.29's memory calls, over braid_memory.h (the same values and flag).
static_assert(NCCL_SUSPEND_MEM == BRAID_SUSPEND_MEM &&
              static_cast<int>(ncclStatGpuMemTotal) == static_cast<int>(braidStatGpuMemTotal));
NCCL_EXPORT ncclResult_t ncclCommSuspend(ncclComm_t comm, int flags) {
  return toNccl(braidCommSuspend(toBraid(comm), flags));
}
NCCL_EXPORT ncclResult_t ncclCommResume(ncclComm_t comm) {
  return toNccl(braidCommResume(toBraid(comm)));
}
NCCL_EXPORT ncclResult_t ncclCommMemStats(ncclComm_t comm, ncclCommMemStat_t stat,
                                          uint64_t* value) {
  return toNccl(braidCommMemStats(toBraid(comm), static_cast<braidCommMemStat_t>(stat), value));
}
// NCCL 2.27-2.29's windows and one-sided calls, over braid_rma.h (the same flags and layout).
static_assert(NCCL_WIN_COLL_SYMMETRIC == BRAID_WIN_COLL_SYMMETRIC &&
              NCCL_WIN_STRICT_ORDERING == BRAID_WIN_STRICT_ORDERING &&
              sizeof(ncclWaitSignalDesc_t) == sizeof(braidWaitSignalDesc_t));
braidWindow_t toBraid(ncclWindow_t w) { return reinterpret_cast<braidWindow_t>(w); }
NCCL_EXPORT ncclResult_t ncclCommWindowRegister(ncclComm_t comm, void* buff, size_t size,
                                                ncclWindow_t* win, int winFlags) {
  return toNccl(braidCommWindowRegister(toBraid(comm), buff, size,
                                        reinterpret_cast<braidWindow_t*>(win), winFlags));
}
NCCL_EXPORT ncclResult_t ncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win) {
  return toNccl(braidCommWindowDeregister(toBraid(comm), toBraid(win)));
}
NCCL_EXPORT ncclResult_t ncclWinGetUserPtr(ncclComm_t comm, ncclWindow_t win, void** outUserPtr) {
  return toNccl(braidWinGetUserPtr(toBraid(comm), toBraid(win), outUserPtr));
}
NCCL_EXPORT ncclResult_t ncclPutSignal(const void* localbuff, size_t count, ncclDataType_t datatype,
                                       int peer, ncclWindow_t peerWin, size_t peerWinOffset,
                                       int sigIdx, int ctx, unsigned int flags, ncclComm_t comm,
                                       cudaStream_t stream) {
  return toNccl(braidPutSignal(localbuff, count, toBraid(datatype), peer, toBraid(peerWin),
                               peerWinOffset, sigIdx, ctx, flags, toBraid(comm),
                               toBraid(stream, comm)));
}
NCCL_EXPORT ncclResult_t ncclSignal(int peer, int sigIdx, int ctx, unsigned int flags,
                                    ncclComm_t comm, cudaStream_t stream) {
  return toNccl(braidSignal(peer, sigIdx, ctx, flags, toBraid(comm), toBraid(stream, comm)));
}
NCCL_EXPORT ncclResult_t ncclWaitSignal(int nDesc, ncclWaitSignalDesc_t* signalDescs,
                                        ncclComm_t comm, cudaStream_t stream) {
  return toNccl(braidWaitSignal(nDesc, reinterpret_cast<const braidWaitSignalDesc_t*>(signalDescs),
                                toBraid(comm), toBraid(stream, comm)));
}
NCCL_EXPORT ncclResult_t ncclGroupSimulateEnd(ncclSimInfo_t* simInfo) {
  if (!simInfo) return ncclGroupEnd();  // NCCL's: no simInfo, an ordinary group end
  double us = -1;                       // left alone by a nested level
  const braidResult_t r = braidGroupSimulateEnd(&us);
  if (r != braidSuccess) return toNccl(r);  // outside a group; a refused call of the group
  // As NCCL: a simInfo it cannot read ends the group (dropped, nothing run) with an error.
  if (simInfo->magic != 0x74685283 ||
      simInfo->size < offsetof(ncclSimInfo_t, estimatedTime) + sizeof(float))
    return toNccl(braid::fail(braidInvalidArgument,
                              "ncclGroupSimulateEnd: simInfo was not initialised with "
                              "NCCL_SIM_INFO_INITIALIZER (size %zu, magic 0x%x); the group "
                              "was ended and nothing of it ran",
                              simInfo->size, simInfo->magic));
  if (us >= 0) simInfo->estimatedTime = static_cast<float>(us);
  return ncclSuccess;
}

// The profiling twins: strong aliases of the functions above.
#define NCCL_PROFILING_TWIN(ret, name, params) \
  __attribute__((visibility("default"), alias(#name))) ret p##name params;
NCCL_PROFILING_TWIN(ncclResult_t, ncclGetVersion, (int*))
NCCL_PROFILING_TWIN(void, ncclResetDebugInit, (void))
NCCL_PROFILING_TWIN(ncclResult_t, ncclGetUniqueId, (ncclUniqueId*))
NCCL_PROFILING_TWIN(ncclResult_t, ncclCommInitRank, (ncclComm_t*, int, ncclUniqueId, int))
NCCL_PROFILING_TWIN(ncclResult_t, ncclCommInitRankConfig,
                    (ncclComm_t*, int, ncclUniqueId, int, ncclConfig_t*))
NCCL_PROFILING_TWIN(ncclResult_t, ncclCommInitAll, (ncclComm_t*, int, const int*))
NCCL_PROFILING_TWIN(ncclResult_t, ncclCommFinalize, (ncclComm_t))
NCCL_PROFILING_TWIN(ncclResult_t, ncclCommDestroy, (ncclComm_t))
NCCL_PROFILING_TWIN(ncclResult_t, ncclCommAbort, (ncclComm_t))
NCCL_PROFILING_TWIN(ncclResult_t, ncclCommSplit, (ncclComm_t, int, int, ncclComm_t*, ncclConfig_t*))
NCCL_PROFILING_TWIN(const char*, ncclGetErrorString, (ncclResult_t))
NCCL_PROFILING_TWIN(const char*, ncclGetLastError, (ncclComm_t))
NCCL_PROFILING_TWIN(ncclResult_t, ncclCommGetAsyncError, (ncclComm_t, ncclResult_t*))
NCCL_PROFILING_TWIN(ncclResult_t, ncclCommCount, (const ncclComm_t, int*))
NCCL_PROFILING_TWIN(ncclResult_t, ncclCommCuDevice, (const ncclComm_t, int*))
NCCL_PROFILING_TWIN(ncclResult_t, ncclCommUserRank, (const ncclComm_t, int*))
NCCL_PROFILING_TWIN(ncclResult_t, ncclMemAlloc, (void**, size_t))
NCCL_PROFILING_TWIN(ncclResult_t, ncclMemFree, (void*))
NCCL_PROFILING_TWIN(ncclResult_t, ncclCommRegister, (const ncclComm_t, void*, size_t, void**))
NCCL_PROFILING_TWIN(ncclResult_t, ncclCommDeregister, (const ncclComm_t, void*))
NCCL_PROFILING_TWIN(ncclResult_t, ncclRedOpCreatePreMulSum,
                    (ncclRedOp_t*, void*, ncclDataType_t, ncclScalarResidence_t, ncclComm_t))
NCCL_PROFILING_TWIN(ncclResult_t, ncclRedOpDestroy, (ncclRedOp_t, ncclComm_t))
NCCL_PROFILING_TWIN(ncclResult_t, ncclReduce,
                    (const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, int, ncclComm_t,
                     cudaStream_t))
NCCL_PROFILING_TWIN(ncclResult_t, ncclBcast,
                    (void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t))
NCCL_PROFILING_TWIN(ncclResult_t, ncclBroadcast,
                    (const void*, void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t))
NCCL_PROFILING_TWIN(ncclResult_t, ncclAllReduce,
                    (const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t,
                     cudaStream_t))
NCCL_PROFILING_TWIN(ncclResult_t, ncclReduceScatter,
                    (const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t,
                     cudaStream_t))
NCCL_PROFILING_TWIN(ncclResult_t, ncclAllGather,
                    (const void*, void*, size_t, ncclDataType_t, ncclComm_t, cudaStream_t))
NCCL_PROFILING_TWIN(ncclResult_t, ncclSend,
                    (const void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t))
NCCL_PROFILING_TWIN(ncclResult_t, ncclRecv,
                    (void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t))
NCCL_PROFILING_TWIN(ncclResult_t, ncclGroupStart, (void))
NCCL_PROFILING_TWIN(ncclResult_t, ncclGroupEnd, (void))
NCCL_PROFILING_TWIN(ncclResult_t, ncclAlltoAll,
                    (const void*, void*, size_t, ncclDataType_t, ncclComm_t, cudaStream_t))
NCCL_PROFILING_TWIN(ncclResult_t, ncclGather,
                    (const void*, void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t))
NCCL_PROFILING_TWIN(ncclResult_t, ncclScatter,
                    (const void*, void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t))
NCCL_PROFILING_TWIN(ncclResult_t, ncclCommInitRankScalable,
                    (ncclComm_t*, int, int, int, ncclUniqueId*, ncclConfig_t*))
NCCL_PROFILING_TWIN(ncclResult_t, ncclCommShrink,
                    (ncclComm_t, int*, int, ncclComm_t*, ncclConfig_t*, int))
NCCL_PROFILING_TWIN(ncclResult_t, ncclCommGetUniqueId, (ncclComm_t, ncclUniqueId*))
NCCL_PROFILING_TWIN(ncclResult_t, ncclCommGrow,
                    (ncclComm_t, int, const ncclUniqueId*, int, ncclComm_t*, ncclConfig_t*))
NCCL_PROFILING_TWIN(ncclResult_t, ncclCommRevoke, (ncclComm_t, int))
NCCL_PROFILING_TWIN(ncclResult_t, ncclCommSuspend, (ncclComm_t, int))
NCCL_PROFILING_TWIN(ncclResult_t, ncclCommResume, (ncclComm_t))
NCCL_PROFILING_TWIN(ncclResult_t, ncclCommMemStats, (ncclComm_t, ncclCommMemStat_t, uint64_t*))
NCCL_PROFILING_TWIN(ncclResult_t, ncclCommWindowRegister,
                    (ncclComm_t, void*, size_t, ncclWindow_t*, int))
NCCL_PROFILING_TWIN(ncclResult_t, ncclCommWindowDeregister, (ncclComm_t, ncclWindow_t))
NCCL_PROFILING_TWIN(ncclResult_t, ncclWinGetUserPtr, (ncclComm_t, ncclWindow_t, void**))
NCCL_PROFILING_TWIN(ncclResult_t, ncclPutSignal,
                    (const void*, size_t, ncclDataType_t, int, ncclWindow_t, size_t, int, int,
                     unsigned int, ncclComm_t, cudaStream_t))
NCCL_PROFILING_TWIN(ncclResult_t, ncclSignal,
                    (int, int, int, unsigned int, ncclComm_t, cudaStream_t))
NCCL_PROFILING_TWIN(ncclResult_t, ncclWaitSignal,
                    (int, ncclWaitSignalDesc_t*, ncclComm_t, cudaStream_t))
NCCL_PROFILING_TWIN(ncclResult_t, ncclGroupSimulateEnd, (ncclSimInfo_t*))

}  // extern "C"
