/*
 * nccl.h: Braid's NCCL drop-in. Declares every function of NCCL 2.30's public host header
 * with NCCL's type layouts and enum values (ncclConfig_t as 2.30 lays it out, ncclTimeout,
 * the FP8 datatypes), so that code written for NCCL builds unchanged against it and links to
 * Braid's libnccl.so.2, which forwards every call to the braid* function of the same meaning
 * (include/braid/braid.h documents each one). Each declaration after 2.19 says which NCCL
 * release brought it. NCCL_VERSION_CODE names the newest release whose whole public host API
 * Braid provides (2.22.3, whose last addition is ncclGroupSimulateEnd; of 2.24's additions,
 * ncclCommInitRankScalable and the fp8 types are here, ncclResetDebugInit is not). Every other
 * function of NCCL 2.30's host header is here and carried out, fault tolerance (2.27-2.29:
 * shrink, revoke, grow), suspend and memory figures, windows and one-sided calls included;
 * what Braid cannot do on a build (a GPU-only case) returns an error with ncclGetLastError
 * saying why: never success. The device header (nccl_device.h, 2.28) is not provided, so the
 * version code stays below 2.28.
 *
 * Shapes and units are NCCL's: counts are elements of the datatype, never bytes; `peer` and
 * `root` are ranks of comm. Each function also exists as pncclX (NCCL's profiling twins).
 *
 * Where Braid differs:
 *  - Buffers may be host memory (any rank, no GPU needed) or CUDA device memory (a CUDA build
 *    with a device). On a host communicator (no CUDA device) a call has finished when it
 *    returns, which also satisfies a later cudaStreamSynchronize on `stream`. On a device
 *    communicator calls are ordered on `stream` as NCCL's are (braidStreamCreateCuda): they
 *    run on a proxy thread when the stream reaches them: device to device between ranks of
 *    one host that all have a device (CUDA IPC; NCCL_P2P_DISABLE=1 turns it off), else
 *    staged through host memory.
 *  - ncclCommInitRankConfig with config->blocking = 0 returns ncclInProgress with *comm set
 *    while init goes on in the background: poll ncclCommGetAsyncError until it is ncclSuccess
 *    (or init's error); other calls on that comm meanwhile return ncclInvalidArgument (as
 *    NCCL's), and ncclCommAbort or ncclCommDestroy stop the init and free it. ncclCommSplit
 *    and ncclCommFinalize finish before they return, blocking = 0 or not (NCCL allows it). The
 *    GPU fields (cgaClusterSize, minCTAs, maxCTAs, netName, splitShare) are read only for
 *    validity.
 *  - A wait bounded by BRAID_TIMEOUT that expires returns ncclTimeout (NCCL 2.30's code);
 *    ncclGetLastError says which rank did not answer.
 *  - Environment: NCCL_DEBUG, NCCL_DEBUG_SUBSYS, NCCL_ALGO, NCCL_SOCKET_IFNAME,
 *    NCCL_TOPO_FILE, NCCL_BUFFSIZE, NCCL_CHUNKSIZE (and others, see README) are read as their
 *    BRAID_ names when those are unset. NCCL_ALGO takes NCCL's spellings (Ring, Tree,
 *    comma lists); names Braid lacks (CollnetDirect, CollnetChain, NVLS, NVLSTree, PAT) and
 *    exclusions (^...) are reported once and the selector decides. Rank 0's NCCL_ALGO (or
 *    BRAID_ALGO) applies on every rank; a BRAID_ALGO that does not parse fails init.
 *  - Send and receive buffers that overlap without being the call's in-place form return
 *    ncclInvalidArgument (NCCL runs them, with undefined results).
 *  - Init inside ncclGroupStart/End runs at once, not at ncclGroupEnd: one thread cannot
 *    init several ranks of one communicator in a group (each waits for the others until
 *    BRAID_TIMEOUT); use ncclCommInitAll, or a thread per rank. ncclCommDestroy of a comm with
 *    calls in the thread's open group returns ncclInvalidUsage; ncclCommAbort drops them.
 */
#ifndef NCCL_H_
#define NCCL_H_

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

/* As NCCL's header does: CUDA's runtime and its half, bfloat16 and (C++) fp8 types, so code
 * that takes `half` or `__nv_bfloat16` from nccl.h builds unchanged. Where CUDA's headers are
 * not on the include path (a host-only build; or BRAID_NCCL_NO_CUDA_HEADERS), only
 * cudaStream_t is declared, as CUDA declares it, and C and C++ code still compiles. */
