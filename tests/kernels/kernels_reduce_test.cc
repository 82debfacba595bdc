// The host reduction kernels (kernels/reduce.h): every dtype x op against a closed form, in
// place and out of place, across block boundaries; integer wrap-around and truncating AVG; NaN
// propagation, rounding of the narrow formats and the operands' order; and divide().
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
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

}  // namespace
}  // namespace braid::kernels
