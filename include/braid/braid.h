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
/// Under srun, torchrun or mpirun, braidCommInitFromEnv(&comm) does the first two steps from
/// the launcher's environment variables.
#ifndef BRAID_BRAID_H_
#define BRAID_BRAID_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/// In C++ the enums below have int as their fixed underlying type: any int a C caller passes
/// (a datatype of 42) is a value of the type, which the library refuses with an error, rather
/// than undefined behaviour in C++.
#ifdef __cplusplus
#define BRAID_ENUM_INT : int
#else
#define BRAID_ENUM_INT
#endif

#define BRAID_MAJOR 0
#define BRAID_MINOR 1
#define BRAID_PATCH 0
/// Same encoding as NCCL_VERSION_CODE: major * 10000 + minor * 100 + patch.
#define BRAID_VERSION_CODE (BRAID_MAJOR * 10000 + BRAID_MINOR * 100 + BRAID_PATCH)

/// Result codes; the values 0..7 are ncclResult_t's.
typedef enum BRAID_ENUM_INT {
  braidSuccess = 0,
  braidUnhandledCudaError = 1,
  braidSystemError = 2,      ///< a system call failed (socket, mmap, shm_open, ...), or memory
                             ///< or a thread could not be had (no entry point throws)
  braidInternalError = 3,    ///< a bug in Braid
  braidInvalidArgument = 4,  ///< an argument is wrong (message names it)
  braidInvalidUsage = 5,     ///< the call is wrong in this state (e.g. mismatched ranks)
  braidRemoteError = 6,      ///< a peer failed or closed its connection
  braidInProgress = 7,       ///< non-blocking operation still running
  braidTimeout = 8,          ///< a wait exceeded BRAID_TIMEOUT (Braid extension)
  braidNumResults = 9
} braidResult_t;

