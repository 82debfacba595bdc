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
/// default rule). Overrides BRAID_ALGO. braidInvalidArgument if no such algorithm.
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

#endif  // BRAID_BRAID_ALGORITHMS_H_
