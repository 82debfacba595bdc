/// @file verifiable.h
/// Verifiable data for the perf binaries: inputs whose results the harness knows exactly,
/// in every datatype, so validation compares values (reductions) or bits (data movement)
/// with no tolerance. The role of nccl-tests' verifiable/verifiable.cu, on the host.
///
/// Reductions: inputs are chosen per datatype and op so that the result is exact whatever
/// order the library reduces in (small integers, powers of two, bounded partial sums);
/// integer inputs span the type's whole range so that sums and products wrap around.
/// Data movement: every element is a hash of (seed, source rank, element index) over all
/// its bits, so an element delivered from the wrong rank or offset never matches.
#ifndef BRAID_PERF_VERIFIABLE_H_
#define BRAID_PERF_VERIFIABLE_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "braid/braid.h"

namespace braid::perf {

/// What the fill functions need to know about the call being checked.
struct CheckArgs {
  braidDataType_t dtype = braidFloat32;
  braidRedOp_t op = braidSum;
  int root = 0;
  int rank = 0;
  int nranks = 1;
  uint64_t seed = 0;  ///< differs per check so stale results cannot pass
};

/// Size in bytes of one element (the harness's own table; 0 for an unknown type).
size_t ElementSize(braidDataType_t dtype);
/// nccl-tests' name of dtype ("float", "half", "bfloat16", "int8", ...), "unknown" if bad.
const char* TypeName(braidDataType_t dtype);
/// nccl-tests' mulsum: the perf binaries' stand-in op (one past the built-in ones, as
/// nccl-tests stands ncclNumOps in for it) for a PreMulSum op that each call creates with
/// braidRedOpCreatePreMulSum: sum over ranks of PreMulScalar(rank) * input.
constexpr braidRedOp_t kMulSum = static_cast<braidRedOp_t>(braidNumOps);
/// A rank's PreMulSum scalar: +1 on even ranks, -1 on odd ones, so that every product and
/// partial sum stays exact in every datatype (integers wrap, as their sums do).
double PreMulScalar(int rank);
/// PreMulScalar(rank) as one element of dtype, into out (ElementSize(dtype) bytes).
void PreMulScalarBytes(braidDataType_t dtype, int rank, void* out);

/// nccl-tests' name of an op ("sum", "prod", "max", "min", "avg", "mulsum"), "unknown" if bad.
const char* OpName(braidRedOp_t op);
/// Every datatype, in braidDataType_t order (what "-d all" runs).
std::vector<braidDataType_t> AllTypes();
/// Parses a datatype by nccl-tests' name or a common alias ("fp16", "bf16", "e4m3", ...).
/// @return false for an unknown name.
bool ParseTypeName(const char* text, braidDataType_t* dtype);

/// splitmix64 over (seed, a, b): the hash every fill derives from.
uint64_t Mix(uint64_t seed, uint64_t a, uint64_t b);

/// Writes elements [offset, offset + count) of rank's reduction input into buf (element i
/// of buf is global element offset + i).
void FillInput(void* buf, size_t count, size_t offset, const CheckArgs& args, int rank);

/// Writes op over ranks 0..nranks-1 of FillInput's elements [offset, offset + count)
/// into buf, rounded as braid.h documents (avg: exact sum, then one division; kMulSum: the
/// sum of each rank's input times PreMulScalar(rank)).
void FillReduced(void* buf, size_t count, size_t offset, const CheckArgs& args);

/// Writes elements [offset, offset + count) of rank's data-movement pattern into buf: every
/// bit of element i hashes (args.seed, rank, offset + i). Compare with CountBitMismatches.
void FillPattern(void* buf, size_t count, size_t offset, const CheckArgs& args, int rank);

/// Writes `bytes` pseudo-random bytes derived from seed (poison for untouched regions).
void FillBytes(void* buf, size_t bytes, uint64_t seed);

/// Number of elements of got that differ from want by value (floating point: NaN equals
/// NaN and -0 equals +0; integers: exactly).
size_t CountMismatches(const void* got, const void* want, size_t count, braidDataType_t dtype);

/// Number of elem_size-byte elements of got whose bits differ from want's.
size_t CountBitMismatches(const void* got, const void* want, size_t count, size_t elem_size);

}  // namespace braid::perf

#endif  // BRAID_PERF_VERIFIABLE_H_
