// Tests for the host reduction kernels: every dtype x op against a closed form, in place
// and out of place, across block boundaries; integer wrap-around and truncating AVG; and
// the narrow-format conversions against literal encodings, exhaustive round trips, the
// compiler's _Float16 where it has one, and a brute-force nearest-value search for fp8.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/reduce.h"

namespace braid::kernels {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// ---- Typed storage for the closed-form tests ----------------------------------------

size_t sizeOf(braidDataType_t t) {
  switch (t) {
    case braidInt8:
    case braidUint8:
    case braidFloat8e4m3:
    case braidFloat8e5m2:
      return 1;
    case braidFloat16:
    case braidBfloat16:
      return 2;
    case braidInt32:
    case braidUint32:
    case braidFloat32:
      return 4;
    default:
      return 8;
  }
}

bool isInteger(braidDataType_t t) {
  return t == braidInt8 || t == braidUint8 || t == braidInt32 || t == braidUint32 ||
         t == braidInt64 || t == braidUint64;
}

bool isUnsigned(braidDataType_t t) {
  return t == braidUint8 || t == braidUint32 || t == braidUint64;
}

// Stores v, rounded to t's format (the narrow formats through the library's encoders, which
// the conversion tests below check independently).
void store(braidDataType_t t, void* p, size_t i, double v) {
  switch (t) {
    case braidInt8:
      static_cast<int8_t*>(p)[i] = static_cast<int8_t>(v);
      break;
    case braidUint8:
      static_cast<uint8_t*>(p)[i] = static_cast<uint8_t>(v);
      break;
    case braidInt32:
      static_cast<int32_t*>(p)[i] = static_cast<int32_t>(v);
      break;
    case braidUint32:
      static_cast<uint32_t*>(p)[i] = static_cast<uint32_t>(v);
      break;
    case braidInt64:
      static_cast<int64_t*>(p)[i] = static_cast<int64_t>(v);
      break;
    case braidUint64:
      static_cast<uint64_t*>(p)[i] = static_cast<uint64_t>(v);
      break;
    case braidFloat16:
      static_cast<uint16_t*>(p)[i] = floatToHalf(float(v));
      break;
    case braidFloat32:
      static_cast<float*>(p)[i] = float(v);
      break;
    case braidFloat64:
      static_cast<double*>(p)[i] = v;
      break;
    case braidBfloat16:
      static_cast<uint16_t*>(p)[i] = floatToBf16(float(v));
      break;
    case braidFloat8e4m3:
      static_cast<uint8_t*>(p)[i] = floatToFp8e4m3(float(v));
      break;
    case braidFloat8e5m2:
      static_cast<uint8_t*>(p)[i] = floatToFp8e5m2(float(v));
      break;
    default:
      break;
  }
}

const char* typeName(braidDataType_t t) {
  static const char* const kNames[] = {"int8",    "uint8",    "int32",   "uint32",
                                       "int64",   "uint64",   "float16", "float32",
                                       "float64", "bfloat16", "e4m3",    "e5m2"};
  return kNames[t];
}

// ---- Every dtype x op, closed form -----------------------------------------------------

struct OpCase {
  braidRedOp_t op;
  int divisor;
  const char* name;
};

const OpCase kOpCases[] = {
    {braidSum, 1, "sum"}, {braidProd, 1, "prod"},   {braidMax, 1, "max"},     {braidMin, 1, "min"},
    {braidAvg, 1, "avg"}, {braidAvg, 2, "avgDiv2"}, {braidSum, 3, "sumDiv3"},
};

enum class Alias { kDisjoint, kDstIsA, kDstIsB, kAllSame };
const char* aliasName(Alias a) {
  switch (a) {
    case Alias::kDisjoint:
      return "disjoint";
    case Alias::kDstIsA:
      return "dstIsA";
    case Alias::kDstIsB:
      return "dstIsB";
    default:
      return "allSame";
  }
}

// Inputs every format holds exactly, whose sums, products and halves it also holds
// exactly: a in {0..3}, negated now and then where the type is signed; b in {1, 2, 4}.
double inputA(braidDataType_t t, size_t i) {
  const double v = double(i % 4);
  return (!isUnsigned(t) && i % 5 == 0 && v != 0) ? -v : v;
}
double inputB(size_t i) { return double(1 << (i % 3)); }

double closedForm(braidDataType_t t, const OpCase& c, double a, double b) {
  double r = 0;
  switch (c.op) {
    case braidProd:
      r = a * b;
      break;
    case braidMax:
      r = a > b ? a : b;
      break;
    case braidMin:
      r = a < b ? a : b;
      break;
    default:
      r = a + b;
      break;
  }
  if (c.divisor > 1) r = isInteger(t) ? std::trunc(r / c.divisor) : r / c.divisor;
  return r;
}

using Param = std::tuple<braidDataType_t, int, Alias>;

class ReduceAllTypes : public ::testing::TestWithParam<Param> {};

TEST_P(ReduceAllTypes, MatchesClosedForm) {
  const auto [dtype, opIndex, alias] = GetParam();
  const OpCase& c = kOpCases[opIndex];
  const size_t es = sizeOf(dtype);
  constexpr size_t kGuard = 16;  // bytes past the end that must stay untouched
  for (size_t count : {0, 1, 2, 63, 64, 65, 129, 1000}) {
    SCOPED_TRACE("count " + std::to_string(count));
    std::vector<uint8_t> a(count * es + kGuard, 0xa5), b(a), dst(a), want(a);
    for (size_t i = 0; i < count; ++i) {
      const double av = inputA(dtype, i);
      const double bv = alias == Alias::kAllSame ? av : inputB(i);
      store(dtype, a.data(), i, av);
      store(dtype, b.data(), i, bv);
      store(dtype, want.data(), i, closedForm(dtype, c, av, bv));
    }
    uint8_t* out = dst.data();
    const uint8_t* pa = a.data();
    const uint8_t* pb = b.data();
    if (alias == Alias::kDstIsA) {
      out = a.data();
    } else if (alias == Alias::kDstIsB) {
      out = b.data();
    } else if (alias == Alias::kAllSame) {
      out = a.data();
      pb = a.data();
    }
    ASSERT_TRUE(reduce(dtype, c.op, out, pa, pb, count, c.divisor));
    for (size_t i = 0; i < count; ++i) {
      ASSERT_EQ(0, std::memcmp(out + i * es, want.data() + i * es, es))
          << "element " << i << " a=" << inputA(dtype, i) << " b=" << inputB(i);
    }
    for (size_t k = 0; k < kGuard; ++k) ASSERT_EQ(0xa5, out[count * es + k]) << "overrun";
  }
}

std::vector<Param> allParams() {
  std::vector<Param> params;
  for (int t = 0; t < braidNumTypes; ++t) {
    for (int c = 0; c < int(std::size(kOpCases)); ++c) {
      for (Alias a : {Alias::kDisjoint, Alias::kDstIsA, Alias::kDstIsB, Alias::kAllSame}) {
        params.emplace_back(braidDataType_t(t), c, a);
      }
    }
  }
  return params;
}

std::string paramName(const ::testing::TestParamInfo<Param>& info) {
  const auto [t, c, a] = info.param;
  return std::string(typeName(t)) + "_" + kOpCases[c].name + "_" + aliasName(a);
}

INSTANTIATE_TEST_SUITE_P(Kernels, ReduceAllTypes, ::testing::ValuesIn(allParams()), paramName);

// ---- Targeted cases ---------------------------------------------------------------

template <typename T>
std::vector<T> run(braidDataType_t t, braidRedOp_t op, const std::vector<T>& a,
                   const std::vector<T>& b, int divisor = 1) {
  std::vector<T> out(a.size());
  EXPECT_TRUE(reduce(t, op, out.data(), a.data(), b.data(), a.size(), divisor));
  return out;
}

template <typename T>
using Lim = std::numeric_limits<T>;

TEST(Reduce, IntegerSumWraps) {
  EXPECT_EQ(run<int8_t>(braidInt8, braidSum, {120, -128, 127}, {100, -1, 1}),
            (std::vector<int8_t>{-36, 127, -128}));
  EXPECT_EQ(run<uint8_t>(braidUint8, braidSum, {200, 255}, {100, 1}),
            (std::vector<uint8_t>{44, 0}));
  EXPECT_EQ(run<int32_t>(braidInt32, braidSum, {Lim<int32_t>::max(), Lim<int32_t>::min()}, {1, -1}),
            (std::vector<int32_t>{Lim<int32_t>::min(), Lim<int32_t>::max()}));
  EXPECT_EQ(run<uint32_t>(braidUint32, braidSum, {Lim<uint32_t>::max()}, {2}),
            (std::vector<uint32_t>{1}));
  EXPECT_EQ(run<int64_t>(braidInt64, braidSum, {Lim<int64_t>::max(), Lim<int64_t>::min()}, {1, -1}),
            (std::vector<int64_t>{Lim<int64_t>::min(), Lim<int64_t>::max()}));
  EXPECT_EQ(run<uint64_t>(braidUint64, braidAvg, {Lim<uint64_t>::max()}, {1}),
            (std::vector<uint64_t>{0}));
}

TEST(Reduce, IntegerProdWraps) {
  EXPECT_EQ(run<int8_t>(braidInt8, braidProd, {16, 100, -128, -128}, {16, 3, -1, 2}),
            (std::vector<int8_t>{0, 44, -128, 0}));
  EXPECT_EQ(run<uint8_t>(braidUint8, braidProd, {200, 20, 255}, {2, 13, 255}),
            (std::vector<uint8_t>{144, 4, 1}));
  EXPECT_EQ(run<int32_t>(braidInt32, braidProd, {65536, Lim<int32_t>::min()}, {65536, -1}),
            (std::vector<int32_t>{0, Lim<int32_t>::min()}));
  EXPECT_EQ(run<uint32_t>(braidUint32, braidProd, {Lim<uint32_t>::max()}, {Lim<uint32_t>::max()}),
            (std::vector<uint32_t>{1}));
  EXPECT_EQ(run<int64_t>(braidInt64, braidProd, {Lim<int64_t>::min(), int64_t(1) << 32},
                         {-1, int64_t(1) << 32}),
            (std::vector<int64_t>{Lim<int64_t>::min(), 0}));
  EXPECT_EQ(run<uint64_t>(braidUint64, braidProd, {uint64_t(1) << 63, 3}, {2, 0x5555555555555556}),
            (std::vector<uint64_t>{0, 2}));
}

TEST(Reduce, IntegerMaxMinAtExtremes) {
  EXPECT_EQ(run<int8_t>(braidInt8, braidMax, {-128, 127}, {-127, -128}),
            (std::vector<int8_t>{-127, 127}));
  EXPECT_EQ(run<uint64_t>(braidUint64, braidMin, {Lim<uint64_t>::max(), 0}, {1, 7}),
            (std::vector<uint64_t>{1, 0}));
  EXPECT_EQ(run<int64_t>(braidInt64, braidMin, {Lim<int64_t>::min()}, {Lim<int64_t>::max()}),
            (std::vector<int64_t>{Lim<int64_t>::min()}));
}

TEST(Reduce, IntegerAvgTruncatesTheWrappedSum) {
  EXPECT_EQ(run<int32_t>(braidInt32, braidAvg, {-7, 7, -1, 5, -6}, {0, 0, 0, 0, 0}, 2),
            (std::vector<int32_t>{-3, 3, 0, 2, -3}));
  EXPECT_EQ(run<int8_t>(braidInt8, braidAvg, {120, -100}, {100, -100}, 3),
            (std::vector<int8_t>{-12, 18}));  // -36 / 3; 56 / 3 (-200 wraps to 56)
  EXPECT_EQ(run<uint8_t>(braidUint8, braidAvg, {200, 7}, {100, 0}, 3),
            (std::vector<uint8_t>{14, 2}));
  EXPECT_EQ(run<uint8_t>(braidUint8, braidAvg, {200}, {50}, 300), (std::vector<uint8_t>{0}));
  EXPECT_EQ(run<int64_t>(braidInt64, braidAvg, {Lim<int64_t>::max()}, {1}, 2),
            (std::vector<int64_t>{-(int64_t(1) << 62)}));
  EXPECT_EQ(run<uint64_t>(braidUint64, braidAvg, {Lim<uint64_t>::max()}, {Lim<uint64_t>::max()}, 2),
            (std::vector<uint64_t>{Lim<uint64_t>::max() / 2}));
  EXPECT_EQ(run<uint32_t>(braidUint32, braidAvg, {Lim<uint32_t>::max()}, {0}, 7),
            (std::vector<uint32_t>{Lim<uint32_t>::max() / 7}));
}

TEST(Reduce, FloatAvgDividesOnceInComputeType) {
  EXPECT_EQ(run<float>(braidFloat32, braidAvg, {1, 0.1f}, {0, 0.2f}, 3),
            (std::vector<float>{1.0f / 3.0f, (0.1f + 0.2f) / 3.0f}));
  EXPECT_EQ(run<double>(braidFloat64, braidAvg, {1, 0.1}, {0, 0.2}, 3),
            (std::vector<double>{1.0 / 3.0, (0.1 + 0.2) / 3.0}));
  EXPECT_EQ(run<uint16_t>(braidFloat16, braidAvg, {0x3c00, 0x3c00}, {0x0000, 0x4000}, 3),
            (std::vector<uint16_t>{0x3555, 0x3c00}));  // 1/3 in fp16; (1 + 2) / 3
  EXPECT_EQ(run<uint16_t>(braidBfloat16, braidAvg, {0x3f80}, {0x0000}, 3),
            (std::vector<uint16_t>{0x3eab}));
  EXPECT_EQ(run<uint8_t>(braidFloat8e4m3, braidAvg, {0x38}, {0x00}, 3),
            (std::vector<uint8_t>{0x2b}));  // 0.34375
  EXPECT_EQ(run<uint8_t>(braidFloat8e5m2, braidAvg, {0x3c}, {0x00}, 3),
            (std::vector<uint8_t>{0x35}));  // 0.3125
}

TEST(Reduce, NarrowFormatsRoundOnceToNearestEven) {
  // 2048 + 1 and 2048 + 3 are ties at fp16's ulp of 2 in [2048, 4096).
  EXPECT_EQ(run<uint16_t>(braidFloat16, braidSum, {floatToHalf(2048), floatToHalf(2048)},
                          {floatToHalf(1), floatToHalf(3)}),
            (std::vector<uint16_t>{0x6800, 0x6802}));
  EXPECT_EQ(run<uint16_t>(braidFloat16, braidSum, {0x7bff, 0xfbff}, {0x7bff, 0xfbff}),
            (std::vector<uint16_t>{0x7c00, 0xfc00}));  // overflow to +-inf
  EXPECT_EQ(run<uint16_t>(braidFloat16, braidProd, {floatToHalf(256)}, {floatToHalf(256)}),
            (std::vector<uint16_t>{0x7c00}));
  EXPECT_EQ(run<uint16_t>(braidBfloat16, braidSum, {floatToBf16(256), floatToBf16(256)},
                          {floatToBf16(1), floatToBf16(3)}),
            (std::vector<uint16_t>{0x4380, 0x4382}));
  EXPECT_EQ(run<uint8_t>(braidFloat8e4m3, braidSum, {floatToFp8e4m3(16), floatToFp8e4m3(16)},
                         {floatToFp8e4m3(1), floatToFp8e4m3(3)}),
            (std::vector<uint8_t>{floatToFp8e4m3(16), floatToFp8e4m3(20)}));
  EXPECT_EQ(run<uint8_t>(braidFloat8e4m3, braidSum, {0x7e, 0xfe}, {0x7e, 0xfe}),
            (std::vector<uint8_t>{0x7e, 0xfe}));  // saturates at +-448
  EXPECT_EQ(run<uint8_t>(braidFloat8e5m2, braidProd, {0x7b}, {floatToFp8e5m2(2)}),
            (std::vector<uint8_t>{0x7b}));  // saturates at 57344
}

TEST(Reduce, FloatMaxMinPropagateNaN) {
  const float f[] = {kNaN, 1.0f, -1.0f, kInf};
  const float g[] = {1.0f, kNaN, -2.0f, 1.0f};
  std::vector<float> out(4);
  ASSERT_TRUE(reduce(braidFloat32, braidMax, out.data(), f, g, 4));
  EXPECT_TRUE(std::isnan(out[0]) && std::isnan(out[1]));
  EXPECT_EQ(-1.0f, out[2]);
  EXPECT_EQ(kInf, out[3]);
  ASSERT_TRUE(reduce(braidFloat32, braidMin, out.data(), f, g, 4));
  EXPECT_TRUE(std::isnan(out[0]) && std::isnan(out[1]));
  EXPECT_EQ(-2.0f, out[2]);
  EXPECT_EQ(1.0f, out[3]);

  const double d[] = {std::nan(""), 0.5};
  const double e[] = {0.5, std::nan("")};
  std::vector<double> dout(2);
  for (braidRedOp_t op : {braidMax, braidMin}) {
    ASSERT_TRUE(reduce(braidFloat64, op, dout.data(), d, e, 2));
    EXPECT_TRUE(std::isnan(dout[0]) && std::isnan(dout[1]));
  }

  for (braidRedOp_t op : {braidMax, braidMin}) {
    const auto h = run<uint16_t>(braidFloat16, op, {0x7e00, 0x3c00}, {0x3c00, 0x7e00});
    EXPECT_TRUE(std::isnan(halfToFloat(h[0])) && std::isnan(halfToFloat(h[1])));
    const auto bf = run<uint16_t>(braidBfloat16, op, {0x7fc0, 0x3f80}, {0x3f80, 0x7fc0});
    EXPECT_TRUE(std::isnan(bf16ToFloat(bf[0])) && std::isnan(bf16ToFloat(bf[1])));
    EXPECT_EQ(run<uint8_t>(braidFloat8e4m3, op, {0x7f, 0x38}, {0x38, 0x7f}),
              (std::vector<uint8_t>{0x7f, 0x7f}));
  }
  // Max and min of +inf with -inf; sum of the two is NaN.
  const auto h = run<uint16_t>(braidFloat16, braidMax, {0x7c00}, {0xfc00});
  EXPECT_EQ(0x7c00, h[0]);
  EXPECT_TRUE(
      std::isnan(halfToFloat(run<uint16_t>(braidFloat16, braidSum, {0x7c00}, {0xfc00})[0])));
}

// The operands keep their (a, b) order in every aliasing case, which shows in which NaN
// payload max and min return and in their choice between +0 and -0.
TEST(Reduce, MaxMinKeepOperandOrderInPlace) {
  const uint32_t nanA = 0x7fc00001, nanB = 0x7fc00002;
  const float aInit[] = {std::bit_cast<float>(nanA), 0.0f};
  const float bInit[] = {std::bit_cast<float>(nanB), -0.0f};
  for (braidRedOp_t op : {braidMax, braidMin}) {
    for (int where = 0; where < 3; ++where) {  // disjoint, dst == a, dst == b
      float a[2], b[2], out[2];
      std::memcpy(a, aInit, sizeof(a));
      std::memcpy(b, bInit, sizeof(b));
      float* dst = where == 0 ? out : where == 1 ? a : b;
      ASSERT_TRUE(reduce(braidFloat32, op, dst, a, b, 2));
      EXPECT_EQ(nanA, std::bit_cast<uint32_t>(dst[0])) << op << " " << where;
      EXPECT_TRUE(std::signbit(dst[1])) << op << " " << where;  // b's -0
    }
  }
}

TEST(Reduce, ZeroCountTouchesNothing) {
  for (int t = 0; t < braidNumTypes; ++t) {
    for (int op = 0; op < braidNumOps; ++op) {
      EXPECT_TRUE(reduce(braidDataType_t(t), braidRedOp_t(op), nullptr, nullptr, nullptr, 0));
    }
    EXPECT_TRUE(divide(braidDataType_t(t), nullptr, nullptr, 0, 2));
  }
}

TEST(Reduce, RejectsUnknownTypeOrOp) {
  int32_t a[2] = {1, 2}, b[2] = {3, 4}, out[2] = {7, 7};
  EXPECT_FALSE(reduce(braidNumTypes, braidSum, out, a, b, 2));
  EXPECT_FALSE(reduce(braidDataType_t(-1), braidSum, out, a, b, 2));
  EXPECT_FALSE(reduce(braidInt32, braidNumOps, out, a, b, 2));
  EXPECT_FALSE(reduce(braidInt32, braidRedOp_t(-1), out, a, b, 2));
  EXPECT_FALSE(reduce(braidNumTypes, braidSum, out, a, b, 0));
  EXPECT_EQ(7, out[0]);
  EXPECT_EQ(7, out[1]);
}

TEST(Reduce, InPlaceAcrossManyBlocks) {
  // fp16 in place over counts that are not a multiple of the block size.
  for (size_t count : {63, 64, 65, 1000}) {
    std::vector<uint16_t> x(count), y(count);
    for (size_t i = 0; i < count; ++i) {
      x[i] = floatToHalf(float(i % 100));
      y[i] = floatToHalf(float(i % 7));
    }
    ASSERT_TRUE(reduce(braidFloat16, braidSum, y.data(), x.data(), y.data(), count));
    for (size_t i = 0; i < count; ++i) ASSERT_EQ(float(i % 100 + i % 7), halfToFloat(y[i]));
  }
}

// Whether element i of x and y (dtype) are both NaN: IEEE 754 leaves open which payload an
// operation on two NaNs keeps, and compilers may swap the operands of + and *.
bool bothNaN(braidDataType_t dtype, const std::vector<uint8_t>& x, const std::vector<uint8_t>& y,
             size_t i) {
  auto isNaN = [dtype](const uint8_t* p) {
    uint16_t h;
    float f;
    double d;
    switch (dtype) {
      case braidFloat32:
        std::memcpy(&f, p, 4);
        return std::isnan(f);
      case braidFloat64:
        std::memcpy(&d, p, 8);
        return std::isnan(d);
      case braidFloat16:
        std::memcpy(&h, p, 2);
        return std::isnan(halfToFloat(h));
      case braidBfloat16:
        std::memcpy(&h, p, 2);
        return std::isnan(bf16ToFloat(h));
      case braidFloat8e4m3:
        return std::isnan(fp8e4m3ToFloat(*p));
      case braidFloat8e5m2:
        return std::isnan(fp8e5m2ToFloat(*p));
      default:
        return false;
    }
  };
  const size_t es = braidTypeSize(dtype);
  return isNaN(&x[i * es]) && isNaN(&y[i * es]);
}

// The elements where x and y differ other than by a NaN's payload.
size_t differences(braidDataType_t dtype, const std::vector<uint8_t>& x,
                   const std::vector<uint8_t>& y) {
  const size_t es = braidTypeSize(dtype);
  size_t n = 0;
  for (size_t i = 0; i < x.size() / es; ++i)
    n += std::memcmp(&x[i * es], &y[i * es], es) != 0 && !bothNaN(dtype, x, y, i);
  return n;
}

// Every instruction-set build of the kernels gives the generic build's bits, for every dtype,
// op and divisor, on random bit patterns (NaNs, infinities and subnormals among them), at
// counts that end inside and on vector widths, in place and out of place; a NaN may carry
// either operand's payload.
TEST(Isa, EveryBuildMatchesGenericBitForBit) {
  std::printf("kernels run on %s\n", isaName(activeIsa()));
  uint64_t state = 0x9e3779b97f4a7c15ull;
  auto next = [&state] {
    state ^= state << 13, state ^= state >> 7, state ^= state << 17;
    return state;
  };
  for (Isa isa : {Isa::kAvx2, Isa::kAvx512}) {
    if (!isaSupported(isa)) {
      std::printf("%s: not built or not supported by this CPU, not compared\n", isaName(isa));
      continue;
    }
    for (int t = 0; t < braidNumTypes; ++t) {
      const auto dtype = static_cast<braidDataType_t>(t);
      const size_t es = braidTypeSize(dtype);
      for (size_t count : {size_t{1}, size_t{31}, size_t{64}, size_t{1000}, size_t{4099}}) {
        std::vector<uint8_t> a(count * es), b(count * es);
        for (auto& x : a) x = static_cast<uint8_t>(next());
        for (auto& x : b) x = static_cast<uint8_t>(next());
        for (braidRedOp_t op : {braidSum, braidProd, braidMax, braidMin, braidAvg})
          for (int divisor : {1, 3}) {
            std::vector<uint8_t> want(count * es), got(count * es);
            ASSERT_TRUE(reduceWith(Isa::kGeneric, dtype, op, want.data(), a.data(), b.data(), count,
                                   divisor));
            ASSERT_TRUE(reduceWith(isa, dtype, op, got.data(), a.data(), b.data(), count, divisor));
            EXPECT_EQ(differences(dtype, want, got), 0u)
                << isaName(isa) << " " << braidTypeName(dtype) << " " << braidOpName(op)
                << " count " << count << " / " << divisor;
            std::vector<uint8_t> inPlace = a;
            ASSERT_TRUE(reduceWith(isa, dtype, op, inPlace.data(), inPlace.data(), b.data(), count,
                                   divisor));
            EXPECT_EQ(differences(dtype, want, inPlace), 0u)
                << isaName(isa) << " in place " << braidTypeName(dtype);
          }
        std::vector<uint8_t> want(count * es), got(count * es);
        ASSERT_TRUE(divideWith(Isa::kGeneric, dtype, want.data(), a.data(), count, 7));
        ASSERT_TRUE(divideWith(isa, dtype, got.data(), a.data(), count, 7));
        EXPECT_EQ(differences(dtype, want, got), 0u)
            << isaName(isa) << " divide " << braidTypeName(dtype);
      }
    }
    // fp16 and bf16: every code against codes spread over the whole range.
    for (braidDataType_t dtype : {braidFloat16, braidBfloat16}) {
      std::vector<uint8_t> a(65536 * 2), b(65536 * 2), want(65536 * 2), got(65536 * 2);
      for (uint32_t i = 0; i < 65536; ++i) {
        const uint16_t x = static_cast<uint16_t>(i), y = static_cast<uint16_t>(i * 40503u + 1);
        std::memcpy(&a[2 * i], &x, 2);
        std::memcpy(&b[2 * i], &y, 2);
      }
      for (braidRedOp_t op : {braidSum, braidProd, braidMax, braidMin})
        for (int divisor : {1, 3}) {
          ASSERT_TRUE(reduceWith(Isa::kGeneric, dtype, op, want.data(), a.data(), b.data(), 65536,
                                 divisor));
          ASSERT_TRUE(reduceWith(isa, dtype, op, got.data(), a.data(), b.data(), 65536, divisor));
          EXPECT_EQ(differences(dtype, want, got), 0u)
              << isaName(isa) << " every " << braidTypeName(dtype) << " code, " << braidOpName(op)
              << " / " << divisor;
        }
    }
  }
}

// reduceStreaming gives reduce()'s bits (a NaN may carry either operand's payload, as between
// builds) on every instruction-set build, dtype, op and divisor,
// wherever dst sits against a 64-byte line (elements 0..3 past a boundary, so heads of whole,
// partial and no lines) and whatever the count (inside a line, whole lines, a tail); it writes
// nothing outside dst, and in place (dst == a, dst == b) it is reduce().
TEST(ReduceStreaming, MatchesReduceOnEveryBuildTypeOpAndAlignment) {
  uint64_t state = 0x243f6a8885a308d3ull;
  auto next = [&state] {
    state ^= state << 13, state ^= state >> 7, state ^= state << 17;
    return state;
  };
  constexpr uint8_t kSentinel = 0xa5;
  for (Isa isa : {Isa::kGeneric, Isa::kAvx2, Isa::kAvx512}) {
    if (!isaSupported(isa)) continue;
    for (int t = 0; t < braidNumTypes; ++t) {
      const auto dtype = static_cast<braidDataType_t>(t);
      const size_t es = braidTypeSize(dtype);
      for (size_t count : {size_t{1}, size_t{7}, size_t{64}, size_t{300}, size_t{4099}}) {
        std::vector<uint8_t> a(count * es), b(count * es);
        for (auto& x : a) x = static_cast<uint8_t>(next());
        for (auto& x : b) x = static_cast<uint8_t>(next());
        for (size_t shift = 0; shift < 4; ++shift) {
          // dst at `shift` elements past a 64-byte boundary, with 64 sentinel bytes each side.
          std::vector<uint8_t> block(count * es + 64 * 3);
          const size_t base = (64 - reinterpret_cast<uintptr_t>(block.data()) % 64) % 64 + 64;
          uint8_t* dst = block.data() + base + shift * es;
          for (braidRedOp_t op : {braidSum, braidProd, braidMax, braidMin, braidAvg})
            for (int divisor : {1, 3}) {
              std::vector<uint8_t> want(count * es);
              ASSERT_TRUE(
                  reduceWith(isa, dtype, op, want.data(), a.data(), b.data(), count, divisor));
              std::fill(block.begin(), block.end(), kSentinel);
              ASSERT_TRUE(
                  reduceStreamingWith(isa, dtype, op, dst, a.data(), b.data(), count, divisor));
              ASSERT_EQ(differences(dtype, want, std::vector<uint8_t>(dst, dst + want.size())), 0u)
                  << isaName(isa) << " " << braidTypeName(dtype) << " " << braidOpName(op)
                  << " count " << count << " / " << divisor << ", dst " << shift
                  << " elements past a line";
              for (size_t i = 0; i < block.size(); ++i)
                if (block.data() + i < dst || block.data() + i >= dst + want.size())
                  ASSERT_EQ(block[i], kSentinel) << "byte " << i << " outside dst was written";
            }
        }
        for (int inputIsDst = 0; inputIsDst < 2; ++inputIsDst) {
          std::vector<uint8_t> want(count * es);
          ASSERT_TRUE(reduceWith(isa, dtype, braidSum, want.data(), a.data(), b.data(), count));
          std::vector<uint8_t> x = inputIsDst ? b : a;
          const uint8_t* other = inputIsDst ? a.data() : b.data();
          ASSERT_TRUE(
              inputIsDst
                  ? reduceStreamingWith(isa, dtype, braidSum, x.data(), other, x.data(), count)
                  : reduceStreamingWith(isa, dtype, braidSum, x.data(), x.data(), other, count));
          EXPECT_EQ(differences(dtype, want, x), 0u)
              << isaName(isa) << " " << braidTypeName(dtype) << " in place";
        }
      }
    }
    EXPECT_FALSE(reduceStreamingWith(isa, static_cast<braidDataType_t>(braidNumTypes), braidSum,
                                     nullptr, nullptr, nullptr, 1));
  }
}

// Streaming copies: every head alignment (0..16 bytes to the next 16-byte boundary), tails
// of 0..63 bytes and lengths across whole 64-byte lines; bytes beyond the range stay as
// they were.
TEST(CopyStreaming, CopiesEveryAlignmentAndLengthExactly) {
  std::vector<unsigned char> src(4096 + 64), dst(4096 + 96);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<unsigned char>(i * 131 + 7);
  for (size_t dstOff = 0; dstOff < 17; ++dstOff) {
    for (size_t srcOff : {size_t{0}, size_t{1}, size_t{8}, size_t{33}}) {
      for (size_t bytes :
           {size_t{0}, size_t{1}, size_t{15}, size_t{16}, size_t{17}, size_t{63}, size_t{64},
            size_t{65}, size_t{127}, size_t{128}, size_t{200}, size_t{4000}, size_t{4096}}) {
        std::fill(dst.begin(), dst.end(), 0xa5);
        copyStreaming(dst.data() + dstOff, src.data() + srcOff, bytes);
        for (size_t i = 0; i < dst.size(); ++i) {
          const bool inside = i >= dstOff && i < dstOff + bytes;
          const unsigned char want = inside ? src[srcOff + i - dstOff] : 0xa5;
          ASSERT_EQ(dst[i], want) << "dst offset " << dstOff << ", src offset " << srcOff << ", "
                                  << bytes << " bytes: byte " << i;
        }
      }
    }
  }
}

TEST(Divide, IntegersTruncate) {
  std::vector<int32_t> v = {-7, 7, 5, -1, 0};
  ASSERT_TRUE(divide(braidInt32, v.data(), v.data(), v.size(), 2));  // in place
  EXPECT_EQ(v, (std::vector<int32_t>{-3, 3, 2, 0, 0}));
  const uint8_t u[] = {255, 1};
  uint8_t uo[2];
  ASSERT_TRUE(divide(braidUint8, uo, u, 2, 2));
  EXPECT_EQ(127, uo[0]);
  EXPECT_EQ(0, uo[1]);
  const int64_t s[] = {Lim<int64_t>::min()};
  int64_t so[1];
  ASSERT_TRUE(divide(braidInt64, so, s, 1, 3));
  EXPECT_EQ(Lim<int64_t>::min() / 3, so[0]);
}

TEST(Divide, FloatsRoundOnce) {
  std::vector<float> f = {1, 3, -0.5f};
  ASSERT_TRUE(divide(braidFloat32, f.data(), f.data(), f.size(), 3));
  EXPECT_EQ(f, (std::vector<float>{1.0f / 3.0f, 1.0f, -0.5f / 3.0f}));
  const uint16_t h[] = {0x3c00, 0x7c00};
  uint16_t ho[2];
  ASSERT_TRUE(divide(braidFloat16, ho, h, 2, 3));
  EXPECT_EQ(0x3555, ho[0]);
  EXPECT_EQ(0x7c00, ho[1]);
  const uint8_t e[] = {0x7e};  // 448 / 3 = 149.33 -> 144 (ulp 16 in [128, 256))
  uint8_t eo[1];
  ASSERT_TRUE(divide(braidFloat8e4m3, eo, e, 1, 3));
  EXPECT_EQ(144.0f, fp8e4m3ToFloat(eo[0]));
}

TEST(Divide, ByOneCopiesBitForBit) {
  const uint16_t h[] = {0x7d01, 0x3c00, 0xfe55};  // signalling and quiet NaNs kept exactly
  uint16_t out[3] = {};
  ASSERT_TRUE(divide(braidFloat16, out, h, 3, 1));
  EXPECT_EQ(0, std::memcmp(out, h, sizeof(h)));
  ASSERT_TRUE(divide(braidFloat16, out, out, 3, 1));
  EXPECT_EQ(0, std::memcmp(out, h, sizeof(h)));
}

TEST(Divide, RejectsBadArguments) {
  int32_t v[1] = {6};
  EXPECT_FALSE(divide(braidInt32, v, v, 1, 0));
  EXPECT_FALSE(divide(braidInt32, v, v, 1, -2));
  EXPECT_FALSE(divide(braidNumTypes, v, v, 1, 2));
  EXPECT_EQ(6, v[0]);
}

// ---- Conversions ------------------------------------------------------------------

float fromBits(uint32_t u) { return std::bit_cast<float>(u); }

TEST(Half, KnownValues) {
  const std::pair<float, uint16_t> cases[] = {
      {0.0f, 0x0000},
      {-0.0f, 0x8000},
      {1.0f, 0x3c00},
      {-2.0f, 0xc000},
      {0.5f, 0x3800},
      {65504.0f, 0x7bff},
      {0x1p-14f, 0x0400},
      {0x1p-24f, 0x0001},
      {0x3ffp-24f, 0x03ff},
      {kInf, 0x7c00},
      {-kInf, 0xfc00},
      {1.0f + 0x1p-11f, 0x3c00},             // tie: even
      {1.0f + 0x3p-11f, 0x3c02},             // tie: up to even
      {1.0f + 0x1p-11f + 0x1p-20f, 0x3c01},  // just above the tie
      {65519.0f, 0x7bff},
      {65520.0f, 0x7c00},  // tie between 65504 and 65536: inf
      {0x1p-25f, 0x0000},
      {0x3p-25f, 0x0002},  // subnormal ties
      {0x1p-25f + 0x1p-40f, 0x0001},
      {0x1p-30f, 0x0000},
      {1e-40f, 0x0000},
      {0x7ffp-25f, 0x0400},  // tie: up into the first normal
      {1e10f, 0x7c00},
  };
  for (const auto& [f, h] : cases) {
    EXPECT_EQ(h, floatToHalf(f)) << f;
    EXPECT_EQ(uint16_t(h ^ 0x8000), floatToHalf(-f)) << f;
  }
  EXPECT_EQ(65504.0f, halfToFloat(0x7bff));
  EXPECT_EQ(0x1p-24f, halfToFloat(0x0001));
  EXPECT_EQ(-kInf, halfToFloat(0xfc00));
  EXPECT_TRUE(std::signbit(halfToFloat(0x8000)));
}

TEST(Half, RoundTripsEveryCode) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = halfToFloat(uint16_t(h));
    if ((h & 0x7c00) == 0x7c00 && (h & 0x3ff) != 0) {
      ASSERT_TRUE(std::isnan(f)) << h;
      // NaN stays NaN, sign and high payload kept, quiet bit set.
      ASSERT_EQ(h | 0x200, floatToHalf(f)) << h;
    } else {
      ASSERT_EQ(h, floatToHalf(f)) << h;
    }
  }
}

