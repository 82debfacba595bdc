// The narrow-format conversions of the host kernels (fp16, bf16, fp8 E4M3 and E5M2) against
// literal encodings, exhaustive round trips, the compiler's _Float16 where it has one, and a
// brute-force nearest-value search for fp8.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

#include "kernels/reduce.h"

namespace braid::kernels {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

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