#if defined(__has_include)
#if __has_include(<cuda_runtime.h>) && !defined(BRAID_NCCL_NO_CUDA_HEADERS)
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#if CUDART_VERSION >= 11000
#include <cuda_bf16.h>
#endif
#if defined(__cplusplus) && CUDART_VERSION >= 11080
#include <cuda_fp8.h>
#endif
#define BRAID_NCCL_CUDA_HEADERS 1
#endif
#endif
#ifndef BRAID_NCCL_CUDA_HEADERS
/* The CUDA runtime's own definition, so code built without CUDA headers links the same. */
typedef struct CUstream_st* cudaStream_t;
#endif

#define NCCL_MAJOR 2
#define NCCL_MINOR 22
#define NCCL_PATCH 3
#define NCCL_SUFFIX "braid"
/* NCCL's encoding since 2.9: major * 10000 + minor * 100 + patch. */
#define NCCL_VERSION(X, Y, Z) \
  (((X) <= 2 && (Y) <= 8) ? (X)*1000 + (Y)*100 + (Z) : (X)*10000 + (Y)*100 + (Z))
#define NCCL_VERSION_CODE NCCL_VERSION(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH)

#ifdef __cplusplus
extern "C" {
#endif

/* In C++ the enums below have int as their fixed underlying type, so that any int a C caller
 * passes (an out-of-range datatype such as 42) is a value of the type, which the library
 * then refuses with an error, rather than undefined behaviour in C++. */
#ifdef __cplusplus
#define NCCL_COMPAT_ENUM_INT : int
#else
#define NCCL_COMPAT_ENUM_INT
#endif

typedef struct ncclComm* ncclComm_t;
#define NCCL_COMM_NULL NULL

#define NCCL_UNIQUE_ID_BYTES 128
typedef struct {
  char internal[NCCL_UNIQUE_ID_BYTES];
} ncclUniqueId;

typedef enum NCCL_COMPAT_ENUM_INT {
  ncclSuccess = 0,
  ncclUnhandledCudaError = 1,
  ncclSystemError = 2,
  ncclInternalError = 3,
  ncclInvalidArgument = 4,
  ncclInvalidUsage = 5,
  ncclRemoteError = 6,
  ncclInProgress = 7,
  ncclTimeout = 8, /* NCCL 2.30 */
  ncclNumResults = 9
} ncclResult_t;

#define NCCL_CONFIG_UNDEF_INT INT_MIN
#define NCCL_CONFIG_UNDEF_PTR NULL
#define NCCL_SPLIT_NOCOLOR -1

#define NCCL_UNDEF_FLOAT -1.0f
#define NCCL_API_MAGIC 0xcafebeef

/* ncclConfig_t as NCCL 2.30 lays it out (96 bytes on LP64); set it with
 * NCCL_CONFIG_INITIALIZER, then change fields. A config of an older layout (a smaller `size`,
 * as code built against NCCL 2.14-2.29 or an older Braid header passes) is read up to its
 * size. Braid reads blocking; the GPU and network fields (cgaClusterSize, minCTAs, maxCTAs,
 * netName, splitShare, trafficClass, collnetEnable, CTAPolicy, shrinkShare, nvlsCTAs,
 * nChannelsPerNetPeer, nvlinkCentricSched, graphUsageMode, numRmaCtx, maxP2pPeers) and
 * commName are accepted and have no effect on host ranks. */
typedef struct ncclConfig_v22800 {
  size_t size;
  unsigned int magic;
  unsigned int version;
  int blocking;
  int cgaClusterSize;
  int minCTAs;
  int maxCTAs;
  const char* netName;
  int splitShare;
  int trafficClass;        /* NCCL 2.26 */
  const char* commName;    /* NCCL 2.27 */
  int collnetEnable;       /* NCCL 2.27 */
  int CTAPolicy;           /* NCCL 2.27: NCCL_CTA_POLICY_* */
  int shrinkShare;         /* NCCL 2.27 */
  int nvlsCTAs;            /* NCCL 2.27 */
  int nChannelsPerNetPeer; /* NCCL 2.28 */
  int nvlinkCentricSched;  /* NCCL 2.28 */
  int graphUsageMode;      /* NCCL 2.29 */
  int numRmaCtx;           /* NCCL 2.29 */
  int maxP2pPeers;         /* NCCL 2.30 */
} ncclConfig_t;

#define NCCL_CONFIG_INITIALIZER                                                     \
  {                                                                                 \
    sizeof(ncclConfig_t), NCCL_API_MAGIC, NCCL_VERSION_CODE, NCCL_CONFIG_UNDEF_INT, \
        NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT,        \
        NCCL_CONFIG_UNDEF_PTR, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT,        \
        NCCL_CONFIG_UNDEF_PTR, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT,        \
        NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT,        \
        NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT,        \
        NCCL_CONFIG_UNDEF_INT,                                                      \
  }

/* config.CTAPolicy (NCCL 2.27). */
#define NCCL_CTA_POLICY_DEFAULT 0x00
#define NCCL_CTA_POLICY_EFFICIENCY 0x01
#define NCCL_CTA_POLICY_ZERO 0x02
/* ncclCommShrink's shrinkFlags (NCCL 2.27), ncclCommRevoke's revokeFlags (2.28),
 * ncclCommSuspend's flags (2.29). */
#define NCCL_SHRINK_DEFAULT 0x00
#define NCCL_SHRINK_ABORT 0x01
#define NCCL_REVOKE_DEFAULT 0x00
#define NCCL_SUSPEND_MEM 0x01
/* ncclCommWindowRegister's winFlags (NCCL 2.27). */
#define NCCL_WIN_DEFAULT 0x00
#define NCCL_WIN_COLL_SYMMETRIC 0x01
#define NCCL_WIN_STRICT_ORDERING 0x02
#define NCCL_WIN_REQUIRED_ALIGNMENT 4096

/* A registered window (NCCL 2.27; the struct is NCCL's name, opaque). */
typedef struct ncclWindow_vidmem* ncclWindow_t;

/* ncclGroupSimulateEnd's result (NCCL 2.22): estimatedTime in microseconds. */
typedef struct ncclSimInfo_v22200 {
  size_t size;
  unsigned int magic;
  unsigned int version;
  float estimatedTime;
} ncclSimInfo_t;
#define NCCL_SIM_INFO_INITIALIZER \
  { sizeof(ncclSimInfo_t), 0x74685283, NCCL_VERSION_CODE, NCCL_UNDEF_FLOAT }

/* One signal to wait for in ncclWaitSignal (NCCL 2.29): opCnt signals from peer at sigIdx of
 * context ctx. */
typedef struct {
  int opCnt;
  int peer;
  int sigIdx;
  int ctx;
} ncclWaitSignalDesc_t;

/* What ncclCommMemStats reports (NCCL 2.29), in bytes but for ncclStatGpuMemSuspended
 * (1 while suspended, else 0). */
typedef enum NCCL_COMPAT_ENUM_INT {
  ncclStatGpuMemSuspend = 0,   /* device memory ncclCommSuspend can release */
  ncclStatGpuMemSuspended = 1, /* 1 while suspended */
  ncclStatGpuMemPersist = 2,   /* device memory kept while suspended */
  ncclStatGpuMemTotal = 3      /* all device memory the communicator holds */
} ncclCommMemStat_t;

/* A bound parameter (NCCL 2.30's Param API; NCCL 2.30's spelling: the struct, not a
 * pointer). */
typedef struct ncclParamHandle ncclParamHandle_t;

typedef enum NCCL_COMPAT_ENUM_INT {
  ncclInt8 = 0,
  ncclChar = 0,
  ncclUint8 = 1,
  ncclInt32 = 2,
  ncclInt = 2,
  ncclUint32 = 3,
  ncclInt64 = 4,
  ncclUint64 = 5,
  ncclFloat16 = 6,
  ncclHalf = 6,
  ncclFloat32 = 7,
  ncclFloat = 7,
  ncclFloat64 = 8,
  ncclDouble = 8,
  ncclBfloat16 = 9,
  /* FP8 with NCCL 2.24's values (OCP E4M3 and E5M2); Braid reduces them on host too. */
  ncclFloat8e4m3 = 10,
  ncclFloat8e5m2 = 11,
  ncclNumTypes = 12
} ncclDataType_t;

typedef enum NCCL_COMPAT_ENUM_INT {
  ncclSum = 0,
  ncclProd = 1,
  ncclMax = 2,
  ncclMin = 3,
  ncclAvg = 4,
  ncclNumOps = 5,
  /* Ops from ncclRedOpCreatePreMulSum lie in [ncclNumOps, ncclMaxRedOp]. */
  ncclMaxRedOp = 0x7fffffff
} ncclRedOp_t;

typedef enum NCCL_COMPAT_ENUM_INT {
  ncclScalarDevice = 0,
  ncclScalarHostImmediate = 1
} ncclScalarResidence_t;

/* Version, ids and communicators. */
ncclResult_t ncclGetVersion(int* version);
ncclResult_t pncclGetVersion(int* version);
ncclResult_t ncclGetUniqueId(ncclUniqueId* uniqueId);
ncclResult_t pncclGetUniqueId(ncclUniqueId* uniqueId);
ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank);
ncclResult_t pncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank);
ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank,
                                    ncclConfig_t* config);