TEST(Half, NaNStaysNaN) {
  EXPECT_EQ(0x7e00, floatToHalf(kNaN) & 0x7e00);
  EXPECT_EQ(0xfe00, floatToHalf(-kNaN) & 0xfe00);
  EXPECT_EQ(0x7e00, floatToHalf(fromBits(0x7f800001)) & 0x7e00);  // signalling, low payload
}

#ifdef __FLT16_MAX__
// The compiler's _Float16 conversion is an independent, correctly rounded reference.
TEST(Half, MatchesCompilerFloat16) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    if ((h & 0x7c00) == 0x7c00 && (h & 0x3ff) != 0) continue;
    ASSERT_EQ(float(std::bit_cast<_Float16>(uint16_t(h))), halfToFloat(uint16_t(h))) << h;
  }
  auto check = [](float f) {
    if (std::isnan(f)) return;
    ASSERT_EQ(std::bit_cast<uint16_t>(static_cast<_Float16>(f)), floatToHalf(f))
        << std::hexfloat << f;
  };
  for (uint64_t u = 0; u < (uint64_t(1) << 32); u += 997) check(fromBits(uint32_t(u)));
  // Every midpoint between adjacent halves, and its neighbours.
  for (uint32_t h = 0; h < 0x7c00; ++h) {
    const float mid = (halfToFloat(uint16_t(h)) + halfToFloat(uint16_t(h + 1))) / 2;
    for (float f : {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, kInf)}) {
      check(f);
      check(-f);
    }
  }
}
#endif

