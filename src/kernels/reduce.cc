// Host reduction kernels.
//
// Each (dtype, op, divide-or-not) combination instantiates one loop template whose op is a
// functor, so GCC at -O3 vectorises the integer, fp32 and fp64 loops. The four aliasing
// cases (dst == a == b, dst == a, dst == b, disjoint) get separate loops whose pointers are
// __restrict, which the contract allows and which spares the compiler a runtime overlap
// check that an exact alias (in place) would fail. fp16, bf16 and fp8 are processed in
// blocks of kBlock elements: decode a block of each input to fp32, combine in fp32, encode
// back; the fp32 step vectorises and each element is rounded once.
#include "kernels/reduce.h"

// This file is compiled once per instruction set (src/kernels/meson.build): BRAID_KERNEL_ISA
// names the namespace of reduce(), reduceStreaming() and divide() in that build (generic, avx2,
// avx512), and dispatch.cc picks one at run time. The conversions are defined by the generic
// build only.
#ifndef BRAID_KERNEL_ISA
#define BRAID_KERNEL_ISA generic
#define BRAID_KERNEL_GENERIC 1
#endif

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace braid::kernels {
namespace {

// ---- Conversions --------------------------------------------------------------------

// cond ? a : b without a branch. A plain ?: lets GCC sink the fp32 arithmetic of one arm
// into a branch, and under the default -ftrapping-math it then will not if-convert that
// branch back, so the conversion loops would not vectorise.
inline uint32_t select(bool cond, uint32_t a, uint32_t b) {
  const uint32_t mask = 0u - uint32_t(cond);
  return (a & mask) | (b & ~mask);
}

// Rounds a non-NaN magnitude, given as fp32 bits with the sign cleared, to a format with
// kMant stored mantissa bits and exponent bias kBias; ties to even. The result is the
// format's code without sign and may lie beyond its largest finite code (the caller clamps).
// Normal results round in the integer domain: adding half an ulp minus one, plus the lsb,
// carries into the exponent exactly when rounding up crosses a binade. Subnormal results
// come from adding a magic constant whose ulp is the format's smallest subnormal, so the
// FPU does the rounding (this assumes the default round-to-nearest mode, as all Braid
// arithmetic does; flush-to-zero cannot disturb it because the sum is normal). Both paths
// are computed and one selected, which keeps conversion loops free of branches.
template <int kMant, int kBias>
inline uint32_t roundMagnitude(uint32_t u) {
  constexpr int kShift = 23 - kMant;
  constexpr uint32_t kMinNormal = uint32_t(128 - kBias) << 23;
  constexpr uint32_t kRebias = uint32_t(127 - kBias) << 23;
  constexpr uint32_t kMagic = uint32_t(151 - kBias - kMant) << 23;
  const uint32_t v = u - kRebias;  // wraps for subnormal results, which do not use it
  const uint32_t normal = (v + ((1u << (kShift - 1)) - 1) + ((v >> kShift) & 1)) >> kShift;
  const uint32_t subnormal =
      std::bit_cast<uint32_t>(std::bit_cast<float>(u) + std::bit_cast<float>(kMagic)) - kMagic;
  return select(u >= kMinNormal, normal, subnormal);
}

inline float decodeHalf(uint16_t h) {
  constexpr uint32_t kExpMask = 0x7c00u << 13;
  const uint32_t sign = uint32_t(h & 0x8000) << 16;
  const uint32_t shifted = uint32_t(h & 0x7fff) << 13;
  const uint32_t exp = shifted & kExpMask;
  const uint32_t normal = shifted + ((127 - 15) << 23);
  const uint32_t infNan = normal + ((128 - 16) << 23);
  // A subnormal's mantissa, placed under exponent 2^-14, minus 2^-14 is exact in fp32.
  const float subnormal =
      std::bit_cast<float>(normal + (1u << 23)) - std::bit_cast<float>(113u << 23);
  const uint32_t mag =
      select(exp == kExpMask, infNan, select(exp == 0, std::bit_cast<uint32_t>(subnormal), normal));
  return std::bit_cast<float>(mag | sign);
}

inline uint16_t encodeHalf(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const uint32_t sign = (x >> 16) & 0x8000;
  const uint32_t u = x & 0x7fffffff;
  uint32_t r = roundMagnitude<10, 15>(u);
  r = r > 0x7c00 ? 0x7c00 : r;                                  // overflow: infinity
  r = select(u > 0x7f800000, 0x7e00 | ((u >> 13) & 0x3ff), r);  // NaN stays a quiet NaN
  return uint16_t(r | sign);
}

inline float decodeBf16(uint16_t h) { return std::bit_cast<float>(uint32_t(h) << 16); }

inline uint16_t encodeBf16(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  // bf16 shares fp32's exponent range, so rounding the low half covers subnormals and
  // overflow to infinity alike.
  const uint32_t rounded = (x + 0x7fff + ((x >> 16) & 1)) >> 16;
  const uint32_t nan = (x >> 16) | 0x40;
  return uint16_t(select((x & 0x7fffffff) > 0x7f800000, nan, rounded));
}

// Exact fp32 value of an fp8 code; kHasInf selects E5M2's IEEE-style top exponent over
// E4M3's, where only S.1111.111 is special (NaN).
template <int kMant, int kBias, bool kHasInf>
constexpr float fp8Value(unsigned v) {
  constexpr int kMaxExp = (1 << (7 - kMant)) - 1;
  constexpr int kMantMask = (1 << kMant) - 1;
  const int e = int(v >> kMant) & kMaxExp;
  const int m = int(v) & kMantMask;
  float mag;
  if (kHasInf && e == kMaxExp) {
    mag = m == 0 ? std::numeric_limits<float>::infinity() : std::numeric_limits<float>::quiet_NaN();
  } else if (!kHasInf && e == kMaxExp && m == kMantMask) {
    mag = std::numeric_limits<float>::quiet_NaN();
  } else {
    mag = float(e != 0 ? (1 << kMant) + m : m);
    for (int p = (e != 0 ? e : 1) - kBias - kMant; p != 0; p += p > 0 ? -1 : 1) {
      mag = p > 0 ? mag * 2 : mag / 2;
    }
  }
  return (v & 0x80) != 0 ? -mag : mag;
}

template <int kMant, int kBias, bool kHasInf>
constexpr std::array<float, 256> fp8Table() {
  std::array<float, 256> t{};
  for (unsigned v = 0; v < 256; ++v) t[v] = fp8Value<kMant, kBias, kHasInf>(v);
  return t;
}

constexpr std::array<float, 256> kE4m3Values = fp8Table<3, 7, false>();
constexpr std::array<float, 256> kE5m2Values = fp8Table<2, 15, true>();

// Saturating fp8 narrowing; kMaxCode is the largest finite code without sign.
template <int kMant, int kBias, uint32_t kMaxCode>
inline uint8_t encodeFp8(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const uint32_t sign = (x >> 24) & 0x80;
  const uint32_t u = x & 0x7fffffff;
  uint32_t r = roundMagnitude<kMant, kBias>(u);
  r = r > kMaxCode ? kMaxCode : r;  // satfinite, infinities included
  r = select(u > 0x7f800000, 0x7f, r);
  return uint8_t(r | sign);
}

// A Codec names an element's storage type and its conversions to and from fp32.
struct HalfCodec {
  using Bits = uint16_t;
  static float decode(Bits v) { return decodeHalf(v); }
  static Bits encode(float f) { return encodeHalf(f); }
};
struct Bf16Codec {
  using Bits = uint16_t;
  static float decode(Bits v) { return decodeBf16(v); }
  static Bits encode(float f) { return encodeBf16(f); }
};
struct E4m3Codec {
  using Bits = uint8_t;
  static float decode(Bits v) { return kE4m3Values[v]; }
  static Bits encode(float f) { return encodeFp8<3, 7, 0x7e>(f); }
};
struct E5m2Codec {
  using Bits = uint8_t;
  static float decode(Bits v) { return kE5m2Values[v]; }
  static Bits encode(float f) { return encodeFp8<2, 15, 0x7b>(f); }
};

// ---- Operators ----------------------------------------------------------------------

// Integer sum and product run in an unsigned type at least as wide as unsigned int: narrower
// unsigned operands would promote to int, whose overflow is undefined. Converting the
// wrapped result back to a signed type is modular since C++20.
template <typename T>
using WrapType =
    std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, std::make_unsigned_t<T>>;

struct Sum {
  template <typename T>
  T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) {
      return T(WrapType<T>(a) + WrapType<T>(b));
    } else {
      return a + b;
    }
  }
};