/// Element types; the values 0..11 are ncclDataType_t's (NCCL 2.19+).
typedef enum BRAID_ENUM_INT {
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
typedef enum BRAID_ENUM_INT {
  braidSum = 0,
  braidProd = 1,
  braidMax = 2,
  braidMin = 3,
  braidAvg = 4,
  braidNumOps = 5,
  braidMaxRedOp = 0x7fffffff  ///< ops from braidRedOpCreatePreMulSum lie in [braidNumOps, this]
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
/// @return braidInvalidArgument for a bad nranks/rank/NULL comm or a rank 0 BRAID_ALGO that
///         does not parse (every rank applies rank 0's, and every rank fails alike),
///         braidInvalidUsage for an id whose root refuses it, braidRemoteError/braidTimeout
///         if peers vanish.
braidResult_t braidCommInitRank(braidComm_t* comm, int nranks, braidUniqueId commId, int rank);

/// Per-communicator settings, given to braidCommInitRankConfig (NCCL's ncclConfig_t: the same
/// leading fields; initialise with BRAID_CONFIG_INITIALIZER, then set what you need).
/// Host communicators ignore the GPU fields (cgaClusterSize, minCTAs, maxCTAs, netName,
/// splitShare). `blocking` = 0 makes braidCommInitRankConfig non-blocking (see there); every
/// other call, braidCommSplit and braidCommFinalize included, returns when done.
typedef struct {
  size_t size;         ///< sizeof(braidConfig_t), set by the initializer
  unsigned int magic;  ///< set by the initializer
  unsigned int version;
  int blocking;
  int cgaClusterSize;
  int minCTAs;
  int maxCTAs;
  const char* netName;
  int splitShare;
  /// Braid: the bound of every wait of this communicator, init included, in seconds (as
  /// BRAID_TIMEOUT, which applies when this is 0). Must be >= 0 and finite.
  double timeoutSec;
  /// Braid: BRAID_STALL_WARN for this communicator, in seconds (0 turns the warning off);
  /// negative: the environment's.
  double stallWarnSec;
  /// Braid: BRAID_CHECK for this communicator: 1 compares every rank's call (collective, count,
  /// datatype, op, root) before each collective, so a mismatch fails every rank with the list
  /// of calls; 0 does not; negative: the environment's. Rank 0's value applies to all ranks.
  /// A config of the layout before this field (size 88 on LP64) reads as negative.
  int checkCalls;
} braidConfig_t;
#define BRAID_CONFIG_MAGIC 0xcafebeefu
#define BRAID_CONFIG_INITIALIZER \
  { sizeof(braidConfig_t), BRAID_CONFIG_MAGIC, BRAID_VERSION_CODE, 1, 0, 0, 0, 0, 0, 0.0, -1.0, -1 }

/// braidCommInitRank with per-communicator settings (NCCL's ncclCommInitRankConfig). A NULL
/// config is braidCommInitRank. config->blocking = 0 (NCCL's non-blocking init): arguments are
/// checked at once, then *comm is set and braidInProgress returned while a thread inits; poll
/// braidCommGetAsyncError until braidSuccess or init's error (braidGetLastError(*comm) says
/// why). Other calls on *comm meanwhile return braidInvalidArgument (as NCCL's);
/// braidCommAbort and braidCommDestroy stop the init and free it.
/// @return what braidCommInitRank returns; braidInvalidArgument, naming the field, for a
///         config not made by BRAID_CONFIG_INITIALIZER (size, magic) or a bad timeoutSec.
braidResult_t braidCommInitRankConfig(braidComm_t* comm, int nranks, braidUniqueId commId, int rank,
                                      braidConfig_t* config);

/// Color of a rank that takes no part in the new communicator of braidCommSplit.
#define BRAID_SPLIT_NOCOLOR (-1)
/// Splits comm into disjoint communicators (NCCL's ncclCommSplit, MPI_Comm_split). Collective
/// over comm: every rank calls it, with no other call on comm in between. Ranks with the same
/// color form one new communicator, ranked by key, ties by their rank in comm; a rank with
/// color BRAID_SPLIT_NOCOLOR gets *newcomm = NULL. Each new communicator's rank 0 starts its
/// bootstrap root (as braidGetUniqueId) and comm carries the ids, so no id is shared by
/// hand. A NULL config, or a config's fields left unset (timeoutSec 0, stallWarnSec and
/// checkCalls negative), inherit comm's timeoutSec, stallWarnSec and checkCalls. The split succeeds
/// on every rank or fails on every rank: a rank whose arguments are bad, or whose new communicator
/// cannot be made, still takes part in comm's exchanges, so no peer waits for it.
/// @param color  >= 0, or BRAID_SPLIT_NOCOLOR
/// @param key    any int; orders the ranks of one color
/// @return braidInvalidArgument for a NULL newcomm, a color below -1 or a bad config (as
///         braidCommInitRankConfig) on this rank; braidInvalidUsage, naming the ranks and the
///         first one's reason, where only other ranks failed; braidInvalidUsage inside
///         braidGroupStart/End (the split needs comm's all-gathers to run); comm's errors if
///         a peer fails during the exchanges.
braidResult_t braidCommSplit(braidComm_t comm, int color, int key, braidComm_t* newcomm,
                             braidConfig_t* config);

/// Braid extension: braidCommInitRank with rank, size and rendezvous read from the
/// environment of the launcher that started this process, so that no unique id has to be
/// shared by hand (torch's init_method="env://", NCCL's NCCL_COMM_ID). Collective: every
/// process of the job calls it once. Variables are read at call time.
///
/// Rank and size, from the first pair set (torchrun's first when TORCHELASTIC_RUN_ID shows
/// that torchrun started this process under srun or mpirun, whose variables then describe
/// the torchrun agent):
///   BRAID_RANK/BRAID_NRANKS (braidrun), OMPI_COMM_WORLD_RANK/OMPI_COMM_WORLD_SIZE (Open MPI),
///   PMI_RANK/PMI_SIZE (MPICH Hydra), SLURM_PROCID/SLURM_NTASKS (srun), RANK/WORLD_SIZE
///   (torchrun).
/// Rendezvous, the first set:
///   BRAID_UNIQUE_ID  braidUniqueIdToString's text (braidrun);
///   BRAID_COMM_ID    "host:port", NCCL_COMM_ID's meaning: rank 0 starts the bootstrap root
///                    listening on that port (all interfaces, after checking that host is
///                    one of its addresses), the other ranks connect to host:port, retrying
///                    until BRAID_TIMEOUT since rank 0 may start later. NCCL_COMM_ID is not
///                    read: NCCL in the same job binds that port itself;
///   MASTER_ADDR      with MASTER_PORT (torchrun): as BRAID_COMM_ID with port MASTER_PORT + 1
///                    (MASTER_PORT itself is torch's TCPStore).
///   None, with one rank: a private root (as braidGetUniqueId).
/// Host names are resolved with getaddrinfo, IPv4 only. For the address forms the 32-byte
/// secret every connection must prove is SHA-256 of BRAID_COMM_SECRET if set, else of the
/// job's identifier (SLURM_JOB_ID + SLURM_STEP_ID, TORCHELASTIC_RUN_ID,
/// OMPI_MCA_ess_base_jobid, PMIX_NAMESPACE), else of the address alone, always with the
/// rendezvous setting. Such a secret is only as private as the job's environment (anyone who
/// can read it, or guess the job id, can join or disturb the bootstrap): set
/// BRAID_COMM_SECRET to a random string, the same on every rank, where that matters.
/// @param comm out: the new communicator (NULL on failure)
/// @return braidInvalidArgument, the message naming the variable and its value, for a
///         missing, malformed or inconsistent variable (a rank without a size, RANK=5 with
///         WORLD_SIZE=4, a non-numeric value, host:port that does not parse or resolve, no
///         rendezvous variable with more than one rank, rank 0 on a host that BRAID_COMM_ID
///         does not name); braidSystemError if rank 0 cannot listen on the port (message
///         names the variable and port); braidTimeout if the root is not reached within
///         BRAID_TIMEOUT; otherwise braidCommInitRank's results.
braidResult_t braidCommInitFromEnv(braidComm_t* comm);

/// Braid extension: the first half of braidCommInitFromEnv, for callers that create the
/// communicators themselves (several threads of one process, e.g.): reads the same
/// variables, writes the id every rank passes to braidCommInitRank, and on rank 0 of an
/// address rendezvous starts the bootstrap root (call it once per process, not per thread).
/// The root takes the job's size from the first rank that joins, so a process may
/// multiply ranks (rank * nthreads + thread of nranks * nthreads).
/// @param id        out: the unique id (required)
/// @param rank      out, may be NULL: this process's rank
/// @param nranks    out, may be NULL: the job's size
/// @param localRank out, may be NULL: the rank among this host's processes from the same
///                  launcher (BRAID_LOCAL_RANK, OMPI_COMM_WORLD_LOCAL_RANK, MPI_LOCALRANKID,
///                  SLURM_LOCALID, LOCAL_RANK), or -1 if it does not say
/// @return braidCommInitFromEnv's argument and system errors.
braidResult_t braidUniqueIdFromEnv(braidUniqueId* id, int* rank, int* nranks, int* localRank);

/// Creates ndev communicators, ranks 0..ndev-1, as threads of this process (NCCL's
/// ncclCommInitAll). With a CUDA device, rank r is on devlist[r] (braidInvalidArgument,
/// before anything starts, for a device that cannot be selected); with devlist NULL every
/// rank is on the calling thread's current device (NCCL takes devices 0..ndev-1; Braid lets
/// ranks share a GPU). Host ranks (no device) ignore devlist.
/// Each communicator may then be driven by its own thread or through streams.
braidResult_t braidCommInitAll(braidComm_t* comms, int ndev, const int* devlist);

/// Frees comm (stopping a non-blocking init); waits for its queued work first. NULL is refused.
braidResult_t braidCommDestroy(braidComm_t comm);

/// Aborts comm (NCCL's ncclCommAbort), from any thread, also during a non-blocking init (which
/// it stops) or while another thread is blocked in a call on it: that call returns
/// braidInvalidUsage ("aborted") at its next wait; peers on this host waiting on this rank fail
/// with braidRemoteError naming it within 0.1 s instead of at BRAID_TIMEOUT, and network peers see
/// its sockets close. Work queued on streams fails. Then frees comm as braidCommDestroy does; comm
/// must not be used again, and a call that starts on comm while braidCommAbort runs is undefined
/// (as in NCCL).
braidResult_t braidCommAbort(braidComm_t comm);
/// comm's asynchronous error (NCCL's ncclCommGetAsyncError): braidInProgress while its
/// non-blocking init runs, that init's error if it failed, braidSuccess while comm works,
/// else the result of the call that left it unusable (a peer lost, a timeout, mismatched
/// calls), also one run on a stream. @return braidInvalidArgument for a NULL asyncError.
braidResult_t braidCommGetAsyncError(braidComm_t comm, braidResult_t* asyncError);
/// Finishes the work queued on comm's streams and finalizes it (NCCL's ncclCommFinalize):
/// later calls fail with braidInvalidUsage, except braidCommGetAsyncError and
/// braidCommDestroy. @return the asynchronous error, if comm failed earlier.
braidResult_t braidCommFinalize(braidComm_t comm);

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
/// Algorithm: chosen per call by message size (ring, tree, recursive doubling, rhd); BRAID_ALGO
/// or braidCommSetAlgorithm force one.
/// @return braidInvalidArgument for NULL buffers with count > 0, an unknown datatype or
///         op, count * size overflowing, or buffers that overlap without being the in-place
///         form (every collective: only its in-place form may share memory);
///         braidRemoteError/braidTimeout if a peer fails.
braidResult_t braidAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                             braidDataType_t datatype, braidRedOp_t op, braidComm_t comm,
                             braidStream_t stream);

/// Reduce-scatter: recvbuff[i] on rank r = op over ranks of sendbuff[r * recvcount + i].
/// @param sendbuff nranks * recvcount elements
/// @param recvbuff recvcount elements; in place when recvbuff == sendbuff + rank * recvcount
/// (NCCL's ncclReduceScatter.)
braidResult_t braidReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                                 braidDataType_t datatype, braidRedOp_t op, braidComm_t comm,
                                 braidStream_t stream);