TEST(Bf16, KnownValues) {
  const std::pair<uint32_t, uint16_t> cases[] = {
      {0x3f800000, 0x3f80},                        // 1
      {0x3f808000, 0x3f80},                        // tie: even
      {0x3f818000, 0x3f82},                        // tie: up to even
      {0x3f808001, 0x3f81},                        // above the tie
      {0x3f80ffff, 0x3f81}, {0x7f7fffff, 0x7f80},  // largest float rounds to infinity
      {0x7f7f7fff, 0x7f7f},                        // largest bf16
      {0x7f800000, 0x7f80},                        // inf
      {0x00008000, 0x0000},                        // subnormal tie
      {0x00018000, 0x0002}, {0x00000001, 0x0000}, {0x80000000, 0x8000},  // -0
      {0xc0490fdb, 0xc049},                                              // -pi
  };
  for (const auto& [f, h] : cases) EXPECT_EQ(h, floatToBf16(fromBits(f))) << std::hex << f;
  EXPECT_EQ(1.0f, bf16ToFloat(0x3f80));
  EXPECT_EQ(fromBits(0x00010000), bf16ToFloat(0x0001));
  EXPECT_EQ(0x7fc0, floatToBf16(kNaN));
  EXPECT_EQ(0xffc1, floatToBf16(fromBits(0xff810000)));  // signalling NaN: quieted, payload kept
  EXPECT_TRUE(std::isnan(bf16ToFloat(floatToBf16(fromBits(0x7f800001)))));
}