ncclResult_t pncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank,
                                     ncclConfig_t* config);
/* ndev ranks as threads of this process; rank r on GPU devlist[r]. Unlike NCCL, devlist NULL
 * puts every rank on the current device (ranks may share a GPU). Host ranks ignore it. */
ncclResult_t ncclCommInitAll(ncclComm_t* comm, int ndev, const int* devlist);
ncclResult_t pncclCommInitAll(ncclComm_t* comm, int ndev, const int* devlist);
ncclResult_t ncclCommFinalize(ncclComm_t comm);
ncclResult_t pncclCommFinalize(ncclComm_t comm);
ncclResult_t ncclCommDestroy(ncclComm_t comm);
ncclResult_t pncclCommDestroy(ncclComm_t comm);
ncclResult_t ncclCommAbort(ncclComm_t comm);
ncclResult_t pncclCommAbort(ncclComm_t comm);
/* config NULL: the new communicator inherits comm's settings. */
ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm,
                           ncclConfig_t* config);
ncclResult_t pncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm,
                            ncclConfig_t* config);
const char* ncclGetErrorString(ncclResult_t result);
const char* pncclGetErrorString(ncclResult_t result);
/* NCCL (deprecated, Linux only): reads NCCL_DEBUG and NCCL_DEBUG_SUBSYS again (their BRAID_
 * names first), so logging follows a setenv made after init (braidResetDebugInit). */
