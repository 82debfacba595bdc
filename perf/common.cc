// The nccl-tests-shaped harness of the perf binaries; see common.h.
//
// Flow, as in nccl-tests' common.cu: parse flags; find the ranks (threads of this
// process, braidrun's environment, or mpirun); rank 0 prints the header; every rank
// creates its communicator, and for each datatype and op warms up at the largest and
// smallest size, then for each size times `iters` back-to-back calls out of place and in
// place, reduces the time over ranks (-a), checks the result (-c) and rank 0 prints a
// row. Every cross-rank reduction of timings and counts goes through braidAllReduce
// itself, so MPI is needed only to hand out the unique id.
#include "common.h"

#include <getopt.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#ifdef BRAID_HAVE_MPI
// The C API is all we use; MPI's C++ bindings only bring warnings.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#endif

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

constexpr const char* kOpNames[] = {"sum", "prod", "max", "min", "avg"};

const char* TypeName(braidDataType_t dtype) {
  for (const TypeEntry& t : kTypes) {
    if (t.dtype == dtype) return t.name;
  }
  return "unknown";
}

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

// ---------------------------------------------------------------------------------------
// Verifiable values. Element i of rank r derives from a hash of (seed, r, i).

uint64_t Mix(uint64_t seed, uint64_t rank, uint64_t index) {
  uint64_t z = seed ^ (rank * 0x9E3779B97F4A7C15ull) ^ (index * 0xC2B2AE3D27D4EB4Full);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;  // splitmix64's finaliser
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
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
  if (op == braidSum || op == braidAvg) {
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

// ---------------------------------------------------------------------------------------
// Command line.

struct Options {
  const char* prog = "perf";
  int nthreads = 1;
  size_t min_bytes = 32u << 20;  // nccl-tests' defaults
  size_t max_bytes = 32u << 20;
  size_t step_bytes = 1u << 20;
  size_t step_factor = 1;
  int iters = 20;
  int warmup_iters = 5;
  int agg_iters = 1;
  int check = 1;
  int average = 1;  // 0 rank 0, 1 mean, 2 min, 3 max over ranks
  int blocking = 0;
  int root = 0;
  std::vector<braidDataType_t> types{braidFloat32};
  std::vector<braidRedOp_t> ops{braidSum};
};

const struct option kLongOptions[] = {
    {"nthreads", required_argument, nullptr, 't'},
    {"ngpus", required_argument, nullptr, 'g'},
    {"minbytes", required_argument, nullptr, 'b'},
    {"maxbytes", required_argument, nullptr, 'e'},
    {"stepbytes", required_argument, nullptr, 'i'},
    {"stepfactor", required_argument, nullptr, 'f'},
    {"iters", required_argument, nullptr, 'n'},
    {"agg_iters", required_argument, nullptr, 'm'},
    {"warmup_iters", required_argument, nullptr, 'w'},
    {"check", required_argument, nullptr, 'c'},
    {"op", required_argument, nullptr, 'o'},
    {"datatype", required_argument, nullptr, 'd'},
    {"root", required_argument, nullptr, 'r'},
    {"blocking", required_argument, nullptr, 'z'},
    {"average", required_argument, nullptr, 'a'},
    {"help", no_argument, nullptr, 'h'},
    {nullptr, 0, nullptr, 0},
};

const char* LongName(int c) {
  for (const struct option& o : kLongOptions) {
    if (o.name != nullptr && o.val == c) return o.name;
  }
  return "?";
}

void PrintUsage(const char* prog) {
  printf(
      "USAGE: %s\n"
      "\t[-t,--nthreads <ranks as threads of this process>]\n"
      "\t[-g,--ngpus <ranks per thread: only 1>]\n"
      "\t[-b,--minbytes <min size in bytes, K/M/G suffixes>]\n"
      "\t[-e,--maxbytes <max size in bytes, K/M/G suffixes>]\n"
      "\t[-i,--stepbytes <increment size>]\n"
      "\t[-f,--stepfactor <increment factor>]\n"
      "\t[-n,--iters <iteration count>]\n"
      "\t[-m,--agg_iters <aggregated iteration count>]\n"
      "\t[-w,--warmup_iters <warmup iteration count>]\n"
      "\t[-c,--check <check iteration count: 0 off, 1 on>]\n"
      "\t[-o,--op <sum/prod/min/max/avg/all>]\n"
      "\t[-d,--datatype <int8/uint8/int32/uint32/int64/uint64/half/float/double/bfloat16/"
      "f8e4m3/f8e5m2/all>]\n"
      "\t[-r,--root <root>]\n"
      "\t[-z,--blocking <0/1>: barrier after each call]\n"
      "\t[-a,--average <0/1/2/3> report iteration time of <0=rank 0/1=avg/2=min/3=max>]\n"
      "\t[-h,--help]\n"
      "Ranks: -t N threads in this process, times the processes of braidrun "
      "(BRAID_UNIQUE_ID, BRAID_RANK, BRAID_NRANKS) or mpirun.\n",
      prog);
}

[[noreturn]] void UsageError(const Options& o, const std::string& msg) {
  fprintf(stderr, "%s: %s (see %s -h)\n", o.prog, msg.c_str(), o.prog);
  exit(2);
}

std::string FlagName(int c) {
  return std::string("-") + static_cast<char>(c) + " (--" + LongName(c) + ")";
}

int64_t ParseInt(const Options& o, int c, const char* text, int64_t lo, int64_t hi) {
  errno = 0;
  char* end = nullptr;
  const long long v = strtoll(text, &end, 10);
  if (end == text || *end != '\0' || errno == ERANGE || v < lo || v > hi) {
    UsageError(o, "invalid value '" + std::string(text) + "' for " + FlagName(c) +
                      ": expected an integer in [" + std::to_string(lo) + ", " +
                      std::to_string(hi) + "]");
  }
  return v;
}

// "8", "1.5K", "128M", "4g": a decimal number with an optional 1024-based suffix.
size_t ParseSize(const Options& o, int c, const char* text) {
  const char* p = text;
  long double value = 0;
  int digits = 0;
  for (; *p >= '0' && *p <= '9'; ++p, ++digits) value = value * 10 + (*p - '0');
  if (*p == '.') {
    long double scale = 0.1L;
    for (++p; *p >= '0' && *p <= '9'; ++p, ++digits, scale /= 10) value += scale * (*p - '0');
  }
  long double unit = 1;
  switch (*p) {
    case 'k':
    case 'K':
      unit = 1024.0L;
      ++p;
      break;
    case 'm':
    case 'M':
      unit = 1024.0L * 1024;
      ++p;
      break;
    case 'g':
    case 'G':
      unit = 1024.0L * 1024 * 1024;
      ++p;
      break;
    default:
      break;
  }
  value *= unit;
  if (digits == 0 || *p != '\0' || value > static_cast<long double>(1ull << 60)) {
    UsageError(o, "invalid size '" + std::string(text) + "' for " + FlagName(c) +
                      ": expected bytes like 8, 64K, 128M or 2G (at most 2^60)");
  }
  return static_cast<size_t>(value);
}

void ParseTypes(Options* o, const char* text) {
  o->types.clear();
  if (strcmp(text, "all") == 0) {
    for (const TypeEntry& t : kTypes) o->types.push_back(t.dtype);
    return;
  }
  for (const TypeEntry& t : kTypes) {
    if (strcmp(text, t.name) == 0) {
      o->types.push_back(t.dtype);
      return;
    }
  }
  for (const Alias& a : kTypeAliases) {
    if (strcmp(text, a.name) == 0) {
      o->types.push_back(a.dtype);
      return;
    }
  }
  UsageError(*o, "unknown datatype '" + std::string(text) + "' for " + FlagName('d') +
                     ": expected int8, uint8, int32, uint32, int64, uint64, half (fp16), "
                     "float (fp32), double (fp64), bfloat16 (bf16), f8e4m3, f8e5m2 or all");
}

void ParseOps(Options* o, const char* text) {
  o->ops.clear();
  for (int i = 0; i < braidNumOps; ++i) {
    if (strcmp(text, "all") == 0 || strcmp(text, kOpNames[i]) == 0) {
      o->ops.push_back(static_cast<braidRedOp_t>(i));
    }
  }
  if (o->ops.empty()) {
    UsageError(*o, "unknown op '" + std::string(text) + "' for " + FlagName('o') +
                       ": expected sum, prod, max, min, avg or all");
  }
}

// Returns -1 to go on, else the exit status (help: 0).
int ParseOptions(int argc, char** argv, Options* o) {
  if (argc > 0 && argv[0] != nullptr) {
    const char* slash = strrchr(argv[0], '/');
    o->prog = slash != nullptr ? slash + 1 : argv[0];
  }
  opterr = 0;  // our own messages, with the flag's long name
  optind = 1;
  for (;;) {
    const int c =
        getopt_long(argc, argv, ":t:g:b:e:i:f:n:m:w:c:o:d:r:z:a:h", kLongOptions, nullptr);
    if (c == -1) break;
    switch (c) {
      case 't':
        o->nthreads = static_cast<int>(ParseInt(*o, c, optarg, 1, 4096));
        break;
      case 'g':
        if (ParseInt(*o, c, optarg, 1, 4096) != 1) {
          UsageError(*o,
                     "-g (--ngpus) must be 1: Braid runs one rank per thread or process; "
                     "use -t N for N ranks in this process");
        }
        break;
      case 'b':
        o->min_bytes = ParseSize(*o, c, optarg);
        break;
      case 'e':
        o->max_bytes = ParseSize(*o, c, optarg);
        break;
      case 'i':
        o->step_bytes = ParseSize(*o, c, optarg);
        break;
      case 'f':
        o->step_factor = static_cast<size_t>(ParseInt(*o, c, optarg, 0, 1 << 20));
        break;
      case 'n':
        o->iters = static_cast<int>(ParseInt(*o, c, optarg, 1, INT_MAX));
        break;
      case 'm':
        o->agg_iters = static_cast<int>(ParseInt(*o, c, optarg, 1, INT_MAX));
        break;
      case 'w':
        o->warmup_iters = static_cast<int>(ParseInt(*o, c, optarg, 0, INT_MAX));
        break;
      case 'c':
        o->check = static_cast<int>(ParseInt(*o, c, optarg, 0, INT_MAX));
        break;
      case 'o':
        ParseOps(o, optarg);
        break;
      case 'd':
        ParseTypes(o, optarg);
        break;
      case 'r':
        o->root = static_cast<int>(ParseInt(*o, c, optarg, 0, INT_MAX));
        break;
      case 'z':
        o->blocking = static_cast<int>(ParseInt(*o, c, optarg, 0, 1));
        break;
      case 'a':
        o->average = static_cast<int>(ParseInt(*o, c, optarg, 0, 3));
        break;
      case 'h':
        PrintUsage(o->prog);
        return 0;
      case ':':
        if (optopt != 0) UsageError(*o, "option " + FlagName(optopt) + " needs a value");
        UsageError(*o, "option '" + std::string(argv[optind - 1]) + "' needs a value");
      default: {
        // getopt_long leaves an unknown short flag in optopt, an unknown long one in argv.
        std::string flag = optopt != 0 ? std::string("-") + static_cast<char>(optopt)
                                       : std::string(argv[optind - 1]);
        UsageError(*o, "unknown option '" + flag + "'");
      }
    }
  }
  if (optind < argc) UsageError(*o, "unexpected argument '" + std::string(argv[optind]) + "'");
  if (o->min_bytes > o->max_bytes) {
    UsageError(*o, "-b (--minbytes) " + std::to_string(o->min_bytes) +
                       " is larger than -e (--maxbytes) " + std::to_string(o->max_bytes));
  }
  if (o->step_factor <= 1 && o->step_bytes == 0 && o->min_bytes < o->max_bytes) {
    UsageError(*o, "-i (--stepbytes) must be > 0 when -f (--stepfactor) is 0 or 1");
  }
  return -1;
}

std::vector<size_t> Sizes(const Options& o) {
  std::vector<size_t> sizes;
  for (size_t size = o.min_bytes; size <= o.max_bytes;) {
    sizes.push_back(size);
    size_t next;
    if (o.step_factor > 1) {
      if (size == 0) {
        next = 1;  // 0 * factor would never grow
      } else if (__builtin_mul_overflow(size, o.step_factor, &next)) {
        break;
      }
    } else if (o.step_bytes == 0 || __builtin_add_overflow(size, o.step_bytes, &next)) {
      break;
    }
    size = next;
  }
  return sizes;
}

// ---------------------------------------------------------------------------------------
// Launch: where the ranks come from.

struct Launch {
  int nprocs = 1;
  int proc = 0;
  int local_proc = 0;  // this process's index among those on its host
  bool mpi = false;
  braidUniqueId id{};
};

bool EnvInt(const char* name, int* value) {
  const char* text = getenv(name);
  if (text == nullptr || *text == '\0') return false;
  char* end = nullptr;
  errno = 0;
  const long v = strtol(text, &end, 10);
  if (*end != '\0' || errno == ERANGE || v < 0 || v > INT_MAX) return false;
  *value = static_cast<int>(v);
  return true;
}

[[noreturn]] void LaunchError(const Options& o, const std::string& msg) {
  fprintf(stderr, "%s: %s\n", o.prog, msg.c_str());
  exit(2);
}

Launch DetectLaunch(const Options& o, int* argc, char*** argv) {
  Launch l;
  (void)argc;
  (void)argv;
  if (const char* text = getenv("BRAID_UNIQUE_ID"); text != nullptr) {
    if (!EnvInt("BRAID_RANK", &l.proc) || !EnvInt("BRAID_NRANKS", &l.nprocs) || l.nprocs < 1 ||
        l.proc >= l.nprocs) {
      LaunchError(o,
                  "BRAID_UNIQUE_ID is set but BRAID_RANK / BRAID_NRANKS are missing or "
                  "invalid (need 0 <= BRAID_RANK < BRAID_NRANKS); launch with braidrun");
    }
    if (braidUniqueIdFromString(text, &l.id) != braidSuccess) {
      LaunchError(o,
                  "BRAID_UNIQUE_ID is not a unique id (256 hex digits from "
                  "braidUniqueIdToString): " +
                      std::string(braidGetLastError(nullptr)));
    }
    if (!EnvInt("BRAID_LOCAL_RANK", &l.local_proc)) l.local_proc = l.proc;
    return l;
  }
  int mpi_size = 0;
  if (EnvInt("OMPI_COMM_WORLD_SIZE", &mpi_size) || EnvInt("PMI_SIZE", &mpi_size)) {
#ifdef BRAID_HAVE_MPI
    MPI_Init(argc, argv);
    l.mpi = true;
    MPI_Comm_size(MPI_COMM_WORLD, &l.nprocs);
    MPI_Comm_rank(MPI_COMM_WORLD, &l.proc);
    if (!EnvInt("OMPI_COMM_WORLD_LOCAL_RANK", &l.local_proc) &&
        !EnvInt("MPI_LOCALRANKID", &l.local_proc) && !EnvInt("PMI_LOCAL_RANK", &l.local_proc)) {
      l.local_proc = 0;
    }
    int ok = 1;
    if (l.proc == 0) {
      const braidResult_t r = braidGetUniqueId(&l.id);
      if (r != braidSuccess) {
        fprintf(stderr, "%s: rank 0: braidGetUniqueId failed: %s: %s\n", o.prog,
                braidGetErrorString(r), braidGetLastError(nullptr));
        ok = 0;
      }
    }
    MPI_Bcast(&ok, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (!ok) {
      MPI_Finalize();
      exit(1);
    }
    MPI_Bcast(&l.id, sizeof(l.id), MPI_BYTE, 0, MPI_COMM_WORLD);
    return l;
#else
    if (mpi_size > 1) {
      LaunchError(o, "started by mpirun as one of " + std::to_string(mpi_size) +
                         " processes, but this binary was built without MPI (BRAID_HAVE_MPI); "
                         "rebuild with -Dmpi=enabled or launch with braidrun -n " +
                         std::to_string(mpi_size));
    }
#endif
  }
  const braidResult_t r = braidGetUniqueId(&l.id);
  if (r != braidSuccess) {
    fprintf(stderr, "%s: braidGetUniqueId failed: %s: %s\n", o.prog, braidGetErrorString(r),
            braidGetLastError(nullptr));
    exit(1);
  }
  return l;
}

// Ends the whole job at once: peers blocked in a collective would otherwise wait for this
// rank until BRAID_TIMEOUT. braidrun and mpirun then stop the other processes.
[[noreturn]] void Abort(const Launch& l) {
  fflush(stdout);
  fflush(stderr);
#ifdef BRAID_HAVE_MPI
  if (l.mpi) MPI_Abort(MPI_COMM_WORLD, 1);
#else
  (void)l;
#endif
  _exit(1);
}

// ---------------------------------------------------------------------------------------
// One rank: its communicator, buffers and the sweep.

struct FreeDeleter {
  void operator()(void* p) const { free(p); }
};
using Buffer = std::unique_ptr<std::byte, FreeDeleter>;

constexpr size_t kInfoBytes = 128;  // per-rank record gathered for "# Using devices"

std::string TimeString(double usec) {
  // nccl-tests' rule: two decimals below 100 us, one below 10 ms, none above.
  char text[32];
  if (usec >= 10000.0) {
    snprintf(text, sizeof(text), "%7.0f", usec);
  } else if (usec >= 100.0) {
    snprintf(text, sizeof(text), "%7.1f", usec);
  } else {
    snprintf(text, sizeof(text), "%7.2f", usec);
  }
  return text;
}

class Rank {
 public:
  Rank(const Options& o, const Launch& l, const Collective& coll, int thread)
      : o_(o), l_(l), coll_(coll), thread_(thread) {
    nranks_ = l.nprocs * o.nthreads;
    rank_ = l.proc * o.nthreads + thread;
  }

  // Returns this rank's exit status.
  int Run() {
    Call(braidCommInitRank(&comm_, nranks_, l_.id, rank_), "braidCommInitRank");
    PrintDevices();
    Allocate();
    if (rank_ == 0) PrintTableHeader();
    for (braidDataType_t dtype : o_.types) {
      if (coll_.uses_op) {
        for (braidRedOp_t op : o_.ops) Sweep(dtype, op);
      } else {
        Sweep(dtype, braidSum);
      }
    }
    if (rank_ == 0) {
      printf("# Out of bounds values : %d %s\n", errors_, errors_ != 0 ? "FAILED" : "OK");
      printf("# Avg bus bandwidth    : %g\n", bw_count_ > 0 ? bw_sum_ / bw_count_ : 0.0);
      printf("#\n");
      printf("# Collective test concluded: %s\n", coll_.name);
      fflush(stdout);
    }
    // Nobody exits (possibly non-zero) before rank 0 has printed its summary.
    Barrier();
    Call(braidCommDestroy(comm_), "braidCommDestroy");
    comm_ = nullptr;
    return errors_ != 0 ? 1 : 0;
  }

 private:
  void Call(braidResult_t r, const char* what) {
    if (r == braidSuccess) return;
    fprintf(stderr, "%s: rank %d: %s failed: %s: %s\n", o_.prog, rank_, what,
            braidGetErrorString(r), braidGetLastError(comm_));
    Abort(l_);
  }

  // A barrier made of a one-element all-reduce.
  void Barrier() {
    int32_t token = 0;
    Call(braidAllReduce(&token, &token, 1, braidInt32, braidSum, comm_, nullptr),
         "braidAllReduce (harness barrier)");
  }

  double ReduceTime(double seconds) {
    braidRedOp_t op = braidSum;
    double value = seconds;
    switch (o_.average) {
      case 0:
        value = rank_ == 0 ? seconds : 0.0;
        break;
      case 2:
        op = braidMin;
        break;
      case 3:
        op = braidMax;
        break;
      default:
        break;
    }
    Call(braidAllReduce(&value, &value, 1, braidFloat64, op, comm_, nullptr),
         "braidAllReduce (harness time reduction)");
    return o_.average == 1 ? value / nranks_ : value;
  }

  int64_t SumOverRanks(int64_t value) {
    Call(braidAllReduce(&value, &value, 1, braidInt64, braidSum, comm_, nullptr),
         "braidAllReduce (harness error count)");
    return value;
  }

  void PrintDevices() {
    // Gathered with a sum all-reduce over zero-filled records, one slot per rank.
    std::vector<uint8_t> info(kInfoBytes * nranks_, 0);
    uint8_t* mine = info.data() + kInfoBytes * rank_;
    const int32_t pid = getpid();
    const int32_t device = l_.local_proc * o_.nthreads + thread_;
    memcpy(mine, &pid, 4);
    memcpy(mine + 4, &device, 4);
    char host[kInfoBytes - 8] = {};
    gethostname(host, sizeof(host) - 1);
    memcpy(mine + 8, host, sizeof(host));
    Call(
        braidAllReduce(info.data(), info.data(), info.size(), braidUint8, braidSum, comm_, nullptr),
        "braidAllReduce (harness device report)");
    if (rank_ != 0) return;
    for (int r = 0; r < nranks_; ++r) {
      const uint8_t* rec = info.data() + kInfoBytes * r;
      int32_t rpid, rdev;
      memcpy(&rpid, rec, 4);
      memcpy(&rdev, rec + 4, 4);
      char rhost[kInfoBytes - 8];
      memcpy(rhost, rec + 8, sizeof(rhost));
      rhost[sizeof(rhost) - 1] = '\0';
      printf("#  Rank %2d Group %2d Pid %6d on %10s device %2d [cpu] host\n", r, 0, rpid, rhost,
             rdev);
    }
  }

  static void PrintTableHeader() {
    printf("#\n");
    printf(
        "# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place"
        "          \n",
        "", "", "", "", "");
    printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s %6s  %7s  %6s  %6s %6s\n", "size", "count",
           "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw",
           "#wrong");
    printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %5s  %7s  %6s  %6s  %5s\n", "(B)",
           "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)",
           "");
    fflush(stdout);
  }

  // Buffers big enough for the largest size of every datatype, in both placements.
  void Allocate() {
    size_t send_bytes = 64, recv_bytes = 64, expected_bytes = 64;
    for (braidDataType_t dtype : o_.types) {
      const size_t es = ElementSize(dtype);
      const CollCounts c = coll_.counts(o_.max_bytes / es, nranks_);
      const size_t r = static_cast<size_t>(rank_);
      send_bytes = std::max(send_bytes, c.send_count * es);
      expected_bytes = std::max(expected_bytes, c.recv_count * es);
      recv_bytes =
          std::max({recv_bytes, c.recv_count * es, (c.send_inplace_offset * r + c.send_count) * es,
                    (c.recv_inplace_offset * r + c.recv_count) * es});
    }
    send_ = Alloc(send_bytes, "send buffer");
    recv_ = Alloc(recv_bytes, "receive buffer");
    if (o_.check > 0) expected_ = Alloc(expected_bytes, "expected-result buffer");
  }

  Buffer Alloc(size_t bytes, const char* what) {
    const size_t rounded = (bytes + 4095) / 4096 * 4096;
    void* p = nullptr;
    if (posix_memalign(&p, 4096, rounded) != 0) {
      fprintf(stderr, "%s: rank %d: cannot allocate %zu bytes for the %s; lower -e\n", o_.prog,
              rank_, rounded, what);
      Abort(l_);
    }
    memset(p, 0, rounded);  // first touch by this rank's thread
    return Buffer(static_cast<std::byte*>(p));
  }

  void Sweep(braidDataType_t dtype, braidRedOp_t op) {
    const size_t es = ElementSize(dtype);
    Barrier();
    // Warm-up at the largest then the smallest size, out of place, as nccl-tests does.
    for (size_t bytes : {o_.max_bytes, o_.min_bytes}) {
      const CollCounts c = coll_.counts(bytes / es, nranks_);
      for (int i = 0; i < o_.warmup_iters; ++i) RunOnce(c, dtype, op, false);
    }
    for (size_t size : Sizes(o_)) {
      const CollCounts c = coll_.counts(size / es, nranks_);
      const size_t bytes = std::max(c.send_count, c.recv_count) * es;
      if (rank_ == 0) {
        printf("%12zu  %12zu  %8s  %6s  %6i", bytes, c.param_count, TypeName(dtype),
               coll_.uses_op ? kOpNames[op] : "none", coll_.uses_root ? o_.root : -1);
      }
      Bench(c, bytes, dtype, op, false);
      Bench(c, bytes, dtype, op, true);
      if (rank_ == 0) {
        printf("\n");
        fflush(stdout);
      }
    }
  }

  std::byte* SendPtr(const CollCounts& c, size_t es, bool in_place) {
    return in_place ? recv_.get() + c.send_inplace_offset * es * rank_ : send_.get();
  }
  std::byte* RecvPtr(const CollCounts& c, size_t es, bool in_place) {
    return recv_.get() + (in_place ? c.recv_inplace_offset * es * rank_ : 0);
  }

  void RunOnce(const CollCounts& c, braidDataType_t dtype, braidRedOp_t op, bool in_place) {
    const size_t es = ElementSize(dtype);
    const braidResult_t r = coll_.run(SendPtr(c, es, in_place), RecvPtr(c, es, in_place), c, dtype,
                                      op, o_.root, comm_, nullptr);
    if (r != braidSuccess) {
      const std::string what = std::string(coll_.call) + " (" + TypeName(dtype) + " " +
                               kOpNames[op] + ", count " + std::to_string(c.param_count) +
                               (in_place ? ", in place)" : ", out of place)");
      Call(r, what.c_str());
    }
  }

  void Bench(const CollCounts& c, size_t bytes, braidDataType_t dtype, braidRedOp_t op,
             bool in_place) {
    const size_t es = ElementSize(dtype);
    CheckArgs args{dtype, op, o_.root, rank_, nranks_, 0};
    // Time the call on valid data, as nccl-tests does (NaNs or denormals could skew it).
    if (o_.check > 0) coll_.fill_send(SendPtr(c, es, in_place), c, args);
    Barrier();
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < o_.iters; ++i) {
      for (int a = 0; a < o_.agg_iters; ++a) RunOnce(c, dtype, op, in_place);
      if (o_.blocking) Barrier();
    }
    const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
    const double seconds =
        ReduceTime(elapsed.count() / (static_cast<double>(o_.iters) * o_.agg_iters));
    const double algbw = seconds > 0 ? static_cast<double>(bytes) / 1.0e9 / seconds : 0.0;
    const double busbw = algbw * coll_.busbw_factor(nranks_);

    int64_t wrong = 0;
    for (int k = 0; k < o_.check; ++k) {
      args.seed = Mix(++checks_, 0x6272616964ull, static_cast<uint64_t>(in_place));
      std::byte* recv = RecvPtr(c, es, in_place);
      coll_.fill_expected(expected_.get(), c, args);
      // Poison the output with the complement of the expected bits (differs in value for
      // every type), then write the input, which in place lies inside the output.
      for (size_t b = 0; b < c.recv_count * es; ++b) recv[b] = ~expected_.get()[b];
      coll_.fill_send(SendPtr(c, es, in_place), c, args);
      RunOnce(c, dtype, op, in_place);
      const size_t local = CountMismatches(recv, expected_.get(), c.recv_count, dtype);
      if (local != 0) {
        fprintf(stderr, "%s: rank %d: %zu of %zu elements wrong (%s %s %s, %zu bytes)\n", o_.prog,
                rank_, local, c.recv_count, TypeName(dtype), kOpNames[op],
                in_place ? "in place" : "out of place", bytes);
      }
      wrong = SumOverRanks(static_cast<int64_t>(local));
      if (wrong != 0) break;
    }
    // nccl-tests counts one error per rank for each check that found wrong elements.
    if (wrong != 0) errors_ += nranks_;
    bw_sum_ += busbw;
    ++bw_count_;
    if (rank_ == 0) {
      if (o_.check > 0) {
        printf("  %7s  %6.2f  %6.2f  %5lld", TimeString(seconds * 1e6).c_str(), algbw, busbw,
               static_cast<long long>(wrong));
      } else {
        printf("  %7s  %6.2f  %6.2f  %5s", TimeString(seconds * 1e6).c_str(), algbw, busbw, "N/A");
      }
    }
  }

  const Options& o_;
  const Launch& l_;
  const Collective& coll_;
  const int thread_;
  int nranks_ = 1;
  int rank_ = 0;
  braidComm_t comm_ = nullptr;
  Buffer send_, recv_, expected_;
  uint64_t checks_ = 0;
  int errors_ = 0;
  double bw_sum_ = 0;
  int bw_count_ = 0;
};

}  // namespace