TEST(Bf16, RoundTripsEveryCodeAndMatchesNearest) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = bf16ToFloat(uint16_t(h));
    if ((h & 0x7f80) == 0x7f80 && (h & 0x7f) != 0) {
      ASSERT_EQ(h | 0x40, floatToBf16(f)) << h;
    } else {
      ASSERT_EQ(h, floatToBf16(f)) << h;
    }
  }
  // Against a nearest-of-two-neighbours reference computed in double.
  for (uint64_t u = 0; u < (uint64_t(1) << 32); u += 1009) {
    const float f = fromBits(uint32_t(u));
    if (std::isnan(f) || std::isinf(f)) continue;
    const uint32_t lo = uint32_t(u) >> 16;
    const double x = std::fabs(double(f));
    const double dlo = std::fabs(double(bf16ToFloat(uint16_t(lo)))) - x;
    // Past the largest bf16 the next step up is 2^128, which IEEE rounding treats as a value.
    const double hi =
        ((lo + 1) & 0x7fff) == 0x7f80 ? 0x1p128 : std::fabs(double(bf16ToFloat(uint16_t(lo + 1))));
    const double dhi = hi - x;
    const uint32_t want = (-dlo < dhi || (-dlo == dhi && (lo & 1) == 0)) ? lo : lo + 1;
    ASSERT_EQ(want, floatToBf16(f)) << std::hex << u;
  }
}