#if defined(__linux__)
#define NCCL_OS_LINUX 1
void ncclResetDebugInit(void);
void pncclResetDebugInit(void);
#else
#define ncclResetDebugInit()
#define pncclResetDebugInit()
#endif
const char* ncclGetLastError(ncclComm_t comm);
const char* pncclGetLastError(ncclComm_t comm);
ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError);
ncclResult_t pncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError);
ncclResult_t ncclCommCount(const ncclComm_t comm, int* count);
ncclResult_t pncclCommCount(const ncclComm_t comm, int* count);
/* -1 for a communicator made without a CUDA device (host ranks). */
ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int* device);
ncclResult_t pncclCommCuDevice(const ncclComm_t comm, int* device);
ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank);
ncclResult_t pncclCommUserRank(const ncclComm_t comm, int* rank);

/* Memory: device memory of the current CUDA device; ncclUnhandledCudaError ("no CUDA
 * device") without one. Registration of host buffers records the range and returns a handle. */
ncclResult_t ncclMemAlloc(void** ptr, size_t size);
ncclResult_t pncclMemAlloc(void** ptr, size_t size);
ncclResult_t ncclMemFree(void* ptr);
ncclResult_t pncclMemFree(void* ptr);
ncclResult_t ncclCommRegister(const ncclComm_t comm, void* buff, size_t size, void** handle);
ncclResult_t pncclCommRegister(const ncclComm_t comm, void* buff, size_t size, void** handle);
ncclResult_t ncclCommDeregister(const ncclComm_t comm, void* handle);
ncclResult_t pncclCommDeregister(const ncclComm_t comm, void* handle);

/* Reduction ops: sum over ranks of (scalar * x), scalar of `datatype` at *scalar. */
ncclResult_t ncclRedOpCreatePreMulSum(ncclRedOp_t* op, void* scalar, ncclDataType_t datatype,
                                      ncclScalarResidence_t residence, ncclComm_t comm);
ncclResult_t pncclRedOpCreatePreMulSum(ncclRedOp_t* op, void* scalar, ncclDataType_t datatype,
                                       ncclScalarResidence_t residence, ncclComm_t comm);
ncclResult_t ncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm);
ncclResult_t pncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm);