struct Prod {
  template <typename T>
  T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) {
      return T(WrapType<T>(a) * WrapType<T>(b));
    } else {
      return a * b;
    }
  }
};

// NaN-propagating max/min (see reduce.h). NCCL's device FuncMax uses fmax-like or plain
// comparisons depending on type and version; Braid picks propagation so that a NaN in any
// rank's data is visible in the result, whichever order the algorithm combines in.
struct Max {
  template <typename T>
  T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) {
      return a > b ? a : b;
    } else {
      return (a > b || std::isnan(a)) ? a : b;
    }
  }
};

struct Min {
  template <typename T>
  T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) {
      return a < b ? a : b;
    } else {
      return (a < b || std::isnan(a)) ? a : b;
    }
  }
};

// The first operand; divide() runs the combine loops with it and a == b.
struct Keep {
  template <typename T>
  T operator()(T a, T /*b*/) const {
    return a;
  }
};

struct NoDivide {
  template <typename T>
  T operator()(T x) const {
    return x;
  }
};

// Integers: C's truncating division, done in 64 bits so that no narrow type's value or the
// divisor can overflow. Floating point: one IEEE division in the compute type.
struct Divide {
  int divisor;
  template <typename T>
  T operator()(T x) const {
    if constexpr (std::is_integral_v<T> && std::is_signed_v<T>) {
      return T(int64_t(x) / int64_t(divisor));
    } else if constexpr (std::is_integral_v<T>) {
      return T(uint64_t(x) / uint64_t(divisor));
    } else {
      return x / T(divisor);
    }
  }
};