// Brute-force reference for fp8: the nearest finite code by value, ties to the even code,
// saturating beyond the largest finite value.
uint8_t nearestFp8(float f, float (*decode)(uint8_t)) {
  const double x = std::fabs(double(f));
  int best = 0;
  double bestDist = std::numeric_limits<double>::infinity();
  for (int c = 0; c < 0x80; ++c) {
    const float v = decode(uint8_t(c));
    if (std::isnan(v) || std::isinf(v)) continue;
    const double d = std::fabs(double(v) - x);
    if (x >= double(v)) {  // codes ascend in value: at or past the largest, saturate to it
      best = c;
      bestDist = d;
    } else if (d < bestDist || (d == bestDist && (c & 1) == 0)) {
      best = c;
      bestDist = d;
    }
  }
  return uint8_t(best | (std::signbit(f) ? 0x80 : 0));
}

void checkFp8AgainstBruteForce(float (*decode)(uint8_t), uint8_t (*encode)(float)) {
  std::vector<float> inputs;
  for (int c = 0; c < 0x80; ++c) {
    const float v = decode(uint8_t(c));
    const float next = decode(uint8_t(c + 1));
    if (std::isnan(v) || std::isinf(v) || std::isnan(next) || std::isinf(next)) continue;
    const float mid = (v + next) / 2;
    for (float f : {v, mid, std::nextafter(mid, 0.0f), std::nextafter(mid, kInf)}) {
      inputs.push_back(f);
      inputs.push_back(-f);
    }
  }
  for (uint32_t u = 0; u < 0x7f800000; u += 4099) inputs.push_back(fromBits(u));
  for (float f : inputs) ASSERT_EQ(nearestFp8(f, decode), encode(f)) << std::hexfloat << f;
}