/* Collectives (NCCL's argument order and meaning). */
ncclResult_t ncclReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                        ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclReduce(const void* sendbuff, void* recvbuff, size_t count,
                         ncclDataType_t datatype, ncclRedOp_t op, int root, ncclComm_t comm,
                         cudaStream_t stream);
/* In-place broadcast (the pre-2.2 form). */
ncclResult_t ncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                       cudaStream_t stream);
ncclResult_t pncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root,
                        ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                            ncclDataType_t datatype, int root, ncclComm_t comm,
                            cudaStream_t stream);
ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                           cudaStream_t stream);
ncclResult_t pncclAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                            ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                            cudaStream_t stream);
/* recvcount elements per rank; sendbuff holds nranks * recvcount. */
ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                               ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                               cudaStream_t stream);
ncclResult_t pncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                                ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                cudaStream_t stream);
/* sendcount elements per rank; recvbuff holds nranks * sendcount. */
ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                           ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                            ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer,
                       ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer,
                       ncclComm_t comm, cudaStream_t stream);

/* Groups: calls between them on this thread are fused and launched at ncclGroupEnd. */
ncclResult_t ncclGroupStart(void);
ncclResult_t pncclGroupStart(void);
ncclResult_t ncclGroupEnd(void);
ncclResult_t pncclGroupEnd(void);

/* ---- NCCL 2.22-2.30 ----------------------------------------------------------------------
 * Declared and exported so that code written for NCCL 2.30 builds and links. Those Braid
 * cannot carry out yet return ncclInvalidUsage with ncclGetLastError naming what is missing
 * (issue 34 of Braid's tracker lists them). */

/* NCCL 2.28. AlltoAll: count elements to each peer; sendbuff and recvbuff hold nranks * count,
 * block j of sendbuff goes to rank j, block i of recvbuff comes from rank i. Gather: count
 * elements from each rank into the root's recvbuff (nranks * count; ignored elsewhere).
 * Scatter: block r of the root's sendbuff (nranks * count; ignored elsewhere) to rank r's
 * recvbuff (count). */
