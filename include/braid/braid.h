/// @file braid.h
/// Braid's public C API: a collective communication library shaped like NCCL.
///
/// Every function returns a braidResult_t whose values mirror ncclResult_t. On failure,
/// braidGetLastError() returns a message naming the rank, the call, the argument or peer
/// at fault and what to do.
///
/// Usage (one process per rank, launched by braidrun or mpirun):
/// @code
///   braidUniqueId id;                         // rank 0: braidGetUniqueId(&id), then share it
///   braidComm_t comm;
///   braidCommInitRank(&comm, nranks, id, rank);
///   braidAllReduce(send, recv, count, braidFloat32, braidSum, comm, NULL);  // NULL: blocking
///   braidCommDestroy(comm);
/// @endcode
#ifndef BRAID_BRAID_H_
#define BRAID_BRAID_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define BRAID_MAJOR 0
#define BRAID_MINOR 1
#define BRAID_PATCH 0
/// Same encoding as NCCL_VERSION_CODE: major * 10000 + minor * 100 + patch.
#define BRAID_VERSION_CODE (BRAID_MAJOR * 10000 + BRAID_MINOR * 100 + BRAID_PATCH)

/// Result codes; the values 0..7 are ncclResult_t's.
typedef enum {
  braidSuccess = 0,
  braidUnhandledCudaError = 1,
  braidSystemError = 2,      ///< a system call failed (socket, mmap, shm_open, ...)
  braidInternalError = 3,    ///< a bug in Braid
  braidInvalidArgument = 4,  ///< an argument is wrong (message names it)
  braidInvalidUsage = 5,     ///< the call is wrong in this state (e.g. mismatched ranks)
  braidRemoteError = 6,      ///< a peer failed or closed its connection
  braidInProgress = 7,       ///< non-blocking operation still running
  braidTimeout = 8,          ///< a wait exceeded BRAID_TIMEOUT (Braid extension)
  braidNumResults = 9
} braidResult_t;

/// Element types; the values 0..11 are ncclDataType_t's (NCCL 2.19+).
typedef enum {
  braidInt8 = 0,
  braidChar = 0,
  braidUint8 = 1,
  braidInt32 = 2,
  braidInt = 2,
  braidUint32 = 3,
  braidInt64 = 4,
  braidUint64 = 5,
  braidFloat16 = 6,
  braidHalf = 6,
  braidFloat32 = 7,
  braidFloat = 7,
  braidFloat64 = 8,
  braidDouble = 8,
  braidBfloat16 = 9,
  braidFloat8e4m3 = 10,  ///< OCP FP8 E4M3 (finite-only, max 448)
  braidFloat8e5m2 = 11,  ///< OCP FP8 E5M2 (IEEE-like, max 57344)
  braidNumTypes = 12
} braidDataType_t;

/// Reduction operators; the values are ncclRedOp_t's.
/// braidAvg sums, then divides once by nranks at the end (post-divide, as NCCL does for
/// integers); integer results truncate toward zero, floating-point results round once.
/// Integer sum and product wrap around modulo 2^bits (computed without undefined behaviour).
/// fp16, bf16 and fp8 are reduced in fp32 and rounded once per reduction step.
typedef enum {
  braidSum = 0,
  braidProd = 1,
  braidMax = 2,
  braidMin = 3,
  braidAvg = 4,
  braidNumOps = 5
} braidRedOp_t;

/// 128 opaque bytes: the bootstrap root's address and port and a random secret.
/// Produced by braidGetUniqueId on one rank and passed to all others out of band.
#define BRAID_UNIQUE_ID_BYTES 128
typedef struct {
  char internal[BRAID_UNIQUE_ID_BYTES];
} braidUniqueId;

typedef struct braidComm* braidComm_t;

/// A host stream: a queue of collectives executed in order by a worker thread.
/// A NULL stream means "run now and return when done".
typedef struct braidStream* braidStream_t;

/// Writes BRAID_VERSION_CODE of the library to *version.
braidResult_t braidGetVersion(int* version);