size_t ElementSize(braidDataType_t dtype) {
  for (const TypeEntry& t : kTypes) {
    if (t.dtype == dtype) return t.size;
  }
  return 0;
}

void FillInput(void* buf, size_t count, size_t offset, const CheckArgs& args, int rank) {
  Dispatch(args.dtype,
           [&](auto codec) { FillInputT<decltype(codec)>(buf, count, offset, args, rank); });
}

void FillReduced(void* buf, size_t count, size_t offset, const CheckArgs& args) {
  Dispatch(args.dtype,
           [&](auto codec) { FillReducedT<decltype(codec)>(buf, count, offset, args); });
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

int PerfMain(int argc, char** argv, const Collective& coll) {
  setlinebuf(stdout);
  Options o;
  if (const int status = ParseOptions(argc, argv, &o); status >= 0) return status;
  const Launch l = DetectLaunch(o, &argc, &argv);
  const int nranks = l.nprocs * o.nthreads;
  if (coll.uses_root && o.root >= nranks) {
    LaunchError(o, "-r (--root) " + std::to_string(o.root) + " is not a rank: there are " +
                       std::to_string(nranks) + " ranks");
  }
  if (l.proc == 0) {
    printf("# Collective test starting: %s\n", coll.name);
    printf(
        "# nThread %d nGpus %d minBytes %zu maxBytes %zu step: %zu(%s) warmup iters: %d "
        "iters: %d agg iters: %d validation: %d graph: %d\n",
        o.nthreads, 1, o.min_bytes, o.max_bytes, o.step_factor > 1 ? o.step_factor : o.step_bytes,
        o.step_factor > 1 ? "factor" : "bytes", o.warmup_iters, o.iters, o.agg_iters, o.check, 0);
    if (o.blocking)
      printf("# Blocking Enabled: wait for completion and barrier after each collective \n");
    printf("#\n");
    printf("# Using devices\n");
    fflush(stdout);
  }

  std::vector<int> status(o.nthreads, 0);
  std::vector<std::thread> threads;
  threads.reserve(o.nthreads);
  for (int t = 1; t < o.nthreads; ++t) {
    threads.emplace_back([&, t] { status[t] = Rank(o, l, coll, t).Run(); });
  }
  status[0] = Rank(o, l, coll, 0).Run();
  for (std::thread& t : threads) t.join();

#ifdef BRAID_HAVE_MPI
  if (l.mpi) MPI_Finalize();
#endif
  return *std::max_element(status.begin(), status.end());
}

}  // namespace braid::perf