// ---- Loops --------------------------------------------------------------------------

// Each loop is a function of its own that callers do not inline (BRAID_LOOP): the streaming and
// the plain entry points, and a streaming loop's head and tail, call one compiled copy of it
// instead of vectorising it again inside each caller. perf/reduce_bench measured the same
// speeds; the AVX-512 build compiles in 10 CPU-s instead of 20 (g++ -O3), and in 7 instead of
// 21 under clang's TSan, which CI builds too.
#define BRAID_LOOP [[gnu::noinline]]

template <typename T, typename Op, typename Post>
BRAID_LOOP void combineDisjoint(T* __restrict dst, const T* __restrict a, const T* __restrict b,
                                size_t count, Op op, Post post) {
  for (size_t i = 0; i < count; ++i) dst[i] = post(op(a[i], b[i]));
}

// ---- Streaming stores (reduceStreaming) -------------------------------------------------

constexpr size_t kLineBytes = 64;

// Writes the 64-byte line at `line` (64-byte aligned) to dst (64-byte aligned) with streaming
// stores: the widest this build has, so each line leaves the write-combining buffer whole.
inline void streamLine(void* dst, const void* line) {
#if defined(__AVX512F__)
  _mm512_stream_si512(static_cast<__m512i*>(dst), _mm512_load_si512(line));
#elif defined(__AVX2__)
  auto* d = static_cast<__m256i*>(dst);
  const auto* l = static_cast<const __m256i*>(line);
  _mm256_stream_si256(d, _mm256_load_si256(l));
  _mm256_stream_si256(d + 1, _mm256_load_si256(l + 1));
#elif defined(__x86_64__)
  auto* d = static_cast<__m128i*>(dst);
  const auto* l = static_cast<const __m128i*>(line);
  for (int k = 0; k < 4; ++k) _mm_stream_si128(d + k, _mm_load_si128(l + k));
#else
  std::memcpy(dst, line, kLineBytes);
#endif
}

