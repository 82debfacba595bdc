// Host reduction kernels: the element-wise combine step of every reducing collective, and
// the conversions between fp32 and the narrow floating-point formats Braid reduces.
//
// Semantics follow NCCL's device kernels where they are defined and braid.h where Braid
// chooses: integer sum and product wrap modulo 2^bits; fp16, bf16 and fp8 are combined in
// fp32 and rounded once to nearest-even; AVG is a sum followed by one division.
#ifndef BRAID_KERNELS_REDUCE_H_
#define BRAID_KERNELS_REDUCE_H_

#include <cstddef>
#include <cstdint>

#include "braid/braid.h"

namespace braid::kernels {

/// Element-wise combine: dst[i] = op(a[i], b[i]) for i < count, then divided by divisor if
/// divisor > 1 (the final step of AVG).
/// @param dtype    element type of dst, a and b
/// @param op       braidSum, braidProd, braidMax or braidMin; braidAvg is treated as braidSum
///                 (the caller divides once, at the end, through divisor)
/// @param dst      count elements; may equal a or b exactly (in place), no other overlap
/// @param a, b     count elements each; may equal each other
/// @param count    elements, not bytes; 0 is a no-op (the pointers are then not read)
/// @param divisor  > 1: integers use C's truncating division of the wrapped sum; fp32 and
///                 narrower divide in fp32, fp64 in fp64; values <= 1 do not divide
/// Integer sum and product wrap modulo 2^bits (computed in the unsigned type, no undefined
/// behaviour). fp16, bf16 and fp8 are decoded to fp32, combined (and divided) in fp32 and
/// rounded once to nearest-even; fp8 saturates to its largest finite value.
/// Floating-point max and min propagate NaN: if either input is NaN the result is NaN (the
/// first NaN operand's payload). Otherwise they compare with < and >, so max(+0, -0) and
/// min(+0, -0) return b.
/// @return false, touching nothing, for an unknown dtype or op.
bool reduce(braidDataType_t dtype, braidRedOp_t op, void* dst, const void* a, const void* b,
            size_t count, int divisor = 1);

/// reduce() with the same results, for outputs larger than the last-level cache that nothing
/// reads soon: where dst is disjoint from a and b, its whole 64-byte lines are written with
/// streaming (non-temporal) stores, which skip the read for ownership of each line (x86-64;
/// elsewhere, and where dst equals a or b, plain stores). Ends with a store fence, so a later
/// release store publishes the output.
bool reduceStreaming(braidDataType_t dtype, braidRedOp_t op, void* dst, const void* a,
                     const void* b, size_t count, int divisor = 1);

/// dst[i] = src[i] / divisor for i < count, with reduce's division and rounding rules; AVG on
/// one rank. dst may equal src exactly; no other overlap. divisor == 1 copies bit for bit.
/// @return false, touching nothing, for an unknown dtype or divisor < 1.
bool divide(braidDataType_t dtype, void* dst, const void* src, size_t count, int divisor);

/// memcpy with streaming (non-temporal) stores where the CPU has them (x86-64: SSE2, 16 bytes
/// at a time; the head up to 16-byte alignment and the tail go through memcpy), plain memcpy
/// elsewhere. For outputs larger than the last-level cache that nothing reads soon: the
/// stores skip the read-for-ownership of each destination line, a third of the memory
/// traffic of a cached copy. Ends with a store fence, so a later release store (a FIFO's
/// counter) publishes the bytes. dst and src must not overlap; bytes 0 is a no-op.
void copyStreaming(void* dst, const void* src, size_t bytes);

/// The instruction sets reduce() and divide() are built for (x86-64: generic SSE2, AVX2 with
/// FMA and F16C, AVX-512 F/BW/VL; elsewhere generic only). The first call picks the widest
/// this CPU supports, or the one BRAID_KERNEL_ISA names (generic, avx2, avx512; one the CPU
/// lacks falls back, with a warning). Every one gives the same bits (the same loops compiled
/// for wider vectors, floating-point contraction off), except which operand's payload the
/// NaN made by a sum or product of two NaNs carries: IEEE 754 leaves it open, and
/// compilers may swap the operands of + and *.
enum class Isa { kGeneric, kAvx2, kAvx512 };
const char* isaName(Isa isa);
bool isaSupported(Isa isa);  // built for it and this CPU runs it
Isa activeIsa();             // the one reduce(), reduceStreaming() and divide() use
/// reduce(), divide() and reduceStreaming() on a given instruction set (tests compare them);
/// false, touching nothing, when !isaSupported(isa).
bool reduceWith(Isa isa, braidDataType_t dtype, braidRedOp_t op, void* dst, const void* a,
                const void* b, size_t count, int divisor = 1);
bool divideWith(Isa isa, braidDataType_t dtype, void* dst, const void* src, size_t count,
                int divisor);
bool reduceStreamingWith(Isa isa, braidDataType_t dtype, braidRedOp_t op, void* dst, const void* a,
                         const void* b, size_t count, int divisor = 1);

/// Conversions between fp32 and the narrow formats. Narrowing rounds to nearest, ties to
/// even, and keeps NaN a NaN (sign kept; fp16 and bf16 keep the high payload bits and set
/// the quiet bit). fp16 and bf16 follow IEEE 754 (overflow gives infinity). fp8 narrowing
/// saturates like CUDA's __nv_cvt_float_to_fp8(x, __NV_SATFINITE, ...): magnitudes beyond
/// the largest finite value, infinities included, become +-448 (e4m3) or +-57344 (e5m2).
/// NaN narrows to 0x7f with the input's sign in both fp8 formats.
/// Widening is exact; e4m3's only NaNs are 0x7f and 0xff (OCP FP8, no infinities).
float halfToFloat(uint16_t h);
uint16_t floatToHalf(float f);
float bf16ToFloat(uint16_t h);
uint16_t floatToBf16(float f);
float fp8e4m3ToFloat(uint8_t v);
uint8_t floatToFp8e4m3(float f);
float fp8e5m2ToFloat(uint8_t v);
uint8_t floatToFp8e5m2(float f);

}  // namespace braid::kernels

#endif  // BRAID_KERNELS_REDUCE_H_
