/// @file common.h
/// The harness behind every perf/*_perf binary: nccl-tests' flags, rank launch (threads,
/// braidrun, mpirun), timing, validation and nccl-tests' output table.
///
/// A perf binary describes its collective with a Collective and hands it to PerfMain:
/// @code
///   const braid::perf::Collective kAllReduce = {
///       .name = "all_reduce_perf", .counts = ..., .busbw_factor = ...,
///       .fill_send = ..., .fill_expected = ..., .run = ...};
///   int main(int argc, char** argv) { return braid::perf::PerfMain(argc, argv, kAllReduce); }
/// @endcode
///
/// The table has the shape of nccl-tests' (NVIDIA/nccl-tests src/common.cu): only global
/// rank 0 prints it, one row per size with out-of-place then in-place columns; time in
/// microseconds per call, algbw = bytes / time in GB/s (1e9 bytes/s), busbw = algbw times
/// the collective's factor (nccl-tests doc/PERFORMANCE.md), #wrong = mismatching elements
/// summed over ranks. Validation (-c 1) runs once per size and placement after the timed
/// loop, as nccl-tests does, on freshly filled inputs.
#ifndef BRAID_PERF_COMMON_H_
#define BRAID_PERF_COMMON_H_

#include <cstddef>
#include <cstdint>

#include "braid/braid.h"

namespace braid::perf {

/// Element counts of one call at one benchmark size, as nccl-tests' getCollByteCount
/// computes them from count = bytes / element size.
struct CollCounts {
  size_t send_count = 0;           ///< elements each rank sends
  size_t recv_count = 0;           ///< elements each rank receives (and the check compares)
  size_t param_count = 0;          ///< the count argument of the call ("count" column)
  size_t send_inplace_offset = 0;  ///< in place, send = recvbuff + this * rank (elements)
  size_t recv_inplace_offset = 0;  ///< in place, recv = recvbuff + this * rank (elements)
};

/// What fill_send and fill_expected need to know about the call being checked.
struct CheckArgs {
  braidDataType_t dtype = braidFloat32;
  braidRedOp_t op = braidSum;
  int root = 0;
  int rank = 0;
  int nranks = 1;
  uint64_t seed = 0;  ///< differs per check so stale results cannot pass
};

/// A collective as the harness drives it. Every field is required.
struct Collective {
  const char* name;  ///< "all_reduce_perf": printed in "# Collective test starting: ..."
  const char* call;  ///< "braidAllReduce": named in error messages
  bool uses_op;      ///< false: the redop column says "none" and -o is ignored
  bool uses_root;    ///< false: the root column says -1 and -r is ignored
  /// Counts for count = bytes / element size elements on nranks ranks.
  CollCounts (*counts)(size_t count, int nranks);
  /// busbw / algbw for nranks ranks (all-reduce: 2 (n - 1) / n).
  double (*busbw_factor)(int nranks);
  /// Writes rank args.rank's send_count input elements into send.
  void (*fill_send)(void* send, const CollCounts& counts, const CheckArgs& args);
  /// Writes the recv_count elements rank args.rank must hold after the call.
  void (*fill_expected)(void* expected, const CollCounts& counts, const CheckArgs& args);
  /// Runs the collective once; send may lie inside recv (in place).
  braidResult_t (*run)(const void* send, void* recv, const CollCounts& counts,
                       braidDataType_t dtype, braidRedOp_t op, int root, braidComm_t comm,
                       braidStream_t stream);
};

/// Parses nccl-tests' flags, launches the ranks, runs the sweep and prints the table.
/// @return the process exit status: 0 on success, 1 if a check found wrong elements or a
///         Braid call failed, 2 for a bad command line (the message names the flag).
int PerfMain(int argc, char** argv, const Collective& coll);

// Verifiable data, shared by every collective's fill_send / fill_expected. Inputs are
// chosen per datatype and op so that the reduction is exact whatever order the library
// reduces in (small integers, powers of two, bounded partial sums), so the check compares
// values exactly; integer inputs span the type's whole range so that sums and products
// wrap around.

/// Writes elements [offset, offset + count) of rank's input into buf (element i of buf
/// is global element offset + i).
void FillInput(void* buf, size_t count, size_t offset, const CheckArgs& args, int rank);

/// Writes op over ranks 0..nranks-1 of FillInput's elements [offset, offset + count)
/// into buf, rounded as braid.h documents (avg: exact sum, then one division).
void FillReduced(void* buf, size_t count, size_t offset, const CheckArgs& args);

/// Number of elements of got that differ from want (floating point: by value, NaN
/// equals NaN; integers: exactly).
size_t CountMismatches(const void* got, const void* want, size_t count, braidDataType_t dtype);

/// Size in bytes of one element (the harness's own table; 0 for an unknown type).
size_t ElementSize(braidDataType_t dtype);

}  // namespace braid::perf

#endif  // BRAID_PERF_COMMON_H_
