// Verifiable data for the perf binaries; see verifiable.h.
#include "verifiable.h"

#include <strings.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

namespace braid::perf {
namespace {

// ---------------------------------------------------------------------------------------
// Datatypes and ops: names as nccl-tests prints them, plus the aliases it does not know.

struct TypeEntry {
  braidDataType_t dtype;
  const char* name;  // printed in the "type" column
  size_t size;
};

constexpr TypeEntry kTypes[] = {
    {braidInt8, "int8", 1},         {braidUint8, "uint8", 1},       {braidInt32, "int32", 4},
    {braidUint32, "uint32", 4},     {braidInt64, "int64", 8},       {braidUint64, "uint64", 8},
    {braidFloat16, "half", 2},      {braidFloat32, "float", 4},     {braidFloat64, "double", 8},
    {braidBfloat16, "bfloat16", 2}, {braidFloat8e4m3, "f8e4m3", 1}, {braidFloat8e5m2, "f8e5m2", 1},
};

struct Alias {
  const char* name;
  braidDataType_t dtype;
};

constexpr Alias kTypeAliases[] = {
    {"char", braidInt8},          {"int", braidInt32},       {"fp16", braidFloat16},
    {"float16", braidFloat16},    {"bf16", braidBfloat16},   {"fp32", braidFloat32},
    {"float32", braidFloat32},    {"fp64", braidFloat64},    {"float64", braidFloat64},
    {"fp8e4m3", braidFloat8e4m3}, {"e4m3", braidFloat8e4m3}, {"float8e4m3", braidFloat8e4m3},
    {"fp8e5m2", braidFloat8e5m2}, {"e5m2", braidFloat8e5m2}, {"float8e5m2", braidFloat8e5m2},
};

constexpr const char* kOpNames[] = {"sum", "prod", "max", "min", "avg", "mulsum"};
static_assert(sizeof(kOpNames) / sizeof(kOpNames[0]) == braidNumOps + 1, "an op without a name");

// ---------------------------------------------------------------------------------------
// Element codecs. fp16, bf16 and the two fp8 formats are "minifloats": sign, ebits of
// biased exponent, mbits of mantissa, IEEE subnormals; e4m3 (OCP) has no infinities and
// a single NaN mantissa. Encoding rounds to nearest, ties to even, from a double.

struct MiniFormat {
  int ebits;
  int mbits;
  int bias;
  bool finite_only;  // OCP e4m3: exponent all-ones is a normal binade, S.1111.111 is NaN
};

double DecodeMini(uint32_t code, const MiniFormat& f) {
  const uint32_t emask = (1u << f.ebits) - 1;
  const uint32_t mmask = (1u << f.mbits) - 1;
  const bool negative = (code >> (f.ebits + f.mbits)) & 1;
  const uint32_t e = (code >> f.mbits) & emask;
  const uint32_t m = code & mmask;
  double v;
  if (!f.finite_only && e == emask) {
    v = m ? NAN : INFINITY;
  } else if (f.finite_only && e == emask && m == mmask) {
    v = NAN;
  } else if (e == 0) {
    v = std::ldexp(static_cast<double>(m), 1 - f.bias - f.mbits);
  } else {
    v = std::ldexp(static_cast<double>(m | (1u << f.mbits)),
                   static_cast<int>(e) - f.bias - f.mbits);
  }
  return negative ? -v : v;
}

uint32_t EncodeMini(double x, const MiniFormat& f) {
  const uint32_t emask = (1u << f.ebits) - 1;
  const uint32_t mmask = (1u << f.mbits) - 1;
  const uint32_t nan =
      f.finite_only ? (emask << f.mbits) | mmask : (emask << f.mbits) | (1u << (f.mbits - 1));
  if (std::isnan(x)) return nan;
  const uint32_t sign = std::signbit(x) ? 1u << (f.ebits + f.mbits) : 0;
  const uint32_t overflow = f.finite_only ? nan : emask << f.mbits;
  const double a = std::fabs(x);
  if (std::isinf(a)) return sign | overflow;
  if (a == 0) return sign;
  int k;
  std::frexp(a, &k);
  // a lies in [2^e, 2^(e+1)); below the smallest normal the quantum stays fixed.
  const int emin = 1 - f.bias;
  int e = std::max(k - 1, emin);
  double m = std::nearbyint(std::ldexp(a, f.mbits - e));  // default mode: ties to even
  if (m >= std::ldexp(1.0, f.mbits + 1)) {
    m /= 2;
    ++e;
  }
  uint32_t mant = static_cast<uint32_t>(m);
  uint32_t efield = 0;
  if (mant > mmask) {
    efield = static_cast<uint32_t>(e + f.bias);
    mant &= mmask;
  }
  const uint32_t max_efield = f.finite_only ? emask : emask - 1;
  if (efield > max_efield || (f.finite_only && efield == emask && mant == mmask)) {
    return sign | overflow;
  }
  return sign | (efield << f.mbits) | mant;
}

// Codecs name a storage type, decode/encode through double, and say which inputs keep a
// reduction exact: integers up to kExactInt are exact, and so are powers of two up to
// 2^kMaxPow2. kNarrow: avg divides in fp32 (braid.h: 16- and 8-bit floats reduce in fp32).
template <typename T>
struct IntCodec {
  using Storage = T;
  static constexpr bool kIsFloat = false;
};

template <int E, int M, int B, bool FiniteOnly, typename S, int ExactInt, int MaxPow2>
struct MiniCodec {
  using Storage = S;
  static constexpr bool kIsFloat = true;
  static constexpr bool kNarrow = true;
  static constexpr double kExactInt = ExactInt;
  static constexpr int kMaxPow2 = MaxPow2;
  static constexpr MiniFormat kFormat{E, M, B, FiniteOnly};
  static double Decode(S code) { return DecodeMini(code, kFormat); }
  static S Encode(double x) { return static_cast<S>(EncodeMini(x, kFormat)); }
};

using HalfCodec = MiniCodec<5, 10, 15, false, uint16_t, 2048, 15>;
using Bf16Codec = MiniCodec<8, 7, 127, false, uint16_t, 256, 127>;
using E4m3Codec = MiniCodec<4, 3, 7, true, uint8_t, 16, 8>;
using E5m2Codec = MiniCodec<5, 2, 15, false, uint8_t, 8, 15>;

struct FloatCodec {
  using Storage = float;
  static constexpr bool kIsFloat = true;
  static constexpr bool kNarrow = true;
  static constexpr double kExactInt = 16777216.0;
  static constexpr int kMaxPow2 = 127;
  static double Decode(float v) { return v; }
  static float Encode(double x) { return static_cast<float>(x); }
};

struct DoubleCodec {
  using Storage = double;
  static constexpr bool kIsFloat = true;
  static constexpr bool kNarrow = false;
  static constexpr double kExactInt = 9007199254740992.0;
  static constexpr int kMaxPow2 = 1023;
  static double Decode(double v) { return v; }
  static double Encode(double x) { return x; }
};

// Calls fn with the codec of dtype; false for an unknown dtype.
template <typename Fn>
bool Dispatch(braidDataType_t dtype, Fn&& fn) {
  switch (dtype) {
    case braidInt8:
      fn(IntCodec<int8_t>{});
      return true;
    case braidUint8:
      fn(IntCodec<uint8_t>{});
      return true;
    case braidInt32:
      fn(IntCodec<int32_t>{});
      return true;
    case braidUint32:
      fn(IntCodec<uint32_t>{});
      return true;
    case braidInt64:
      fn(IntCodec<int64_t>{});
      return true;
    case braidUint64:
      fn(IntCodec<uint64_t>{});
      return true;
    case braidFloat16:
      fn(HalfCodec{});
      return true;
    case braidFloat32:
      fn(FloatCodec{});
      return true;
    case braidFloat64:
      fn(DoubleCodec{});
      return true;
    case braidBfloat16:
      fn(Bf16Codec{});
      return true;
    case braidFloat8e4m3:
      fn(E4m3Codec{});
      return true;
    case braidFloat8e5m2:
      fn(E5m2Codec{});
      return true;
    default:
      return false;
  }
}

// Floating-point inputs keep every partial result exact in the type:
//  sum/avg: integers in [-amp, amp] with nranks * amp <= kExactInt; past that, 0/1 with
//           at most kExactInt ones per element (period `period` over r + i);
//  prod:    +-1 and +-2, at most kMaxPow2 twos per element;
//  max/min: integers in [-8, 8] (exact even in e5m2).
struct FloatPlan {
  braidRedOp_t op;
  uint64_t amp = 0;
  uint64_t period = 0;  // 0: hashed; else a deterministic sparse pattern
};

template <typename C>
FloatPlan MakePlan(braidRedOp_t op, int nranks) {
  FloatPlan plan{op};
  const auto n = static_cast<uint64_t>(nranks);
  if (op == braidSum || op == braidAvg || op == kMulSum) {  // mulsum: +-1 times a sum's inputs
    const auto exact = static_cast<uint64_t>(C::kExactInt);
    plan.amp = std::min<uint64_t>(4, exact / n);
    if (plan.amp == 0) plan.period = (n + exact - 1) / exact;
  } else if (op == braidProd) {
    const auto twos = static_cast<uint64_t>(C::kMaxPow2);
    if (n > twos) plan.period = (n + twos - 1) / twos;
  }
  return plan;
}

double FloatValue(const FloatPlan& plan, uint64_t seed, int rank, size_t index) {
  const uint64_t h = Mix(seed, static_cast<uint64_t>(rank), index);
  const uint64_t pos = static_cast<uint64_t>(rank) + index;
  switch (plan.op) {
    case braidSum:
    case braidAvg:
    case kMulSum:
      if (plan.amp > 0) {
        return static_cast<double>(static_cast<int64_t>(h % (2 * plan.amp + 1))) -
               static_cast<double>(plan.amp);
      }
      return pos % plan.period == 0 ? 1.0 : 0.0;
    case braidProd: {
      const bool two = plan.period == 0 ? (h & 1) != 0 : pos % plan.period == 0;
      const double mag = two ? 2.0 : 1.0;
      return ((h >> 8) & 3) == 0 ? -mag : mag;
    }
    default:
      return static_cast<double>(static_cast<int64_t>(h % 17)) - 8.0;
  }
}

// Integer inputs span the whole type so sums wrap; products use odd values so they wrap
// without collapsing to zero.
template <typename T>
T IntValue(braidRedOp_t op, uint64_t seed, int rank, size_t index) {
  uint64_t h = Mix(seed, static_cast<uint64_t>(rank), index);
  if (op == braidProd) h |= 1;
  return static_cast<T>(h);
}

template <typename C>
void FillInputT(void* buf, size_t count, size_t offset, const CheckArgs& args, int rank) {
  using S = typename C::Storage;
  S* out = static_cast<S*>(buf);
  if constexpr (C::kIsFloat) {
    const FloatPlan plan = MakePlan<C>(args.op, args.nranks);
    for (size_t i = 0; i < count; ++i) {
      out[i] = C::Encode(FloatValue(plan, args.seed, rank, offset + i));
    }
  } else {
    for (size_t i = 0; i < count; ++i) {
      out[i] = IntValue<S>(args.op, args.seed, rank, offset + i);
    }
  }
}

template <typename C>
void FillReducedT(void* buf, size_t count, size_t offset, const CheckArgs& args) {
  using S = typename C::Storage;
  S* out = static_cast<S*>(buf);
  const int n = args.nranks;
  if constexpr (C::kIsFloat) {
    const FloatPlan plan = MakePlan<C>(args.op, n);
    for (size_t i = 0; i < count; ++i) {
      const size_t index = offset + i;
      double acc = FloatValue(plan, args.seed, 0, index);
      for (int r = 1; r < n; ++r) {
        const double v = FloatValue(plan, args.seed, r, index);
        switch (args.op) {
          case braidProd:
            acc *= v;
            break;
          case braidMax:
            acc = std::max(acc, v);
            break;
          case braidMin:
            acc = std::min(acc, v);
            break;
          case kMulSum:
            acc += PreMulScalar(r) * v;
            break;
          default:
            acc += v;
            break;
        }
      }
      if (args.op == braidAvg) {
        // The sum is exact; one division, in fp32 for the types that reduce in fp32.
        acc = C::kNarrow ? static_cast<double>(static_cast<float>(acc) / static_cast<float>(n))
                         : acc / n;
      }
      out[i] = C::Encode(acc);
    }
  } else {
    for (size_t i = 0; i < count; ++i) {
      const size_t index = offset + i;
      // Sums and products wrap modulo 2^bits: do them in uint64_t (no overflow UB) and
      // keep the low bits.
      S first = IntValue<S>(args.op, args.seed, 0, index);
      uint64_t acc = static_cast<uint64_t>(first);
      S best = first;
      for (int r = 1; r < n; ++r) {
        const S v = IntValue<S>(args.op, args.seed, r, index);
        switch (args.op) {
          case braidProd:
            acc *= static_cast<uint64_t>(v);
            break;
          case braidMax:
            best = std::max(best, v);
            break;
          case braidMin:
            best = std::min(best, v);
            break;
          case kMulSum:  // times -1 is the negation modulo 2^bits, as the library's product
            acc += PreMulScalar(r) < 0 ? 0 - static_cast<uint64_t>(v) : static_cast<uint64_t>(v);
            break;
          default:
            acc += static_cast<uint64_t>(v);
            break;
        }
      }
      if (args.op == braidMax || args.op == braidMin) {
        out[i] = best;
      } else if (args.op == braidAvg) {
        const S sum = static_cast<S>(acc);
        if constexpr (std::is_signed_v<S>) {
          out[i] = static_cast<S>(static_cast<int64_t>(sum) / n);  // truncates toward zero
        } else {
          out[i] = static_cast<S>(static_cast<uint64_t>(sum) / static_cast<uint64_t>(n));
        }
      } else {
        out[i] = static_cast<S>(acc);
      }
    }
  }
}

// Data-movement pattern: the low bytes of one hash per element, whatever the type.
template <typename S>
void FillPatternT(void* buf, size_t count, size_t offset, uint64_t seed, int rank) {
  S* out = static_cast<S*>(buf);
  for (size_t i = 0; i < count; ++i) {
    const uint64_t h = Mix(seed ^ 0x7061747465726eull, static_cast<uint64_t>(rank), offset + i);
    memcpy(&out[i], &h, sizeof(S));
  }
}

}  // namespace

uint64_t Mix(uint64_t seed, uint64_t a, uint64_t b) {
  uint64_t z = seed ^ (a * 0x9E3779B97F4A7C15ull) ^ (b * 0xC2B2AE3D27D4EB4Full);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;  // splitmix64's finaliser
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

size_t ElementSize(braidDataType_t dtype) {
  for (const TypeEntry& t : kTypes) {
    if (t.dtype == dtype) return t.size;
  }
  return 0;
}

const char* TypeName(braidDataType_t dtype) {
  for (const TypeEntry& t : kTypes) {
    if (t.dtype == dtype) return t.name;
  }
  return "unknown";
}

const char* OpName(braidRedOp_t op) {
  const int k = static_cast<int>(op);
  return k >= 0 && k <= braidNumOps ? kOpNames[k] : "unknown";
}

double PreMulScalar(int rank) { return rank % 2 == 0 ? 1.0 : -1.0; }

void PreMulScalarBytes(braidDataType_t dtype, int rank, void* out) {
  Dispatch(dtype, [&](auto codec) {
    using C = decltype(codec);
    using S = typename C::Storage;
    S v;
    if constexpr (C::kIsFloat) {
      v = C::Encode(PreMulScalar(rank));
    } else {
      v = static_cast<S>(PreMulScalar(rank) < 0 ? -1 : 1);  // unsigned: 2^bits - 1
    }
    memcpy(out, &v, sizeof(S));
  });
}

std::vector<braidDataType_t> AllTypes() {
  std::vector<braidDataType_t> all;
  for (const TypeEntry& t : kTypes) all.push_back(t.dtype);
  return all;
}

bool ParseTypeName(const char* text, braidDataType_t* dtype) {
  for (const TypeEntry& t : kTypes) {
    if (strcasecmp(text, t.name) == 0) {
      *dtype = t.dtype;
      return true;
    }
  }
  for (const Alias& a : kTypeAliases) {
    if (strcasecmp(text, a.name) == 0) {
      *dtype = a.dtype;
      return true;
    }
  }
  return false;
}

void FillInput(void* buf, size_t count, size_t offset, const CheckArgs& args, int rank) {
  Dispatch(args.dtype,
           [&](auto codec) { FillInputT<decltype(codec)>(buf, count, offset, args, rank); });
}

void FillReduced(void* buf, size_t count, size_t offset, const CheckArgs& args) {
  Dispatch(args.dtype,
           [&](auto codec) { FillReducedT<decltype(codec)>(buf, count, offset, args); });
}

void FillPattern(void* buf, size_t count, size_t offset, const CheckArgs& args, int rank) {
  switch (ElementSize(args.dtype)) {
    case 1:
      FillPatternT<uint8_t>(buf, count, offset, args.seed, rank);
      break;
    case 2:
      FillPatternT<uint16_t>(buf, count, offset, args.seed, rank);
      break;
    case 4:
      FillPatternT<uint32_t>(buf, count, offset, args.seed, rank);
      break;
    case 8:
      FillPatternT<uint64_t>(buf, count, offset, args.seed, rank);
      break;
    default:
      break;
  }
}

void FillBytes(void* buf, size_t bytes, uint64_t seed) {
  auto* out = static_cast<uint8_t*>(buf);
  size_t i = 0;
  for (; i + 8 <= bytes; i += 8) {
    const uint64_t h = Mix(seed, 0x706f69736f6eull, i / 8);
    memcpy(out + i, &h, 8);
  }
  if (i < bytes) {
    const uint64_t h = Mix(seed, 0x706f69736f6eull, i / 8);
    memcpy(out + i, &h, bytes - i);
  }
}

size_t CountMismatches(const void* got, const void* want, size_t count, braidDataType_t dtype) {
  size_t wrong = 0;
  Dispatch(dtype, [&](auto codec) {
    using C = decltype(codec);
    using S = typename C::Storage;
    const S* g = static_cast<const S*>(got);
    const S* w = static_cast<const S*>(want);
    for (size_t i = 0; i < count; ++i) {
      if constexpr (C::kIsFloat) {
        const double a = C::Decode(g[i]);
        const double b = C::Decode(w[i]);
        if (!(a == b || (std::isnan(a) && std::isnan(b)))) ++wrong;
      } else {
        if (g[i] != w[i]) ++wrong;
      }
    }
  });
  return wrong;
}

size_t CountBitMismatches(const void* got, const void* want, size_t count, size_t elem_size) {
  const auto* g = static_cast<const uint8_t*>(got);
  const auto* w = static_cast<const uint8_t*>(want);
  if (memcmp(g, w, count * elem_size) == 0) return 0;
  size_t wrong = 0;
  for (size_t i = 0; i < count; ++i) {
    if (memcmp(g + i * elem_size, w + i * elem_size, elem_size) != 0) ++wrong;
  }
  return wrong;
}

}  // namespace braid::perf