// Orders the streaming stores before whatever the caller publishes next.
inline void streamFence() {
#if defined(__x86_64__)
  _mm_sfence();
#endif
}

// Elements of T before dst's first 64-byte boundary (count when there is none in range, or
// when dst is not aligned to T: then nothing streams).
template <typename T>
size_t elemsBeforeLine(const T* dst, size_t count) {
  const auto addr = reinterpret_cast<uintptr_t>(dst);
  if (addr % sizeof(T) != 0) return count;
  return std::min(count, (kLineBytes - addr % kLineBytes) % kLineBytes / sizeof(T));
}

// combineDisjoint with dst's whole lines written by streaming stores: each line is computed
// into a 64-byte block (a vector register once vectorised) and stored whole.
template <typename T, typename Op, typename Post>
BRAID_LOOP void combineDisjointStreaming(T* __restrict dst, const T* __restrict a,
                                         const T* __restrict b, size_t count, Op op, Post post) {
  constexpr size_t kLine = kLineBytes / sizeof(T);
  const size_t head = elemsBeforeLine(dst, count);
  combineDisjoint(dst, a, b, head, op, post);
  size_t i = head;
  for (; i + kLine <= count; i += kLine) {
    alignas(kLineBytes) T line[kLine];
    for (size_t k = 0; k < kLine; ++k) line[k] = post(op(a[i + k], b[i + k]));
    streamLine(dst + i, line);
  }
  combineDisjoint(dst + i, a + i, b + i, count - i, op, post);
}

// memcpy of n bytes from an aligned block to dst, its whole lines by streaming stores.
inline void copyBlockStreaming(char* dst, const char* src, size_t n) {
  const size_t head = elemsBeforeLine(dst, n);
  std::memcpy(dst, src, head);
  size_t i = head;
  for (; i + kLineBytes <= n; i += kLineBytes) {
    alignas(kLineBytes) char line[kLineBytes];
    std::memcpy(line, src + i, kLineBytes);
    streamLine(dst + i, line);
  }
  std::memcpy(dst + i, src + i, n - i);
}

// x is both an input and the output; kXIsB keeps the operands in their (a, b) order.
template <bool kXIsB, typename T, typename Op, typename Post>
BRAID_LOOP void combineInPlace(T* __restrict x, const T* __restrict other, size_t count, Op op,
                               Post post) {
  for (size_t i = 0; i < count; ++i) {
    x[i] = post(kXIsB ? op(other[i], x[i]) : op(x[i], other[i]));
  }
}

template <typename T, typename Op, typename Post>
BRAID_LOOP void combineSelf(T* x, size_t count, Op op, Post post) {
  for (size_t i = 0; i < count; ++i) x[i] = post(op(x[i], x[i]));
}

template <bool kStream, typename T, typename Op, typename Post>
void combineNative(void* dstv, const void* av, const void* bv, size_t count, Op op, Post post) {
  T* dst = static_cast<T*>(dstv);
  const T* a = static_cast<const T*>(av);
  const T* b = static_cast<const T*>(bv);
  if (kStream && dst != a && dst != b) {
    combineDisjointStreaming(dst, a, b, count, op, post);
  } else if (dst == a && dst == b) {
    combineSelf(dst, count, op, post);
  } else if (dst == a) {
    combineInPlace<false>(dst, b, count, op, post);
  } else if (dst == b) {
    combineInPlace<true>(dst, a, count, op, post);
  } else {
    combineDisjoint(dst, a, b, count, op, post);
  }
}

// Block size for the narrow formats: large enough to amortise the loop overheads, small
// enough that the two fp32 buffers stay in L1.
constexpr size_t kBlock = 256;

