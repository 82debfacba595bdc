// The element-wise arithmetic of the CUDA kernels (kernels/cuda_kernels.cu): codecs of every
// dtype, the reduction operators, AVG's division and the NaN rules, as functions both nvcc
// (device and host code) and a plain C++ compiler (tests) compile. The conversions are
// kernels/reduce.cc's, line for line, with its branch-free selects as branches.
//
// A GPU returns one canonical NaN from any arithmetic that yields NaN; the host kernels return a
// NaN operand quieted, and for an invalid operation (inf - inf, 0 * inf) the CPU's default NaN
// (x86: negative, 0xffc00000; Arm: positive). fixNaN rewrites the one into the other. Compiled
// for the CPU, add/mul/div here also return the canonical NaN, so
// tests/kernels/cuda_elementwise_test.cc checks, on any machine, that these functions give
// the host kernels' bits on the GPU.
#ifndef BRAID_KERNELS_CUDA_ELEMENTWISE_H_
#define BRAID_KERNELS_CUDA_ELEMENTWISE_H_

#include <cstdint>
#include <cstring>
#include <type_traits>

#if defined(__CUDACC__)
#define BRAID_HD __host__ __device__ __forceinline__
#else
#define BRAID_HD inline
#endif

namespace braid::cuda::elementwise {

// ---- NaN rules of the host kernels ----------------------------------------------------

// The CPU's default NaN (see above).
#if defined(__x86_64__) || defined(__i386__)
inline constexpr uint32_t kDefaultNaN32 = 0xffc00000u;
inline constexpr uint64_t kDefaultNaN64 = 0xfff8000000000000ull;
#else
inline constexpr uint32_t kDefaultNaN32 = 0x7fc00000u;
inline constexpr uint64_t kDefaultNaN64 = 0x7ff8000000000000ull;
#endif

// Bits of a float or double and back.
BRAID_HD uint32_t floatBits(float f) {
#ifdef __CUDA_ARCH__
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
#endif
}
BRAID_HD float bitsFloat(uint32_t u) {
#ifdef __CUDA_ARCH__
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
#endif
}
BRAID_HD uint64_t doubleBits(double d) {
#ifdef __CUDA_ARCH__
  return static_cast<uint64_t>(__double_as_longlong(d));
#else
  uint64_t u;
  std::memcpy(&u, &d, sizeof u);
  return u;
#endif
}
BRAID_HD double bitsDouble(uint64_t u) {
#ifdef __CUDA_ARCH__
  return __longlong_as_double(static_cast<long long>(u));
#else
  double d;
  std::memcpy(&d, &u, sizeof d);
  return d;
#endif
}

BRAID_HD float quiet(float x) { return bitsFloat(floatBits(x) | 0x00400000u); }
BRAID_HD double quiet(double x) { return bitsDouble(doubleBits(x) | 0x0008000000000000ull); }
BRAID_HD float defaultNaN(float) { return bitsFloat(kDefaultNaN32); }
BRAID_HD double defaultNaN(double) { return bitsDouble(kDefaultNaN64); }

// x != x is NaN's test; nvcc keeps it (no fast-math).
template <typename T>
BRAID_HD T fixNaN(T r, T a, T b) {
  if (r == r) return r;
  if (a != a) return quiet(a);
  if (b != b) return quiet(b);
  return defaultNaN(r);
}

// The GPU's arithmetic: IEEE round to nearest even, never contracted nor flushed to zero, and
// every NaN result the canonical NaN. On the CPU (tests) the same, canonical NaN included.
#ifdef __CUDA_ARCH__
BRAID_HD float add(float a, float b) { return __fadd_rn(a, b); }
BRAID_HD double add(double a, double b) { return __dadd_rn(a, b); }
BRAID_HD float mul(float a, float b) { return __fmul_rn(a, b); }
BRAID_HD double mul(double a, double b) { return __dmul_rn(a, b); }
BRAID_HD float div(float a, float b) { return __fdiv_rn(a, b); }
BRAID_HD double div(double a, double b) { return __ddiv_rn(a, b); }
#else
inline float canonical(float r) { return r == r ? r : bitsFloat(0x7fffffffu); }
inline double canonical(double r) { return r == r ? r : bitsDouble(0x7fffffffffffffffull); }
inline float add(float a, float b) { return canonical(a + b); }
inline double add(double a, double b) { return canonical(a + b); }
inline float mul(float a, float b) { return canonical(a * b); }
inline double mul(double a, double b) { return canonical(a * b); }
inline float div(float a, float b) { return canonical(a / b); }
inline double div(double a, double b) { return canonical(a / b); }
#endif

// ---- Conversions (kernels/reduce.cc's) ------------------------------------------------

// See roundMagnitude in reduce.cc: a non-NaN fp32 magnitude rounded, ties to even, to a format
// with kMant mantissa bits and bias kBias; may exceed the largest finite code.
template <int kMant, int kBias>
BRAID_HD uint32_t roundMagnitude(uint32_t u) {
  constexpr int kShift = 23 - kMant;
  constexpr uint32_t kMinNormal = uint32_t(128 - kBias) << 23;
  constexpr uint32_t kRebias = uint32_t(127 - kBias) << 23;
  constexpr uint32_t kMagic = uint32_t(151 - kBias - kMant) << 23;
  if (u >= kMinNormal) {
    const uint32_t v = u - kRebias;
    return (v + ((1u << (kShift - 1)) - 1) + ((v >> kShift) & 1)) >> kShift;
  }
  return floatBits(add(bitsFloat(u), bitsFloat(kMagic))) - kMagic;
}

BRAID_HD float decodeHalf(uint16_t h) {
  constexpr uint32_t kExpMask = 0x7c00u << 13;
  const uint32_t sign = uint32_t(h & 0x8000) << 16;
  const uint32_t shifted = uint32_t(h & 0x7fff) << 13;
  const uint32_t exp = shifted & kExpMask;
  const uint32_t normal = shifted + ((127 - 15) << 23);
  uint32_t mag;
  if (exp == kExpMask) {
    mag = normal + ((128 - 16) << 23);
  } else if (exp == 0) {
    // Exact: the subnormal's mantissa under exponent 2^-14, minus 2^-14.
    mag = floatBits(add(bitsFloat(normal + (1u << 23)), -bitsFloat(113u << 23)));
  } else {
    mag = normal;
  }
  return bitsFloat(mag | sign);
}

BRAID_HD uint16_t encodeHalf(float f) {
  const uint32_t x = floatBits(f);
  const uint32_t sign = (x >> 16) & 0x8000;
  const uint32_t u = x & 0x7fffffff;
  if (u > 0x7f800000) return uint16_t(0x7e00 | ((u >> 13) & 0x3ff) | sign);  // quiet NaN
  uint32_t r = roundMagnitude<10, 15>(u);
  r = r > 0x7c00 ? 0x7c00 : r;  // overflow: infinity
  return uint16_t(r | sign);
}

BRAID_HD float decodeBf16(uint16_t h) { return bitsFloat(uint32_t(h) << 16); }

BRAID_HD uint16_t encodeBf16(float f) {
  const uint32_t x = floatBits(f);
  if ((x & 0x7fffffff) > 0x7f800000) return uint16_t((x >> 16) | 0x40);
  return uint16_t((x + 0x7fff + ((x >> 16) & 1)) >> 16);
}

// fp8 widening, exact (reduce.cc's tables, computed): NaN widens to fp32's quiet NaN with the
// code's sign, as the tables' -quiet_NaN() does.
BRAID_HD float decodeE4m3(uint8_t v) {
  const uint32_t sign = uint32_t(v & 0x80) << 24;
  const uint32_t e = (v >> 3) & 0xf;
  const uint32_t m = v & 0x7;
  if (e == 0xf && m == 0x7) return bitsFloat(sign | 0x7fc00000u);
  if (e == 0) return bitsFloat(sign | floatBits(float(m) * 0.001953125f));  // m * 2^-9
  return bitsFloat(sign | ((e + 127 - 7) << 23) | (m << 20));
}

BRAID_HD float decodeE5m2(uint8_t v) {
  const uint32_t sign = uint32_t(v & 0x80) << 24;
  const uint32_t e = (v >> 2) & 0x1f;
  const uint32_t m = v & 0x3;
  if (e == 0x1f) return bitsFloat(sign | (m == 0 ? 0x7f800000u : 0x7fc00000u));
  if (e == 0) return bitsFloat(sign | floatBits(float(m) * 0.0000152587890625f));  // m * 2^-16
  return bitsFloat(sign | ((e + 127 - 15) << 23) | (m << 21));
}

// Saturating fp8 narrowing (CUDA's __NV_SATFINITE); NaN narrows to 0x7f with its sign.
template <int kMant, int kBias, uint32_t kMaxCode>
BRAID_HD uint8_t encodeFp8(float f) {
  const uint32_t x = floatBits(f);
  const uint32_t sign = (x >> 24) & 0x80;
  const uint32_t u = x & 0x7fffffff;
  if (u > 0x7f800000) return uint8_t(0x7f | sign);
  uint32_t r = roundMagnitude<kMant, kBias>(u);
  r = r > kMaxCode ? kMaxCode : r;
  return uint8_t(r | sign);
}

// A Codec: the stored type (Bits), the type combined in (Compute) and the conversions.
template <typename T>
struct NativeCodec {
  using Bits = T;
  using Compute = T;
  BRAID_HD static T decode(T v) { return v; }
  BRAID_HD static T encode(T v) { return v; }
};
struct HalfCodec {
  using Bits = uint16_t;
  using Compute = float;
  BRAID_HD static float decode(Bits v) { return decodeHalf(v); }
  BRAID_HD static Bits encode(float f) { return encodeHalf(f); }
};
struct Bf16Codec {
  using Bits = uint16_t;
  using Compute = float;
  BRAID_HD static float decode(Bits v) { return decodeBf16(v); }
  BRAID_HD static Bits encode(float f) { return encodeBf16(f); }
};
struct E4m3Codec {
  using Bits = uint8_t;
  using Compute = float;
  BRAID_HD static float decode(Bits v) { return decodeE4m3(v); }
  BRAID_HD static Bits encode(float f) { return encodeFp8<3, 7, 0x7e>(f); }
};
struct E5m2Codec {
  using Bits = uint8_t;
  using Compute = float;
  BRAID_HD static float decode(Bits v) { return decodeE5m2(v); }
  BRAID_HD static Bits encode(float f) { return encodeFp8<2, 15, 0x7b>(f); }
};

// ---- Operators (reduce.cc's) ----------------------------------------------------------

// Integer sum and product wrap: computed in an unsigned type at least as wide as unsigned int.
template <typename T>
using WrapType =
    std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, std::make_unsigned_t<T>>;

struct Sum {
  template <typename T>
  BRAID_HD T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) {
      return T(WrapType<T>(a) + WrapType<T>(b));
    } else {
      return fixNaN(add(a, b), a, b);
    }
  }
};