/// All-gather: recvbuff[j * sendcount + i] = rank j's sendbuff[i], on every rank.
/// @param sendbuff sendcount elements; in place when sendbuff == recvbuff + rank * sendcount
/// @param recvbuff nranks * sendcount elements
/// (NCCL's ncclAllGather.)
braidResult_t braidAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                             braidDataType_t datatype, braidComm_t comm, braidStream_t stream);

/// Broadcast: recvbuff = root's sendbuff (count elements) on every rank. sendbuff is read
/// only on root (may be NULL elsewhere). braidInvalidArgument if root is out of range.
braidResult_t braidBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                             braidDataType_t datatype, int root, braidComm_t comm,
                             braidStream_t stream);
/// In-place broadcast (NCCL's legacy ncclBcast).
braidResult_t braidBcast(void* buff, size_t count, braidDataType_t datatype, int root,
                         braidComm_t comm, braidStream_t stream);

/// Reduce: root's recvbuff[i] = op over ranks of sendbuff[i]. recvbuff is written only on
/// root (may be NULL elsewhere).
braidResult_t braidReduce(const void* sendbuff, void* recvbuff, size_t count,
                          braidDataType_t datatype, braidRedOp_t op, int root, braidComm_t comm,
                          braidStream_t stream);

/// All-to-all: block j (count elements) of rank i's sendbuff lands in block i of rank j's
/// recvbuff. Both buffers hold nranks * count elements; they must not overlap.
braidResult_t braidAllToAll(const void* sendbuff, void* recvbuff, size_t count,
                            braidDataType_t datatype, braidComm_t comm, braidStream_t stream);