// One block of n <= kBlock elements: a[0, n) and b[0, n) combined into o[0, n). Each block is
// read entirely before it is written, so o may equal a or b exactly. N is either
// std::integral_constant<size_t, kBlock> (whole blocks: vector loops without remainders) or
// size_t (the last, partial block).
template <typename Codec, typename Op, typename Post, typename N>
BRAID_LOOP void combineBlock(typename Codec::Bits* o, const typename Codec::Bits* a,
                             const typename Codec::Bits* b, N n, Op op, Post post) {
  float fa[kBlock];
  float fb[kBlock];
#ifdef __F16C__
  // fp16 in whole blocks: the CPU's own conversions (F16C), 8 lanes at a time. They round
  // to nearest even, keep subnormals and quiet NaNs keeping the payload's high bits, as
  // decodeHalf and encodeHalf do (tests/kernels/kernels_conversions_test.cc compares them bit
  // for bit).
  if constexpr (std::is_same_v<Codec, HalfCodec> && !std::is_same_v<N, size_t>) {
    for (size_t i = 0; i < n; i += 8) {
      _mm256_storeu_ps(fa + i,
                       _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a + i))));
      _mm256_storeu_ps(fb + i,
                       _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + i))));
    }
    for (size_t i = 0; i < n; ++i) fa[i] = post(op(fa[i], fb[i]));
    for (size_t i = 0; i < n; i += 8)
      _mm_storeu_si128(reinterpret_cast<__m128i*>(o + i),
                       _mm256_cvtps_ph(_mm256_loadu_ps(fa + i), _MM_FROUND_TO_NEAREST_INT));
    return;
  }
#endif
  for (size_t i = 0; i < n; ++i) fa[i] = Codec::decode(a[i]);
  for (size_t i = 0; i < n; ++i) fb[i] = Codec::decode(b[i]);
  for (size_t i = 0; i < n; ++i) fa[i] = post(op(fa[i], fb[i]));
  for (size_t i = 0; i < n; ++i) o[i] = Codec::encode(fa[i]);
}

// The narrow formats block by block (combineBlock), whole blocks first, then the rest.
// kStream, where the output is not also an input (reduce.h): each block is encoded into
// `staged` and goes to dst by streaming stores.
template <bool kStream, typename Codec, typename Op, typename Post>
void combineNarrow(void* dstv, const void* av, const void* bv, size_t count, Op op, Post post) {
  using Bits = typename Codec::Bits;
  using Whole = std::integral_constant<size_t, kBlock>;
  Bits* const out = static_cast<Bits*>(dstv);
  const Bits* a = static_cast<const Bits*>(av);
  const Bits* b = static_cast<const Bits*>(bv);
  const bool stream = kStream && out != a && out != b;
  alignas(kLineBytes) Bits staged[kStream ? kBlock : 1];
  // Elements [start, start + n) of the inputs into the output, through `staged` when streaming.
  auto block = [&](size_t start, auto n) {
    Bits* o = stream ? staged : out + start;
    combineBlock<Codec>(o, a + start, b + start, n, op, post);
    if (stream)
      copyBlockStreaming(reinterpret_cast<char*>(out + start), reinterpret_cast<const char*>(o),
                         n * sizeof(Bits));
  };
  const size_t whole = count - count % kBlock;
  for (size_t start = 0; start < whole; start += kBlock) block(start, Whole{});
  if (whole < count) block(whole, count - whole);
}

bool isKnownType(braidDataType_t dtype) {
  return static_cast<unsigned>(dtype) < static_cast<unsigned>(braidNumTypes);
}

size_t elementSize(braidDataType_t dtype) { return braidTypeSize(dtype); }

