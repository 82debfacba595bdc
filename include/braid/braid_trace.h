/// @file braid_trace.h
/// The flight recorder (docs/trace.md): every rank records every call on every communicator in a
/// bounded ring (BRAID_TRACE_BUFFER calls, 2,000 by default; BRAID_TRACE=off turns it off,
/// BRAID_TRACE=steps adds one record per schedule step: peer, bytes, and the time spent waiting,
/// copying and reducing). The records go to BRAID_TRACE_DIR/<job>/rank-N.json, one JSON record a
/// line: on the first failed call of a communicator (a timeout, an abort, a lost peer, a
/// mismatch), on SIGUSR1 (where the program left SIGUSR1 at its default), and on
/// braidCommDumpTrace. <job> is BRAID_TRACE_JOB, else "job-" and the hash of the communicator
/// the rank created by init; N is the rank in it. braid-trace reads a job's folder: which rank
/// hangs and where, mismatched calls, a timeline for chrome://tracing and Perfetto, and where
/// the time went. PyTorch's flight recorder (TORCH_NCCL_TRACE_BUFFER_SIZE, dumps on timeout)
/// is the model. Part of the public API: braid.h includes it (inside its extern "C").
#ifndef BRAID_BRAID_TRACE_H_
#define BRAID_BRAID_TRACE_H_

#ifndef BRAID_BRAID_H_
#error "include braid/braid.h, which includes braid/braid_trace.h"
#endif

/// Writes this rank's flight recorder now: its calls on comm and on every communicator that
/// shares its recorder (those split, shrunk or grown from the one it was made for). Local: no
/// other rank takes part. Safe while other threads make calls on comm.
/// @param path if not NULL, receives the file written (NUL-terminated, cut at pathSize)
/// @return braidInvalidArgument for a bad comm; braidInvalidUsage when BRAID_TRACE_DIR is unset
///         or BRAID_TRACE=off; braidSystemError when the file cannot be written (the message
///         names it).
braidResult_t braidCommDumpTrace(braidComm_t comm, char* path, size_t pathSize);

#endif  // BRAID_BRAID_TRACE_H_