/// All-to-all with per-peer counts and displacements (MPI_Alltoallv's meaning, in elements):
/// sendbuff[sdispls[j] .. + sendcounts[j]) goes to rank j, which receives it at
/// recvbuff[rdispls[i] .. + recvcounts[i]). Zero counts are allowed; sendcounts[j] on rank i
/// must equal recvcounts[i] on rank j. Arrays hold nranks entries. The buffers' extents (up
/// to the largest displacement plus its count) must not overlap: braidInvalidArgument.
braidResult_t braidAllToAllv(const void* sendbuff, const size_t sendcounts[],
                             const size_t sdispls[], void* recvbuff, const size_t recvcounts[],
                             const size_t rdispls[], braidDataType_t datatype, braidComm_t comm,
                             braidStream_t stream);

/// Gather: root's recvbuff[j * count + i] = rank j's sendbuff[i]. recvbuff is used only on root.
/// The root's sendbuff may be its own slot, recvbuff + root * count (nccl-tests' in place).
braidResult_t braidGather(const void* sendbuff, void* recvbuff, size_t count,
                          braidDataType_t datatype, int root, braidComm_t comm,
                          braidStream_t stream);
/// Scatter: recvbuff[i] on rank j = root's sendbuff[j * count + i]. sendbuff is read only on root.
/// The root's recvbuff may be its own slot, sendbuff + root * count (nccl-tests' in place).
braidResult_t braidScatter(const void* sendbuff, void* recvbuff, size_t count,
                           braidDataType_t datatype, int root, braidComm_t comm,
                           braidStream_t stream);