template <bool kStream, typename Op, typename Post>
bool combineByType(braidDataType_t dtype, void* dst, const void* a, const void* b, size_t count,
                   Op op, Post post) {
  switch (dtype) {
    case braidInt8:
      combineNative<kStream, int8_t>(dst, a, b, count, op, post);
      return true;
    case braidUint8:
      combineNative<kStream, uint8_t>(dst, a, b, count, op, post);
      return true;
    case braidInt32:
      combineNative<kStream, int32_t>(dst, a, b, count, op, post);
      return true;
    case braidUint32:
      combineNative<kStream, uint32_t>(dst, a, b, count, op, post);
      return true;
    case braidInt64:
      combineNative<kStream, int64_t>(dst, a, b, count, op, post);
      return true;
    case braidUint64:
      combineNative<kStream, uint64_t>(dst, a, b, count, op, post);
      return true;
    case braidFloat32:
      combineNative<kStream, float>(dst, a, b, count, op, post);
      return true;
    case braidFloat64:
      combineNative<kStream, double>(dst, a, b, count, op, post);
      return true;
    case braidFloat16:
      combineNarrow<kStream, HalfCodec>(dst, a, b, count, op, post);
      return true;
    case braidBfloat16:
      combineNarrow<kStream, Bf16Codec>(dst, a, b, count, op, post);
      return true;
    case braidFloat8e4m3:
      combineNarrow<kStream, E4m3Codec>(dst, a, b, count, op, post);
      return true;
    case braidFloat8e5m2:
      combineNarrow<kStream, E5m2Codec>(dst, a, b, count, op, post);
      return true;
    default:
      return false;
  }
}

template <bool kStream, typename Op>
bool combineWithDivisor(braidDataType_t dtype, void* dst, const void* a, const void* b,
                        size_t count, Op op, int divisor) {
  if (divisor > 1) return combineByType<kStream>(dtype, dst, a, b, count, op, Divide{divisor});
  return combineByType<kStream>(dtype, dst, a, b, count, op, NoDivide{});
}

template <bool kStream>
bool reduceAs(braidDataType_t dtype, braidRedOp_t op, void* dst, const void* a, const void* b,
              size_t count, int divisor) {
  if (!isKnownType(dtype)) return false;
  switch (op) {
    case braidSum:
    case braidAvg:
      return combineWithDivisor<kStream>(dtype, dst, a, b, count, Sum{}, divisor);
    case braidProd:
      return combineWithDivisor<kStream>(dtype, dst, a, b, count, Prod{}, divisor);
    case braidMax:
      return combineWithDivisor<kStream>(dtype, dst, a, b, count, Max{}, divisor);
    case braidMin:
      return combineWithDivisor<kStream>(dtype, dst, a, b, count, Min{}, divisor);
    default:
      return false;
  }
}

}  // namespace

namespace BRAID_KERNEL_ISA {

bool reduce(braidDataType_t dtype, braidRedOp_t op, void* dst, const void* a, const void* b,
            size_t count, int divisor) {
  return reduceAs<false>(dtype, op, dst, a, b, count, divisor);
}

bool reduceStreaming(braidDataType_t dtype, braidRedOp_t op, void* dst, const void* a,
                     const void* b, size_t count, int divisor) {
  const bool ok = reduceAs<true>(dtype, op, dst, a, b, count, divisor);
  streamFence();
  return ok;
}

bool divide(braidDataType_t dtype, void* dst, const void* src, size_t count, int divisor) {
  if (!isKnownType(dtype) || divisor < 1) return false;
  if (divisor == 1) {
    // A copy, not a decode-encode round trip, so signalling NaN payloads survive too.
    if (dst != src && count > 0) std::memcpy(dst, src, count * elementSize(dtype));
    return true;
  }
  return combineByType<false>(dtype, dst, src, src, count, Keep{}, Divide{divisor});
}

}  // namespace BRAID_KERNEL_ISA

#ifdef BRAID_KERNEL_GENERIC

float halfToFloat(uint16_t h) { return decodeHalf(h); }
uint16_t floatToHalf(float f) { return encodeHalf(f); }
float bf16ToFloat(uint16_t h) { return decodeBf16(h); }
uint16_t floatToBf16(float f) { return encodeBf16(f); }
float fp8e4m3ToFloat(uint8_t v) { return kE4m3Values[v]; }
uint8_t floatToFp8e4m3(float f) { return E4m3Codec::encode(f); }
float fp8e5m2ToFloat(uint8_t v) { return kE5m2Values[v]; }
uint8_t floatToFp8e5m2(float f) { return E5m2Codec::encode(f); }
#endif

}  // namespace braid::kernels
