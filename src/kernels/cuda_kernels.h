// CUDA kernels: the device twins of the host reduction kernels (kernels/reduce.h), and a copy.
//
// A plain C++ header: no CUDA types, so .cc files call it whether or not Braid was built with
// CUDA. Without CUDA every function is a stub that fails with kNotBuilt ("Braid built without
// CUDA"), and deviceCount() says so.
//
// Results are bit-identical to braid::kernels::reduce() and divide() on the host that built
// Braid (tests/kernels/cuda_kernels_test.cc compares every dtype and op): integers wrap modulo
// 2^bits; fp16, bf16 and fp8 are decoded to fp32, combined in fp32 and rounded once to
// nearest-even, with fp8 saturating; max and min propagate NaN. Where the GPU's own NaN rules
// differ from the CPU's (a GPU returns one canonical NaN), the kernels follow the CPU's: an
// operation on one NaN returns it quieted, and an invalid one (inf - inf, 0 * inf) the CPU's
// default NaN. Which of two NaN operands a sum or product returns is open, as on the host.
//
// Every pointer is device memory (or memory the device can address) aligned to its element
// size. Work is enqueued on `stream`, a cudaStream_t passed as void* (nullptr: the legacy
// default stream); the functions return before it runs. Bulk data moves in 16-byte vectors
// when out and the inputs share their alignment modulo 16, element by element otherwise.
#ifndef BRAID_KERNELS_CUDA_KERNELS_H_
#define BRAID_KERNELS_CUDA_KERNELS_H_

#include <cstddef>
#include <string>

#include "braid/braid.h"

namespace braid::cuda {

/// Error codes: 0 is success, and any other value a cudaError_t, except kNotBuilt.
inline constexpr int kSuccess = 0;
/// An unknown dtype or op, or a divisor < 1 (cudaErrorInvalidValue's value).
inline constexpr int kInvalidValue = 1;
/// Every function of a build without CUDA.
inline constexpr int kNotBuilt = -1;

/// True when Braid was built with CUDA (BRAID_HAVE_CUDA).
bool built();

/// The number of CUDA devices this process sees. 0 when there are none, with *why (if not
/// NULL) saying why: "no CUDA device (cudaGetDeviceCount: <CUDA's error string>)", "no CUDA
/// device (cudaGetDeviceCount found 0)" or "Braid built without CUDA".
int deviceCount(std::string* why);

/// out[i] = op(a[i], b[i]) for i < count, then divided by divisor if divisor > 1: the device
/// twin of kernels::reduce() with the same rules (braidAvg is braidSum; integers divide with
/// C's truncation, floating point in fp32, fp64 in fp64, once, before narrowing).
/// @param out    count elements; may equal a or b exactly, no other overlap
/// @param count  elements, not bytes; 0 enqueues nothing
/// @param stream cudaStream_t as void*
/// @return 0, kInvalidValue for an unknown dtype or op, or the launch's cudaError_t.
int reduce(void* out, const void* a, const void* b, size_t count, braidDataType_t dtype,
           braidRedOp_t op, void* stream, int divisor = 1);

/// dst[i] = src[i] / divisor: the device twin of kernels::divide() (braidAvg's final step).
/// dst may equal src exactly; divisor == 1 copies (nothing when dst == src).
/// @return 0, kInvalidValue for an unknown dtype or divisor < 1, or a cudaError_t.
int divide(void* dst, const void* src, size_t count, braidDataType_t dtype, int divisor,
           void* stream);

/// buf[i] = buf[i] * factor in place, for a PreMulSum op: factor is first converted to dtype
/// (integers: truncated toward zero; fp32 and narrower: rounded to nearest-even), then the
/// product is kernels::reduce(dtype, braidProd, ...) with that scalar as its second operand.
/// A factor exactly representable in dtype (a PreMulSum scalar always is) gives the host's bits.
/// @return 0, kInvalidValue for an unknown dtype, or the launch's cudaError_t.
int scale(void* buf, size_t count, braidDataType_t dtype, double factor, void* stream);

/// dst[0, bytes) = src[0, bytes) with a 16-byte vectorised kernel (cudaMemcpyAsync when dst
/// and src differ in alignment modulo 16). No overlap.
/// @return 0 or a cudaError_t.
int copy(void* dst, const void* src, size_t bytes, void* stream);

/// A readable message for a value these functions returned (CUDA's own for a cudaError_t).
const char* errorString(int err);

}  // namespace braid::cuda

#endif  // BRAID_KERNELS_CUDA_KERNELS_H_