/// Point-to-point (NCCL's ncclSend/ncclRecv): count elements to / from rank peer. Messages
/// between two ranks match in posting order. Outside a group each call blocks like a
/// one-operation group; inside braidGroupStart/End operations are fused and run together
/// when the group ends, so no order of sends and receives in a group can deadlock.
braidResult_t braidSend(const void* sendbuff, size_t count, braidDataType_t datatype, int peer,
                        braidComm_t comm, braidStream_t stream);
braidResult_t braidRecv(void* recvbuff, size_t count, braidDataType_t datatype, int peer,
                        braidComm_t comm, braidStream_t stream);

/// Groups (NCCL's ncclGroupStart/End): calls between them, on this thread, are deferred and
/// launched together at braidGroupEnd. Groups nest; the outermost End launches. One thread
/// may drive several communicators in one group (each runs on its own worker). A call of the
/// group that is refused (bad arguments) returns its error at once, and the outermost End
/// then returns that error too and runs nothing of the group (as ncclGroupEnd).
braidResult_t braidGroupStart(void);
braidResult_t braidGroupEnd(void);

/// Barrier: returns on each rank once every rank has entered (dissemination algorithm).
braidResult_t braidBarrier(braidComm_t comm, braidStream_t stream);

/// Where the scalar of braidRedOpCreatePreMulSum lives (NCCL's ncclScalarResidence_t).
typedef enum BRAID_ENUM_INT {
  braidScalarDevice = 0,        ///< read when the collective runs
  braidScalarHostImmediate = 1  ///< read once, at creation
} braidScalarResidence_t;

/// Creates an op computing sum over ranks of (scalar * x), with scalar of `datatype`
/// (NCCL's ncclRedOpCreatePreMulSum). The op is valid only with comm and that datatype.
braidResult_t braidRedOpCreatePreMulSum(braidRedOp_t* op, void* scalar, braidDataType_t datatype,
                                        braidScalarResidence_t residence, braidComm_t comm);
braidResult_t braidRedOpDestroy(braidRedOp_t op, braidComm_t comm);

#include "braid/braid_algorithms.h"  // braidListAlgorithms, braidCommSetAlgorithm, braidCommPredict
#include "braid/braid_fault.h"
#include "braid/braid_memory.h"
#include "braid/braid_rma.h"
#include "braid/braid_trace.h"

/// Creates a host stream with its own worker thread.
braidResult_t braidStreamCreate(braidStream_t* stream);
/// Braid extension: a stream whose calls are ordered with the CUDA stream `cudaStream` (a
/// cudaStream_t; NULL is the legacy default stream), as NCCL's calls are: each call runs once
/// the work queued on cudaStream before it has finished, and work queued on cudaStream after
/// it waits until the call is done. The calling thread does not wait. The call runs on this
/// stream's worker thread (the proxy), which moves device buffers device to device (CUDA IPC,
/// on a communicator whose ranks share one host and all have a device: BRAID_CUDA_IPC) or
/// stages them through host memory, on a stream of its own on the communicator's device; cudaStream
/// waits on a mapped host word (cuStreamWaitValue32, which the device must support), so it can be
/// captured into a CUDA graph, each replay running the call again. Use it with that one CUDA stream
/// (for cudaStreamPerThread, from one thread), and launch no graph holding its calls after
/// braidStreamDestroy. A failed call is reported by braidStreamSynchronize and is its
/// communicator's asynchronous error (braidCommGetAsyncError): no caller waited for it. If
/// the wait cannot be queued, the call returns that error but still runs, unordered, when
/// the stream reaches it, and the stream refuses later calls. braidCommAbort does not wait for
/// calls the CUDA stream has not reached; they fail when it does. braidUnhandledCudaError without a
/// CUDA device. The NCCL drop-in makes one for each cudaStream_t a device communicator is called
/// with.
braidResult_t braidStreamCreateCuda(braidStream_t* stream, void* cudaStream);
/// Waits until all work queued on stream has run; returns the first error of that work. On a
/// stream of braidStreamCreateCuda, waits for the CUDA stream first (cudaStreamSynchronize).
braidResult_t braidStreamSynchronize(braidStream_t stream);
/// Synchronizes, then frees the stream.
braidResult_t braidStreamDestroy(braidStream_t stream);

