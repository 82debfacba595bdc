/// @file common.h
/// The harness behind every perf/*_perf binary: nccl-tests' flags, rank launch (threads,
/// braidrun, mpirun), timing, validation and nccl-tests' output table.
///
/// A perf binary describes its collective with a Collective and hands it to PerfMain:
/// @code
///   const braid::perf::Collective kAllReduce = {
///       .name = "all_reduce_perf", .collective = "allreduce", .call = "braidAllReduce", ...,
///       .counts = ..., .busbw_factor = ..., .fill_send = ..., .fill_expected = ...,
///       .run = ...};
///   int main(int argc, char** argv) { return braid::perf::PerfMain(argc, argv, kAllReduce); }
/// @endcode
///
/// The table has the shape of nccl-tests' (NVIDIA/nccl-tests src/common.cu): only global
/// rank 0 prints it, one row per size with out-of-place then in-place columns; size is
/// max(send, receive) bytes of one rank and count the call's count argument (nccl-tests'
/// getCollByteCount conventions); time in microseconds per call, algbw = bytes / time in
/// GB/s (1e9 bytes/s), busbw = algbw times the collective's factor (nccl-tests
/// doc/PERFORMANCE.md), #wrong = mismatching elements summed over ranks. Validation (-c 1)
/// runs once per size and placement after the timed loop, as nccl-tests does, on freshly
/// filled inputs, and also checks that the call leaves alone what it must not write (the
/// receive buffer of a non-root rank in reduce and gather, gaps between all-to-all-v blocks).
#ifndef BRAID_PERF_COMMON_H_
#define BRAID_PERF_COMMON_H_

#include <cstddef>
#include <cstdint>

#include "braid/braid.h"
#include "verifiable.h"

namespace braid::perf {

/// Element counts of one call at one benchmark size, as nccl-tests' getCollByteCount
/// computes them from count = bytes / element size.
struct CollCounts {
  size_t send_count = 0;           ///< elements each rank sends
  size_t recv_count = 0;           ///< elements of each rank's receive region (checked)
  size_t param_count = 0;          ///< the count argument of the call ("count" column)
  size_t send_inplace_offset = 0;  ///< in place, send = recvbuff + this * rank (elements)
  size_t recv_inplace_offset = 0;  ///< in place, recv = recvbuff + this * rank (elements)
};

/// A collective as the harness drives it. Fields up to `run` are required; the ones after
/// it may be left out.
struct Collective {
  const char* name;        ///< "all_reduce_perf": printed in "# Collective test starting: ..."
  const char* collective;  ///< "allreduce": braidListAlgorithms' name, -A's target, JSON's
  const char* call;        ///< "braidAllReduce": named in error messages
  /// false: built from grouped braidSend/braidRecv (sendrecv, hypercube), which no row of
  /// the algorithm table implements: -A list prints nothing and -A NAME is refused.
  bool has_algorithms;
  bool uses_op;    ///< false: the redop column says "none" and -o is ignored
  bool uses_root;  ///< false: the root column says -1 and -r is ignored
  bool in_place;   ///< false: no in-place form; the in-place columns say N/A
  /// true: data movement, compared bit for bit; false: reduction results, by value.
  bool bitwise;
  /// Counts for count = bytes / element size elements on nranks ranks.
  CollCounts (*counts)(size_t count, int nranks);
  /// busbw / algbw for nranks ranks (all-reduce: 2 (n - 1) / n).
  double (*busbw_factor)(int nranks);
  /// Writes rank args.rank's input into send (send_count elements; rooted collectives
  /// whose input lives on the root write it on the root only).
  void (*fill_send)(void* send, const CollCounts& counts, const CheckArgs& args);
  /// Writes the elements of the recv_count-element receive region that the call defines on
  /// args.rank, and leaves every other element alone: the harness checks that the call
  /// leaves those unchanged too.
  void (*fill_expected)(void* expected, const CollCounts& counts, const CheckArgs& args);
  /// Runs the collective once; send may lie inside recv (in place).
  braidResult_t (*run)(const void* send, void* recv, const CollCounts& counts,
                       braidDataType_t dtype, braidRedOp_t op, int root, braidComm_t comm,
                       braidStream_t stream);
  /// Bytes algbw divides by the time; nullptr: the size column (nccl-tests' rule for all
  /// but hypercube).
  double (*algbw_bytes)(const CollCounts& counts, size_t elem_size, int nranks) = nullptr;
  /// Why the collective cannot run on nranks ranks, or nullptr. The binary then prints it
  /// and exits 0, as nccl-tests' hypercube does for a rank count that is not a power of 2.
  const char* (*skip_reason)(int nranks) = nullptr;
};

/// Parses nccl-tests' flags, launches the ranks, runs the sweep and prints the table.
/// @return the process exit status: 0 on success, 1 if a check found wrong elements or a
///         Braid call failed (an algorithm forced with -A that cannot run a call included),
///         2 for a bad command line (the message names the flag; an unknown -A name lists
///         the known ones).
int PerfMain(int argc, char** argv, const Collective& coll);

/// Building blocks shared by the binaries' Collective descriptors (nccl-tests'
/// getCollByteCount shapes; count = bytes / element size, n = nranks):
/// Whole: every rank sends and receives count (all-reduce, broadcast, reduce, send/recv).
CollCounts WholeCounts(size_t count, int nranks);
/// Gather-shaped: send count/n, receive n blocks; in place, send = recv + rank block.
CollCounts GatherCounts(size_t count, int nranks);
/// Scatter-shaped: send n blocks, receive count/n; in place, recv = send + rank block.
CollCounts ScatterCounts(size_t count, int nranks);
/// All-to-all: n blocks of count/n each way.
CollCounts AllToAllCounts(size_t count, int nranks);
/// busbw factors of nccl-tests doc/PERFORMANCE.md.
double BusBwOne(int nranks);        ///< broadcast, reduce, send/recv: 1
double BusBwAllButOwn(int nranks);  ///< gather-like and all-to-all: (n-1)/n
/// This rank's reduction input (FillInput), or its bit pattern (FillPattern), as send.
void FillSendInput(void* send, const CollCounts& counts, const CheckArgs& args);
void FillSendPattern(void* send, const CollCounts& counts, const CheckArgs& args);
/// The root's bit pattern as send, on the root only (broadcast, scatter).
void FillSendRootPattern(void* send, const CollCounts& counts, const CheckArgs& args);
/// Expected: block j of param_count elements holds rank j's pattern (all-gather, gather).
void FillBlocksByRank(void* expected, const CollCounts& counts, const CheckArgs& args);

}  // namespace braid::perf

#endif  // BRAID_PERF_COMMON_H_
