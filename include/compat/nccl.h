/*
 * nccl.h: Braid's NCCL drop-in. Declares the NCCL 2.19 API (the calls nccl-tests makes at
 * that level) with NCCL's type layouts and enum values (plus 2.24's FP8 datatypes, so
 * ncclNumTypes is 12 as in 2.24, not 2.19's 10), so that code written for NCCL
 * builds unchanged against it and links to Braid's libnccl.so.2, which forwards every call
 * to the braid* function of the same meaning (include/braid/braid.h documents each one).
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
 *  - ncclCommInitRankConfig and ncclCommSplit accept config->blocking = 0 but always finish
 *    before they return (never ncclInProgress); the GPU fields (cgaClusterSize, minCTAs,
 *    maxCTAs, netName, splitShare) are read only for validity.
 *  - A wait bounded by BRAID_TIMEOUT that expires returns ncclRemoteError (NCCL has no
 *    timeout code); ncclGetLastError says which rank did not answer.
 *  - Environment: NCCL_DEBUG, NCCL_DEBUG_SUBSYS, NCCL_ALGO, NCCL_SOCKET_IFNAME,
 *    NCCL_TOPO_FILE, NCCL_BUFFSIZE, NCCL_CHUNKSIZE (and others, see README) are read as their
 *    BRAID_ names when those are unset. NCCL_ALGO takes NCCL's spellings (Ring, Tree,
 *    comma lists); names Braid lacks (CollnetDirect, CollnetChain, NVLS, NVLSTree, PAT) and
 *    exclusions (^...) are reported once and the selector decides. Rank 0's NCCL_ALGO (or
 *    BRAID_ALGO) applies on every rank; a BRAID_ALGO that does not parse fails init.
 *  - Send and receive buffers that overlap without being the call's in-place form return
 *    ncclInvalidArgument (NCCL runs them, with undefined results).
 */
#ifndef NCCL_H_
#define NCCL_H_

#include <limits.h>
#include <stddef.h>

#if defined(__has_include)
#if __has_include(<cuda_runtime.h>) && !defined(BRAID_NCCL_NO_CUDA_HEADERS)
#include <cuda_runtime.h>
#define BRAID_NCCL_CUDA_HEADERS 1
#endif
#endif
#ifndef BRAID_NCCL_CUDA_HEADERS
/* The CUDA runtime's own definition, so code built without CUDA headers links the same. */
typedef struct CUstream_st* cudaStream_t;
#endif

#define NCCL_MAJOR 2
#define NCCL_MINOR 19
#define NCCL_PATCH 3
#define NCCL_SUFFIX "braid"
/* NCCL's encoding since 2.9: major * 10000 + minor * 100 + patch. */
#define NCCL_VERSION(X, Y, Z) \
  (((X) <= 2 && (Y) <= 8) ? (X)*1000 + (Y)*100 + (Z) : (X)*10000 + (Y)*100 + (Z))
#define NCCL_VERSION_CODE NCCL_VERSION(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH)

#ifdef __cplusplus
extern "C" {
#endif

/// In C++ the enums below have int as their fixed underlying type, so that any int a C caller
/// passes (an out-of-range datatype such as 42) is a value of the type, which the library
/// then refuses with an error, rather than undefined behaviour in C++.
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
  ncclNumResults = 8
} ncclResult_t;

#define NCCL_CONFIG_UNDEF_INT INT_MIN
#define NCCL_CONFIG_UNDEF_PTR NULL
#define NCCL_SPLIT_NOCOLOR -1

/* ncclConfig_t as in NCCL 2.19; set with NCCL_CONFIG_INITIALIZER, then change fields. */
typedef struct ncclConfig_v21700 {
  size_t size;
  unsigned int magic;
  unsigned int version;
  int blocking;
  int cgaClusterSize;
  int minCTAs;
  int maxCTAs;
  const char* netName;
  int splitShare;
} ncclConfig_t;

#define NCCL_CONFIG_INITIALIZER                                                         \
  {                                                                                     \
    sizeof(ncclConfig_t), 0xcafebeef, NCCL_VERSION(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH), \
        NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT,            \
        NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_PTR, NCCL_CONFIG_UNDEF_INT             \
  }

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

#ifdef __cplusplus
}
#endif

#endif /* NCCL_H_ */
