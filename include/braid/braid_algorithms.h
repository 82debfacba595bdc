/// @file braid_algorithms.h
/// Braid extensions over the table of algorithms: list an operation's algorithms, force one on a
/// communicator, ask the cost model what a call would take. Part of the public API: braid.h
/// includes it (inside its extern "C"), and it is not meant to be included on its own.
#ifndef BRAID_BRAID_ALGORITHMS_H_
#define BRAID_BRAID_ALGORITHMS_H_

#ifndef BRAID_BRAID_H_
#error "include braid/braid.h, which includes braid/braid_algorithms.h"
#endif

/// Braid extension: the names of the algorithms that implement `collective` ("allreduce",
/// "reducescatter", "allgather", "broadcast", "reduce", "alltoall", "alltoallv", "gather",
/// "scatter", "barrier"), in table order. Writes up to max names (static strings) and sets
/// *count to the total. braidInvalidArgument for an unknown collective.
braidResult_t braidListAlgorithms(const char* collective, const char** names, int max, int* count);
/// Braid extension: forces `algorithm` for `collective` on comm (NULL or "" restores the
/// default rule). Overrides BRAID_ALGO. braidInvalidArgument if no such algorithm. Every rank
/// must make the same choice: a call whose ranks run different algorithms fails on every rank
/// with braidInvalidUsage naming each rank's algorithm (with BRAID_CALL_CHECK=1, the default).
braidResult_t braidCommSetAlgorithm(braidComm_t comm, const char* collective,
                                    const char* algorithm);

/// Braid extension: what the selector's cost model predicts for a call, without running it.
/// `collective` as braidListAlgorithms names it; `count` the call's count argument, elements
/// of `dtype`. With `algorithm` NULL or "", *predictedUs is the time of the algorithm the
/// cost model picks (the one a call runs unless braidCommSetAlgorithm or BRAID_ALGO forces
/// another); else that algorithm's. *chosen (if not NULL) gets the cost model's pick, a
/// static string. Times in microseconds; figures come from the communicator's fabric (ranks
/// per host, shared-memory and network link costs). braid-tune prints them beside measured
/// times. braidInvalidArgument for an unknown collective, algorithm or dtype;
/// braidInvalidUsage if the algorithm cannot run this call (the message says why).
braidResult_t braidCommPredict(braidComm_t comm, const char* collective, size_t count,
                               braidDataType_t dtype, const char* algorithm, double* predictedUs,
                               const char** chosen);

/// Braid extension (NCCL's ncclGroupSimulateEnd, 2.22): closes the calling thread's group like
/// braidGroupEnd, but runs none of its calls: it predicts their time instead and drops them.
/// Each communicator's calls are predicted in posting order, each collective by the algorithm
/// it would run (braidCommSetAlgorithm's, BRAID_ALGO's, braid-tune's table or the cost model's
/// pick, as a call chooses) with the cost model of braidCommPredict, and each run of
/// consecutive sends and receives as one fused exchange (the bytes each of the rank's ports
/// carries, within the host and to the network, over its bandwidth, plus the largest link
/// latency met); the communicators of a group run side by
/// side, so *estimatedUs is the largest communicator's sum, in microseconds. Nothing is sent,
/// buffers are neither read nor written, no peer takes part (each rank predicts its own share).
/// Inside a nested group it only closes that level (as braidGroupEnd), leaving *estimatedUs
/// alone; the outermost one predicts the whole group.
/// @return braidInvalidUsage outside a group; braidInvalidArgument for a NULL estimatedUs (the
///         group stays open: end it again, or run it with braidGroupEnd); a call of the group
///         that was refused: its error, as braidGroupEnd returns it (nothing predicted).
braidResult_t braidGroupSimulateEnd(double* estimatedUs);

#endif  // BRAID_BRAID_ALGORITHMS_H_