/// Creates a unique id and starts the bootstrap root in the calling process (a thread
/// that serves this one job and exits once all ranks have initialised, or after
/// BRAID_TIMEOUT seconds). The root listens on BRAID_SOCKET_IFNAME's address (default:
/// the first non-loopback IPv4 interface, else loopback).
/// @return braidInvalidArgument if uniqueId is NULL, braidSystemError if no socket.
braidResult_t braidGetUniqueId(braidUniqueId* uniqueId);

/// Collective over nranks ranks: every rank calls it with the same id and its own rank.
/// Blocks until every rank has joined (bounded by BRAID_TIMEOUT, default 300 s).
/// @param comm     out: the new communicator
/// @param nranks   number of ranks, >= 1
/// @param commId   the id from braidGetUniqueId; an id of another job is refused
/// @param rank     this rank, 0 <= rank < nranks
/// @return braidInvalidArgument for a bad nranks/rank/NULL comm, braidInvalidUsage for
///         an id whose root refuses it, braidRemoteError/braidTimeout if peers vanish.
braidResult_t braidCommInitRank(braidComm_t* comm, int nranks, braidUniqueId commId, int rank);

/// Creates ndev communicators, ranks 0..ndev-1, as threads of this process (NCCL's
/// ncclCommInitAll). devlist may be NULL (it names GPUs; host ranks ignore it).
/// Each communicator may then be driven by its own thread or through streams.
braidResult_t braidCommInitAll(braidComm_t* comms, int ndev, const int* devlist);

/// Frees the communicator; waits for its queued work first. NULL is refused.
braidResult_t braidCommDestroy(braidComm_t comm);

/// Number of ranks in comm.
braidResult_t braidCommCount(const braidComm_t comm, int* count);
/// This rank's index in comm.
braidResult_t braidCommUserRank(const braidComm_t comm, int* rank);

/// A static string describing a result code (never NULL).
const char* braidGetErrorString(braidResult_t result);
/// The last error message of the calling thread's most recent failed call on comm
/// (comm may be NULL: the thread's last message). Never NULL; "" if none.
const char* braidGetLastError(braidComm_t comm);

/// All-reduce: recvbuff[i] = op over ranks of sendbuff[i], for i < count, on every rank.
/// @param sendbuff count elements of datatype (may equal recvbuff: in place)
/// @param recvbuff count elements of datatype
/// @param count    elements (not bytes); 0 is a successful no-op
/// @param stream   NULL to run now and return when done, else queued on the stream
/// Algorithm: ring reduce-scatter then ring all-gather (Patarasuk & Yuan, 2009), chunked
/// and pipelined; BRAID_ALGO may force another once more exist.
/// @return braidInvalidArgument for NULL buffers with count > 0, an unknown datatype or
///         op, or count * size overflowing; braidRemoteError/braidTimeout if a peer fails.
braidResult_t braidAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                             braidDataType_t datatype, braidRedOp_t op, braidComm_t comm,
                             braidStream_t stream);

/// Creates a host stream with its own worker thread.
braidResult_t braidStreamCreate(braidStream_t* stream);
/// Waits until all work queued on stream has run; returns the first error of that work.
braidResult_t braidStreamSynchronize(braidStream_t stream);
/// Synchronizes, then frees the stream.
braidResult_t braidStreamDestroy(braidStream_t stream);

/// Text form of a unique id (256 hex digits + NUL) for environment variables; used by
/// braidrun (BRAID_UNIQUE_ID) and torchrun-style launchers.
braidResult_t braidUniqueIdToString(const braidUniqueId* id,
                                    char out[2 * BRAID_UNIQUE_ID_BYTES + 1]);
/// Parses braidUniqueIdToString's form. braidInvalidArgument if it is not 256 hex digits.
braidResult_t braidUniqueIdFromString(const char* text, braidUniqueId* id);

/// Size in bytes of one element of datatype, or 0 for an unknown datatype.
size_t braidTypeSize(braidDataType_t datatype);
/// Lower-case names as nccl-tests prints them ("float", "half", "bfloat16", "int8", ...,
/// "sum", "prod", ...); "unknown" for a bad value.
const char* braidTypeName(braidDataType_t datatype);
const char* braidOpName(braidRedOp_t op);

#ifdef __cplusplus
}
#endif

#endif  // BRAID_BRAID_H_