/// Text form of a unique id (256 hex digits + NUL) for environment variables; used by
/// braidrun (BRAID_UNIQUE_ID) and torchrun-style launchers.
braidResult_t braidUniqueIdToString(const braidUniqueId* id,
                                    char out[2 * BRAID_UNIQUE_ID_BYTES + 1]);
/// Parses braidUniqueIdToString's form. braidInvalidArgument if it is not 256 hex digits.
braidResult_t braidUniqueIdFromString(const char* text, braidUniqueId* id);

/// The CUDA device comm's rank uses (NCCL's ncclCommCuDevice): the calling thread's current
/// device when the communicator was made, or -1 for a host communicator (a build without
/// CUDA, or no CUDA device then). @return braidInvalidArgument for a NULL device.
braidResult_t braidCommCuDevice(const braidComm_t comm, int* device);
/// Allocates size bytes of device memory on the calling thread's current CUDA device, for
/// buffers of collectives (NCCL's ncclMemAlloc; cudaMalloc here). size 0 gives NULL.
/// @return braidInvalidArgument for a NULL ptr; braidUnhandledCudaError when there is no CUDA
///         device (the message says why: "Braid built without CUDA", no driver, no device)
///         or cudaMalloc fails (out of memory, with the size).
braidResult_t braidMemAlloc(void** ptr, size_t size);
/// Frees memory from braidMemAlloc (NULL is a no-op). braidUnhandledCudaError if CUDA refuses.
braidResult_t braidMemFree(void* ptr);
/// Braid extension: allocates size bytes of host memory (page aligned, zeroed) that the
/// other ranks of this machine read in place: in a collective whose buffers on the machine
/// outgrow the last-level cache (BRAID_CACHE_BYTES), pieces of at least
/// BRAID_SINGLE_COPY_BYTES that lie in such memory are read by the receiving rank straight
/// from it, in its own mapping of the allocation (made on first use), instead of through the
/// shared-memory FIFO's copy in and copy out; smaller calls keep the FIFO, which is faster
/// while the data stays in cache. Other host memory works as before. Each
/// allocation is a memfd; a rank of another process maps it through /proc/PID/fd (same user;
/// BRAID_DEBUG_SUBSYS=INIT says, per peer, whether it can). BRAID_SINGLE_COPY=off turns it
/// off. The role of NCCL's ncclMemAlloc plus ncclCommRegister, for host memory. size 0
/// gives NULL.
/// Like any shared mapping, the pages are allocated as they are first written (a size beyond
/// the machine's memory fails then, not here) and a child made by fork() shares them. Each
/// allocation holds one file descriptor of the process until it is freed.
/// @return braidInvalidArgument for a NULL ptr or a size over 2^48; braidSystemError when
///         the system refuses the memory (the message says why: out of file descriptors,
///         address space).
braidResult_t braidMemAllocHost(void** ptr, size_t size);
/// Frees memory from braidMemAllocHost (NULL is a no-op). Peers that mapped it let go of it
/// when the next piece from this process reaches them (any collective with them).
/// @return braidInvalidArgument for a pointer that is not the start of a live
/// braidMemAllocHost allocation.
braidResult_t braidMemFreeHost(void* ptr);
/// Braid extension: copies bytes from src to dst, each host or device memory (CUDA works out
/// which), after the device has finished its queued work, and returns when the copy is done.
/// For harnesses without a CUDA runtime of their own (the perf binaries' -B device).
/// Host to host is memcpy, also without CUDA. @return braidInvalidArgument for NULL pointers
/// with bytes > 0; braidUnhandledCudaError if a device side has no CUDA to copy it.
braidResult_t braidMemcpy(void* dst, const void* src, size_t bytes);
/// Registers size bytes at buff with comm for later collectives (NCCL's ncclCommRegister).
/// Braid needs no registration (host buffers are copied through its own segments; device
/// buffers are opened by their peers per allocation, or staged), so this records the range and
/// returns a handle for braidCommDeregister. @return braidInvalidArgument for a NULL buff (size >
/// 0) or handle.
braidResult_t braidCommRegister(const braidComm_t comm, void* buff, size_t size, void** handle);
/// Releases a handle of braidCommRegister on the same comm; braidInvalidArgument for a handle
/// comm did not give or one already released. Handles left are freed with comm.
braidResult_t braidCommDeregister(const braidComm_t comm, void* handle);

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