ncclResult_t ncclAlltoAll(const void* sendbuff, void* recvbuff, size_t count,
                          ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclAlltoAll(const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclGather(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                        int root, ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclGather(const void* sendbuff, void* recvbuff, size_t count,
                         ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclScatter(const void* sendbuff, void* recvbuff, size_t count,
                         ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclScatter(const void* sendbuff, void* recvbuff, size_t count,
                          ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream);

/* NCCL 2.24. Every rank passes the same nId ids (made by ncclGetUniqueId on nId ranks); Braid
 * joins the communicator through the first id's root (NCCL spreads the bootstrap over all
 * nId roots), so it needs the first id to be reachable; the result is the same communicator. */
ncclResult_t ncclCommInitRankScalable(ncclComm_t* newcomm, int nranks, int myrank, int nId,
                                      ncclUniqueId* commIds, ncclConfig_t* config);
ncclResult_t pncclCommInitRankScalable(ncclComm_t* newcomm, int nranks, int myrank, int nId,
                                       ncclUniqueId* commIds, ncclConfig_t* config);

/* NCCL 2.27: a communicator of comm's ranks but excludeRanksList (a list of
 * excludeRanksCount ranks of comm, dead ones included), its ranks renumbered in order;
 * shrinkFlags NCCL_SHRINK_DEFAULT, or NCCL_SHRINK_ABORT to abort comm's calls in flight first.
 * Called by every rank that stays; the ranks that stay agree on who is out, dead ones found
 * without a list (braidCommShrink in braid/braid_fault.h). */
ncclResult_t ncclCommShrink(ncclComm_t comm, int* excludeRanksList, int excludeRanksCount,
                            ncclComm_t* newcomm, ncclConfig_t* config, int shrinkFlags);
ncclResult_t pncclCommShrink(ncclComm_t comm, int* excludeRanksList, int excludeRanksCount,
                             ncclComm_t* newcomm, ncclConfig_t* config, int shrinkFlags);
/* NCCL 2.29: ncclCommGetUniqueId on comm's rank 0 makes the id that ncclCommGrow's ranks
 * share: comm's ranks pass rank -1 (its rank 0 the id, the others NULL), joining ranks pass
 * comm NULL, the id and their new rank (braidCommGrow). */
ncclResult_t ncclCommGetUniqueId(ncclComm_t comm, ncclUniqueId* uniqueId);
ncclResult_t pncclCommGetUniqueId(ncclComm_t comm, ncclUniqueId* uniqueId);
ncclResult_t ncclCommGrow(ncclComm_t comm, int nRanks, const ncclUniqueId* uniqueId, int rank,
                          ncclComm_t* newcomm, ncclConfig_t* config);
ncclResult_t pncclCommGrow(ncclComm_t comm, int nRanks, const ncclUniqueId* uniqueId, int rank,
                           ncclComm_t* newcomm, ncclConfig_t* config);
/* NCCL 2.28: stops comm's calls in flight and refuses new ones (ncclInvalidUsage), on every
 * rank Braid can reach (braidCommRevoke); revokeFlags must be NCCL_REVOKE_DEFAULT. */
ncclResult_t ncclCommRevoke(ncclComm_t comm, int revokeFlags);
ncclResult_t pncclCommRevoke(ncclComm_t comm, int revokeFlags);
/* NCCL 2.29: suspend comm (its calls refused until resumed), releasing its device memory with
 * flags NCCL_SUSPEND_MEM, and resume it, allocating that memory again (braid_memory.h). */
ncclResult_t ncclCommSuspend(ncclComm_t comm, int flags);
ncclResult_t pncclCommSuspend(ncclComm_t comm, int flags);
ncclResult_t ncclCommResume(ncclComm_t comm);
ncclResult_t pncclCommResume(ncclComm_t comm);
/* NCCL 2.29: *value is the statistic `stat` (ncclCommMemStat_t) of comm's device memory. A host
 * communicator (no CUDA device) holds none: every figure is 0. */
ncclResult_t ncclCommMemStats(ncclComm_t comm, ncclCommMemStat_t stat, uint64_t* value);
ncclResult_t pncclCommMemStats(ncclComm_t comm, ncclCommMemStat_t stat, uint64_t* value);

/* NCCL 2.27 (ncclWinGetUserPtr 2.29): symmetric registration of a buffer on every rank
 * (collective), and the user pointer a window stands for (braid/braid_rma.h). */
ncclResult_t ncclCommWindowRegister(ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win,
                                    int winFlags);
ncclResult_t pncclCommWindowRegister(ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win,
                                     int winFlags);
ncclResult_t ncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win);
ncclResult_t pncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win);
ncclResult_t ncclWinGetUserPtr(ncclComm_t comm, ncclWindow_t win, void** outUserPtr);
ncclResult_t pncclWinGetUserPtr(ncclComm_t comm, ncclWindow_t win, void** outUserPtr);

/* NCCL 2.29, one-sided: put count elements of localbuff into peer's window peerWin at
 * peerWinOffset bytes, then raise signal sigIdx of context ctx there; a signal alone; wait
 * for nDesc signals. flags: 0. The target needs no call for the data to land (over Braid's
 * control plane; braid/braid_rma.h). */
ncclResult_t ncclPutSignal(const void* localbuff, size_t count, ncclDataType_t datatype, int peer,
                           ncclWindow_t peerWin, size_t peerWinOffset, int sigIdx, int ctx,
                           unsigned int flags, ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclPutSignal(const void* localbuff, size_t count, ncclDataType_t datatype, int peer,
                            ncclWindow_t peerWin, size_t peerWinOffset, int sigIdx, int ctx,
                            unsigned int flags, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclSignal(int peer, int sigIdx, int ctx, unsigned int flags, ncclComm_t comm,
                        cudaStream_t stream);
ncclResult_t pncclSignal(int peer, int sigIdx, int ctx, unsigned int flags, ncclComm_t comm,
                         cudaStream_t stream);
ncclResult_t ncclWaitSignal(int nDesc, ncclWaitSignalDesc_t* signalDescs, ncclComm_t comm,
                            cudaStream_t stream);
ncclResult_t pncclWaitSignal(int nDesc, ncclWaitSignalDesc_t* signalDescs, ncclComm_t comm,
                             cudaStream_t stream);

/* NCCL 2.22: ends the group without running it and sets simInfo->estimatedTime (microseconds)
 * to Braid's prediction (braidGroupSimulateEnd: each call by the algorithm it would run, on
 * the communicator's cost model); a nested level leaves it alone. simInfo NULL: ncclGroupEnd.
 * A simInfo not made by NCCL_SIM_INFO_INITIALIZER: the group ends, nothing of it runs, and the
 * call returns ncclInvalidArgument (as NCCL). */
ncclResult_t ncclGroupSimulateEnd(ncclSimInfo_t* simInfo);
ncclResult_t pncclGroupSimulateEnd(ncclSimInfo_t* simInfo);

/* NCCL 2.30's Param API, over Braid's settings (braid/braid_config.h: every variable Braid
 * reads, BRAID_DEBUG ... BRAID_COMM_SECRET). A key is NCCL's variable name where Braid reads it
 * ("NCCL_BUFFSIZE"), Braid's ("BRAID_BUFFSIZE"), or either without its prefix ("BUFFSIZE");
 * ncclParamGetAllParameterKeys lists Braid's names. Values are those in effect, as text:
 * BRAID_BUFFSIZE=1M reads "1048576"; a refused value reads as the default; a secret (BRAID_COMM_
 * SECRET, BRAID_UNIQUE_ID) reads "(secret)". As NCCL: one handle per setting, valid for the
 * process; unknown keys and NULL arguments give ncclInvalidArgument, ncclGetLastError naming the
 * key or argument (ncclParamGetParameter then sets *value NULL, *valueLen 0); returned strings
 * stay valid until the same function's next call on the thread (the key table for the
 * process); *valueLen excludes the
 * NUL; ncclParamDumpAll prints "NAME=value (source)" a line to stdout, source being the variable
 * the value came from or "default". Unlike NCCL, whose settings each have one C type:
 * ncclParamGetI8 ... GetU64 take any setting whose value is a whole number in the type's range
 * (else ncclInvalidArgument, the output untouched), ncclParamGetStr any setting's text, and
 * ncclParamGet copies an int setting as int32_t, a size as uint64_t, a bool as uint8_t, a double
 * as double, text with its NUL (*len: the bytes; a maxLen too small: ncclInvalidArgument, *len 0).
 */
ncclResult_t ncclParamBind(ncclParamHandle_t** out, const char* key);
ncclResult_t pncclParamBind(ncclParamHandle_t** out, const char* key);
ncclResult_t ncclParamGetI8(ncclParamHandle_t* h, int8_t* out);
ncclResult_t pncclParamGetI8(ncclParamHandle_t* h, int8_t* out);
ncclResult_t ncclParamGetI16(ncclParamHandle_t* h, int16_t* out);
ncclResult_t pncclParamGetI16(ncclParamHandle_t* h, int16_t* out);
ncclResult_t ncclParamGetI32(ncclParamHandle_t* h, int32_t* out);
ncclResult_t pncclParamGetI32(ncclParamHandle_t* h, int32_t* out);
ncclResult_t ncclParamGetI64(ncclParamHandle_t* h, int64_t* out);
ncclResult_t pncclParamGetI64(ncclParamHandle_t* h, int64_t* out);
ncclResult_t ncclParamGetU8(ncclParamHandle_t* h, uint8_t* out);
ncclResult_t pncclParamGetU8(ncclParamHandle_t* h, uint8_t* out);
ncclResult_t ncclParamGetU16(ncclParamHandle_t* h, uint16_t* out);
ncclResult_t pncclParamGetU16(ncclParamHandle_t* h, uint16_t* out);
ncclResult_t ncclParamGetU32(ncclParamHandle_t* h, uint32_t* out);
ncclResult_t pncclParamGetU32(ncclParamHandle_t* h, uint32_t* out);
ncclResult_t ncclParamGetU64(ncclParamHandle_t* h, uint64_t* out);
ncclResult_t pncclParamGetU64(ncclParamHandle_t* h, uint64_t* out);
ncclResult_t ncclParamGetStr(ncclParamHandle_t* h, const char** out);
ncclResult_t pncclParamGetStr(ncclParamHandle_t* h, const char** out);
ncclResult_t ncclParamGet(ncclParamHandle_t* h, void* out, int maxLen, int* len);
ncclResult_t pncclParamGet(ncclParamHandle_t* h, void* out, int maxLen, int* len);
ncclResult_t ncclParamGetParameter(const char* key, const char** value, int* valueLen);
ncclResult_t pncclParamGetParameter(const char* key, const char** value, int* valueLen);
ncclResult_t ncclParamGetAllParameterKeys(const char*** table, int* tableLen);
ncclResult_t pncclParamGetAllParameterKeys(const char*** table, int* tableLen);
void ncclParamDumpAll(void);
void pncclParamDumpAll(void);

#ifdef __cplusplus
}
#endif

#endif /* NCCL_H_ */