TEST(Fp8E4m3, KnownValues) {
  EXPECT_EQ(0x38, floatToFp8e4m3(1.0f));
  EXPECT_EQ(0xc0, floatToFp8e4m3(-2.0f));
  EXPECT_EQ(0x7e, floatToFp8e4m3(448.0f));
  EXPECT_EQ(0x08, floatToFp8e4m3(0x1p-6f));   // smallest normal
  EXPECT_EQ(0x01, floatToFp8e4m3(0x1p-9f));   // smallest subnormal
  EXPECT_EQ(0x00, floatToFp8e4m3(0x1p-10f));  // tie: even (zero)
  EXPECT_EQ(0x02, floatToFp8e4m3(0x3p-10f));  // tie: up to even
  EXPECT_EQ(0x38, floatToFp8e4m3(1.0625f));   // tie between 1 and 1.125
  EXPECT_EQ(0x3a, floatToFp8e4m3(1.1875f));   // tie between 1.125 and 1.25
  EXPECT_EQ(0x80, floatToFp8e4m3(-0.0f));
  EXPECT_EQ(448.0f, fp8e4m3ToFloat(0x7e));
  EXPECT_EQ(-448.0f, fp8e4m3ToFloat(0xfe));
  EXPECT_EQ(0x1p-9f, fp8e4m3ToFloat(0x01));
  EXPECT_EQ(0.875f * 0x1p-6f, fp8e4m3ToFloat(0x07));
  EXPECT_EQ(256.0f, fp8e4m3ToFloat(0x78));  // exponent 15 holds finite values in E4M3
  EXPECT_TRUE(std::isnan(fp8e4m3ToFloat(0x7f)));
  EXPECT_TRUE(std::isnan(fp8e4m3ToFloat(0xff)));
}