struct Prod {
  template <typename T>
  BRAID_HD T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) {
      return T(WrapType<T>(a) * WrapType<T>(b));
    } else {
      return fixNaN(mul(a, b), a, b);
    }
  }
};

// NaN-propagating: a NaN first operand wins, else the comparison picks.
struct Max {
  template <typename T>
  BRAID_HD T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) {
      return a > b ? a : b;
    } else {
      return (a > b || a != a) ? a : b;
    }
  }
};

struct Min {
  template <typename T>
  BRAID_HD T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) {
      return a < b ? a : b;
    } else {
      return (a < b || a != a) ? a : b;
    }
  }
};

// Unary ops (the kernel passes a's element twice): division's and copy's identity, and
// PreMulSum's product with a scalar already converted to the element type.
struct Keep {
  template <typename T>
  BRAID_HD T operator()(T a, T) const {
    return a;
  }
};

template <typename T>
struct MulBy {
  T scalar;
  BRAID_HD T operator()(T a, T) const { return Prod{}(a, scalar); }
};

// AVG's division, applied when divisor > 1: integers with C's truncation in 64 bits, floating
// point once in the compute type (a NaN stays its quieted self, as on the CPU).
struct MaybeDivide {
  int divisor;
  template <typename T>
  BRAID_HD T operator()(T x) const {
    if (divisor <= 1) return x;
    if constexpr (std::is_integral_v<T> && std::is_signed_v<T>) {
      return T(int64_t(x) / int64_t(divisor));
    } else if constexpr (std::is_integral_v<T>) {
      return T(uint64_t(x) / uint64_t(divisor));
    } else {
      return x != x ? quiet(x) : div(x, T(divisor));
    }
  }
};

}  // namespace braid::cuda::elementwise

#endif  // BRAID_KERNELS_CUDA_ELEMENTWISE_H_