TEST(Fp8E4m3, SaturatesAndKeepsNaN) {
  for (float f : {449.0f, 464.0f, 480.0f, 500.0f, 1e9f, 3e38f, kInf}) {
    EXPECT_EQ(0x7e, floatToFp8e4m3(f)) << f;
    EXPECT_EQ(0xfe, floatToFp8e4m3(-f)) << f;
  }
  EXPECT_EQ(0x7f, floatToFp8e4m3(kNaN));
  EXPECT_EQ(0xff, floatToFp8e4m3(-kNaN));
}

TEST(Fp8E4m3, RoundTripsAndMatchesBruteForce) {
  for (int c = 0; c < 256; ++c) {
    if ((c & 0x7f) == 0x7f) continue;
    ASSERT_EQ(c, floatToFp8e4m3(fp8e4m3ToFloat(uint8_t(c)))) << c;
  }
  checkFp8AgainstBruteForce(fp8e4m3ToFloat, floatToFp8e4m3);
}

TEST(Fp8E5m2, KnownValues) {
  EXPECT_EQ(0x3c, floatToFp8e5m2(1.0f));
  EXPECT_EQ(0x7b, floatToFp8e5m2(57344.0f));
  EXPECT_EQ(0x01, floatToFp8e5m2(0x1p-16f));  // smallest subnormal
  EXPECT_EQ(0x04, floatToFp8e5m2(0x1p-14f));  // smallest normal
  EXPECT_EQ(0x3c, floatToFp8e5m2(1.125f));    // tie: even
  EXPECT_EQ(0x3e, floatToFp8e5m2(1.375f));    // tie: up to even
  EXPECT_EQ(57344.0f, fp8e5m2ToFloat(0x7b));
  EXPECT_EQ(kInf, fp8e5m2ToFloat(0x7c));
  EXPECT_EQ(-kInf, fp8e5m2ToFloat(0xfc));
  for (int c : {0x7d, 0x7e, 0x7f, 0xfd, 0xfe, 0xff})
    EXPECT_TRUE(std::isnan(fp8e5m2ToFloat(uint8_t(c))));
}

TEST(Fp8E5m2, SaturatesAndKeepsNaN) {
  for (float f : {57345.0f, 61440.0f, 65536.0f, 1e9f, kInf}) {
    EXPECT_EQ(0x7b, floatToFp8e5m2(f)) << f;
    EXPECT_EQ(0xfb, floatToFp8e5m2(-f)) << f;
  }
  EXPECT_EQ(0x7f, floatToFp8e5m2(kNaN));
  EXPECT_EQ(0xff, floatToFp8e5m2(-kNaN));
}

TEST(Fp8E5m2, RoundTripsAndMatchesBruteForce) {
  for (int c = 0; c < 256; ++c) {
    if ((c & 0x7f) > 0x7b) continue;  // inf saturates; NaNs checked above
    ASSERT_EQ(c, floatToFp8e5m2(fp8e5m2ToFloat(uint8_t(c)))) << c;
  }
  checkFp8AgainstBruteForce(fp8e5m2ToFloat, floatToFp8e5m2);
}

}  // namespace
}  // namespace braid::kernels
